//===- Pool.h - The runtime's memory pool ------------------------*- C++
//-*-===//
//
// Every buffer of a compiled step comes from here (zest_pool_alloc, and
// finalize-memref-to-llvm's allocation functions), so its peak is counted
// exactly and matches zest-plan-memory's prediction.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_COMMON_POOL_H
#define ZEST_RUNTIME_COMMON_POOL_H

#include "Backend.h"
#include "zest_runtime.h"

#include <map>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace zest::rt {

/// Size-bucketed free lists: allocations are rounded up to 64 bytes and a
/// freed buffer is handed to the next allocation of the same size, so the
/// steady state of a training loop allocates nothing from the system.
class Pool {
public:
  /// Takes new memory from `source` (the backend's kind of memory).
  void *allocate(int64_t bytes, Backend &source);
  void release(void *ptr);
  void markGathered(void *ptr);
  /// Returns the buffers no allocation holds to `source` (zest_finalize).
  void releaseUnused(Backend &source);

  zest_counters_t counters = {};

private:
  static constexpr size_t kAlignment = 64;
  static size_t roundUp(int64_t bytes) {
    size_t size = bytes > 0 ? static_cast<size_t>(bytes) : 1;
    return (size + kAlignment - 1) / kAlignment * kAlignment;
  }
  std::map<size_t, std::vector<void *>> freeLists;
  /// Bucket size and requested bytes of every live allocation.
  std::unordered_map<void *, std::pair<size_t, int64_t>> sizes;
  std::unordered_set<void *> gathered;
};

} // namespace zest::rt

#endif // ZEST_RUNTIME_COMMON_POOL_H
