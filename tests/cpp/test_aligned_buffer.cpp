// AlignedBuffer's placement: every buffer is 64-byte aligned; a heap buffer of 2 MiB or more starts on a
// 2 MiB boundary and its whole 2 MiB extents are advised as huge pages (the kernel marks that mapping
// "hg"); weight-pool buffers lie side by side in such chunks, which go back to the system when empty.
#include <gtest/gtest.h>
#include <sys/mman.h>  // MADV_HUGEPAGE

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/aligned_buffer.hpp"
#include "core/page_map.hpp"
#include "core/weight_pool.hpp"

namespace samebits {
namespace {

constexpr std::size_t kHuge = AlignedBuffer<float>::kHugePage;

std::uintptr_t address(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

// The VmFlags line of the /proc/self/smaps mapping that holds `p`, or "" when none is found.
std::string vm_flags_of(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    unsigned long long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx ", &lo, &hi) == 2 && line.find(':') > line.find('-')) {
      inside = lo <= address(p) && address(p) < hi;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return "";
}

bool flag_set(const std::string& vm_flags, const std::string& flag) {
  std::istringstream words(vm_flags);
  std::string word;
  while (words >> word)
    if (word == flag) return true;
  return false;
}

TEST(AlignedBuffer, SmallBuffersAreVectorAligned) {
  for (std::size_t count : {std::size_t{1}, std::size_t{3}, std::size_t{16}, std::size_t{1000},
                            std::size_t{100000}, kHuge / sizeof(float) - 17}) {
    AlignedBuffer<float> buffer(count);
    EXPECT_EQ(address(buffer.data()) % AlignedBuffer<float>::kAlignment, 0u) << count;
    EXPECT_EQ(buffer.size(), count);
  }
}

TEST(AlignedBuffer, BigBuffersStartOnAHugePageAndAskForHugePages) {
  for (std::size_t bytes : {kHuge, kHuge + 4096, 5 * kHuge + 12345}) {
    const std::size_t count = (bytes + sizeof(float) - 1) / sizeof(float);
    AlignedBuffer<float> buffer;
    buffer.assign_zero(count);
    ASSERT_EQ(address(buffer.data()) % kHuge, 0u) << bytes;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const std::string flags = vm_flags_of(buffer.data());
    ASSERT_FALSE(flags.empty()) << "no mapping found for the buffer";
    EXPECT_TRUE(flag_set(flags, "hg")) << bytes << ": " << flags;
#endif
    EXPECT_EQ(buffer[count - 1], 0.0f);
  }
}

TEST(AlignedBuffer, CloneAndMoveKeepTheContents) {
  AlignedBuffer<float> buffer(kHuge / sizeof(float) + 5);
  for (std::size_t i = 0; i < buffer.size(); ++i) buffer[i] = static_cast<float>(i % 977);
  AlignedBuffer<float> copy = buffer.clone();
  ASSERT_EQ(address(copy.data()) % kHuge, 0u);
  AlignedBuffer<float> moved = std::move(buffer);
  EXPECT_EQ(buffer.data(), nullptr);
  ASSERT_EQ(moved.size(), copy.size());
  for (std::size_t i = 0; i < copy.size(); ++i) ASSERT_EQ(moved[i], copy[i]) << i;
}

// The resident set of this process in bytes (VmRSS of /proc/self/status), or -1 when unreadable.
long long resident_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  return -1;
}

// /proc/sys/vm/overcommit_memory: 2 refuses mappings beyond the commit limit, so a large zeroed buffer
// may then be refused (std::bad_alloc) rather than mapped.
int overcommit_mode() {
  std::ifstream mode("/proc/sys/vm/overcommit_memory");
  int value = -1;
  mode >> value;
  return value;
}

TEST(AlignedBuffer, ABigZeroedBufferIsResidentOnlyWhereWritten) {
  if (!page_map::kAvailable) GTEST_SKIP() << "sanitizer build: buffers come from the heap and are zeroed";
  if (overcommit_mode() == 2) GTEST_SKIP() << "vm.overcommit_memory = 2: an 8 GiB mapping may be refused";
  const long long before = resident_bytes();
  ASSERT_GT(before, 0);
  // 8 GiB of zeros, a third of this machine's memory: zeroing it page by page would make it all resident.
  const std::size_t count = (std::size_t{8} << 30) / sizeof(float);
  AlignedBuffer<float> buffer;
  buffer.assign_zero(count);
  ASSERT_EQ(address(buffer.data()) % kHuge, 0u);
  const std::size_t probes[] = {0, count / 3, count / 2 + 7, count - 1};
  for (std::size_t i : probes) EXPECT_EQ(buffer[i], 0.0f) << i;
  for (std::size_t i : probes) buffer[i] = static_cast<float>(i % 1000) + 1.0f;
  for (std::size_t i : probes) EXPECT_EQ(buffer[i], static_cast<float>(i % 1000) + 1.0f) << i;
  // Four written places cost at most four huge pages; allow the test's own noise on top.
  EXPECT_LT(resident_bytes() - before, 64ll << 20);
  // Reused at the same size, assign_zero must clear what was written.
  buffer.assign_zero(count);
  for (std::size_t i : probes) EXPECT_EQ(buffer[i], 0.0f) << i;
}

constexpr bool kPoolOnHeap = !page_map::kAvailable;  // sanitizer builds: every block from the heap

TEST(WeightPool, BlocksLieSideBySideInOneHugePageChunk) {
  const std::size_t chunks_before = weight_pool::chunk_count();
  std::vector<AlignedBuffer<float>> blocks;
  std::uintptr_t next = 0;
  for (std::size_t count : {std::size_t{3}, std::size_t{1000}, std::size_t{300000}, std::size_t{17}}) {
    AlignedBuffer<float> block;
    block.assign_zero(count, Placement::kWeightPool);
    ASSERT_EQ(block.placement(), Placement::kWeightPool);
    ASSERT_EQ(address(block.data()) % AlignedBuffer<float>::kAlignment, 0u);
    for (std::size_t i = 0; i < count; ++i) block[i] = static_cast<float>(count + i);
    if (!kPoolOnHeap && next != 0) {
      EXPECT_EQ(address(block.data()), next) << count;
    }
    next = address(block.data()) + (count * sizeof(float) + 63) / 64 * 64;
    blocks.push_back(std::move(block));
  }
  if (!kPoolOnHeap) {
    EXPECT_EQ(weight_pool::chunk_count(), chunks_before + 1);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    EXPECT_TRUE(flag_set(vm_flags_of(blocks.front().data()), "hg"));
#endif
  }
  for (const AlignedBuffer<float>& block : blocks)
    for (std::size_t i = 0; i < block.size(); ++i) ASSERT_EQ(block[i], static_cast<float>(block.size() + i));
  blocks.clear();
  EXPECT_EQ(weight_pool::chunk_count(), chunks_before);  // the emptied chunk is unmapped
}

TEST(WeightPool, ABlockLargerThanAChunkGetsItsOwn) {
  const std::size_t chunks_before = weight_pool::chunk_count();
  AlignedBuffer<float> small;
  small.assign_zero(100, Placement::kWeightPool);
  AlignedBuffer<float> large;
  large.assign_zero((std::size_t{80} << 20) / sizeof(float), Placement::kWeightPool);  // past 64 MiB
  large[large.size() - 1] = 1.0f;
  if (!kPoolOnHeap) {
    EXPECT_EQ(address(large.data()) % kHuge, 0u);
    EXPECT_EQ(weight_pool::chunk_count(), chunks_before + 2);
  }
  large = AlignedBuffer<float>();
  small = AlignedBuffer<float>();
  EXPECT_EQ(weight_pool::chunk_count(), chunks_before);
}

TEST(WeightPool, ClonesStayInThePoolAndHeapBuffersStayOnTheHeap) {
  AlignedBuffer<float> pooled;
  pooled.assign_zero(4096, Placement::kWeightPool);
  pooled[7] = 3.5f;
  const AlignedBuffer<float> copy = pooled.clone();
  EXPECT_EQ(copy.placement(), Placement::kWeightPool);
  EXPECT_EQ(copy[7], 3.5f);
  AlignedBuffer<float> heap(4096);
  EXPECT_EQ(heap.placement(), Placement::kHeap);
  heap = std::move(pooled);  // the heap block is freed, the pooled one changes hands
  EXPECT_EQ(heap.placement(), Placement::kWeightPool);
  EXPECT_EQ(heap[7], 3.5f);
}

TEST(WeightPool, ThreadsAcquireAndReleaseConcurrently) {
  const std::size_t chunks_before = weight_pool::chunk_count();
  std::vector<std::thread> threads;
  std::vector<int> failures(3, 0);
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([t, &failures] {
      std::vector<AlignedBuffer<float>> held;
      for (int round = 0; round < 200; ++round) {
        AlignedBuffer<float> block;
        block.resize_uninitialized(static_cast<std::size_t>(1 + (round * 7919 + t * 104729) % 50000),
                                   Placement::kWeightPool);
        for (std::size_t i = 0; i < block.size(); ++i) block[i] = static_cast<float>(t * 1000 + round);
        held.push_back(std::move(block));
        if (round % 3 == 2) held.erase(held.begin());  // give some back while others are taken
        for (const AlignedBuffer<float>& b : held)
          if (b[0] != b[b.size() - 1]) ++failures[static_cast<std::size_t>(t)];
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int f : failures) EXPECT_EQ(f, 0);
  EXPECT_EQ(weight_pool::chunk_count(), chunks_before);
}

}  // namespace
}  // namespace samebits
