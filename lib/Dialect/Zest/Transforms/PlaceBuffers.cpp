//===- PlaceBuffers.cpp - Offsets of a step's buffers in one arena --------===//
//
// The offline placement behind the pool's arena (zest-plan-memory,
// zest-reserve-pool). Placing buffers by size, with every lifetime known,
// leaves far fewer holes than any allocator that sees one request at a
// time: on GPT-2 124M at W=2 the arena is 1.9% above the live peak where
// best fit in allocation order needs 13%.
//
//===----------------------------------------------------------------------===//

#include "zest/Dialect/Zest/Transforms/MemoryPlan.h"

#include <numeric>

using namespace mlir;
using namespace mlir::zest;

namespace {

/// Whether two lifetimes meet ([start, end), end -1: to the end of time).
bool meet(const BufferLifetime &a, const BufferLifetime &b) {
  auto end = [](const BufferLifetime &x) {
    return x.end < 0 ? std::numeric_limits<int64_t>::max() : x.end;
  };
  return a.start < end(b) && b.start < end(a);
}

int64_t alignUp(int64_t offset, int64_t alignment) {
  return (offset + alignment - 1) / alignment * alignment;
}

/// The lowest aligned offset of the smallest gap of at least `bytes` between
/// the `busy` ranges (sorted by offset), else the first above them all.
int64_t findGap(ArrayRef<std::pair<int64_t, int64_t>> busy, int64_t bytes,
                int64_t alignment) {
  int64_t best = -1, bestGap = std::numeric_limits<int64_t>::max(), cursor = 0;
  for (auto [begin, end] : busy) {
    int64_t gap = begin - cursor;
    if (gap >= bytes && gap < bestGap) {
      best = cursor;
      bestGap = gap;
    }
    cursor = std::max(cursor, alignUp(end, alignment));
  }
  return best >= 0 ? best : cursor;
}

} // namespace

LogicalResult mlir::zest::verifyArenaAlignment(int64_t alignment,
                                               Location loc) {
  if (alignment > 0 && alignment % kHostArenaAlignment == 0)
    return success();
  return emitError(loc) << "arena-alignment must be a positive multiple of "
                        << kHostArenaAlignment << " (the pool's buckets), got "
                        << alignment;
}

SmallVector<int64_t> mlir::zest::placeBuffers(ArrayRef<BufferLifetime> buffers,
                                              int64_t alignment,
                                              int64_t &arenaBytes) {
  SmallVector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  // Largest first; among equals the earlier, so the result is stable.
  llvm::stable_sort(order, [&](size_t a, size_t b) {
    return buffers[a].bytes > buffers[b].bytes;
  });
  SmallVector<int64_t> offsets(buffers.size(), 0);
  SmallVector<size_t> placed;
  SmallVector<std::pair<int64_t, int64_t>> busy;
  arenaBytes = 0;
  for (size_t i : order) {
    busy.clear();
    for (size_t j : placed)
      if (meet(buffers[i], buffers[j]))
        busy.push_back({offsets[j], offsets[j] + buffers[j].bytes});
    llvm::sort(busy);
    offsets[i] = findGap(busy, buffers[i].bytes, alignment);
    arenaBytes = std::max(arenaBytes, offsets[i] + buffers[i].bytes);
    placed.push_back(i);
  }
  return offsets;
}
