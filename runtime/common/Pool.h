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
#include <vector>

namespace zest::rt {

/// The step's planned arena, each buffer at the offset its memory plan
/// gave it (zest_pool_reserve); size-bucketed free lists for allocations
/// without a plan, where a freed buffer is handed to the next allocation of
/// the same size. Either way the steady state of a training loop allocates
/// nothing from the system, and the arena's bookkeeping calls no malloc
/// (glibc's heap, which MPI's large temporaries share, would otherwise
/// fragment and grow into new pages now and then).
class Pool {
public:
  /// Grows the arena to `bytes` and follows `placement` (offset and bytes
  /// per allocation to come) if none of the arena's buffers is live.
  void reserve(int64_t bytes, const int64_t *placement, int64_t count,
               Backend &source);
  /// Takes new memory from `source` (the backend's kind of memory).
  void *allocate(int64_t bytes, Backend &source);
  /// The arena's memory now: replayed work (a CUDA graph) addresses it.
  const void *arenaBase() const { return arena; }
  /// A buffer outside the arena, kept until releaseUnused.
  void *allocateKept(int64_t bytes, Backend &source);
  void release(void *ptr);
  void markGathered(void *ptr);
  /// Returns the buffers no allocation holds (and kept ones) to `source`
  /// (zest_finalize).
  void releaseUnused(Backend &source);

  zest_counters_t counters = {};

private:
  static constexpr size_t kAlignment = 64;
  static size_t roundUp(int64_t bytes) {
    size_t size = bytes > 0 ? static_cast<size_t>(bytes) : 1;
    return (size + kAlignment - 1) / kAlignment * kAlignment;
  }
  /// A live buffer: its bucket (end - offset in the arena), the bytes asked
  /// for, and whether it holds gathered parameters.
  struct Live {
    int64_t offset, end, requested;
    bool gathered;
  };
  /// New memory of `size` bytes from `source`; fatal if there is none.
  void *take(size_t size, Backend &source);
  /// The next planned buffer if it is `size` bytes and free now; null
  /// otherwise (the step departed from its plan, which then ends).
  void *takePlanned(size_t size, int64_t requested);
  /// The live buffer `ptr` starts, or null.
  Live *findLive(void *ptr);
  /// The first live arena buffer at or above `offset`.
  std::vector<Live>::iterator arenaLowerBound(int64_t offset);
  bool inArena(const void *ptr) const {
    auto *byte = static_cast<const char *>(ptr);
    return arena && byte >= arena && byte < arena + capacity;
  }
  void count(int64_t size);

  char *arena = nullptr;
  int64_t capacity = 0;
  /// The arena's live buffers, sorted by offset.
  std::vector<Live> arenaLive;
  /// The plan being followed: pairs of offset and bytes, and the next one.
  const int64_t *placement = nullptr;
  int64_t placementCount = 0, next = 0;
  /// The highest end of a buffer placed in the arena (bytes touched), and
  /// bytes held outside it: free-list buffers and kept ones.
  int64_t arenaTouched = 0, heldOutside = 0;
  std::map<size_t, std::vector<void *>> freeLists;
  std::vector<std::pair<void *, size_t>> kept;
  /// Live buffers from the free lists (offset 0, end their bucket size).
  std::unordered_map<void *, Live> listLive;
};

} // namespace zest::rt

#endif // ZEST_RUNTIME_COMMON_POOL_H
