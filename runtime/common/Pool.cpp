//===- Pool.cpp - The runtime's memory pool and its C API -----------------===//

#include "RuntimeState.h"

#include <algorithm>
#include <string>

using namespace zest::rt;

void *Pool::allocate(int64_t bytes, Backend &source) {
  size_t size = roundUp(bytes);
  void *ptr = nullptr;
  auto &free = freeLists[size];
  if (!free.empty()) {
    ptr = free.back();
    free.pop_back();
  } else {
    ptr = source.allocateMemory(size, kAlignment);
    if (!ptr)
      fatal("out of memory allocating " + std::to_string(size) +
            " bytes (pool holds " + std::to_string(counters.pool_bytes) +
            " bytes)");
  }
  sizes[ptr] = {size, bytes};
  counters.pool_bytes += size;
  counters.pool_peak_bytes =
      std::max(counters.pool_peak_bytes, counters.pool_bytes);
  return ptr;
}

void Pool::release(void *ptr) {
  if (!ptr)
    return;
  auto it = sizes.find(ptr);
  if (it == sizes.end())
    fatal("zest_pool_free of a pointer the pool did not allocate");
  auto [size, requested] = it->second;
  sizes.erase(it);
  counters.pool_bytes -= size;
  if (gathered.erase(ptr))
    counters.gathered_bytes -= requested;
  freeLists[size].push_back(ptr);
}

void Pool::markGathered(void *ptr) {
  auto it = sizes.find(ptr);
  if (it == sizes.end() || !gathered.insert(ptr).second)
    return;
  // Gathered bytes count the buffers themselves, not the pool rounding.
  counters.gathered_bytes += it->second.second;
  counters.gathered_peak_bytes =
      std::max(counters.gathered_peak_bytes, counters.gathered_bytes);
}

void Pool::releaseUnused(Backend &source) {
  for (auto &[size, free] : freeLists)
    for (void *ptr : free)
      source.freeMemory(ptr);
  freeLists.clear();
}

extern "C" {

void *zest_pool_alloc(int64_t bytes) {
  Runtime &rt = get();
  std::lock_guard<std::mutex> lock(rt.mutex);
  void *ptr = rt.pool.allocate(bytes, *rt.backend);
  traceCounters();
  return ptr;
}

void zest_pool_free(void *ptr) {
  Runtime &rt = get();
  std::lock_guard<std::mutex> lock(rt.mutex);
  rt.pool.release(ptr);
  traceCounters();
}

void zest_pool_mark_gathered(void *ptr) {
  Runtime &rt = get();
  std::lock_guard<std::mutex> lock(rt.mutex);
  rt.pool.markGathered(ptr);
  traceCounters();
}

void zest_get_counters(zest_counters_t *counters) {
  *counters = get().pool.counters;
}

void zest_reset_counters(void) {
  zest_counters_t &c = get().pool.counters;
  c.pool_peak_bytes = c.pool_bytes;
  c.gathered_peak_bytes = c.gathered_bytes;
  c.bytes_sent = 0;
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
