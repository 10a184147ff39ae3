// Mamba-3 dims and the carried state (allocation, clone, Input_States).
#include "blocks/mamba3/state.hpp"

#include <algorithm>
#include <cstring>
#include <samebits/errors.hpp>

#include "core/state_size.hpp"
#include "core/thread_pool.hpp"
#include "numerics/transpose.hpp"

namespace samebits::blocks {

using namespace mamba3;

Mamba3Dims Mamba3Dims::of(std::int64_t d_model) {
  if (d_model < kDModelStep || d_model % kDModelStep != 0)
    throw_value_error("Mamba3Dims: d_model must be a positive multiple of 32, got " +
                      std::to_string(d_model));
  Mamba3Dims dims;
  dims.d_model = d_model;
  dims.d_inner = 2 * d_model;
  dims.heads = dims.d_inner / kHeadDim;
  dims.d_in_proj = 2 * dims.d_inner + 2 * kStateDim + 3 * dims.heads + kAngles;
  return dims;
}

namespace {
void zeros(AlignedBuffer<float>& buffer, std::int64_t count) {
  buffer.assign_zero(static_cast<std::size_t>(count));
}
}  // namespace

Mamba3State::Mamba3State(std::int64_t batch, std::int64_t heads) : batch_(batch), heads_(heads) {
  if (batch < 1) throw_value_error("Mamba3State: batch_size must be positive, got " + std::to_string(batch));
  if (heads < 1) throw_value_error("Mamba3State: heads must be positive, got " + std::to_string(heads));
  std::int64_t floats_per_head = 3 * kChunk;  // the open-chunk cache, then the ten pieces
  for (int p = 0; p < kPieceCount; ++p) {
    std::int64_t floats = 1;
    for (std::int64_t extent : piece_shape_for(p, 1, 1)) floats *= extent;
    floats_per_head += floats;
  }
  allocate_state_buffers("Mamba3State", {batch, heads, floats_per_head}, [&] {
    for (int p = 0; p < kPieceCount; ++p) zeros(*buffer_of(p), piece_elements(p));
    const std::int64_t per_head = batch * heads * kChunk;
    zeros(cache_.adt, per_head);
    zeros(cache_.dacs, per_head);
    zeros(cache_.colacc, per_head);
  });
}

Mamba3State Mamba3State::clone() const {
  Mamba3State copy;
  copy.batch_ = batch_;
  copy.heads_ = heads_;
  copy.buffered_tokens = buffered_tokens;
  copy.pending = pending;
  copy.theta_ = theta_.clone();
  copy.h_ = h_.clone();
  copy.buffer_qrot_ = buffer_qrot_.clone();
  copy.buffer_krot_ = buffer_krot_.clone();
  copy.buffer_v_ = buffer_v_.clone();
  copy.buffer_dt_ = buffer_dt_.clone();
  copy.buffer_sig_ = buffer_sig_.clone();
  copy.buffer_adt_ = buffer_adt_.clone();
  copy.pending_k_ = pending_k_.clone();
  copy.pending_v_ = pending_v_.clone();
  copy.cache_.valid = cache_.valid;
  copy.cache_.rows = cache_.rows;
  copy.cache_.adt = cache_.adt.clone();
  copy.cache_.dacs = cache_.dacs.clone();
  copy.cache_.colacc = cache_.colacc.clone();
  copy.trusted_ = trusted();  // the same bits; nobody holds a pin of the copy
  if (h_t_current_) {         // relied on only while the copy is trusted, as for the original
    copy.h_t_ = h_t_.clone();
    copy.h_t_current_ = true;
  }
  if (krot_t_current_) {
    copy.krot_t_ = krot_t_.clone();
    copy.krot_t_current_ = true;
    copy.krot_t_rows_ = krot_t_rows_;
  }
  return copy;
}

const char* Mamba3State::piece_name(int piece) {
  static const char* const names[kPieceCount] = {"theta",     "h",         "buffer_qrot", "buffer_krot",
                                                 "buffer_v",  "buffer_dt", "buffer_sig",  "buffer_adt",
                                                 "pending_k", "pending_v"};
  return names[piece];
}

std::vector<std::int64_t> Mamba3State::piece_shape_for(int piece, std::int64_t B, std::int64_t H) {
  switch (piece) {
    case 0:
      return {B, H, kAngles};
    case 1:
      return {B, H, kHeadDim, kStateDim};
    case 2:
    case 3:
      return {B, kChunk, H, kStateDim};
    case 4:
      return {B, kChunk, H, kHeadDim};
    case 5:
    case 6:
    case 7:
      return {B, kChunk, H};
    case 8:
      return {B, H, kStateDim};
    case 9:
      return {B, H, kHeadDim};
    default:
      throw_value_error("Mamba3State: no piece " + std::to_string(piece));
  }
}

std::int64_t Mamba3State::piece_elements(int piece) const {
  std::int64_t count = 1;
  for (auto d : piece_shape(piece)) count *= d;
  return count;
}

AlignedBuffer<float>* Mamba3State::buffer_of(int piece) {
  AlignedBuffer<float>* const buffers[kPieceCount] = {&theta_,     &h_,         &buffer_qrot_, &buffer_krot_,
                                                      &buffer_v_,  &buffer_dt_, &buffer_sig_,  &buffer_adt_,
                                                      &pending_k_, &pending_v_};
  if (piece < 0 || piece >= kPieceCount) throw_value_error("Mamba3State: no piece " + std::to_string(piece));
  return buffers[piece];
}

Mamba3State::Pin Mamba3State::pin(int piece) {
  AlignedBuffer<float>* buffer = buffer_of(piece);
  trusted_ = false;  // what is written through it is scanned by the next call after the last pin
  drop_derived_copies();
  return Pin(pins_, buffer->data(), static_cast<std::int64_t>(buffer->size()));
}

const float* Mamba3State::piece(int piece) const {
  return const_cast<Mamba3State*>(this)->buffer_of(piece)->data();
}

void Mamba3State::set_input_states(const float* theta, const float* h, const float* k, const float* v) {
  std::memcpy(theta_.data(), theta, theta_.size() * sizeof(float));
  std::memcpy(h_.data(), h, h_.size() * sizeof(float));
  std::memcpy(pending_k_.data(), k, pending_k_.size() * sizeof(float));
  std::memcpy(pending_v_.data(), v, pending_v_.size() * sizeof(float));
  pending = true;
  trusted_ = false;  // the caller's values: the next call scans them
  drop_derived_copies();
}

float* Mamba3State::engine_krot_transposed() {
  if (krot_t_.size() != buffer_krot_.size()) krot_t_.assign_zero(buffer_krot_.size());
  return krot_t_.data();
}

void Mamba3State::mirror_krot(std::int64_t first_slot, std::int64_t end_slot) {
  float* out = engine_krot_transposed();
  const float* in = buffer_krot_.data();
  for (std::int64_t b = 0; b < batch_; ++b)
    for (std::int64_t h = 0; h < heads_; ++h)
      for (std::int64_t slot = first_slot; slot < end_slot; ++slot) {
        const float* row =
            in + ((b * kChunk + slot) * heads_ + h) * kStateDim;             // buffer_krot [B, 64, H, 128]
        float* column = out + (b * heads_ + h) * kStateDim * kChunk + slot;  // [B, H, 128, 64]
        for (std::int64_t n = 0; n < kStateDim; ++n) column[n * kChunk] = row[n];
      }
  // Slots past end_slot stay current only where they were and this call left them alone (first_slot > 0).
  krot_t_rows_ = first_slot == 0 ? end_slot : std::max(krot_t_rows_, end_slot);
}

float* Mamba3State::engine_h_transposed() {
  if (h_t_.size() != h_.size()) h_t_.resize_uninitialized(h_.size());
  return h_t_.data();
}

void Mamba3State::transpose_h() {
  float* out = engine_h_transposed();
  const float* in = h_.data();
  parallel_for(batch_ * heads_, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t bh = begin; bh < end; ++bh)  // [64][128] -> [128][64]
      transpose::transpose(in + bh * kHeadDim * kStateDim, kHeadDim, kStateDim,
                           out + bh * kStateDim * kHeadDim);
  });
}

std::vector<Mamba3State::Span> Mamba3State::spans_written_by(std::int64_t length) {
  std::vector<Span> spans;
  const std::int64_t q0 = buffered_tokens, total = q0 + length;
  const std::int64_t chunks = std::max<std::int64_t>(1, (total + kChunk - 1) / kChunk);
  const std::int64_t start = (chunks - 1) * kChunk;
  const std::int64_t lo = std::max(start, q0) - start, hi = total - start;
  auto whole = [&](int piece) { spans.push_back({buffer_of(piece)->data(), piece_elements(piece)}); };
  whole(kTheta);
  if (chunks > 1 || pending) whole(kH);  // sealed chunks, or the Input_States correction
  if (pending) {                         // consumed: zeroed
    whole(kPendingK);
    whole(kPendingV);
  }
  for (int piece = kQrot; piece <= kAdt; ++piece) {  // buffers [B, 64, H, width]
    const std::int64_t width = piece_elements(piece) / (batch_ * kChunk * heads_);
    for (std::int64_t b = 0; b < batch_; ++b)
      spans.push_back(
          {buffer_of(piece)->data() + (b * kChunk + lo) * heads_ * width, (hi - lo) * heads_ * width});
  }
  return spans;
}

}  // namespace samebits::blocks
