// `samebits verify`: the step-vs-full check. Decodes a batch one token at a time with a carried state and
// compares every position bit for bit with one stateless forward; --sabotage proves the check can fail by
// moving one carried state cell by one ULP.
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <samebits/samebits.hpp>
#include <string>
#include <vector>

#include "cli.hpp"
#include "sampling.hpp"

namespace samebits::cli {
namespace {

struct Difference {
  std::int64_t position, row, unit;
  float want, got;
};

std::uint32_t bits_of(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

// One carried state cell to perturb: the piece's name and its memory.
struct Piece {
  std::string name;
  std::function<float*(SambaState&)> data;
  std::int64_t cells;
};

std::vector<Piece> carried_pieces(const SambaInference& model, const SambaState& probe) {
  std::vector<Piece> pieces;
  for (std::int64_t i = 0; i < probe.layer_count(); ++i) {
    const std::string layer = "layers[" + std::to_string(i) + "].";
    if (const Mamba3State* m = probe.mamba3(i)) {
      for (int p = 0; p < Mamba3State::kPieceCount; ++p)
        pieces.push_back({layer + Mamba3State::piece_name(p),
                          [i, p](SambaState& s) { return s.mamba3(i)->pin(p).data(); },
                          m->piece_elements(p)});
    } else {
      const std::int64_t floats = probe.attention(i)->cache_floats();
      pieces.push_back(
          {layer + "k_cache", [i](SambaState& s) { return s.attention(i)->pin_k_cache().data(); }, floats});
      pieces.push_back(
          {layer + "v_cache", [i](SambaState& s) { return s.attention(i)->pin_v_cache().data(); }, floats});
    }
  }
  (void)model;
  return pieces;
}

// Decodes ids [B, L] step by step; before step `bump_at`, adds one to the bits of `bump_piece`[cell].
std::optional<Difference> decode_and_compare(const SambaInference& model,
                                             const std::vector<std::int32_t>& ids, std::int64_t batch,
                                             std::int64_t length, const std::vector<float>& full,
                                             const Piece* bump_piece, std::int64_t cell,
                                             std::int64_t bump_at) {
  const std::int64_t vocab = model.config().vocab();
  SambaState state = model.allocate_state(batch, length);
  std::vector<std::int32_t> column(static_cast<std::size_t>(batch));
  for (std::int64_t t = 0; t < length; ++t) {
    if (bump_piece != nullptr && t == bump_at) {
      float* target = bump_piece->data(state) + cell;
      const std::uint32_t moved = bits_of(*target) + 1;
      std::memcpy(target, &moved, 4);
    }
    for (std::int64_t b = 0; b < batch; ++b) column[static_cast<std::size_t>(b)] = ids[b * length + t];
    const std::vector<float> logits = model.step({column.data(), batch, 1}, state);
    for (std::int64_t b = 0; b < batch; ++b)
      for (std::int64_t u = 0; u < vocab; ++u) {
        const float got = logits[b * vocab + u];
        const float want = full[(b * length + t) * vocab + u];
        if (bits_of(got) != bits_of(want)) return Difference{t, b, u, want, got};
      }
  }
  return std::nullopt;
}

void print_difference(const Difference& d) {
  std::printf(
      "FIRST DIFFERING POSITION t=%lld (row %lld, unit %lld): forward %.9g (0x%08x) vs step %.9g (0x%08x)\n",
      static_cast<long long>(d.position), static_cast<long long>(d.row), static_cast<long long>(d.unit),
      d.want, bits_of(d.want), d.got, bits_of(d.got));
}

}  // namespace

int command_verify(std::vector<std::string> args) {
  const std::int64_t batch = parse_int(take_option(args, "--batch").value_or("2"), "--batch", 1, 64);
  const std::int64_t length = parse_int(take_option(args, "--length").value_or("16"), "--length", 2, 8192);
  const auto seed = static_cast<std::uint64_t>(
      parse_int(take_option(args, "--seed").value_or("7"), "--seed", 0, INT64_MAX));
  const bool sabotage = take_flag(args, "--sabotage");
  reject_unknown_options(args, "verify");
  if (args.size() != 1) throw UsageError{"verify takes exactly one CHECKPOINT"};
  const SambaInference model = SambaInference::from_checkpoint(args[0]);
  const std::int64_t vocab = model.config().vocab();

  Random random(seed);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(batch * length));
  for (auto& id : ids) id = static_cast<std::int32_t>(random.next() % static_cast<std::uint64_t>(vocab));
  const std::vector<float> full = model.forward({ids.data(), batch, length});
  std::printf("samba %s: B = %lld, L = %lld, vocab %lld, seed %llu\n", args[0].c_str(),
              static_cast<long long>(batch), static_cast<long long>(length), static_cast<long long>(vocab),
              static_cast<unsigned long long>(seed));

  if (!sabotage) {
    if (const auto diff = decode_and_compare(model, ids, batch, length, full, nullptr, 0, 0)) {
      print_difference(*diff);
      std::printf("FAIL step_vs_full\n");
      return 1;
    }
    std::printf("BITWISE EQUAL at every one of %lld positions (%lld rows)\nPASS step_vs_full\n",
                static_cast<long long>(length), static_cast<long long>(batch));
    return 0;
  }
  // One-ULP sabotage: the first carried cell whose bump moves any position proves the check can fail.
  const std::int64_t at = std::max<std::int64_t>(1, length / 2);
  const SambaState probe = model.allocate_state(batch, length);
  for (const Piece& piece : carried_pieces(model, probe)) {
    for (std::int64_t cell = 0; cell < std::min<std::int64_t>(piece.cells, 128); ++cell) {
      if (const auto diff = decode_and_compare(model, ids, batch, length, full, &piece, cell, at)) {
        std::printf("sabotage: +1 ULP on %s[%lld] just before step %lld\n", piece.name.c_str(),
                    static_cast<long long>(cell), static_cast<long long>(at));
        print_difference(*diff);
        std::printf("PASS sabotage (the step-vs-full check detects a one-ULP state change)\n");
        return 0;
      }
    }
    std::printf("sabotage: %s absorbs a one-ULP bump at its first %lld cells\n", piece.name.c_str(),
                static_cast<long long>(std::min<std::int64_t>(piece.cells, 128)));
  }
  std::printf(
      "no one-ULP perturbation changed any position: this arm cannot fail and is not evidence\nFAIL "
      "sabotage\n");
  return 1;
}

}  // namespace samebits::cli
