// Mamba-3 block construction and the refusals every call runs before any arithmetic.
#include "blocks/mamba3/mamba3.hpp"

#include <samebits/errors.hpp>
#include <string>
#include <utility>

#include "blocks/common/block_support.hpp"
#include "numerics/finite_scan.hpp"
#include "numerics/mamba3_kernels.hpp"

namespace samebits::blocks {

using namespace mamba3;

namespace {

constexpr int kInProj = 1;   // in_proj.weight's place in the tensor table
constexpr int kOutProj = 8;  // out_proj.weight's

// The first non-finite element as "NaN in <name> at flat index <i> REFUSED", or empty.
std::string non_finite_message(const float* data, std::int64_t count, const std::string& name) {
  if (finite_scan::all_finite(data, count)) return {};
  try {
    refuse_non_finite(data, count, "", name);
  } catch (const Error& e) {
    return std::string(e.what()).substr(2);  // drop the empty "<what>: " prefix
  }
  return {};
}

}  // namespace

Mamba3Block::Mamba3Block(Mamba3Weights weights) : weights_(std::move(weights)) {
  const std::int64_t d_model = static_cast<std::int64_t>(weights_.block_norm().size());
  dims_ = Mamba3Dims::of(d_model);
  const auto specs = mamba3_tensors(dims_);
  for (int i = 0; i < kMamba3TensorCount; ++i) {
    if (static_cast<std::int64_t>(weights_.tensors[i].size()) != specs[i].elements())
      throw_value_error(std::string("Mamba3Block: ") + specs[i].name + " holds " +
                        std::to_string(weights_.tensors[i].size()) + " values, want " +
                        std::to_string(specs[i].elements()));
  }
  for (int i = 0; i < kMamba3TensorCount && weight_refusal_.empty(); ++i)
    weight_refusal_ = non_finite_message(weights_.tensors[i].data(), specs[i].elements(), specs[i].name);
  // The panels become the only copy of the two projections: each raw buffer goes as soon as it is packed.
  packed_in_proj_ = gemm::PackedRhs::from_transposed(weights_.in_proj().data(), dims_.d_in_proj, d_model,
                                                     Placement::kWeightPool);
  std::vector<float>().swap(weights_.tensors[kInProj]);
  packed_out_proj_ = gemm::PackedRhs::from_transposed(weights_.out_proj().data(), d_model, dims_.d_inner,
                                                      Placement::kWeightPool);
  std::vector<float>().swap(weights_.tensors[kOutProj]);
}

std::vector<float> Mamba3Block::weight(int index) const {
  if (index == kInProj) return packed_in_proj_.unpack_transposed();
  if (index == kOutProj) return packed_out_proj_.unpack_transposed();
  return weights_.tensors[index];
}

Mamba3Weights Mamba3Block::weights() const {
  Mamba3Weights copy;
  for (int i = 0; i < kMamba3TensorCount; ++i) copy.tensors[i] = weight(i);
  return copy;
}

void Mamba3Block::refuse(const float* x, std::int64_t B, std::int64_t L, const Mamba3State& state,
                         const char* entry, bool scan_state) const {
  const std::string where = entry;
  if (state.heads() != dims_.heads || state.batch() != B)
    throw_value_error(where + ": the state holds batch " + std::to_string(state.batch()) + " x " +
                      std::to_string(state.heads()) + " heads but the call has B = " + std::to_string(B) +
                      " x " + std::to_string(dims_.heads) + " heads");
  const std::int64_t q0 = state.buffered_tokens;
  if (q0 < 0 || q0 > kChunk)
    throw_value_error(
        "mamba3: buf_len must be in [0, 64] (inclusive: the buffer holds 1..64 rows after any call "
        "and 0 only before the first token), got " +
        std::to_string(q0) + "; the state and this call disagree");
  if (B < 1 || L < 1) throw_value_error("mamba3: B and L must be positive");
  if (state.pending && q0 != 0)
    throw_value_error("Mamba3State.set_input_states: the state is mid-sequence (buf_len = " +
                      std::to_string(q0) + "); Input_States only has upstream meaning on a fresh state");
  if (x != nullptr) refuse_if_non_finite(x, B * L * dims_.d_model, entry, "x");
  if (!weight_refusal_.empty()) throw_value_error(where + ": " + weight_refusal_);
  if (!scan_state || state.trusted()) return;  // a trusted state has nothing for the scan to find
  // Every piece in one pool-split scan: pending_k and pending_v only while an input is pending.
  ScannedArray pieces[10];
  const int scanned = state.pending ? 10 : 8;
  for (int p = 0; p < scanned; ++p)
    pieces[p] = {state.piece(p), state.piece_elements(p), Mamba3State::piece_name(p)};
  refuse_if_any_non_finite(pieces, static_cast<std::size_t>(scanned), entry, "state.");
}

}  // namespace samebits::blocks
