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

#include "zest/Dialect/Zest/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/IR/Module.h"

#include <optional>
#include <string>

namespace mlir::zest {

enum class EmitKind { Mlir, Llvm, Object, Executable, Shared };

struct CompileOptions {
  ShardPipelineOptions shard;
  /// The optimizer compiled into training steps; none: they return their
  /// gradient shards instead (for --emit=shared users and gradient checks).
  std::optional<InsertOptimizerPassOptions> optimizer =
      InsertOptimizerPassOptions();
  EmitKind emit = EmitKind::Executable;
  std::string output;
  int optLevel = 2;
  /// Rewrite linear layers into fused linear ops (zest-fuse-linear).
  bool fuseLinear = true;
  /// Fuse elementwise producers into their consumers (zest-fuse-elementwise).
  bool fuseElementwise = true;
  /// Tile and vectorize kernels in MLIR (zest-vectorize).
  bool vectorize = true;
  /// Outline each unit's regions on tensors and compile repeated ones once
  /// (zest-outline-regions).
  bool outlineRegions = true;
  /// All-gathers in flight ahead of the unit computing; > 0 also overlaps
  /// reduce-scatters (zest-schedule-collectives).
  unsigned prefetch = 0;
  /// Units kept gathered from forward to backward besides those of the
  /// strategy (`shard.strategy`).
  std::vector<std::string> keepUnits;
  /// Units prefetched to another depth than `prefetch`, as
  /// "<unit>:<depth>" (zest-schedule-collectives' unit-prefetch).
  std::vector<std::string> unitPrefetch;
  /// Collectives of several units merged while their buffers add up to at
  /// most this many bytes (0: one collective per unit).
  int64_t bucketBytes = 0;
  /// Peak pool bytes per rank the step may reach (0: no budget). The
  /// schedule (prefetch depth up to `prefetch`, kept units) is chosen to
  /// fit it.
  int64_t memoryBudget = 0;
  /// Where zest-plan-memory writes its JSON report (empty: none).
  std::string reportJson;
  /// Print the memory plan as text (zestc --report).
  bool reportText = false;
  /// Machine the report predicts step time on (cpu, h100-nvlink; empty:
  /// none), and its link if not the preset's (<GB/s>,<latency us>).
  std::string machine;
  std::string link;
  /// ... and its link between replica groups (hybrid sharding), if not the
  /// preset's.
  std::string replicaLink;
  /// Folder holding libzest_runtime.a and libzest_driver.a.
  std::string runtimeDir;
  /// Where the step's computation runs: cpu, or cuda (kernels compiled for
  /// an NVIDIA GPU, products through the CUDA runtime's cuBLASLt calls).
  std::string target = "cpu";
  /// --target=cuda: the GPU (sm_90 is the H100), PTX features, the kernels'
  /// binary format (fatbin, bin: need ptxas; isa: PTX text), and the CUDA
  /// toolkit that holds ptxas.
  std::string cudaChip = "sm_90";
  std::string cudaFeatures = "+ptx80";
  std::string cudaFormat = "fatbin";
  std::string cudaPath = "/usr/local/cuda";
};

/// Adds sharding, the optimizer and the entry-point convention to `pm`.
void buildFrontPipeline(OpPassManager &pm, const CompileOptions &options);

/// Adds the lowering of a sharded module to the LLVM dialect to `pm`.
void buildLoweringPipeline(OpPassManager &pm, const CompileOptions &options);

/// Adds the first part of the lowering: up to where every allocation and
/// free of a step is placed (what zest-plan-memory replays).
void buildBufferizationPipeline(OpPassManager &pm,
                                const CompileOptions &options);

/// Drops the `zest.*` argument, result and function attributes of a sharded
/// entry point before lowering: the model descriptor has recorded the roles.
/// With `keepUnits`, `zest.unit` stays for zest-outline-regions, which
/// consumes it.
void stripRoleAttributes(func::FuncOp func, bool keepUnits);

/// Picks the schedule under `options.memoryBudget` (zestc --memory-budget)
/// and stores it in `options` (`prefetch`, `keepUnits`): for each prefetch
/// depth up to `options.prefetch` that fits, the units that save the most
/// re-gathered bytes are kept greedily while they fit and do not slow the
/// step; the fastest of these schedules on `options.machine` (default:
/// cpu) wins; then, below the deepest depth, single units are prefetched
/// one deeper while that fits and is faster (`unitPrefetch`). Each candidate is
/// compiled up to its exact memory plan (zest-plan-memory) and replayed on the
/// cost model (CostModel.h), on a copy of `module`. With `options.reportText`,
/// prints the choice. Fails with a located error when even the leanest schedule
/// exceeds the budget.
LogicalResult chooseSchedule(ModuleOp module, CompileOptions &options);

/// The model descriptor the host driver reads (docs/Runtime.md): units,
/// parameters and entry-point signatures, one record per line.
std::string buildModelDescriptor(ModuleOp shardedModule);

/// Runs the whole compilation; diagnostics go to the context's handler.
LogicalResult compileModel(ModuleOp module, const CompileOptions &options,
                           llvm::raw_ostream &printPipelineTo);

} // namespace mlir::zest

#endif // ZEST_DRIVER_COMPILER_H
