//===- ScheduleCandidates.h - Schedules compiled to their plans -*- C++ -*-===//
//
// What the budget search (MemoryBudget.cpp) measures a schedule by: a copy
// of the sharded step compiled under the schedule up to its exact memory
// plan, and that plan replayed on the cost model.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_LIB_DRIVER_SCHEDULECANDIDATES_H
#define ZEST_LIB_DRIVER_SCHEDULECANDIDATES_H

#include "zest/Dialect/Zest/Transforms/CostModel.h"
#include "zest/Driver/Compiler.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <mutex>

namespace mlir::zest {

/// One schedule, compiled up to its plan.
struct Candidate {
  /// Predicted bytes per rank the budget holds (the pool's footprint, and on
  /// a GPU the arguments on the device), and time of the slowest entry point.
  int64_t heldBytes = 0;
  double stepUs = 0;
  /// Per sharded unit: gathers after the first in the busiest function
  /// (what keeping it saves), bytes of its gathered buffer, and the program
  /// position of its first gather.
  struct UnitGathers {
    int64_t regathers = 0, bytes = 0, firstGather = 0;
  };
  llvm::StringMap<UnitGathers> units;
  /// Gathers of the function that gathers most: deeper prefetch than this
  /// minus one changes nothing.
  int64_t gathers = 0;
  /// The units that recompute their forward (those of the schedule's that
  /// have a backward of their own).
  llvm::StringSet<> recomputed;
};

/// Compiles schedules of one model: the model is sharded once (sharding
/// does not depend on the schedule), and each schedule compiles a copy of
/// the sharded step.
class CandidateCompiler {
public:
  CandidateCompiler(ModuleOp module, const CompileOptions &options,
                    const MachineModel &machine);

  /// Shards the model; fails (without diagnostics: the real compilation
  /// reports them) where it does not shard.
  LogicalResult shard();

  /// Each of `schedules` compiled, concurrently on the context's threads;
  /// failure for one that does not compile or whose plan is not exact.
  /// Diagnostics are dropped (the real compilation reports them).
  SmallVector<FailureOr<Candidate>> compile(ArrayRef<Schedule> schedules);

  /// Schedules compiled so far (the search's cost).
  unsigned getCompiled() const { return compiled; }

private:
  FailureOr<Candidate> evaluate(const Schedule &schedule);

  ModuleOp module;
  const CompileOptions &options;
  const MachineModel &machine;
  OwningOpRef<ModuleOp> sharded;
  std::mutex cloning;
  unsigned compiled = 0;
};

} // namespace mlir::zest

#endif // ZEST_LIB_DRIVER_SCHEDULECANDIDATES_H
