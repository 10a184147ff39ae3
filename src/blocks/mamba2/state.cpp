// Mamba-2 dims and Mamba2State (docs/blocks.md §2.2): allocation, copies, what a call writes, and settling a
// pending report before the state changes.
#include "blocks/mamba2/state.hpp"

#include <algorithm>
#include <cstring>

#include "blocks/mamba2/mamba2.hpp"
#include "core/state_size.hpp"

namespace samebits::blocks {

Mamba2Dims Mamba2Dims::for_d_model(std::int64_t d_model) {
  Mamba2Dims d;
  d.d_model = d_model;
  d.d_inner = 2 * d_model;
  d.nheads = d.d_inner / kHeadDim;
  d.conv_dim = d.d_inner + 2 * kState;
  d.d_in_proj = 2 * d.d_inner + 2 * kState + d.nheads;
  return d;
}

Mamba2State::Mamba2State(std::int64_t batch, const Mamba2Dims& dims)
    : data_(std::make_shared<Mamba2StateData>()) {
  data_->batch = batch;
  data_->dims = dims;
  const std::int64_t per_row = dims.conv_dim * Mamba2Dims::kConv +
                               dims.nheads * Mamba2Dims::kHeadDim * Mamba2Dims::kState +
                               Mamba2Dims::kChunk * (dims.conv_dim + dims.nheads);
  allocate_state_buffers("Mamba2State", {batch, per_row}, [&] {
    data_->conv_window.assign_zero(static_cast<std::size_t>(conv_window_size()));
    data_->h.assign_zero(static_cast<std::size_t>(h_size()));
    data_->buffer_xbc.assign_zero(static_cast<std::size_t>(buffer_xbc_size()));
    data_->buffer_dtraw.assign_zero(static_cast<std::size_t>(buffer_dtraw_size()));
  });
}

Mamba2State Mamba2State::clone() const {
  auto copy = std::make_shared<Mamba2StateData>();
  copy->batch = data_->batch;
  copy->dims = data_->dims;
  copy->conv_window = data_->conv_window.clone();
  copy->h = data_->h.clone();
  copy->buffer_xbc = data_->buffer_xbc.clone();
  copy->buffer_dtraw = data_->buffer_dtraw.clone();
  copy->buffered_tokens = data_->buffered_tokens;
  copy->open = data_->open;         // derived rows of identical buffers stay valid
  if (data_->open_xd.size() > 0) {  // only each head's first open.rows Xd rows hold anything
    constexpr std::int64_t kHeadRows = Mamba2Dims::kChunk * Mamba2Dims::kHeadDim;
    copy->open_xd.resize_uninitialized(data_->open_xd.size());
    const auto heads = static_cast<std::int64_t>(data_->open_xd.size()) / kHeadRows;
    const std::int64_t held =
        std::clamp<std::int64_t>(data_->open.rows, 0, Mamba2Dims::kChunk) * Mamba2Dims::kHeadDim;
    for (std::int64_t head = 0; head < heads; ++head)
      std::memcpy(copy->open_xd.data() + head * kHeadRows, data_->open_xd.data() + head * kHeadRows,
                  static_cast<std::size_t>(held) * sizeof(float));
  }
  copy->open.kept_generation = data_->open.kept_generation == data_->generation
                                   ? copy->generation
                                   : Mamba2OpenChunkRows::kNoGeneration;
  copy->trusted = trusted();  // the same bits; nobody holds a pin of the copy
  return Mamba2State(std::move(copy));
}

Mamba2State::Pin Mamba2State::pin(Piece piece) {
  AlignedBuffer<float>* const buffers[] = {&data_->conv_window, &data_->h, &data_->buffer_xbc,
                                           &data_->buffer_dtraw};
  if (piece < kConvWindow || piece > kBufferDtraw) throw_value_error("Mamba2State: no piece");
  data_->trusted = false;  // what is written through it is scanned by the next call after the last pin
  return Pin(data_->pins, buffers[piece]->data(), static_cast<std::int64_t>(buffers[piece]->size()));
}

std::vector<Mamba2State::Span> Mamba2State::spans_written_by(std::int64_t length) const {
  const Mamba2StateData& d = *data_;
  const std::int64_t q0 = d.buffered_tokens;
  if (q0 + length >= Mamba2Dims::kChunk)  // a chunk completes: h, and the buffers refilled from row 0
    return {{d.conv_window.data(), conv_window_size()},
            {d.h.data(), h_size()},
            {d.buffer_xbc.data(), buffer_xbc_size()},
            {d.buffer_dtraw.data(), buffer_dtraw_size()}};
  std::vector<Span> spans{{d.conv_window.data(), conv_window_size()}};
  const std::int64_t cd = d.dims.conv_dim, H = d.dims.nheads;
  for (std::int64_t b = 0; b < d.batch; ++b) {
    spans.push_back({d.buffer_xbc.data() + (b * Mamba2Dims::kChunk + q0) * cd, length * cd});
    spans.push_back({d.buffer_dtraw.data() + (b * Mamba2Dims::kChunk + q0) * H, length * H});
  }
  return spans;
}

void Mamba2State::settle_pending_report(const Mamba2Report* superseded) {
  if (auto report = data_->pending_report.lock())
    if (report.get() != superseded) report->h_last();
  data_->pending_report.reset();
}

}  // namespace samebits::blocks
