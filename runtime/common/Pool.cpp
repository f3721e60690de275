//===- Pool.cpp - The runtime's memory pool and its C API -----------------===//

#include "RuntimeState.h"

#include <algorithm>
#include <string>

using namespace zest::rt;

void Pool::reserve(int64_t bytes, const int64_t *plan, int64_t count,
                   Backend &source) {
  if (!arenaLive.empty())
    return;
  if (bytes > capacity) {
    if (arena)
      source.freeMemory(arena);
    arena = nullptr; // take() reports an exhausted device with this state
    capacity = arenaTouched = 0; // held as far as buffers reach
    arena = static_cast<char *>(take(static_cast<size_t>(bytes), source));
    capacity = bytes;
  }
  placement = plan;
  placementCount = count;
  next = 0;
  arenaLive.reserve(static_cast<size_t>(count));
}

void *Pool::take(size_t size, Backend &source) {
  void *ptr = source.allocateMemory(size, kAlignment);
  if (!ptr)
    fatal("out of memory allocating " + std::to_string(size) +
          " bytes (the pool holds " + std::to_string(counters.pool_held_bytes) +
          " bytes, " + std::to_string(counters.pool_bytes) + " of them live)");
  return ptr;
}

std::vector<Pool::Live>::iterator Pool::arenaLowerBound(int64_t offset) {
  return std::lower_bound(
      arenaLive.begin(), arenaLive.end(), offset,
      [](const Live &live, int64_t at) { return live.offset < at; });
}

Pool::Live *Pool::findLive(void *ptr) {
  if (inArena(ptr)) {
    int64_t offset = static_cast<char *>(ptr) - arena;
    auto it = arenaLowerBound(offset);
    return it != arenaLive.end() && it->offset == offset ? &*it : nullptr;
  }
  auto it = listLive.find(ptr);
  return it != listLive.end() ? &it->second : nullptr;
}

void *Pool::takePlanned(size_t size, int64_t requested) {
  if (next >= placementCount)
    return nullptr;
  int64_t offset = placement[2 * next], bytes = placement[2 * next + 1];
  int64_t end = offset + bytes;
  auto after = arenaLowerBound(offset);
  bool overlaps =
      (after != arenaLive.end() && after->offset < end) ||
      (after != arenaLive.begin() && std::prev(after)->end > offset);
  if (bytes != static_cast<int64_t>(size) || offset < 0 || end > capacity ||
      overlaps) {
    placementCount = 0; // departed from the plan: free lists from here on
    return nullptr;
  }
  ++next;
  arenaLive.insert(after, {offset, end, requested, false});
  arenaTouched = std::max(arenaTouched, end);
  return arena + offset;
}

void Pool::count(int64_t size) {
  counters.pool_bytes += size;
  counters.pool_peak_bytes =
      std::max(counters.pool_peak_bytes, counters.pool_bytes);
  counters.pool_held_bytes = arenaTouched + heldOutside;
  counters.pool_held_peak_bytes =
      std::max(counters.pool_held_peak_bytes, counters.pool_held_bytes);
}

void *Pool::allocate(int64_t bytes, Backend &source) {
  size_t size = roundUp(bytes);
  void *ptr = takePlanned(size, bytes);
  if (!ptr) {
    auto &free = freeLists[size];
    if (!free.empty()) {
      ptr = free.back();
      free.pop_back();
    } else {
      ptr = take(size, source);
      heldOutside += static_cast<int64_t>(size);
    }
    listLive[ptr] = {0, static_cast<int64_t>(size), bytes, false};
  }
  count(size);
  return ptr;
}

void *Pool::allocateKept(int64_t bytes, Backend &source) {
  size_t size = roundUp(bytes);
  void *ptr = take(size, source);
  heldOutside += static_cast<int64_t>(size);
  kept.push_back({ptr, size});
  count(size);
  return ptr;
}

void Pool::release(void *ptr) {
  if (!ptr)
    return;
  Live *live = findLive(ptr);
  if (!live)
    fatal("zest_pool_free of a pointer the pool did not allocate");
  int64_t size = live->end - live->offset;
  counters.pool_bytes -= size;
  if (live->gathered)
    counters.gathered_bytes -= live->requested;
  if (inArena(ptr)) {
    arenaLive.erase(arenaLive.begin() + (live - arenaLive.data()));
  } else {
    listLive.erase(ptr);
    freeLists[static_cast<size_t>(size)].push_back(ptr);
  }
}

void Pool::markGathered(void *ptr) {
  Live *live = findLive(ptr);
  if (!live || live->gathered)
    return;
  live->gathered = true;
  // Gathered bytes count the buffers themselves, not the pool rounding.
  counters.gathered_bytes += live->requested;
  counters.gathered_peak_bytes =
      std::max(counters.gathered_peak_bytes, counters.gathered_bytes);
}

void Pool::releaseUnused(Backend &source) {
  for (auto &[size, free] : freeLists)
    for (void *ptr : free) {
      source.freeMemory(ptr);
      heldOutside -= static_cast<int64_t>(size);
    }
  freeLists.clear();
  for (auto [ptr, size] : kept) {
    source.freeMemory(ptr);
    heldOutside -= static_cast<int64_t>(size);
  }
  kept.clear();
  if (arena && arenaLive.empty()) {
    source.freeMemory(arena);
    arena = nullptr;
    capacity = arenaTouched = 0;
    placementCount = 0;
  }
}

/// Runs `change` on the pool under its lock (allocations may come from any
/// thread), then samples the trace's pool counters.
template <typename Change> static auto changePool(Change change) {
  Runtime &rt = get();
  std::lock_guard<std::mutex> lock(rt.mutex);
  struct SampleOnExit {
    ~SampleOnExit() { traceCounters(); }
  } sample;
  return change(rt.pool, *rt.backend);
}

extern "C" {

void zest_pool_reserve(int64_t bytes, const int64_t *placement, int64_t count) {
  Runtime &rt = get(); // no buffer changes: nothing for the trace
  std::lock_guard<std::mutex> lock(rt.mutex);
  rt.pool.reserve(bytes, placement, count, *rt.backend);
}

void *zest_pool_alloc_kept(int64_t bytes) {
  return changePool([&](Pool &pool, Backend &backend) {
    return pool.allocateKept(bytes, backend);
  });
}

void *zest_pool_alloc(int64_t bytes) {
  return changePool([&](Pool &pool, Backend &backend) {
    return pool.allocate(bytes, backend);
  });
}

void zest_pool_free(void *ptr) {
  changePool([&](Pool &pool, Backend &) { pool.release(ptr); });
}

void zest_pool_mark_gathered(void *ptr) {
  changePool([&](Pool &pool, Backend &) { pool.markGathered(ptr); });
}

void zest_get_counters(zest_counters_t *counters) {
  *counters = get().pool.counters;
}

void zest_reset_counters(void) {
  zest_counters_t &c = get().pool.counters;
  c.pool_peak_bytes = c.pool_bytes;
  c.gathered_peak_bytes = c.gathered_bytes;
  c.pool_held_peak_bytes = c.pool_held_bytes;
  c.bytes_sent = 0;
  c.exchange_bytes = 0;
  c.collectives = 0;
  c.wait_us = 0;
}

//===----------------------------------------------------------------------===//
// Allocation entry points of compiled code: finalize-memref-to-llvm with
// use-generic-functions calls these instead of malloc/free, so every buffer
// of a compiled step lives in the pool.
//===----------------------------------------------------------------------===//

void *_mlir_memref_to_llvm_alloc(size_t size) {
  return zest_pool_alloc(static_cast<int64_t>(size));
}

void *_mlir_memref_to_llvm_aligned_alloc(size_t alignment, size_t size) {
  if (alignment > 64)
    fatal("alignment " + std::to_string(alignment) + " is not supported");
  return zest_pool_alloc(static_cast<int64_t>(size));
}

void _mlir_memref_to_llvm_free(void *ptr) { zest_pool_free(ptr); }

} // extern "C"
