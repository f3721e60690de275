//===- Compiler.h - The zestc compilation pipeline --------------*- C++ -*-===//
//
// Model IR in, object / executable / shared library out, all in process:
// sharding pipeline, lowering to the LLVM dialect, translation to LLVM IR,
// entry-point wrappers and the model descriptor, object emission with the
// native TargetMachine, and linking with the runtime.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_DRIVER_COMPILER_H
#define ZEST_DRIVER_COMPILER_H

#include "zest/Pipelines/Pipelines.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/IR/Module.h"

#include <optional>
#include <string>

namespace mlir::zest {

enum class EmitKind { Mlir, Llvm, Object, Executable, Shared };

/// Everything zestc compiles by: the options of its pipelines' phases, and
/// what it makes of their result.
struct CompileOptions {
  /// Phase "front": sharding, optimizer, schedule (zest-front).
  FrontPipelineOptions front;
  /// Phases "describe", "lower" and "finalize" (zest-lower).
  LowerPipelineOptions lower;
  EmitKind emit = EmitKind::Executable;
  /// Stop after the memory plan and its report (zestc --plan-only): no
  /// code, no output file.
  bool planOnly = false;
  /// The user chose what units recompute (zestc --activation-checkpointing,
  /// `none` included): --memory-budget keeps it instead of weighing
  /// recomputation.
  bool checkpointingChosen = false;
  /// Likewise for offload (zestc --offload, `none` included).
  bool offloadChosen = false;
  std::string output;
  int optLevel = 2;
  /// Folder holding libzest_runtime.a and libzest_trainer.a.
  std::string runtimeDir;

  /// Checks every combination of options, printing what is wrong as
  /// zestc's flags name it ("zestc: error: --nesterov needs --momentum");
  /// the only place a combination is checked.
  LogicalResult verify() const;
};

/// Prints the passes of every phase `compileModel` runs, one line a phase.
void printPipeline(const CompileOptions &options, llvm::raw_ostream &os);

/// A schedule of a step's collectives: zest-front's `prefetch`,
/// `keep-units` and `unit-prefetch`.
struct Schedule {
  unsigned prefetch = 0;
  std::vector<std::string> keepUnits;
  /// "<unit>:<depth>": units prefetched deeper than `prefetch`.
  std::vector<std::string> unitPrefetch;
  /// Units that recompute their forward before their backward, where the
  /// budget needs it, and what they recompute (selective or full).
  std::vector<std::string> checkpointUnits;
  CheckpointMode checkpointMode = CheckpointMode::Full;
  /// Offload, where the budget needs it (GPU targets); none: as the user
  /// chose. `offloadUnits`: the units offloaded, empty for all of them.
  std::optional<OffloadMode> offload;
  std::vector<std::string> offloadUnits;
};

/// Sets `front`'s schedule options to `schedule`.
void applySchedule(FrontPipelineOptions &front, const Schedule &schedule);

/// Picks the schedule under `options.lower.memoryBudget` (zestc
/// --memory-budget; none without a budget): for each prefetch depth up to
/// `options.front.prefetch` that fits, the units that save the most
/// re-gathered bytes are kept greedily while they fit and do not slow the
/// step; the fastest of these schedules on `options.lower.machine`
/// (default: cpu) wins; then, below the deepest depth, single units are
/// prefetched one deeper while that fits and is faster; where the leanest
/// schedule fits without recomputation, the fastest schedules that did not
/// fit are tried with units recomputing their forward (unless
/// `checkpointingChosen`; offload is weighed unless `offloadChosen`). Each
/// candidate is
/// compiled up to its exact memory plan (zest-plan-memory) and replayed on
/// the cost model (CostModel.h), on a copy of `module`. With
/// `options.lower.reportText`, prints the choice. Fails with a located error
/// when even the leanest schedule exceeds the budget.
FailureOr<std::optional<Schedule>>
chooseSchedule(ModuleOp module, const CompileOptions &options);

/// Runs the whole compilation; diagnostics go to the context's handler.
LogicalResult compileModel(ModuleOp module, const CompileOptions &options);

} // namespace mlir::zest

#endif // ZEST_DRIVER_COMPILER_H
