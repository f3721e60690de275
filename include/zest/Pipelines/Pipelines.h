//===- Pipelines.h - The Zest compiler, phase by phase ----------*- C++ -*-===//
//
// The whole compiler order, built in C++ from typed pass options, in the
// phases zestc runs (IREE builds its pipelines the same way):
//
//   front:     contract, units, sharding, optimizer, schedule, entry points
//   describe:  the model descriptor; argument roles dropped
//   lower:     fusion, bufferization, deallocation, the memory plan, then
//              kernels and the LLVM dialect for the target
//   finalize:  no-alias facts onto LLVM arguments, metadata dropped, and a
//              check that only translatable IR is left
//
// Each phase is a registered pipeline as well (zest-front, zest-lower-cpu,
// zest-lower-cuda), so zest-opt reproduces what zestc runs.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_PIPELINES_PIPELINES_H
#define ZEST_PIPELINES_PIPELINES_H

#include "zest/Dialect/Zest/IR/ZestOps.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir::zest {

/// Where the step's computation runs.
enum class Target {
  /// Loop nests vectorized for this CPU, products through OpenBLAS.
  Cpu,
  /// Kernels compiled for an NVIDIA GPU, products through cuBLASLt.
  Cuda,
  /// The GPU program, its kernels compiled for the host, run on the
  /// emulated device (runtime/cuda-emulated): every launch, copy, product
  /// and collective checked as a strict GPU would.
  CudaEmulated,
};

/// Whether `target` runs the GPU program (on a GPU or the emulated device):
/// buffers in device memory, kernels as launches, cuBLASLt products.
inline bool isDeviceTarget(Target target) { return target != Target::Cpu; }

/// Where the pool's arena aligns buffers for `target` (MemoryPlan.h).
int64_t getArenaAlignment(Target target);

/// The target's name as zestc --target and zest-matmul-to-blas take it.
llvm::StringRef stringifyTarget(Target target);
/// The target named `name` (cpu, cuda, cuda-emulated); none for any other
/// name.
std::optional<Target> symbolizeTarget(llvm::StringRef name);

/// The optimizer compiled into training steps, or none (they return their
/// gradient shards).
enum class OptimizerChoice { None, SGD, AdamW };

/// The choice named `name` (sgd, adamw, none); none for any other name.
std::optional<OptimizerChoice> symbolizeOptimizerChoice(llvm::StringRef name);

/// The values of a mixed-precision type option.
inline auto wireTypeValues() {
  return llvm::cl::values(clEnumValN(WireType::F32, "f32", "no rounding"),
                          clEnumValN(WireType::BF16, "bf16", "bfloat16"),
                          clEnumValN(WireType::F16, "f16", "float16"));
}

/// Options of `zest-shard-pipeline`: contract check, unit grouping,
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
  Option<bool> blockUnits{
      *this, "block-units",
      llvm::cl::desc("Without a leaf option, each repeated block class "
                     "(zest.module_classes) is a unit"),
      llvm::cl::init(true)};
  ListOption<std::string> ignore{
      *this, "ignore", llvm::cl::desc("Parameter FQN globs kept replicated")};
  Option<std::string> manifest{
      *this, "manifest",
      llvm::cl::desc("Write the layout manifest (JSON) to this file")};
  Option<ShardingStrategy> strategy{
      *this, "strategy", llvm::cl::desc("How units are sharded"),
      llvm::cl::init(ShardingStrategy::FullShard),
      llvm::cl::values(
          clEnumValN(ShardingStrategy::FullShard, "full-shard",
                     "re-gathered for backward (ZeRO-3)"),
          clEnumValN(ShardingStrategy::ShardGradOp, "shard-grad-op",
                     "kept gathered from forward to backward (ZeRO-2)"),
          clEnumValN(ShardingStrategy::NoShard, "no-shard",
                     "replicated, gradients all-reduced (DDP)"),
          clEnumValN(ShardingStrategy::HybridShard, "hybrid-shard",
                     "sharded within replica groups (HSDP)"))};
  Option<int64_t> replicas{
      *this, "replicas",
      llvm::cl::desc("hybrid-shard: replica groups the world-size ranks form "
                     "(shards within each)"),
      llvm::cl::init(1)};
  Option<int64_t> expertParallel{
      *this, "expert-parallel",
      llvm::cl::desc("Ranks of an expert group: each holds 1/N of every "
                     "mixture-of-experts layer's experts (1: none)"),
      llvm::cl::init(1)};
  Option<WireType> paramDtype{
      *this, "param-dtype",
      llvm::cl::desc("Mixed precision: the gathers' type (f32 master shards)"),
      llvm::cl::init(WireType::F32), wireTypeValues()};
  Option<WireType> reduceDtype{
      *this, "reduce-dtype",
      llvm::cl::desc("Mixed precision: the gradient reductions' type"),
      llvm::cl::init(WireType::F32), wireTypeValues()};
};

/// Options of `zest-front`: sharding, the optimizer compiled into training
/// steps, and the schedule of their collectives.
struct FrontPipelineOptions : public ShardPipelineOptions {
  Option<OptimizerChoice> optimizer{
      *this, "optimizer",
      llvm::cl::desc("The optimizer compiled into training steps"),
      llvm::cl::init(OptimizerChoice::SGD),
      llvm::cl::values(
          clEnumValN(OptimizerChoice::SGD, "sgd", "SGD (momentum optional)"),
          clEnumValN(OptimizerChoice::AdamW, "adamw", "AdamW"),
          clEnumValN(OptimizerChoice::None, "none",
                     "none: training steps return their gradient shards"))};
  Option<bool> momentum{*this, "momentum",
                        llvm::cl::desc("sgd: keep a momentum buffer"),
                        llvm::cl::init(false)};
  Option<bool> nesterov{*this, "nesterov",
                        llvm::cl::desc("sgd with momentum: Nesterov"),
                        llvm::cl::init(false)};
  Option<double> maxGradNorm{
      *this, "max-grad-norm",
      llvm::cl::desc("Clip gradients to this global L2 norm (0: no "
                     "clipping)"),
      llvm::cl::init(0.0)};
  Option<bool> noSync{
      *this, "no-sync",
      llvm::cl::desc("Accumulate full gradients over micro-batches and "
                     "reduce once per step"),
      llvm::cl::init(false)};
  Option<unsigned> prefetch{
      *this, "prefetch",
      llvm::cl::desc("All-gathers in flight ahead of the unit computing"),
      llvm::cl::init(0)};
  ListOption<std::string> keepUnits{
      *this, "keep-units",
      llvm::cl::desc("Units kept gathered from forward to backward besides "
                     "those of the strategy")};
  ListOption<std::string> unitPrefetch{
      *this, "unit-prefetch",
      llvm::cl::desc("<unit>:<depth>: units prefetched to another depth")};
  Option<int64_t> bucketBytes{
      *this, "bucket-bytes",
      llvm::cl::desc("Merge collectives of units while their buffers add up "
                     "to at most this many bytes (0: one per unit)"),
      llvm::cl::init(0)};
  Option<CheckpointMode> activationCheckpointing{
      *this, "activation-checkpointing",
      llvm::cl::desc("What units recompute of their forward before their "
                     "backward"),
      llvm::cl::init(CheckpointMode::None),
      llvm::cl::values(
          clEnumValN(CheckpointMode::None, "none", "keep every activation"),
          clEnumValN(CheckpointMode::Full, "full",
                     "keep the units' inputs, recompute the rest"),
          clEnumValN(CheckpointMode::Selective, "selective",
                     "keep the inputs and the products' outputs"))};
  ListOption<std::string> acUnits{
      *this, "ac-units",
      llvm::cl::desc("Globs of the units checkpointed (default: all but the "
                     "root), each optionally ending in :full or :selective")};

  Option<OffloadMode> offload{
      *this, "offload",
      llvm::cl::desc("What lives in pinned host memory instead of on the "
                     "device (GPU targets)"),
      llvm::cl::init(OffloadMode::None),
      llvm::cl::values(
          clEnumValN(OffloadMode::None, "none", "everything on the device"),
          clEnumValN(OffloadMode::Optimizer, "optimizer",
                     "optimizer state, f32 master shards and accumulators, "
                     "updated on the host"),
          clEnumValN(OffloadMode::Params, "params",
                     "that, and the shards copied to the device for each "
                     "gather only"))};
  ListOption<std::string> offloadUnits{
      *this, "offload-units",
      llvm::cl::desc("Globs of the units offloaded (default: all)")};

  /// Whether training steps get an optimizer (`optimizer` is not none).
  bool hasOptimizer() const { return optimizer != OptimizerChoice::None; }
};

/// Options of the lowering phases (`zest-lower-cpu`, `zest-lower-cuda`).
struct LowerPipelineOptions : public PassPipelineOptions<LowerPipelineOptions> {
  Option<Target> target{
      *this, "target", llvm::cl::desc("Where the step computes"),
      llvm::cl::init(Target::Cpu),
      llvm::cl::values(clEnumValN(Target::Cpu, "cpu", "this CPU"),
                       clEnumValN(Target::Cuda, "cuda", "an NVIDIA GPU"),
                       clEnumValN(Target::CudaEmulated, "cuda-emulated",
                                  "the GPU program on the emulated device"))};
  Option<bool> fuseLinear{
      *this, "fuse-linear",
      llvm::cl::desc("Rewrite linear layers into fused linear ops"),
      llvm::cl::init(true)};
  Option<bool> fuseLoss{
      *this, "fuse-loss",
      llvm::cl::desc("Fuse the LM head's product into its cross-entropy, in "
                     "chunks of rows (with fuse-linear)"),
      llvm::cl::init(true)};
  Option<bool> fuseElementwise{
      *this, "fuse-elementwise",
      llvm::cl::desc("Fuse elementwise producers into their consumers"),
      llvm::cl::init(true)};
  Option<bool> fuseRows{
      *this, "fuse-rows",
      llvm::cl::desc("On the device targets, run each normalization's ops "
                     "as one kernel of a block per row"),
      llvm::cl::init(true)};
  Option<bool> vectorize{
      *this, "vectorize",
      llvm::cl::desc("Tile and vectorize kernels in MLIR; on the device "
                     "targets, 16-byte accesses for elementwise kernels"),
      llvm::cl::init(true)};
  Option<bool> outlineRegions{
      *this, "outline-regions",
      llvm::cl::desc("Outline each unit's regions and compile repeated ones "
                     "once"),
      llvm::cl::init(true)};
  Option<std::string> reportJson{
      *this, "report-json",
      llvm::cl::desc("Where zest-plan-memory writes its JSON report")};
  Option<bool> reportText{*this, "report",
                          llvm::cl::desc("Print the memory plan as text"),
                          llvm::cl::init(false)};
  Option<int64_t> memoryBudget{
      *this, "memory-budget",
      llvm::cl::desc("Peak pool bytes per rank the step may reach (0: no "
                     "budget)"),
      llvm::cl::init(0)};
  Option<std::string> machine{
      *this, "machine",
      llvm::cl::desc("Machine the report predicts step time on (cpu, "
                     "h100-nvlink; empty: none)")};
  Option<std::string> link{
      *this, "link", llvm::cl::desc("The machine's link: <GB/s>,<latency us>")};
  Option<std::string> replicaLink{
      *this, "replica-link",
      llvm::cl::desc("The machine's link between replica groups")};
  Option<std::string> cudaChip{*this, "cuda-chip",
                               llvm::cl::desc("cuda: the GPU (sm_90: H100)"),
                               llvm::cl::init("sm_90")};
  Option<std::string> cudaFeatures{*this, "cuda-features",
                                   llvm::cl::desc("cuda: PTX features"),
                                   llvm::cl::init("+ptx80")};
  Option<std::string> cudaFormat{
      *this, "cuda-format",
      llvm::cl::desc("cuda: the kernels' binary format (fatbin, bin, isa)"),
      llvm::cl::init("fatbin")};
  Option<std::string> cudaPath{
      *this, "cuda-path", llvm::cl::desc("cuda: the toolkit holding ptxas"),
      llvm::cl::init("/usr/local/cuda")};
  Option<bool> cudaGraphs{
      *this, "cuda-graphs",
      llvm::cl::desc("GPU targets: entry points run as CUDA graphs from "
                     "their second call"),
      llvm::cl::init(true)};
};

/// Phase "front" without the optimizer and the schedule: contract, units,
/// sharding, manifest (`zest-shard-pipeline`).
void buildShardPipeline(OpPassManager &pm, const ShardPipelineOptions &options);

/// Phase "front" (`zest-front`): sharding, the optimizer, the schedule of
/// collectives and the entry points' calling convention.
void buildFrontPipeline(OpPassManager &pm, const FrontPipelineOptions &options);

/// Phase "front" after sharding: activation checkpointing, the optimizer,
/// the schedule of collectives, offload and the entry points' calling
/// convention; everything a schedule (zestc --memory-budget) chooses.
void buildSchedulePipeline(OpPassManager &pm,
                           const FrontPipelineOptions &options);

/// Phase "describe": the model descriptor, then roles dropped.
void buildDescribePipeline(OpPassManager &pm,
                           const LowerPipelineOptions &options);

/// The first part of phase "lower": up to where every allocation and free
/// of a step is placed (what zest-plan-memory replays).
void buildBufferizationPipeline(OpPassManager &pm,
                                const LowerPipelineOptions &options);

/// Phase "lower": bufferization, the memory plan, and the lowering to the
/// LLVM dialect for `options.target`.
void buildLoweringPipeline(OpPassManager &pm,
                           const LowerPipelineOptions &options);

/// What `zestc --plan-only` runs after the front phase: describe,
/// bufferization and the memory plan with its report, no code.
void buildPlanPipeline(OpPassManager &pm, const LowerPipelineOptions &options);

/// Phase "finalize": LLVM-level touches and the check of what is left.
void buildFinalizePipeline(OpPassManager &pm);

/// Phases describe, lower and finalize (`zest-lower-cpu`,
/// `zest-lower-cuda`): a sharded module in, the LLVM dialect out.
void buildLowerToLLVMPipeline(OpPassManager &pm,
                              const LowerPipelineOptions &options);

/// Registers zest-shard-pipeline, zest-front, zest-lower-cpu and
/// zest-lower-cuda.
void registerZestPipelines();

} // namespace mlir::zest

#endif // ZEST_PIPELINES_PIPELINES_H
