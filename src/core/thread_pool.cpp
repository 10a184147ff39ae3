// Persistent worker pool behind parallel_for: workers are created once and parked between calls.
#include "core/thread_pool.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace samebits {
namespace {

constexpr int kMaxThreads = 256;

int threads_from_environment() {
  const char* text = std::getenv("SAMEBITS_NUM_THREADS");
  if (text != nullptr) {
    char* end = nullptr;
    long value = std::strtol(text, &end, 10);
    if (end != text && *end == '\0' && value >= 1)
      return static_cast<int>(std::min<long>(value, kMaxThreads));
  }
  return hardware_threads();
}

thread_local bool tls_inside_parallel = false;

class Pool {
 public:
  static Pool& instance() {
    static Pool pool;
    return pool;
  }

  int threads() const { return threads_.load(std::memory_order_relaxed); }
  void set_threads(int n) { threads_.store(std::clamp(n, 1, kMaxThreads), std::memory_order_relaxed); }

  void run(std::int64_t count, const std::function<void(std::int64_t, std::int64_t)>& body,
           std::int64_t grain) {
    const int wanted = threads();
    grain = std::max<std::int64_t>(grain, 1);
    const std::int64_t chunks_possible = (count + grain - 1) / grain;
    const int helpers = static_cast<int>(std::min<std::int64_t>(wanted, chunks_possible)) - 1;
    // A region without helpers never touches the shared workers, so concurrent callers (each with its
    // own state) run such regions at the same time instead of queueing on the pool.
    if (helpers <= 0) {
      run_serial(count, body);
      return;
    }
    // One region at a time uses the workers; a concurrent caller waits for the current one to end.
    std::lock_guard<std::mutex> call_lock(call_mutex_);
    ensure_workers(helpers);
    // Several chunks per thread balance uneven tiles; any split gives the same bits.
    std::int64_t chunk = std::max<std::int64_t>(grain, count / ((helpers + 1) * 4));
    chunk = (chunk + grain - 1) / grain * grain;
    body_ = &body;
    count_ = count;
    chunk_ = chunk;
    // Each thread owns a fixed contiguous run of chunks: the same thread reads the same weights every
    // step, so each core keeps re-reading data its own caches still hold. A thread done with its run
    // takes chunks from the others' runs, so a delayed core does not hold the region up.
    const std::int64_t chunks = (count + chunk - 1) / chunk;
    parts_ = helpers + 1;
    for (int part = 0; part < parts_; ++part) {
      runs_[part].next.store(chunks * part / parts_, std::memory_order_relaxed);
      runs_[part].end = chunks * (part + 1) / parts_;
    }
    error_ = nullptr;
    finished_.store(0, std::memory_order_relaxed);
    const std::uint64_t generation = (round_.load(std::memory_order_relaxed) >> 16) + 1;
    gate_.store(gate_generation(generation), std::memory_order_relaxed);  // open, nobody joined yet
    {
      // The round word carries the generation and the helper count together, so a worker never pairs
      // one round's generation with another round's count. Published under the mutex so that a worker
      // about to park cannot miss it.
      std::lock_guard<std::mutex> lock(mutex_);
      round_.store(generation << 16 | static_cast<std::uint64_t>(helpers), std::memory_order_release);
      if (parked_ > 0) wake_.notify_all();
    }
    work(0);
    // Every chunk is taken now. Closing the round turns away helpers that have not joined it yet, so a
    // worker the system has not scheduled (on a shared machine a core can be away for milliseconds) never
    // holds the caller up: only helpers still finishing the chunks they claimed are waited for.
    const int joined = static_cast<int>(gate_.fetch_or(kGateClosed, std::memory_order_acq_rel) & kGateJoined);
    // Decode steps run dozens of short regions back to back: spin briefly before sleeping, because
    // waking a sleeping thread costs more than a whole small region.
    auto all_back = [&] { return finished_.load(std::memory_order_acquire) == joined; };
    if (!spin_until(all_back)) {
      std::unique_lock<std::mutex> lock(mutex_);
      done_.wait(lock, all_back);
    }
    body_ = nullptr;
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  Pool() : threads_(threads_from_environment()) {}
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
      stopping_flag_.store(true, std::memory_order_relaxed);
    }
    wake_.notify_all();
    for (auto& worker : workers_) worker.join();
  }

  static void run_serial(std::int64_t count, const std::function<void(std::int64_t, std::int64_t)>& body) {
    if (count <= 0) return;
    bool was_inside = tls_inside_parallel;
    tls_inside_parallel = true;
    try {
      body(0, count);
    } catch (...) {
      tls_inside_parallel = was_inside;
      throw;
    }
    tls_inside_parallel = was_inside;
  }

  void ensure_workers(int helpers) {
    while (static_cast<int>(workers_.size()) < helpers) {
      int index = static_cast<int>(workers_.size());
      // The worker starts from the generation now current, read here: the round about to be published
      // is new to it even if the thread only starts running after the publication.
      const std::uint64_t current = round_.load(std::memory_order_relaxed) >> 16;
      workers_.emplace_back([this, index, current] { worker_loop(index, current); });
    }
  }

  // Runs its own part's chunks, then claims what is left of the others'; records the first exception.
  void work(int own) {
    tls_inside_parallel = true;
    for (int offset = 0; offset < parts_; ++offset) {
      Run& run = runs_[(own + offset) % parts_];
      for (;;) {
        const std::int64_t index = run.next.fetch_add(1, std::memory_order_relaxed);
        if (index >= run.end) break;
        const std::int64_t begin = index * chunk_;
        const std::int64_t end = std::min(begin + chunk_, count_);
        try {
          (*body_)(begin, end);
        } catch (...) {
          std::lock_guard<std::mutex> lock(mutex_);
          if (!error_) error_ = std::current_exception();
        }
      }
    }
    tls_inside_parallel = false;
  }

  // Spins up to kSpin for ready() to hold; false when it did not (the caller then sleeps on a condition).
  template <typename Ready>
  static bool spin_until(const Ready& ready) {
    constexpr auto kSpin = std::chrono::microseconds(200);
    const auto start = std::chrono::steady_clock::now();
    for (unsigned i = 1;; ++i) {
      if (ready()) return true;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#else
      std::this_thread::yield();
#endif
      if (i % 64 == 0 && std::chrono::steady_clock::now() - start > kSpin) return ready();
    }
  }

  void worker_loop(int index, std::uint64_t seen) {
    for (;;) {
      std::uint64_t round = 0;
      auto fresh = [&] {
        round = round_.load(std::memory_order_acquire);
        return (round >> 16) != seen;
      };
      if (!spin_until([&] { return stopping_flag_.load(std::memory_order_relaxed) || fresh(); })) {
        std::unique_lock<std::mutex> lock(mutex_);
        ++parked_;
        wake_.wait(lock, [&] { return stopping_ || fresh(); });
        --parked_;
      }
      if (stopping_flag_.load(std::memory_order_relaxed)) return;
      seen = round >> 16;
      if (index >= static_cast<int>(round & 0xffff)) continue;  // not called for this round
      if (!join(seen)) continue;                                // the caller already took every chunk
      work(index + 1);
      finished_.fetch_add(1, std::memory_order_acq_rel);
      // The caller may be asleep waiting for the helpers that joined; the last one back wakes it.
      const std::uint64_t gate = gate_.load(std::memory_order_acquire);
      if ((gate & kGateClosed) != 0 &&
          finished_.load(std::memory_order_acquire) == static_cast<int>(gate & kGateJoined)) {
        std::lock_guard<std::mutex> lock(mutex_);
        done_.notify_all();
      }
    }
  }

  // The gate word of a round: its generation (low 32 bits) << 32, a closed flag and the helpers joined.
  static constexpr std::uint64_t kGateClosed = std::uint64_t{1} << 31;
  static constexpr std::uint64_t kGateJoined = kGateClosed - 1;
  static std::uint64_t gate_generation(std::uint64_t generation) { return generation << 32; }

  // Joins round `generation` unless the caller has closed it (or moved on to a later one).
  bool join(std::uint64_t generation) {
    std::uint64_t gate = gate_.load(std::memory_order_acquire);
    while ((gate & ~(kGateClosed | kGateJoined)) == gate_generation(generation) && (gate & kGateClosed) == 0)
      if (gate_.compare_exchange_weak(gate, gate + 1, std::memory_order_acq_rel, std::memory_order_acquire))
        return true;
    return false;
  }

  std::atomic<int> threads_;
  std::mutex call_mutex_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  std::vector<std::thread> workers_;
  const std::function<void(std::int64_t, std::int64_t)>* body_ = nullptr;
  std::int64_t count_ = 0;
  std::int64_t chunk_ = 1;
  // A thread's run of chunk indices [next, end); next only grows (claimed by fetch_add).
  struct alignas(64) Run {
    std::atomic<std::int64_t> next{0};
    std::int64_t end = 0;
  };
  std::array<Run, kMaxThreads> runs_;
  int parts_ = 1;
  // This round's gate (gate_generation | kGateClosed once the caller is done | helpers joined) and the
  // joined helpers that have finished.
  std::atomic<std::uint64_t> gate_{0};
  std::atomic<int> finished_{0};
  // generation << 16 | helpers called for it (at most kMaxThreads - 1 < 2^16)
  std::atomic<std::uint64_t> round_{0};
  int parked_ = 0;  // workers asleep on wake_ (guarded by mutex_)
  bool stopping_ = false;
  std::atomic<bool> stopping_flag_{false};
  std::exception_ptr error_;
};

}  // namespace

int hardware_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(std::min<unsigned>(n, kMaxThreads));
}

int num_threads() { return Pool::instance().threads(); }

void set_num_threads(int n) { Pool::instance().set_threads(n); }

void parallel_for(std::int64_t count, const std::function<void(std::int64_t, std::int64_t)>& body,
                  std::int64_t grain) {
  if (count <= 0) return;
  if (tls_inside_parallel) {
    body(0, count);
    return;
  }
  Pool::instance().run(count, body, grain);
}

std::int64_t grain_for_work(std::int64_t count, std::int64_t bytes_per_item) {
  if (count <= 1) return 1;
  // Threads the work pays for (in double: count * bytes may pass 2^63; any rounding only moves the split).
  const double worth = static_cast<double>(count) *
                       static_cast<double>(std::max<std::int64_t>(bytes_per_item, 1)) /
                       static_cast<double>(kMinBytesPerThread);
  if (worth >= static_cast<double>(num_threads())) return 1;  // enough for every thread: the pool's balancing
  const std::int64_t threads = std::max<std::int64_t>(1, static_cast<std::int64_t>(worth));
  return (count + threads - 1) / threads;
}

}  // namespace samebits
