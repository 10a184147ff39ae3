// AlignedBuffer's placement: every buffer is 64-byte aligned; one of 2 MiB or more starts on a 2 MiB
// boundary and its whole 2 MiB extents are advised as huge pages (the kernel marks that mapping "hg").
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "core/aligned_buffer.hpp"

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

}  // namespace
}  // namespace samebits
