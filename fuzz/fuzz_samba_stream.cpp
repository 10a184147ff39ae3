// Fuzzes the streamed v2 Samba archive reader; an accepted file becomes a SambaInference that runs a 1x2
// forward.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_samba_reader.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  samebits::fuzz::single_threaded();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace samebits;
  // The retry has the header canonical and every digest honest.
  fuzz::fuzz_samba_file(
      data, size, [](const std::string& path) { return io::read_samba_stream_checkpoint_tensors(path); },
      [](const std::string& path) { return io::read_samba_stream_checkpoint(path); },
      fuzz::honest_samba_stream);
  return 0;
}
