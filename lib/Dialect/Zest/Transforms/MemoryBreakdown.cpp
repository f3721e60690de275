//===- MemoryBreakdown.cpp - What the pool holds, by kind -----------------===//
//
// A peak is actionable only once it is known what it is made of: gathered
// parameters call for less prefetch or re-gathering, gradients for smaller
// buckets, activations for checkpointing. The replay marks each buffer's
// kind and unit; this splits the pool's series and its peak by them.
//
//===----------------------------------------------------------------------===//

#include "zest/Dialect/Zest/Transforms/MemoryPlan.h"

using namespace mlir;
using namespace mlir::zest;

/// The buffers live right after the allocation at `tick`.
static PeakBreakdown getLiveAt(ArrayRef<BufferLifetime> buffers, int64_t tick) {
  PeakBreakdown live;
  for (const BufferLifetime &buffer : buffers) {
    if (buffer.start > tick || (buffer.end >= 0 && buffer.end <= tick))
      continue;
    live.bytes.of(buffer.kind) += buffer.bytes;
    if (!buffer.unit.empty())
      live.units[buffer.unit].of(buffer.kind) += buffer.bytes;
    if (buffer.kind != BufferKind::Other)
      continue;
    ++live.otherBuffers;
    live.others.push_back(
        {buffer.bytes, {buffer.allocatedAt, buffer.calledFrom}, buffer.unit});
  }
  llvm::stable_sort(live.others, [](const PeakBuffer &a, const PeakBuffer &b) {
    return a.bytes > b.bytes;
  });
  return live;
}

void mlir::zest::attributeBuffers(ArrayRef<BufferLifetime> buffers,
                                  MemoryPlan &plan) {
  if (plan.peakTick >= 0)
    plan.atPeak = getLiveAt(buffers, plan.peakTick);
  // Each tick allocates or frees one buffer: a sweep over the ticks.
  int64_t ticks = 0;
  for (const BufferLifetime &buffer : buffers)
    ticks = std::max({ticks, buffer.start + 1, buffer.end + 1});
  SmallVector<const BufferLifetime *> allocated(ticks, nullptr),
      freed(ticks, nullptr);
  for (const BufferLifetime &buffer : buffers) {
    allocated[buffer.start] = &buffer;
    if (buffer.end >= 0)
      freed[buffer.end] = &buffer;
  }
  BytesByKind live;
  plan.kindsAfterAllocation.clear();
  plan.poolAfterAllocation.clear();
  for (int64_t tick = 0; tick < ticks; ++tick) {
    if (const BufferLifetime *buffer = freed[tick])
      live.of(buffer->kind) -= buffer->bytes;
    if (const BufferLifetime *buffer = allocated[tick]) {
      live.of(buffer->kind) += buffer->bytes;
      plan.kindsAfterAllocation.push_back(live);
      plan.poolAfterAllocation.push_back(live.getTotal());
    }
  }
}
