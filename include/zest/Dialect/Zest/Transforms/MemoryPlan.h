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

#include <optional>

namespace mlir::zest {

/// What the runtime's pool holds at the peaks of one step.
struct MemoryPlan {
  int64_t peakPool = 0, peakGathered = 0;
  /// The ops at which each peak is first reached.
  Operation *peakPoolAt = nullptr, *peakGatheredAt = nullptr;

  /// Takes the higher of each peak (the plan of several entry points).
  void merge(const MemoryPlan &other);
};

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

/// What a memory budget holds of entry point `func` whose peak pool is
/// `peakPool`: the pool, and with `deviceArguments` (GPU targets) its
/// arguments on the device too.
int64_t getBudgetedBytes(func::FuncOp func, int64_t peakPool,
                         bool deviceArguments);

/// Replays the allocations and frees of `func` (bufferized, its frees
/// placed, collectives lowered to runtime calls) in program order; nothing
/// if they cannot be replayed exactly.
std::optional<MemoryPlan> planFunctionMemory(func::FuncOp func);

/// The highest peaks over the module's public functions; nothing if one of
/// them cannot be replayed exactly.
std::optional<MemoryPlan> planModuleMemory(ModuleOp module);

} // namespace mlir::zest

#endif // ZEST_DIALECT_ZEST_TRANSFORMS_MEMORYPLAN_H
