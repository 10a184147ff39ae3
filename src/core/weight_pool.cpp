// The weight pool: bump allocation inside huge-page chunks, one lock, a chunk unmapped with its last block.
#include "core/weight_pool.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>

#include "core/page_map.hpp"

namespace samebits::weight_pool {
constexpr std::size_t kBlockAlignment = 64;

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

void unmap_chunk(Pool& p, std::map<std::uintptr_t, Chunk>::iterator it) {
  if (&it->second == p.current) p.current = nullptr;
  page_map::unmap(it->second.base, it->second.size);
  p.chunks.erase(it);
}

}  // namespace

void* acquire(std::size_t bytes) {
  if constexpr (!page_map::kAvailable) {  // sanitizer builds: every block its own heap allocation
    void* block =
        std::aligned_alloc(kBlockAlignment, (std::max<std::size_t>(bytes, 1) + kBlockAlignment - 1) /
                                                kBlockAlignment * kBlockAlignment);
    if (block == nullptr) throw std::bad_alloc();
    return block;
  }
  bytes = std::max<std::size_t>(bytes, 1);
  bytes = (bytes + kBlockAlignment - 1) / kBlockAlignment * kBlockAlignment;
  Pool& p = pool();
  const std::lock_guard<std::mutex> lock(p.mutex);
  if (p.current == nullptr || p.current->size - p.current->used < bytes) {
    const std::size_t size = std::max(kChunkBytes, (bytes + kHugePage - 1) / kHugePage * kHugePage);
    char* base = static_cast<char*>(page_map::map_zeroed(size));
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
  if constexpr (!page_map::kAvailable) {
    std::free(block);
    return;
  }
  Pool& p = pool();
  const std::lock_guard<std::mutex> lock(p.mutex);
  auto it = p.chunks.upper_bound(reinterpret_cast<std::uintptr_t>(block));
  --it;  // the chunk whose base is the last one at or below the block
  if (--it->second.live == 0) unmap_chunk(p, it);
}

std::size_t chunk_count() {
  if constexpr (!page_map::kAvailable) return 0;
  Pool& p = pool();
  const std::lock_guard<std::mutex> lock(p.mutex);
  return p.chunks.size();
}

}  // namespace samebits::weight_pool
