// The vector body of transpose::transpose, shared by transpose_avx2.cpp and transpose_avx512.cpp.
// Include it inside a TU-unique namespace after the ISA's `struct Isa` (numerics/isa_*.hpp).

void transpose_blocks(const float* in, std::int64_t rows, std::int64_t cols, float* out,
                      std::int64_t& rows_done, std::int64_t& cols_done) {
  constexpr std::int64_t kLanes = Isa::kLanes;
  rows_done = rows / kLanes * kLanes;
  cols_done = cols / kLanes * kLanes;
  for (std::int64_t r0 = 0; r0 < rows_done; r0 += kLanes)
    for (std::int64_t c0 = 0; c0 < cols_done; c0 += kLanes) {
      typename Isa::V block[kLanes];
      for (std::int64_t l = 0; l < kLanes; ++l) block[l] = Isa::load(in + (r0 + l) * cols + c0);
      Isa::transpose(block);
      for (std::int64_t l = 0; l < kLanes; ++l) Isa::store(out + (c0 + l) * rows + r0, block[l]);
    }
}
