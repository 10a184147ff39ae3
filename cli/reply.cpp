// The streaming decode loop of `generate` and `chat` (docs/cli.md §5, §9).
#include "reply.hpp"

#include <algorithm>
#include <chrono>

namespace samebits::cli {

ReplyEnd stream_reply(const LanguageModel& model, ModelState& state, std::vector<float> logits,
                      Sampler& sampler, std::int64_t max_new, const std::vector<std::int32_t>& stop_ids,
                      StopStrings& stops, TextStream& text, std::vector<std::int32_t>& fed) {
  const std::int64_t vocab = model.vocab();
  const auto start = std::chrono::steady_clock::now();
  ReplyEnd end;
  std::int32_t next = sampler.sample_and_accept(logits.data(), vocab);
  // Every produced token is counted, printed or held back by a stop string; a closed pipe ends the loop.
  while (end.open) {
    ++end.produced;
    if (std::find(stop_ids.begin(), stop_ids.end(), next) != stop_ids.end()) {
      end.stop_id = true;
      break;
    }
    std::string ready;
    for (const char byte : text.push(next)) ready += stops.push(byte);
    end.text += ready;
    end.open = write_out(ready.data(), ready.size());
    if (!end.open || stops.stopped() || end.produced == max_new) break;
    logits = model.step({&next, 1, 1}, state);
    fed.push_back(next);
    next = sampler.sample_and_accept(logits.data(), vocab);
  }
  if (end.open && !stops.stopped()) {
    std::string rest;
    for (const char byte : text.finish()) rest += stops.push(byte);
    if (!stops.stopped()) rest += stops.flush();
    end.text += rest;
    end.open = write_out(rest.data(), rest.size());
  }
  end.stop_string = stops.stopped();
  end.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return end;
}

}  // namespace samebits::cli
