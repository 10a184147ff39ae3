// Greedy byte-level decoding with the public C++ API: load a Samba checkpoint, prefill a prompt, then step
// one token at a time on a forked state, checking that decode and one-shot forward agree bit for bit.
#include <cstdio>
#include <cstring>
#include <samebits/samebits.hpp>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: samba_greedy CHECKPOINT PROMPT NEW_TOKENS\n");
    return 2;
  }
  try {
    const samebits::SambaInference model = samebits::SambaInference::from_checkpoint(argv[1]);
    const std::int64_t vocab = model.config().vocab();
    const std::string prompt = argv[2];
    const std::int64_t new_tokens = std::stoll(argv[3]);
    std::vector<std::int32_t> ids;
    for (unsigned char c : prompt) ids.push_back(static_cast<std::int32_t>(c % vocab));
    const auto prompt_length = static_cast<std::int64_t>(ids.size());

    samebits::SambaState state = model.allocate_state(1, prompt_length + new_tokens);
    std::vector<float> logits = model.forward({ids.data(), 1, prompt_length}, state);
    const float* last = logits.data() + (prompt_length - 1) * vocab;
    samebits::SambaState fork = state.clone();  // an explicit copy continues independently
    for (std::int64_t t = 0; t < new_tokens; ++t) {
      std::int32_t best = 0;
      for (std::int32_t u = 1; u < vocab; ++u)
        if (last[u] > last[best]) best = u;
      ids.push_back(best);
      std::printf("%d ", best);
      logits = model.step({&ids.back(), 1, 1}, fork);
      last = logits.data();
    }
    std::printf("\n");
    // Decode == forward: the one-shot forward over prompt + generated ids predicts the same last logits.
    const auto total = static_cast<std::int64_t>(ids.size());
    const std::vector<float> full = model.forward({ids.data(), 1, total});
    const bool same =
        std::memcmp(full.data() + (total - 1) * vocab, last, static_cast<std::size_t>(vocab) * 4) == 0;
    std::printf("decode == forward: %s\n", same ? "yes" : "NO");
    return same ? 0 : 1;
  } catch (const samebits::Error& e) {
    std::fprintf(stderr, "samba_greedy: %s\n", e.what());
    return 1;
  }
}
