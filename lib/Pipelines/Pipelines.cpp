//===- Pipelines.cpp - The Zest compiler, phase by phase ------------------===//
//
// Every pass zestc runs, in order, with typed options: a typo in a pass or
// an option name is a compile error here, not a failure at run time.
//
//===----------------------------------------------------------------------===//

#include "zest/Pipelines/Pipelines.h"
#include "zest/Conversion/Passes.h"
#include "zest/Dialect/Zest/Transforms/MemoryPlan.h"
#include "zest/Dialect/Zest/Transforms/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Conversion/VectorToSCF/VectorToSCF.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::zest;

StringRef mlir::zest::stringifyTarget(Target target) {
  switch (target) {
  case Target::Cpu:
    return "cpu";
  case Target::Cuda:
    return "cuda";
  case Target::CudaEmulated:
    return "cuda-emulated";
  }
  llvm_unreachable("a target");
}

std::optional<Target> mlir::zest::symbolizeTarget(StringRef name) {
  for (Target target : {Target::Cpu, Target::Cuda, Target::CudaEmulated})
    if (name == stringifyTarget(target))
      return target;
  return std::nullopt;
}

std::optional<OptimizerChoice>
mlir::zest::symbolizeOptimizerChoice(StringRef name) {
  if (name == "none")
    return OptimizerChoice::None;
  if (std::optional<Optimizer> kind = symbolizeOptimizer(name))
    return *kind == Optimizer::AdamW ? OptimizerChoice::AdamW
                                     : OptimizerChoice::SGD;
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// Phase "front"
//===----------------------------------------------------------------------===//

/// The `param-dtype` / `reduce-dtype` of zest-group-units: empty for f32
/// (no mixed precision).
static std::string getWireTypeOption(WireType type) {
  return type == WireType::F32 ? "" : stringifyWireType(type).str();
}

static GroupUnitsPassOptions
getGroupUnitsOptions(const ShardPipelineOptions &options) {
  GroupUnitsPassOptions group;
  group.worldSize = options.worldSize;
  group.leafModules.assign(options.leafModules.begin(),
                           options.leafModules.end());
  group.leafClasses.assign(options.leafClasses.begin(),
                           options.leafClasses.end());
  group.minUnitNumel = options.minUnitNumel;
  group.blockUnits = options.blockUnits;
  group.ignore.assign(options.ignore.begin(), options.ignore.end());
  group.strategy = stringifyShardingStrategy(options.strategy).str();
  group.replicas = options.replicas;
  group.paramDtype = getWireTypeOption(options.paramDtype);
  group.reduceDtype = getWireTypeOption(options.reduceDtype);
  return group;
}

void mlir::zest::buildShardPipeline(OpPassManager &pm,
                                    const ShardPipelineOptions &options) {
  pm.addPass(createVerifyContractPass());
  ExpertParallelPassOptions experts;
  experts.groupSize = options.expertParallel;
  pm.addPass(createExpertParallelPass(experts));
  pm.addPass(createGroupUnitsPass(getGroupUnitsOptions(options)));
  pm.addPass(createShardParamsPass());
  if (!options.manifest.empty()) {
    WriteManifestPassOptions manifest;
    manifest.path = options.manifest;
    pm.addPass(createWriteManifestPass(manifest));
  }
}

static InsertOptimizerPassOptions
getOptimizerOptions(const FrontPipelineOptions &options) {
  InsertOptimizerPassOptions optimizer;
  optimizer.optimizer =
      stringifyOptimizer(options.optimizer == OptimizerChoice::AdamW
                             ? Optimizer::AdamW
                             : Optimizer::SGD)
          .str();
  optimizer.momentum = options.momentum;
  optimizer.nesterov = options.nesterov;
  optimizer.maxGradNorm = options.maxGradNorm;
  optimizer.noSync = options.noSync;
  return optimizer;
}

static ScheduleCollectivesPassOptions
getScheduleOptions(const FrontPipelineOptions &options) {
  ScheduleCollectivesPassOptions schedule;
  schedule.prefetch = options.prefetch;
  schedule.strategy = stringifyShardingStrategy(options.strategy).str();
  schedule.keepUnits.assign(options.keepUnits.begin(), options.keepUnits.end());
  schedule.unitPrefetch.assign(options.unitPrefetch.begin(),
                               options.unitPrefetch.end());
  schedule.bucketBytes = options.bucketBytes;
  return schedule;
}

void mlir::zest::buildFrontPipeline(OpPassManager &pm,
                                    const FrontPipelineOptions &options) {
  buildShardPipeline(pm, options);
  buildSchedulePipeline(pm, options);
}

void mlir::zest::buildSchedulePipeline(OpPassManager &pm,
                                       const FrontPipelineOptions &options) {
  // On the sharded step, before the optimizer's accumulate entry points
  // copy it and before keep decisions merge the re-gathers it reads.
  if (options.activationCheckpointing != CheckpointMode::None) {
    CheckpointActivationsPassOptions checkpoint;
    checkpoint.mode =
        stringifyCheckpointMode(options.activationCheckpointing).str();
    checkpoint.units.assign(options.acUnits.begin(), options.acUnits.end());
    pm.addPass(createCheckpointActivationsPass(checkpoint));
  }
  if (options.hasOptimizer())
    pm.addPass(createInsertOptimizerPass(getOptimizerOptions(options)));
  // After the updates exist: they move down with their reduce-scatter's wait.
  pm.addPass(createScheduleCollectivesPass(getScheduleOptions(options)));
  // Once the updates are placed: they move to the end of the step.
  if (options.offload != OffloadMode::None && options.hasOptimizer()) {
    OffloadOptimizerPassOptions offload;
    offload.params = options.offload == OffloadMode::Params;
    offload.units.assign(options.offloadUnits.begin(),
                         options.offloadUnits.end());
    pm.addPass(createOffloadOptimizerPass(offload));
  }
  // The calling convention is fixed before the descriptor describes it.
  pm.addPass(createPrepareEntryPointsPass());
}

//===----------------------------------------------------------------------===//
// Phase "describe"
//===----------------------------------------------------------------------===//

void mlir::zest::buildDescribePipeline(OpPassManager &pm,
                                       const LowerPipelineOptions &options) {
  DescribeModelPassOptions describe;
  // zest-outline-regions finds each region's unit by its arguments.
  describe.keepUnits = options.outlineRegions;
  pm.addPass(createDescribeModelPass(describe));
}

//===----------------------------------------------------------------------===//
// Phase "lower": bufferization
//===----------------------------------------------------------------------===//

/// From the sharded step on tensors to the runtime's collectives, with the
/// fusions that want tensors.
static void addTensorPasses(OpPassManager &pm,
                            const LowerPipelineOptions &options) {
  // Under autocast the loss reads the head's 16-bit logits, not an f32
  // copy; before the casts are fused into other loops.
  pm.addNestedPass<func::FuncOp>(createNarrowLossCastsPass());
  // Products read transposed operands in place; before the linear layers
  // are recognized, whose backward reads W and x transposed.
  pm.addNestedPass<func::FuncOp>(createFoldTransposesPass());
  // Linear layers are recognized before their activations are approximated
  // (a polynomial tanh is not recognizable) and before bufferization.
  if (options.fuseLinear) {
    pm.addPass(createFuseLinearPass());
    // The head's product joins the loss, in chunks of rows, once the head's
    // gradients are in the form fuse-linear leaves them.
    if (options.fuseLoss)
      pm.addNestedPass<func::FuncOp>(createFuseLinearCrossEntropyPass());
  }
  // 16-bit sums the fused linear layers left (bias gradients under
  // autocast) accumulate in f32 as PyTorch's do; before their rounding is
  // fused with its users.
  pm.addNestedPass<func::FuncOp>(createWidenAccumulatorsPass());
  // Autocast's weight casts of one unit as one kernel; once the linear
  // layers read the rounded weights and before the casts could be fused
  // into other loops.
  pm.addNestedPass<func::FuncOp>(createGroupParameterCastsPass());
  // After the linear layers (which want their activations apart) and before
  // the optimizer is lowered (its in-place update stays one op).
  if (options.fuseElementwise)
    pm.addNestedPass<func::FuncOp>(createFuseElementwisePass());
  pm.addPass(createLowerOptimizerPass());
  pm.addPass(createConvertZestToRuntimePass());
  // After the gradient norms exist: a GPU reduces them on many blocks.
  if (isDeviceTarget(options.target))
    pm.addPass(createSplitReductionsPass());
  // Repeated blocks are computed by one function each, so everything below
  // works on one copy of a stack's block.
  if (options.outlineRegions)
    pm.addPass(createOutlineRegionsPass());
}

/// bf16 (and f16) arithmetic and math run in f32, rounded back after each
/// op, as PyTorch's CPU kernels do; then the f32 math is approximated.
static void addFloatEmulationPasses(OpPassManager &pm) {
  pm.addNestedPass<func::FuncOp>(createDecomposeAggregatesPass());
  pm.addNestedPass<func::FuncOp>(math::createMathExtendToSupportedTypes());
  // x^n for a constant n (PyTorch's pow(x, 3) in GELU) as products: LLVM's
  // powi takes no vector exponent once vectorized.
  math::MathExpandOpsPassOptions expand;
  expand.opMnemonics = {"fpowi"};
  pm.addNestedPass<func::FuncOp>(math::createMathExpandOpsPass(expand));
  arith::ArithEmulateUnsupportedFloatsOptions emulate;
  emulate.sourceTypeStrs = {"bf16", "f16"};
  emulate.targetTypeStr = "f32";
  pm.addNestedPass<func::FuncOp>(
      arith::createArithEmulateUnsupportedFloats(emulate));
  pm.addNestedPass<func::FuncOp>(createApproximateMathPass());
}

static void addBufferizePasses(OpPassManager &pm) {
  // A concatenation's slices overwrite its fill.
  pm.addNestedPass<func::FuncOp>(createDropOverwrittenFillsPass());
  // Every op fills its own destination instead of copying a shared fill.
  pm.addNestedPass<func::FuncOp>(createCloneSharedFillsPass());
  // The loss's gradient overwrites the logits instead of a second
  // [tokens, vocabulary] array.
  pm.addNestedPass<func::FuncOp>(createReuseLogitsPass());
  // Ops whose destination is a slice of a bigger tensor (gradients packed
  // into a unit's flat buffer) write there directly instead of being copied.
  pm.addPass(bufferization::createEmptyTensorEliminationPass());
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  // In-place updates (shard, optimizer state, gradient accumulator) come
  // back as their argument buffers: no result, no copy.
  pm.addPass(createCanonicalizerPass());
  // A region's in-place updates come back as the buffers its caller
  // passed in (once canonicalize has folded the branches that yield them).
  pm.addPass(bufferization::createDropEquivalentBufferResultsPass());
  pm.addPass(createDropUpdatedResultsPass());
  bufferization::BufferResultsToOutParamsPassOptions outParams;
  outParams.modifyPublicFunctions = true;
  outParams.hoistStaticAllocs = true;
  pm.addPass(bufferization::createBufferResultsToOutParamsPass(outParams));
}

/// buffer-deallocation-pipeline, with owned allocations split out before
/// the (pairwise) simplification, and frees moved to last uses.
static void addDeallocationPasses(OpPassManager &pm) {
  pm.addPass(memref::createExpandReallocPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(bufferization::createOwnershipBasedBufferDeallocationPass());
  pm.addPass(createCanonicalizerPass());
  pm.addNestedPass<func::FuncOp>(createSplitOwnedDeallocsPass());
  pm.addPass(bufferization::createBufferDeallocationSimplificationPass());
  pm.addPass(bufferization::createLowerDeallocationsPass());
  pm.addPass(createCSEPass());
  pm.addPass(createCanonicalizerPass());
  pm.addNestedPass<func::FuncOp>(createFreeAfterLastUsePass());
  pm.addPass(createCanonicalizerPass());
}

void mlir::zest::buildBufferizationPipeline(
    OpPassManager &pm, const LowerPipelineOptions &options) {
  addTensorPasses(pm, options);
  addFloatEmulationPasses(pm);
  addBufferizePasses(pm);
  // An op's results copied into a concatenation (attention's q, k and v
  // gradients) are written there; before the fused ops become calls.
  pm.addPass(createWriteCopiesInPlacePass());
  MatmulToBlasPassOptions blas;
  // The emulated device has the GPU's products.
  blas.target = stringifyTarget(isDeviceTarget(options.target) ? Target::Cuda
                                                               : Target::Cpu)
                    .str();
  pm.addPass(createMatmulToBlasPass(blas));
  // Kernels read device memory only: constants too.
  if (isDeviceTarget(options.target))
    pm.addPass(createUploadConstantsPass());
  addDeallocationPasses(pm);
  // A normalization's ops as one launch; before the memory plan, which then
  // sees the lifetimes the groups give their buffers.
  if (isDeviceTarget(options.target) && options.fuseRows)
    pm.addPass(createFuseRowsPass());
}

//===----------------------------------------------------------------------===//
// Phase "lower": the memory plan, kernels and the LLVM dialect
//===----------------------------------------------------------------------===//

int64_t mlir::zest::getArenaAlignment(Target target) {
  return isDeviceTarget(target) ? kDeviceArenaAlignment : kHostArenaAlignment;
}

static void addPlanMemoryPass(OpPassManager &pm,
                              const LowerPipelineOptions &options) {
  PlanMemoryPassOptions plan;
  plan.reportJson = options.reportJson;
  plan.reportText = options.reportText;
  plan.memoryBudget = options.memoryBudget;
  plan.deviceArguments = isDeviceTarget(options.target);
  plan.arenaAlignment = getArenaAlignment(options.target);
  plan.machine = options.machine;
  plan.link = options.link;
  plan.replicaLink = options.replicaLink;
  pm.addPass(createPlanMemoryPass(plan));
}

/// Loops, then the LLVM dialect, for what runs on the host.
static void addToLLVMPasses(OpPassManager &pm) {
  // What zest-vectorize leaves (transfers that are not contiguous, ops it
  // does not vectorize) becomes loops.
  pm.addPass(createConvertVectorToSCFPass(
      VectorTransferToSCFOptions().enableFullUnroll()));
  pm.addPass(createConvertLinalgToLoopsPass());
  // Views at dynamic offsets (a scatter's rows) leave affine.apply behind.
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  // torch-mlir's index checks stop the ranks with a located error, not an
  // abort() on each.
  pm.addPass(createLowerAssertsPass());
  pm.addPass(createSCFToControlFlowPass());
  // Intrinsics first (sqrt, rsqrt, ...), libm for whatever is left.
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  // Every vector reduction comes from zest-vectorize, which vectorizes only
  // reductions whose order may change: combine lanes as a tree.
  ConvertVectorToLLVMPassOptions vector;
  vector.reassociateFPReductions = true;
  pm.addPass(createConvertVectorToLLVMPass(vector));
  FinalizeMemRefToLLVMConversionPassOptions memref;
  memref.useGenericFunctions = true;
  pm.addPass(createFinalizeMemRefToLLVMConversionPass(memref));
  // bf16 <-> f32 conversions as integer arithmetic, inlined (LLVM may still
  // form a vector fptrunc to bf16, which calls the runtime's __truncsfbf2:
  // runtime/common/SoftFloat.cpp).
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true;
  pm.addPass(arith::createArithExpandOpsPass(expand));
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  // Function bodies behind a branch, so that signature conversion stays
  // linear (Passes.td).
  pm.addNestedPass<func::FuncOp>(createSplitEntryBlockPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  // Padding of vector transfers the vectorizer does not need.
  pm.addPass(createUBToLLVMConversionPass());
}

static void addCpuKernelPasses(OpPassManager &pm,
                               const LowerPipelineOptions &options) {
  // Sums in a blocked order LLVM vectorizes.
  pm.addNestedPass<func::FuncOp>(createReassociateReductionsPass());
  // Identical loop nests (one per block of a stack) are compiled once.
  pm.addPass(createOutlineKernelsPass());
  // Each distinct kernel is vectorized once (without it, LLVM's loop
  // vectorizer is left to vectorize the scalar loops).
  if (options.vectorize)
    pm.addNestedPass<func::FuncOp>(createVectorizePass());
}

/// --target=cuda: every kernel becomes GPU launches (zest-map-kernels-to-gpu)
/// whose bodies upstream outlines into gpu.modules and lowers to NVVM;
/// --target=cuda-emulated compiles those bodies for the host instead.
static void addCudaKernelPasses(OpPassManager &pm,
                                const LowerPipelineOptions &options) {
  OutlineKernelsPassOptions outline;
  outline.deviceBuffers = true;
  pm.addPass(createOutlineKernelsPass(outline));
  MapKernelsToGPUPassOptions map;
  map.vectorBytes = options.vectorize ? 16 : 0;
  pm.addPass(createMapKernelsToGPUPass(map));
  pm.addPass(createLowerAffinePass());
  pm.addPass(createGpuKernelOutliningPass());
  // The emulated device runs the kernels on the host: from here they are
  // host functions, lowered with the rest.
  if (options.target == Target::CudaEmulated) {
    pm.addPass(createEmulateGPUKernelsPass());
    return;
  }
  GpuNVVMAttachTargetOptions target;
  target.chip = options.cudaChip;
  target.features = options.cudaFeatures;
  target.optLevel = 3;
  pm.addPass(createGpuNVVMAttachTarget(target));
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createSCFToControlFlowPass());
  OpPassManager &kernels = pm.nest<gpu::GPUModuleOp>();
  kernels.addPass(createConvertGpuOpsToNVVMOps());
  kernels.addPass(createCanonicalizerPass());
  kernels.addPass(createCSEPass());
  kernels.addPass(createReconcileUnrealizedCastsPass());
}

void mlir::zest::buildLoweringPipeline(OpPassManager &pm,
                                       const LowerPipelineOptions &options) {
  buildBufferizationPipeline(pm, options);
  // Every allocation and free of the step is now where it will run.
  addPlanMemoryPass(pm, options);
  ReservePoolPassOptions reserve;
  reserve.arenaAlignment = getArenaAlignment(options.target);
  pm.addPass(createReservePoolPass(reserve));
  if (options.target == Target::Cpu) {
    addCpuKernelPasses(pm, options);
    addToLLVMPasses(pm);
    pm.addPass(createReconcileUnrealizedCastsPass());
    return;
  }
  addCudaKernelPasses(pm, options);
  addToLLVMPasses(pm);
  // The host side is lowered; launches become the GPU runtime's calls
  // (mgpuLaunchKernel, ...) before the casts are reconciled, and the
  // kernel modules are serialized.
  pm.addPass(createGpuToLLVMConversionPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  if (options.target == Target::CudaEmulated) {
    pm.addPass(createEmulatedKernelEntriesPass());
    return;
  }
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = options.cudaFormat;
  binary.toolkitPath = options.cudaPath;
  pm.addPass(createGpuModuleToBinaryPass(binary));
}

void mlir::zest::buildPlanPipeline(OpPassManager &pm,
                                   const LowerPipelineOptions &options) {
  buildDescribePipeline(pm, options);
  buildBufferizationPipeline(pm, options);
  addPlanMemoryPass(pm, options);
}

//===----------------------------------------------------------------------===//
// Phase "finalize", and the registered pipelines
//===----------------------------------------------------------------------===//

void mlir::zest::buildFinalizePipeline(OpPassManager &pm) {
  pm.addPass(createFinalizeLLVMPass());
  pm.addPass(createVerifyLoweringPass());
}

void mlir::zest::buildLowerToLLVMPipeline(OpPassManager &pm,
                                          const LowerPipelineOptions &options) {
  buildDescribePipeline(pm, options);
  buildLoweringPipeline(pm, options);
  buildFinalizePipeline(pm);
}

void mlir::zest::registerZestPipelines() {
  PassPipelineRegistration<ShardPipelineOptions>(
      "zest-shard-pipeline",
      "Checks the contract, groups parameters into units and shards them "
      "(verify-contract, group-units, shard-params, optional manifest)",
      buildShardPipeline);
  PassPipelineRegistration<FrontPipelineOptions>(
      "zest-front",
      "zestc's first phase: the shard pipeline, the optimizer, the schedule "
      "of collectives and the entry points' calling convention",
      buildFrontPipeline);
  PassPipelineRegistration<LowerPipelineOptions>(
      "zest-lower",
      "zestc's lowering of a sharded module (zest-front's output) to the "
      "LLVM dialect for the target: describe, lower, finalize",
      buildLowerToLLVMPipeline);
}
