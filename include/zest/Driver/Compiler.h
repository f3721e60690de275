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
  /// All-gathers in flight ahead of the unit computing; > 0 also overlaps
  /// reduce-scatters (zest-schedule-collectives).
  unsigned prefetch = 0;
  /// Where zest-plan-memory writes its JSON report (empty: none).
  std::string reportJson;
  /// Print the memory plan as text (zestc --report).
  bool reportText = false;
  /// Folder holding libzest_runtime.a and libzest_driver.a.
  std::string runtimeDir;
};

/// Adds sharding, the optimizer and the entry-point convention to `pm`.
void buildFrontPipeline(OpPassManager &pm, const CompileOptions &options);

/// Adds the lowering of a sharded module to the LLVM dialect to `pm`.
void buildLoweringPipeline(OpPassManager &pm, const CompileOptions &options);

/// The model descriptor the host driver reads (docs/Runtime.md): units,
/// parameters and entry-point signatures, one record per line.
std::string buildModelDescriptor(ModuleOp shardedModule);

/// Runs the whole compilation; diagnostics go to the context's handler.
LogicalResult compileModel(ModuleOp module, const CompileOptions &options,
                           llvm::raw_ostream &printPipelineTo);

} // namespace mlir::zest

#endif // ZEST_DRIVER_COMPILER_H
