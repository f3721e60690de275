//===- MemoryPlan.h - Static peak memory of a step --------------*- C++ -*-===//
//
// The replay behind zest-plan-memory, for callers that choose a schedule by
// its predicted peak (zestc --memory-budget).
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_DIALECT_ZEST_TRANSFORMS_MEMORYPLAN_H
#define ZEST_DIALECT_ZEST_TRANSFORMS_MEMORYPLAN_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"

#include <map>
#include <optional>
#include <string>

namespace mlir::zest {

/// What a buffer of the step holds, as far as the plan can tell: a
/// gathered parameter (`zest_pool_mark_gathered`), a parameter gradient
/// (what a reduce-scatter or all-reduce sends or receives), or anything
/// else (activations, their gradients, temporaries).
enum class BufferKind { Other, Gathered, Gradient };

/// One buffer of a step, as the runtime's pool sees it: its bytes (whole
/// buckets) and when it is allocated and freed (ticks of one clock over the
/// step's allocations and frees; -1: never freed); what it holds, and the
/// unit whose collective moves it (empty if none does).
struct BufferLifetime {
  int64_t bytes, start, end;
  Operation *allocatedAt;
  BufferKind kind = BufferKind::Other;
  std::string unit = {};
  /// The entry point's call the buffer is allocated in (a region of
  /// repeated blocks: its ops' locations are the first block's), if any.
  Operation *calledFrom = nullptr;
};

/// Where something happens in a step: an op, and the entry point's call it
/// runs in, if any.
struct StepSite {
  Operation *op = nullptr, *call = nullptr;
};

/// Live bytes by kind (gathered parameters, parameter gradients, other).
struct BytesByKind {
  int64_t gathered = 0, gradients = 0, other = 0;
  int64_t getTotal() const { return gathered + gradients + other; }
  int64_t &of(BufferKind kind) {
    return kind == BufferKind::Gathered   ? gathered
           : kind == BufferKind::Gradient ? gradients
                                          : other;
  }
};

/// An activation or temporary live at the pool's peak: its size, where it
/// is allocated and the unit it is charged to (none: the root's glue).
struct PeakBuffer {
  int64_t bytes;
  StepSite site;
  std::string unit;
};

/// What is live at the pool's peak: bytes by kind, and by unit (gathered
/// parameters and gradients), the count of other buffers and each of them.
struct PeakBreakdown {
  BytesByKind bytes;
  std::map<std::string, BytesByKind> units;
  int64_t otherBuffers = 0;
  /// Every buffer of the other kind live at the peak, largest first.
  SmallVector<PeakBuffer> others;
};

/// Where the pool's arena aligns buffers: the pool's 64-byte buckets on the
/// host; on a GPU as cudaMalloc does, 256 bytes, which cuBLASLt's algorithm
/// choice assumes for every operand.
constexpr int64_t kHostArenaAlignment = 64, kDeviceArenaAlignment = 256;

/// Fails, with an error at `loc`, unless `alignment` (a pass's
/// `arena-alignment`) is a positive multiple of the pool's 64-byte buckets.
LogicalResult verifyArenaAlignment(int64_t alignment, Location loc);

/// Offsets in one arena, multiples of `alignment`, for `buffers` such that
/// two buffers alive at the same time never overlap, and the arena's size
/// (`arenaBytes`). Greedy by
/// size: the largest buffer first, each in the smallest gap that fits among
/// the buffers already placed that it meets in time, else above them (the
/// "greedy by size" offset planner of Pisarchyk and Lee, 2020, as TFLite
/// uses it).
SmallVector<int64_t> placeBuffers(ArrayRef<BufferLifetime> buffers,
                                  int64_t alignment, int64_t &arenaBytes);

/// What the runtime's pool holds at the peaks of one step.
struct MemoryPlan {
  /// Live bytes at the peaks (of the pool's buffers, of gathered
  /// parameters).
  int64_t peakPool = 0, peakGathered = 0;
  /// The ops at which each peak is first reached, and the calls they run
  /// in.
  Operation *peakPoolAt = nullptr, *peakGatheredAt = nullptr;
  Operation *peakPoolCall = nullptr, *peakGatheredCall = nullptr;
  /// What the pool takes from the system or the device for the step's
  /// buffers: the planned arena, or without a placement the free lists'
  /// buffers. `footprintAt` allocates the buffer that ends highest.
  int64_t arenaBytes = 0;
  Operation *footprintAt = nullptr;
  /// Buffers kept outside the arena (the cuBLASLt workspace).
  int64_t keptBytes = 0;
  /// Per allocation of the step, in the order the runtime makes them, its
  /// offset in the arena and its bytes (what zest_pool_reserve takes);
  /// empty when that order is not static (allocations in loops or
  /// branches, buffers the step does not free): the pool's free lists then
  /// serve the step.
  SmallVector<std::pair<int64_t, int64_t>> placement;
  /// The pool's live bytes right after each allocation of the step, in the
  /// runtime's order (what its trace's pool counter reads then); empty
  /// when that order is not static.
  SmallVector<int64_t> poolAfterAllocation;
  /// The same split by kind (what the pool holds then), and what is live at
  /// the peak.
  SmallVector<BytesByKind> kindsAfterAllocation;
  PeakBreakdown atPeak;
  /// The clock tick of the allocation at which the pool peaks.
  int64_t peakTick = -1;

  /// The memory the pool holds for the step: its buffers and kept ones.
  int64_t getFootprint() const { return arenaBytes + keptBytes; }
  /// Takes the higher of each peak (the plan of several entry points).
  void merge(const MemoryPlan &other);
};

/// Fills `plan`'s pool after each allocation (`poolAfterAllocation`, and
/// split by kind `kindsAfterAllocation`) and what is live at its peak
/// (`atPeak`) from the step's buffers in allocation order.
void attributeBuffers(ArrayRef<BufferLifetime> buffers, MemoryPlan &plan);

/// Bytes of the elements of a statically shaped int or float buffer or
/// tensor type; nothing for any other type.
std::optional<int64_t> getStaticBufferBytes(Type type);

/// The allocation a pointer or view derives from, through views and the
/// address arithmetic of a runtime call's pointer (aligned pointer + offset,
/// cast to i64, then to a pointer); null if none.
memref::AllocOp getAllocation(Value value);

/// Whether `buffer` is (a view of) an entry point's argument in pinned host
/// memory (`zest.host`, offload).
bool isHostBuffer(Value buffer);

/// Where computation on the buffers among `values` runs: on the host
/// (true) when every one is in pinned host memory, on the device (false)
/// when none is (or there is none); nothing for a mix.
std::optional<bool> buffersOnHost(ValueRange values);

/// Bytes of `func`'s arguments (the buffers the host allocates, results'
/// included after bufferization): all of them, or only those in pinned host
/// memory (`onHost`, offload) or only the others.
int64_t getArgumentBytes(func::FuncOp func,
                         std::optional<bool> onHost = std::nullopt);

/// What a memory budget holds of entry point `func` whose pool takes
/// `poolBytes` (its plan's footprint): the pool, and with `deviceArguments`
/// (GPU targets) its arguments on the device too.
int64_t getBudgetedBytes(func::FuncOp func, int64_t poolBytes,
                         bool deviceArguments);

/// Replays the allocations and frees of `func` (bufferized, its frees
/// placed, collectives lowered to runtime calls) in program order; nothing
/// if they cannot be replayed exactly.
std::optional<MemoryPlan>
planFunctionMemory(func::FuncOp func,
                   int64_t arenaAlignment = kHostArenaAlignment);

/// The highest peaks over the module's public functions; nothing if one of
/// them cannot be replayed exactly.
std::optional<MemoryPlan>
planModuleMemory(ModuleOp module, int64_t arenaAlignment = kHostArenaAlignment);

} // namespace mlir::zest

#endif // ZEST_DIALECT_ZEST_TRANSFORMS_MEMORYPLAN_H
