// Per-stage wall-clock totals behind stage_clock::Scope: one owner scope at a time, nanoseconds per stage.
#include "core/stage_clock.hpp"

#include <atomic>
#include <chrono>

namespace samebits::stage_clock {
namespace {

std::atomic<bool> enabled{false};
std::atomic<bool> owned{false};  // a timing scope is open
std::array<std::atomic<std::int64_t>, kStageCount> spent_ns{};

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void enable(bool on) {
  for (auto& ns : spent_ns) ns.store(0, std::memory_order_relaxed);
  enabled.store(on, std::memory_order_release);
}

std::array<double, kStageCount> totals() {
  std::array<double, kStageCount> out{};
  for (int s = 0; s < kStageCount; ++s)
    out[static_cast<std::size_t>(s)] =
        static_cast<double>(spent_ns[static_cast<std::size_t>(s)].load(std::memory_order_relaxed)) * 1e-9;
  return out;
}

Scope::Scope(Stage stage) noexcept {
  if (!enabled.load(std::memory_order_relaxed)) return;
  bool expected = false;
  if (!owned.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) return;
  stage_ = static_cast<int>(stage);
  start_ns_ = now_ns();
}

Scope::~Scope() {
  if (stage_ < 0) return;
  spent_ns[static_cast<std::size_t>(stage_)].fetch_add(now_ns() - start_ns_, std::memory_order_relaxed);
  owned.store(false, std::memory_order_release);
}

}  // namespace samebits::stage_clock
