// Optional wall-clock totals per forward stage (projection GEMMs, scans, attention) for the benchmarks'
// profile split; off unless a benchmark turns it on, and then it never changes a bit, only reads clocks.
#pragma once

#include <array>
#include <cstdint>

namespace samebits::stage_clock {

enum class Stage : int { kProjection = 0, kScan = 1, kAttention = 2 };
inline constexpr int kStageCount = 3;

// Turns collection on (clearing the totals) or off. Meant for one calling thread at a time.
void enable(bool on);
// Seconds spent in each stage since the last enable(true).
std::array<double, kStageCount> totals();

// Times its lifetime into `stage` when collection is on and no other scope is open anywhere: the
// outermost scope owns the time, so the GEMMs inside a scan count as scan and a worker's scopes inside
// a timed region count nowhere else. When off it costs one relaxed load.
class Scope {
 public:
  explicit Scope(Stage stage) noexcept;
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  int stage_ = -1;  // -1: not the owner, nothing to record
  std::int64_t start_ns_ = 0;
};

}  // namespace samebits::stage_clock
