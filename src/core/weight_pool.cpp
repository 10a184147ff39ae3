// The weight pool: bump allocation inside huge-page chunks, one lock, a chunk unmapped with its last block.
#include "core/weight_pool.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>

#if defined(SAMEBITS_SANITIZER_BUILD) || defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SAMEBITS_WEIGHT_POOL_ON_HEAP 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define SAMEBITS_WEIGHT_POOL_ON_HEAP 1
#endif
#endif

namespace samebits::weight_pool {
constexpr std::size_t kBlockAlignment = 64;

#if defined(SAMEBITS_WEIGHT_POOL_ON_HEAP)

void* acquire(std::size_t bytes) {
  void* block =
      std::aligned_alloc(kBlockAlignment, (bytes + kBlockAlignment - 1) / kBlockAlignment * kBlockAlignment);
  if (block == nullptr) throw std::bad_alloc();
  return block;
}

void release(void* block) noexcept { std::free(block); }

std::size_t chunk_count() { return 0; }

#else

namespace {

// Address space reserved per chunk. Only the extents a block touches become resident, so a chunk costs
// at most one partly used huge page beyond what its blocks hold.
constexpr std::size_t kChunkBytes = std::size_t{64} << 20;

struct Chunk {
  char* base;
  std::size_t size;
  std::size_t used = 0;
  std::size_t live = 0;
};

struct Pool {
  std::mutex mutex;
  std::map<std::uintptr_t, Chunk> chunks;  // by base address; node addresses are stable
  Chunk* current = nullptr;                // the chunk new blocks are carved from
};

// Never destroyed: a model held by a static object (or by Python at interpreter exit) may give its
// weights back after every static destructor has run.
Pool& pool() {
  static Pool* const instance = new Pool;
  return *instance;
}

// `size` bytes (a multiple of kHugePage) starting on a huge-page boundary, advised as huge pages.
char* map_chunk(std::size_t size) {
  const std::size_t span = size + kHugePage;
  void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t base = (start + kHugePage - 1) / kHugePage * kHugePage;
  if (base > start) munmap(raw, base - start);
  if (start + span > base + size) munmap(reinterpret_cast<void*>(base + size), start + span - (base + size));
#if defined(MADV_HUGEPAGE)
  madvise(reinterpret_cast<void*>(base), size, MADV_HUGEPAGE);  // advice only: small pages still work
#endif
  return reinterpret_cast<char*>(base);
}

void unmap_chunk(Pool& p, std::map<std::uintptr_t, Chunk>::iterator it) {
  if (&it->second == p.current) p.current = nullptr;
  munmap(it->second.base, it->second.size);
  p.chunks.erase(it);
}

}  // namespace

void* acquire(std::size_t bytes) {
  bytes = std::max<std::size_t>(bytes, 1);
  bytes = (bytes + kBlockAlignment - 1) / kBlockAlignment * kBlockAlignment;
  Pool& p = pool();
  const std::lock_guard<std::mutex> lock(p.mutex);
  if (p.current == nullptr || p.current->size - p.current->used < bytes) {
    const std::size_t size = std::max(kChunkBytes, (bytes + kHugePage - 1) / kHugePage * kHugePage);
    char* base = map_chunk(size);
    // The chunk being left stays mapped while it holds blocks (an empty chunk is never current).
    p.current = &p.chunks.emplace(reinterpret_cast<std::uintptr_t>(base), Chunk{base, size}).first->second;
  }
  char* block = p.current->base + p.current->used;
  p.current->used += bytes;
  ++p.current->live;
  return block;
}

void release(void* block) noexcept {
  if (block == nullptr) return;
  Pool& p = pool();
  const std::lock_guard<std::mutex> lock(p.mutex);
  auto it = p.chunks.upper_bound(reinterpret_cast<std::uintptr_t>(block));
  --it;  // the chunk whose base is the last one at or below the block
  if (--it->second.live == 0) unmap_chunk(p, it);
}

std::size_t chunk_count() {
  Pool& p = pool();
  const std::lock_guard<std::mutex> lock(p.mutex);
  return p.chunks.size();
}

#endif

}  // namespace samebits::weight_pool
