// Fuzzes the streamed v2 Samba archive reader; an accepted file becomes a SambaInference that runs a 1x2
// forward.
#include <cstddef>
#include <cstdint>

#include "fuzz_samba_reader.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) { return samebits::fuzz::initialize_single_threaded(); }

// The retry has the header canonical and every digest honest.
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace samebits;
  return fuzz::fuzz_samba_file(data, size, io::read_samba_stream_checkpoint_tensors,
                               io::read_samba_stream_checkpoint, fuzz::honest_samba_stream);
}
