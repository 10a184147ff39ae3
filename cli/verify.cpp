// `samebits verify`: the step-vs-full check on a Samba checkpoint or a CausalLM. Decodes a batch one token at
// a time with a carried state and compares every position bit for bit with one stateless forward; --sabotage
// proves the check can fail by moving one carried Samba state cell by one ULP.
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <samebits/samebits.hpp>
#include <samebits/sampler.hpp>
#include <string>
#include <vector>

#include "cli.hpp"
#include "language_model.hpp"

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

std::vector<Piece> carried_pieces(const SambaState& probe) {
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
  return pieces;
}

// Decodes ids [B, L] step by step; before step `bump_at`, adds one to the bits of `bump_piece`[cell].
std::optional<Difference> decode_and_compare(const LanguageModel& model, const std::vector<std::int32_t>& ids,
                                             std::int64_t batch, std::int64_t length,
                                             const std::vector<float>& full, const Piece* bump_piece,
                                             std::int64_t cell, std::int64_t bump_at) {
  const std::int64_t vocab = model.vocab();
  ModelState state = model.allocate_state(batch, length);
  std::vector<std::int32_t> column(static_cast<std::size_t>(batch));
  for (std::int64_t t = 0; t < length; ++t) {
    if (bump_piece != nullptr && t == bump_at) {
      float* target = bump_piece->data(std::get<SambaState>(state)) + cell;
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

std::string difference_json(const Difference& d) {
  char buffer[200];
  std::snprintf(
      buffer, sizeof buffer,
      "{\"position\":%lld,\"row\":%lld,\"unit\":%lld,\"forward_bits\":\"0x%08x\",\"step_bits\":\"0x%08x\"}",
      static_cast<long long>(d.position), static_cast<long long>(d.row), static_cast<long long>(d.unit),
      bits_of(d.want), bits_of(d.got));
  return buffer;
}

void print_difference(const Difference& d) {
  std::printf(
      "FIRST DIFFERING POSITION t=%lld (row %lld, unit %lld): forward %.9g (0x%08x) vs step %.9g (0x%08x)\n",
      static_cast<long long>(d.position), static_cast<long long>(d.row), static_cast<long long>(d.unit),
      d.want, bits_of(d.want), d.got, bits_of(d.got));
}

}  // namespace

const CommandSpec& verify_spec() {
  static const CommandSpec spec{
      "verify",
      "MODEL [OPTIONS]",
      "step-by-step decode vs one-shot forward of a model, bit for bit\n"
      "MODEL: a Samba checkpoint or a Hugging Face model directory. Decodes B random sequences of L ids (or\n"
      "the ids of --prompt) one token at a time with a carried state and compares every logit with one\n"
      "stateless forward; exit 1 when any bit differs. --sabotage (Samba) moves one carried state cell by\n"
      "one ULP and passes only when the comparison catches it.",
      {{"--batch", "", "B", "2", "sequences, 1 to 64"},
       {"--length", "", "L", "16", "positions per sequence, 2 to 8192"},
       {"--seed", "-s", "S", "7", "seed of the random ids"},
       {"--prompt", "-p", "TEXT", "random ids", "verify over the ids of TEXT (a model with a tokenizer)"},
       {"--sabotage", "", "", "", "prove the check can fail (one-ULP state bump; Samba)"},
       {"--json", "", "", "", "print one JSON object instead of text"}},
      "samebits verify assets/default-model/samba-kjv.ckpt --batch 2 --length 32"};
  return spec;
}

int command_verify(const Args& args) {
  std::int64_t batch = args.integer("--batch", "2", 1, 64);
  std::int64_t length = args.integer("--length", "16", 2, 8192);
  const auto seed = static_cast<std::uint64_t>(args.integer("--seed", "7", 0, INT64_MAX));
  const bool sabotage = args.flag("--sabotage");
  const bool json = args.flag("--json");
  const auto prompt = args.get("--prompt");
  const std::string& path = args.single("MODEL");
  const LanguageModel model = LanguageModel::open(path, "verify", prompt.has_value());
  if (sabotage && !model.byte_level())
    throw UsageError{"verify --sabotage bumps a cell of a Samba state; it does not apply to " + path};
  const std::int64_t vocab = model.vocab();

  std::vector<std::int32_t> ids;
  if (prompt) {
    if (model.byte_level()) throw UsageError{"verify --prompt needs a model with a tokenizer"};
    ids = model.encode(*prompt, true);
    batch = 1;
    length = static_cast<std::int64_t>(ids.size());
    if (length < 2) throw UsageError{"verify --prompt needs a text of at least 2 tokens"};
  } else {
    SplitMix64 random(seed);
    ids.resize(static_cast<std::size_t>(batch * length));
    for (auto& id : ids) id = static_cast<std::int32_t>(random.next() % static_cast<std::uint64_t>(vocab));
  }
  if (const auto limit = model.position_limit(); limit && length > *limit)
    throw UsageError{"verify: " + std::to_string(length) + " positions exceed the model's limit of " +
                     std::to_string(*limit)};
  const std::vector<float> full = model.forward({ids.data(), batch, length});
  const std::string head = "{\"file\":" + json_string(path) + ",\"batch\":" + std::to_string(batch) +
                           ",\"length\":" + std::to_string(length) + ",\"vocab\":" + std::to_string(vocab) +
                           ",\"seed\":" + std::to_string(seed) +
                           ",\"check\":" + (sabotage ? "\"sabotage\"" : "\"step_vs_full\"");
  if (json) {
    if (!sabotage) {
      const auto diff = decode_and_compare(model, ids, batch, length, full, nullptr, 0, 0);
      std::printf("%s,\"pass\":%s,\"first_difference\":%s}\n", head.c_str(), diff ? "false" : "true",
                  diff ? difference_json(*diff).c_str() : "null");
      return diff ? kExitRefused : kExitOk;
    }
    const std::int64_t at = std::max<std::int64_t>(1, length / 2);
    const SambaState probe = model.samba()->allocate_state(batch, length);
    for (const Piece& piece : carried_pieces(probe))
      for (std::int64_t cell = 0; cell < std::min<std::int64_t>(piece.cells, 128); ++cell)
        if (const auto diff = decode_and_compare(model, ids, batch, length, full, &piece, cell, at)) {
          std::printf(
              "%s,\"pass\":true,\"bumped\":%s,\"cell\":%lld,\"before_step\":%lld,"
              "\"first_difference\":%s}\n",
              head.c_str(), json_string(piece.name).c_str(), static_cast<long long>(cell),
              static_cast<long long>(at), difference_json(*diff).c_str());
          return kExitOk;
        }
    std::printf("%s,\"pass\":false,\"first_difference\":null}\n", head.c_str());
    return kExitRefused;
  }
  std::printf("%s %s: B = %lld, L = %lld, vocab %lld, %s\n",
              model.byte_level() ? "samba" : model.causal_lm()->model_type().c_str(), path.c_str(),
              static_cast<long long>(batch), static_cast<long long>(length), static_cast<long long>(vocab),
              prompt ? "ids of --prompt" : ("seed " + std::to_string(seed)).c_str());

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
  const SambaState probe = model.samba()->allocate_state(batch, length);
  for (const Piece& piece : carried_pieces(probe)) {
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
