//===- Passes.h - Zest transformation passes --------------------*- C++ -*-===//

#ifndef ZEST_DIALECT_ZEST_TRANSFORMS_PASSES_H
#define ZEST_DIALECT_ZEST_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassOptions.h"
#include "zest/Dialect/Zest/IR/ZestOps.h"

namespace mlir::zest {

#define GEN_PASS_DECL
#include "zest/Dialect/Zest/Transforms/Passes.h.inc"

/// Whether `name` is a sharding strategy: full-shard, shard-grad-op or
/// no-shard (the `strategy` of zest-group-units and
/// zest-schedule-collectives, zestc --strategy).
inline bool isShardingStrategy(llvm::StringRef name) {
  return name == "full-shard" || name == "shard-grad-op" ||
         name == "no-shard" || name == "hybrid-shard";
}

/// Options of the `zest-shard-pipeline`: contract check, unit grouping,
/// parameter sharding and, optionally, the manifest.
struct ShardPipelineOptions : public PassPipelineOptions<ShardPipelineOptions> {
  Option<int64_t> worldSize{*this, "world-size",
                            llvm::cl::desc("Number of data-parallel ranks"),
                            llvm::cl::init(1)};
  ListOption<std::string> leafModules{
      *this, "leaf-modules",
      llvm::cl::desc("Module path globs whose modules become units")};
  ListOption<std::string> leafClasses{
      *this, "leaf-classes",
      llvm::cl::desc("Module class names that become units")};
  Option<int64_t> minUnitNumel{
      *this, "min-unit-numel",
      llvm::cl::desc("Size-based auto-wrap threshold (0 disables it)"),
      llvm::cl::init(0)};
  ListOption<std::string> ignore{
      *this, "ignore", llvm::cl::desc("Parameter FQN globs kept replicated")};
  Option<std::string> manifest{
      *this, "manifest",
      llvm::cl::desc("Write the layout manifest (JSON) to this file")};
  Option<std::string> strategy{
      *this, "strategy",
      llvm::cl::desc("full-shard, shard-grad-op, hybrid-shard (sharded "
                     "units) or no-shard (replicated units, DDP)"),
      llvm::cl::init("full-shard")};
  Option<int64_t> replicas{
      *this, "replicas",
      llvm::cl::desc("hybrid-shard: replica groups the world-size ranks form "
                     "(shards within each)"),
      llvm::cl::init(1)};
  Option<std::string> paramDtype{
      *this, "param-dtype",
      llvm::cl::desc("Mixed precision: bf16 or f16 gathers (f32 master "
                     "shards)")};
  Option<std::string> reduceDtype{
      *this, "reduce-dtype",
      llvm::cl::desc("Mixed precision: bf16 or f16 gradient reductions")};

  /// The grouping pass options these pipeline options imply.
  GroupUnitsPassOptions getGroupUnitsOptions() const;
};

/// Adds the sharding pipeline to `pm`.
void buildShardPipeline(OpPassManager &pm, const ShardPipelineOptions &options);

/// Registers the Zest pass pipelines (`zest-shard-pipeline`).
void registerZestPipelines();

/// Registration of every Zest pass: registerZestPasses().
#define GEN_PASS_REGISTRATION
#include "zest/Dialect/Zest/Transforms/Passes.h.inc"

} // namespace mlir::zest

#endif // ZEST_DIALECT_ZEST_TRANSFORMS_PASSES_H
