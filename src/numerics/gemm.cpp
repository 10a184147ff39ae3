// GEMM fast-path driver: packs the right operand into panels, splits output tiles over the thread
// pool, runs the target's leaf kernels and folds leaf partials exactly as the twin does.
#include "numerics/gemm.hpp"

#include <algorithm>
#include <cstring>
#include <samebits/lowbit.hpp>
#include <utility>

#include "core/stage_clock.hpp"
#include "core/thread_pool.hpp"
#include "numerics/fp.hpp"
#include "numerics/gemm_kernels.hpp"
#include "numerics/mxcsr_flags.hpp"
#include "numerics/simd_kernels.hpp"

namespace samebits::gemm {
namespace {

using detail::KernelSet;

struct Problem {
  LhsView a;
  std::int64_t m;
  const PackedRhs* rhs;
  float* c;
  std::int64_t leaf;
  std::int64_t leaves;
  const KernelSet* kernels;
};

// The panels one task covers: `count` consecutive panels starting at `first`, run by `fast`/`exact`
// kernels that span exactly `count` panels (1, or the skinny width).
struct PanelGroup {
  std::int64_t first;
  int count;
  const detail::LeafKernel* fast;
  const detail::LeafKernel* exact;
};

void run_leaves(const Problem& pb, const detail::LeafKernel* table, std::int64_t row0, int rows,
                const PanelGroup& group, const detail::PanelSpan& panels, float* partials) {
  const std::int64_t k = pb.rhs->k();
  const std::int64_t leaf_stride = group.count * detail::kLeafStride;
  for (std::int64_t t = 0; t < pb.leaves; ++t) {
    const std::int64_t p0 = t * pb.leaf;
    const std::int64_t len = std::min(pb.leaf, k - p0);
    table[rows](pb.a.data + row0 * pb.a.row_stride + p0 * pb.a.depth_stride, pb.a.row_stride,
                pb.a.depth_stride, panels, p0, len, partials + t * leaf_stride);
  }
}

// One task: a group of column panels times a range of row tiles. `widen`: a narrow one-panel group whose
// tiles run the float32 kernels on a widened copy (see below).
void run_task(const Problem& pb, const PanelGroup& task_group, int tile_rows, std::int64_t tile_begin,
              std::int64_t tile_end, bool widen) {
  const std::int64_t n = pb.rhs->n();
  const std::int64_t leaf_stride = task_group.count * detail::kLeafStride;
  thread_local AlignedBuffer<float> partials;
  const std::size_t need = static_cast<std::size_t>(pb.leaves * leaf_stride);
  if (partials.size() < need) partials.resize_uninitialized(need);

  // A narrow panel read by several row tiles is widened once, to the very float32 values its own kernels
  // would form, and the tiles run the float32 kernels on that copy: the widening is paid once per panel
  // instead of once per tile, and every cell's chain is unchanged (docs/numerics.md §3.6).
  // widen_for_tiles decides it for the whole call.
  PanelGroup group = task_group;
  detail::PanelSpan panels{pb.rhs->panel(group.first), pb.rhs->panel_bytes(), pb.rhs->block_depth(),
                           pb.rhs->half_headers()};
  thread_local AlignedBuffer<float> widened;
  if (widen) {
    const std::int64_t k = pb.rhs->k();
    if (widened.size() < static_cast<std::size_t>(k * kPanelWidth))
      widened.resize_uninitialized(static_cast<std::size_t>(k * kPanelWidth));
    pb.kernels->storage[static_cast<int>(pb.rhs->storage())].widen(panels, k, widened.data());
    const detail::LeafKernels& f32 = pb.kernels->storage[static_cast<int>(PanelStorage::F32)];
    group.fast = f32.fast;
    group.exact = f32.exact;
    panels = {reinterpret_cast<const unsigned char*>(widened.data()), k * kPanelWidth * 4, 0, false};
  }

  mxcsr_flags::FlagScope mxcsr;
  // Neighbouring tiles read the same panel and rows of the same kind of data, so a tile that needed the
  // flushing pass predicts that the next one will too: that one then runs it directly instead of after a
  // wasted fast pass. The flushing pass raises the flags where its products went subnormal, so it keeps
  // the prediction while they keep showing up. A wrong guess costs time only: the flushing pass is exact.
  bool flushing_predicted = false;
  for (std::int64_t tile = tile_begin; tile < tile_end; ++tile) {
    const std::int64_t row0 = tile * tile_rows;
    const int rows = static_cast<int>(std::min<std::int64_t>(tile_rows, pb.m - row0));
    mxcsr.clear();
    if (flushing_predicted && group.fast[rows] != group.exact[rows]) {
      run_leaves(pb, group.exact, row0, rows, group, panels, partials.data());
      flushing_predicted = mxcsr_flags::FlagScope::subnormal_seen();
    } else {
      run_leaves(pb, group.fast, row0, rows, group, panels, partials.data());
      if (group.fast[rows] != group.exact[rows] && mxcsr_flags::FlagScope::subnormal_seen()) {
        run_leaves(pb, group.exact, row0, rows, group, panels, partials.data());
        flushing_predicted = true;
      }
    }
    for (int q = 0; q < group.count; ++q) {
      const std::int64_t col0 = (group.first + q) * kPanelWidth;
      const int cols = static_cast<int>(std::min<std::int64_t>(kPanelWidth, n - col0));
      pb.kernels->fold(partials.data() + q * detail::kLeafStride, pb.leaves, leaf_stride, rows,
                       pb.c + row0 * n + col0, n, cols);
    }
  }
}

// Whether a call of m rows runs its narrow panels widened to float32: whenever it has more rows than one
// tile of the narrow kernels (so each panel serves several tiles). Float32 panels never need it.
bool widen_for_tiles(const PackedRhs& rhs, const KernelSet& ks, std::int64_t m) {
  return rhs.storage() != PanelStorage::F32 && m > ks.tile_rows;
}

// Rows per register tile: the float32 kernels' taller tile wherever float32 panels are read.
int tile_rows_for(const PackedRhs& rhs, const KernelSet& ks, bool widen) {
  return rhs.storage() == PanelStorage::F32 || widen ? ks.f32_tile_rows : ks.tile_rows;
}

}  // namespace

bool sabotage_build() {
#if defined(SAMEBITS_SABOTAGE_REVERSED_LEAF)
  return true;
#else
  return false;
#endif
}

namespace {

// Where column c of a bfloat16 panel row sits: columns c and c + 16 share one 32-bit word, c in its low
// half, so that a shift and a mask widen 16 columns each (docs/numerics.md §3.6).
std::int64_t bf16_slot(std::int64_t c) { return c < 16 ? 2 * c : 2 * (c - 16) + 1; }

bool has_offsets(PanelStorage storage) {
  return storage == PanelStorage::Codes8Min || storage == PanelStorage::Codes4Min;
}
bool nibble_codes(PanelStorage storage) {
  return storage == PanelStorage::Codes4 || storage == PanelStorage::Codes4Min;
}
// Column c's code in one depth row of a block's codes (int8, or a nibble; Codes4 nibbles are offset by 8).
int code_in_row(PanelStorage storage, const unsigned char* row, std::int64_t c) {
  if (!nibble_codes(storage)) return static_cast<std::int8_t>(row[c]);
  return (c < 16 ? row[c % 16] & 0xF : row[c % 16] >> 4) - (storage == PanelStorage::Codes4 ? 8 : 0);
}

// The kernels' widening of one code: code * scale, then + offset where the storage has one.
float widen_code(int code, float scale, bool offsets, float offset) {
  const float value = fp::MUL(static_cast<float>(code), scale);
  return offsets ? value + offset : value;
}

std::int64_t code_row_bytes(PanelStorage storage) {
  return nibble_codes(storage) ? kPanelWidth / 2 : kPanelWidth;
}

float load_float(const unsigned char* at) {
  float value;
  std::memcpy(&value, at, sizeof value);
  return value;
}
void store_float(unsigned char* at, float value) { std::memcpy(at, &value, sizeof value); }
std::uint16_t load_half(const unsigned char* at) {
  std::uint16_t bits;
  std::memcpy(&bits, at, sizeof bits);
  return bits;
}

}  // namespace

std::optional<std::uint16_t> exact_half(float value) {
  const std::uint32_t sign = fp::bits(value) >> 16 & 0x8000u;
  const float magnitude = fp::from_bits(fp::bits(value) & 0x7FFFFFFFu);
  std::uint32_t bits = 0;
  if (!(magnitude <= 65504.0f)) return std::nullopt;  // past the largest half, or NaN
  if (magnitude >= 0x1p-14f) {                        // a normal half: 10 mantissa bits, exponent rebased
    bits = ((fp::bits(magnitude) >> 23) - 112) << 10 | (fp::bits(magnitude) >> 13 & 0x3FFu);
  } else {                                    // a subnormal half (or zero): a whole number of 2^-24 steps
    const float steps = magnitude * 0x1p24f;  // exact: a power-of-two scaling of a value below 2^-14
    bits = static_cast<std::uint32_t>(steps);
  }
  const auto half = static_cast<std::uint16_t>(sign | bits);
  // Kept only if it gives the value back bit for bit (this rejects any dropped mantissa bit).
  if (fp::bits(lowbit::f32_from_f16(half)) != fp::bits(value)) return std::nullopt;
  return half;
}

std::int64_t PackedRhs::header_bytes() const {
  return (has_offsets(storage_) ? 2 : 1) * kPanelWidth * (half_headers_ ? 2 : 4);
}

PackedRhs::PackedRhs(std::int64_t n, std::int64_t k, PanelStorage storage, std::int64_t block_depth,
                     Placement placement, bool half_headers)
    : n_(n), k_(k), storage_(storage), block_depth_(block_depth), half_headers_(half_headers) {
  switch (storage) {
    case PanelStorage::F32:
      panel_bytes_ = k * kPanelWidth * 4;
      break;
    case PanelStorage::BF16:
      panel_bytes_ = k * kPanelWidth * 2;
      break;
    default:  // whole blocks of block_depth rows, each led by its header
      panel_bytes_ = k / block_depth * (header_bytes() + block_depth * code_row_bytes(storage));
      break;
  }
  data_.assign_zero(static_cast<std::size_t>(panel_count() * panel_bytes_), placement);
}

unsigned char* PackedRhs::block_at(std::int64_t panel, std::int64_t block) {
  return const_cast<unsigned char*>(std::as_const(*this).block_at(panel, block));
}

const unsigned char* PackedRhs::block_at(std::int64_t panel, std::int64_t block) const {
  return data_.data() + panel * panel_bytes_ +
         block * (header_bytes() + block_depth_ * code_row_bytes(storage_));
}

void PackedRhs::set_code_run(std::int64_t p, std::int64_t j, const std::int32_t* codes, std::int64_t count) {
  // The block, row and byte are worked out once for the run (a GGUF load writes every code of a model this
  // way). Columns c and c + 16 share byte c % 16: the low nibble, then the high one.
  const std::int64_t row_bytes = code_row_bytes(storage_);
  unsigned char* cell =
      block_at(j / kPanelWidth, p / block_depth_) + header_bytes() + (p % block_depth_) * row_bytes;
  const std::int64_t c = j % kPanelWidth;
  if (!nibble_codes(storage_)) {
    for (std::int64_t d = 0; d < count; ++d)
      cell[d * row_bytes + c] = static_cast<unsigned char>(static_cast<std::int8_t>(codes[d]));
    return;
  }
  const int bias = storage_ == PanelStorage::Codes4 ? 8 : 0;
  const int shift = c < 16 ? 0 : 4;
  const auto keep = static_cast<unsigned char>(c < 16 ? 0xF0 : 0x0F);
  cell += c % 16;
  for (std::int64_t d = 0; d < count; ++d) {
    unsigned char& byte = cell[d * row_bytes];
    byte = static_cast<unsigned char>((byte & keep) | ((codes[d] + bias) << shift));
  }
}

void PackedRhs::set_scale(std::int64_t p, std::int64_t j, float scale, float offset) {
  unsigned char* head = block_at(j / kPanelWidth, p / block_depth_);
  const std::int64_t c = j % kPanelWidth;
  if (half_headers_) {  // the caller checked that both are fp16 values
    const std::uint16_t halves[2] = {*exact_half(scale), *exact_half(offset)};
    std::memcpy(head + c * 2, &halves[0], 2);
    if (has_offsets(storage_)) std::memcpy(head + (kPanelWidth + c) * 2, &halves[1], 2);
    return;
  }
  store_float(head + c * 4, scale);
  if (has_offsets(storage_)) store_float(head + (kPanelWidth + c) * 4, offset);
}

float PackedRhs::header_value(const unsigned char* head, std::int64_t index) const {
  return half_headers_ ? lowbit::f32_from_f16(load_half(head + index * 2)) : load_float(head + index * 4);
}

float PackedRhs::at(std::int64_t p, std::int64_t j) const {
  const std::int64_t c = j % kPanelWidth;
  const unsigned char* panel_data = panel(j / kPanelWidth);
  switch (storage_) {
    case PanelStorage::F32:
      return load_float(panel_data + (p * kPanelWidth + c) * 4);
    case PanelStorage::BF16: {
      std::uint16_t half;
      std::memcpy(&half, panel_data + (p * kPanelWidth + bf16_slot(c)) * 2, sizeof half);
      return fp::from_bits(static_cast<std::uint32_t>(half) << 16);
    }
    default: {
      const unsigned char* head = block_at(j / kPanelWidth, p / block_depth_);
      const unsigned char* row = head + header_bytes() + (p % block_depth_) * code_row_bytes(storage_);
      const bool offsets = has_offsets(storage_);
      return widen_code(code_in_row(storage_, row, c), header_value(head, c), offsets,
                        offsets ? header_value(head, kPanelWidth + c) : 0.0f);
    }
  }
}

PackedRhs PackedRhs::from_transposed(const float* W, std::int64_t n, std::int64_t k, Placement placement) {
  if (placement == Placement::kWeightPool) {
    // A model weight: the narrowest storage that gives back every value (each try stops at its first
    // miss, so a float32 weight costs little more than one pass).
    for (PanelStorage storage : {PanelStorage::Codes8, PanelStorage::BF16})
      if (std::optional<PackedRhs> packed = from_transposed_as(W, n, k, storage, placement))
        return std::move(*packed);
  }
  return *from_transposed_as(W, n, k, PanelStorage::F32, placement);
}

std::optional<PackedRhs> PackedRhs::from_transposed_as(const float* W, std::int64_t n, std::int64_t k,
                                                       PanelStorage storage, Placement placement) {
  // Each narrow storage is checked over the whole matrix before its panels are allocated (a weight-pool
  // block given back would leave a hole in its chunk): a float32 weight costs a look at its first values.
  if (storage == PanelStorage::Codes8) {
    // samebits' lowbit int8 rows (docs/formats.md §5): one power-of-two scale per row, found again from the
    // values; kept only if code * scale gives back F of every value, bit for bit.
    if (k <= 0 || n <= 0) return std::nullopt;
    std::vector<std::int8_t> codes(static_cast<std::size_t>(k));
    auto quantize_row = [&](std::int64_t j) {
      std::int32_t exponent = 0;
      lowbit::quantize_int8_row(W + j * k, static_cast<std::size_t>(k), codes.data(), &exponent);
      return lowbit::pow2(exponent);
    };
    for (std::int64_t j = 0; j < n; ++j) {
      const float scale = quantize_row(j);
      for (std::int64_t p = 0; p < k; ++p)
        if (fp::bits(fp::MUL(static_cast<float>(codes[p]), scale)) != fp::bits(fp::F(W[j * k + p])))
          return std::nullopt;
    }
    PackedRhs packed(n, k, storage, k, placement);
    std::vector<std::int32_t> run(static_cast<std::size_t>(k));  // a column's codes: one block, one run
    for (std::int64_t j = 0; j < n; ++j) {
      packed.set_scale(0, j, quantize_row(j), 0.0f);
      std::copy(codes.begin(), codes.end(), run.begin());
      packed.set_code_run(0, j, run.data(), k);
      for (std::int64_t p = 0; p < k; ++p) {
        const float original = W[j * k + p];
        if (fp::bits(fp::F(original)) != fp::bits(original)) packed.remember_flushed(p, j, original);
      }
    }
    return packed;
  }
  if (storage == PanelStorage::BF16) {
    if (n <= 0) return std::nullopt;
    for (std::int64_t i = 0; i < n * k; ++i)
      if ((fp::bits(fp::F(W[i])) & 0xFFFFu) != 0) return std::nullopt;
    PackedRhs packed(n, k, storage, 0, placement);
    auto* halves = reinterpret_cast<std::uint16_t*>(packed.data_.data());
    for (std::int64_t j = 0; j < n; ++j) {
      std::uint16_t* column = halves + (j / kPanelWidth) * k * kPanelWidth + bf16_slot(j % kPanelWidth);
      const float* row = W + j * k;
      for (std::int64_t p = 0; p < k; ++p) {
        const std::uint32_t flushed = fp::bits(fp::F(row[p]));
        column[p * kPanelWidth] = static_cast<std::uint16_t>(flushed >> 16);
        if (flushed != fp::bits(row[p])) packed.remember_flushed(p, j, row[p]);
      }
    }
    return packed;
  }
  if (storage != PanelStorage::F32) return std::nullopt;  // the code formats come from GGUF bytes only
  PackedRhs packed(n, k, PanelStorage::F32, 0, placement);
  auto* floats = reinterpret_cast<float*>(packed.data_.data());
  for (std::int64_t j = 0; j < n; ++j) {
    float* column = floats + (j / kPanelWidth) * k * kPanelWidth + j % kPanelWidth;
    const float* row = W + j * k;
    for (std::int64_t p = 0; p < k; ++p) {
      column[p * kPanelWidth] = fp::F(row[p]);
      if (fp::bits(column[p * kPanelWidth]) != fp::bits(row[p])) packed.remember_flushed(p, j, row[p]);
    }
  }
  return packed;  // (j, p) order: flushed_ is already sorted
}

PackedRhs PackedRhs::from_row_major(const float* B, std::int64_t k, std::int64_t n, Placement placement) {
  PackedRhs packed(n, k, PanelStorage::F32, 0, placement);
  auto* floats = reinterpret_cast<float*>(packed.data_.data());
  // Each row's run of a panel is contiguous on both sides: a plain loop the compiler vectorizes, with the
  // (rare) flushed cells recorded in a second pass only where the run had one.
  for (std::int64_t p = 0; p < k; ++p) {
    const float* row = B + p * n;
    for (std::int64_t j0 = 0; j0 < n; j0 += kPanelWidth) {
      float* cells = floats + (j0 / kPanelWidth) * k * kPanelWidth + p * kPanelWidth;
      const std::int64_t width = std::min<std::int64_t>(kPanelWidth, n - j0);
      std::uint32_t changed = 0;
      for (std::int64_t j = 0; j < width; ++j) {
        cells[j] = fp::F(row[j0 + j]);
        changed |= fp::bits(cells[j]) ^ fp::bits(row[j0 + j]);
      }
      if (changed != 0)
        for (std::int64_t j = 0; j < width; ++j)
          if (fp::bits(cells[j]) != fp::bits(row[j0 + j])) packed.remember_flushed(p, j0 + j, row[j0 + j]);
    }
  }
  std::sort(packed.flushed_.begin(), packed.flushed_.end());
  return packed;
}

PackedRhs PackedRhs::clone() const {
  PackedRhs copy;
  copy.n_ = n_;
  copy.k_ = k_;
  copy.storage_ = storage_;
  copy.block_depth_ = block_depth_;
  copy.half_headers_ = half_headers_;
  copy.panel_bytes_ = panel_bytes_;
  copy.data_ = data_.clone();
  copy.flushed_ = flushed_;
  return copy;
}

namespace {
constexpr int kMantissaBits = 23;
constexpr std::uint64_t kMantissaMask = (std::uint64_t{1} << kMantissaBits) - 1;
}  // namespace

void PackedRhs::remember_flushed(std::int64_t p, std::int64_t j, float original) {
  // F only changes subnormals (exponent 0), whose sign the packed zero keeps: the mantissa restores it.
  const auto index = static_cast<std::uint64_t>(j * k_ + p);
  flushed_.push_back(index << kMantissaBits | (fp::bits(original) & kMantissaMask));
}

void PackedRhs::restore_flushed(std::int64_t first, std::int64_t count, float* W_out) const {
  const auto lo = static_cast<std::uint64_t>(first * k_) << kMantissaBits;
  const auto hi = static_cast<std::uint64_t>((first + count) * k_) << kMantissaBits;
  for (auto it = std::lower_bound(flushed_.begin(), flushed_.end(), lo); it != flushed_.end() && *it < hi;
       ++it) {
    const std::int64_t index = static_cast<std::int64_t>(*it >> kMantissaBits) - first * k_;
    const std::uint32_t mantissa = static_cast<std::uint32_t>(*it & kMantissaMask);
    W_out[index] = fp::from_bits(fp::bits(W_out[index]) | mantissa);
  }
}

void PackedRhs::widen_rows(std::int64_t first, std::int64_t count, float* W_out) const {
  for (std::int64_t j = first; j < first + count; ++j) {
    float* row = W_out + (j - first) * k_;
    if (storage_ == PanelStorage::F32) {  // the common case, without the per-value dispatch
      const float* column = reinterpret_cast<const float*>(panel(j / kPanelWidth)) + j % kPanelWidth;
      for (std::int64_t p = 0; p < k_; ++p) row[p] = column[p * kPanelWidth];
    } else if (storage_ == PanelStorage::BF16) {
      for (std::int64_t p = 0; p < k_; ++p) row[p] = at(p, j);
    } else {
      widen_block_rows(j, row);
    }
  }
}

void PackedRhs::widen_block_rows(std::int64_t j, float* row) const {
  // at() for every depth of column j, with each block's header read once (a whole-model unpack, such as a
  // fingerprint's, walks every value this way).
  const std::int64_t c = j % kPanelWidth;
  const bool offsets = has_offsets(storage_);
  const std::int64_t row_bytes = code_row_bytes(storage_);
  for (std::int64_t block = 0; block < k_ / block_depth_; ++block) {
    const unsigned char* head = block_at(j / kPanelWidth, block);
    const float scale = header_value(head, c);
    const float offset = offsets ? header_value(head, kPanelWidth + c) : 0.0f;
    const unsigned char* codes = head + header_bytes();
    float* out = row + block * block_depth_;
    for (std::int64_t d = 0; d < block_depth_; ++d)
      out[d] = widen_code(code_in_row(storage_, codes + d * row_bytes, c), scale, offsets, offset);
  }
}

void PackedRhs::unpack_transposed(std::int64_t first, std::int64_t count, float* W_out) const {
  widen_rows(first, count, W_out);
  restore_flushed(first, count, W_out);
}

void PackedRhs::gather_rows_flushed(const std::int32_t* ids, std::int64_t count, float* out) const {
  parallel_for(
      count,
      [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t t = begin; t < end; ++t) widen_rows(ids[t], 1, out + t * k_);
      },
      16);
}

std::vector<float> PackedRhs::unpack_transposed() const {
  std::vector<float> W(static_cast<std::size_t>(n_ * k_));
  unpack_transposed(0, n_, W.data());
  return W;
}

void PackedRhs::unpack_row_major(float* B_out) const {
  for (std::int64_t p = 0; p < k_; ++p)
    for (std::int64_t j = 0; j < n_; ++j) B_out[p * n_ + j] = at(p, j);
  for (std::uint64_t word : flushed_) {
    const auto index = static_cast<std::int64_t>(word >> kMantissaBits);  // j * k + p
    float& cell = B_out[(index % k_) * n_ + index / k_];
    cell = fp::from_bits(fp::bits(cell) | static_cast<std::uint32_t>(word & kMantissaMask));
  }
}

std::size_t PackedRhs::bytes() const { return data_.size() + flushed_.size() * sizeof(std::uint64_t); }

void gemm_packed(LhsView A, std::int64_t m, const PackedRhs& rhs, float* C) {
  // A profile's split counts it as a projection, unless its caller is itself a timed stage.
  const stage_clock::Scope timed(stage_clock::Stage::kProjection);
  const std::int64_t n = rhs.n();
  const std::int64_t k = rhs.k();
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    std::fill(C, C + m * n, 0.0f);  // no leaves: every cell is +0.0
    return;
  }
  Problem pb{A, m, &rhs, C, leaf_length(k), 0, simd::kernels().gemm};
  pb.leaves = (k + pb.leaf - 1) / pb.leaf;
  const KernelSet& ks = *pb.kernels;
  const detail::LeafKernels& lk = ks.storage[static_cast<int>(rhs.storage())];
  const std::int64_t panels = rhs.panel_count();

  // Decode-sized problems (a row or two) run skinny tiles over several panels at once; any panels left
  // over take the ordinary one-panel kernels. Either way each cell's arithmetic is the same.
  if (m <= ks.skinny_rows && ks.skinny_panels > 1 && panels >= ks.skinny_panels) {
    const std::int64_t wide = panels / ks.skinny_panels;
    const std::int64_t tasks = wide + (panels - wide * ks.skinny_panels);
    // A task streams its panels once: a small matrix runs on fewer threads (docs/performance.md §D).
    parallel_for(
        tasks,
        [&](std::int64_t begin, std::int64_t end) {
          for (std::int64_t task = begin; task < end; ++task) {
            const PanelGroup group =
                task < wide
                    ? PanelGroup{task * ks.skinny_panels, ks.skinny_panels, lk.skinny_fast, lk.skinny_exact}
                    : PanelGroup{wide * ks.skinny_panels + (task - wide), 1, lk.fast, lk.exact};
            run_task(pb, group, static_cast<int>(m), 0, 1, false);
          }
        },
        grain_for_work(tasks, ks.skinny_panels * rhs.panel_bytes()));
    return;
  }

  const bool widen = widen_for_tiles(rhs, ks, m);
  const std::int64_t tile_rows = tile_rows_for(rhs, ks, widen);
  const std::int64_t tiles = (m + tile_rows - 1) / tile_rows;
  // Up to ~64 rows per task keeps a task's A rows and its panel in L2 while leaving enough tasks; a narrow
  // panel, which a task widens once for all its tiles, takes twice as many to halve that widening's share.
  // The tiles are spread evenly over that many row groups (a tile height that does not divide the rows per
  // task must not add a group: each group reads, and a narrow one widens, the whole panel again).
  const std::int64_t rows_per_task = rhs.storage() == PanelStorage::F32 ? 64 : 128;
  const std::int64_t wanted_groups = std::max<std::int64_t>(1, (m + rows_per_task - 1) / rows_per_task);
  const std::int64_t tiles_per_task = (tiles + wanted_groups - 1) / wanted_groups;
  const std::int64_t groups = (tiles + tiles_per_task - 1) / tiles_per_task;
  // Each tile of a task streams the task's panel from cache: its work grows with the tiles.
  parallel_for(
      panels * groups,
      [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t task = begin; task < end; ++task) {
          const PanelGroup group{task / groups, 1, lk.fast, lk.exact};
          const std::int64_t first = (task % groups) * tiles_per_task;
          run_task(pb, group, static_cast<int>(tile_rows), first, std::min(tiles, first + tiles_per_task),
                   widen);
        }
      },
      grain_for_work(panels * groups, tiles_per_task * rhs.panel_bytes()));
}

void gemm_packed_panels(LhsView A, std::int64_t m, const PackedRhs& rhs, std::int64_t first_panel,
                        std::int64_t panel_count, float* C) {
  const std::int64_t n = rhs.n();
  const std::int64_t k = rhs.k();
  const std::int64_t col0 = first_panel * kPanelWidth;
  const std::int64_t col1 = std::min(n, (first_panel + panel_count) * kPanelWidth);
  if (m <= 0 || col0 >= col1) return;
  if (k <= 0) {
    for (std::int64_t i = 0; i < m; ++i) std::fill(C + i * n + col0, C + i * n + col1, 0.0f);
    return;
  }
  Problem pb{A, m, &rhs, C, leaf_length(k), 0, simd::kernels().gemm};
  pb.leaves = (k + pb.leaf - 1) / pb.leaf;
  const KernelSet& ks = *pb.kernels;
  const detail::LeafKernels& lk = ks.storage[static_cast<int>(rhs.storage())];
  const bool widen = widen_for_tiles(rhs, ks, m);
  const int tile_rows = tile_rows_for(rhs, ks, widen);
  const std::int64_t tiles = (m + tile_rows - 1) / tile_rows;
  for (std::int64_t panel = first_panel; panel * kPanelWidth < col1; ++panel)
    run_task(pb, PanelGroup{panel, 1, lk.fast, lk.exact}, tile_rows, 0, tiles, widen);
}

void gemm(Orientation orientation, const float* A, const float* B, float* C, std::int64_t m, std::int64_t n,
          std::int64_t k) {
  if (m <= 0 || n <= 0) return;
  const PackedRhs rhs = orientation == Orientation::NT ? PackedRhs::from_transposed(B, n, k)
                                                       : PackedRhs::from_row_major(B, k, n);
  const LhsView lhs = orientation == Orientation::TN ? LhsView{A, 1, m} : LhsView{A, k, 1};
  gemm_packed(lhs, m, rhs, C);
}

}  // namespace samebits::gemm
