//===- CompileOptions.cpp - Which option combinations zestc accepts -------===//
//
// Every combination of zestc's options is checked here, once, before any
// pass runs: a bad combination is an error naming the flags, never a pass
// failing halfway.
//
//===----------------------------------------------------------------------===//

#include "zest/Dialect/Zest/Transforms/CostModel.h"
#include "zest/Driver/Compiler.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/TargetParser/Triple.h"

using namespace mlir;
using namespace mlir::zest;

/// Prints "zestc: error: <message>" and fails.
static LogicalResult fail(const llvm::Twine &message) {
  llvm::errs() << "zestc: error: " << message << "\n";
  return failure();
}

static LogicalResult verifyOptimizer(const FrontPipelineOptions &front) {
  OptimizerChoice optimizer = front.optimizer;
  if ((front.momentum || front.nesterov) && optimizer != OptimizerChoice::SGD)
    return fail("--momentum and --nesterov need --optimizer=sgd");
  if (!(front.maxGradNorm >= 0)) {
    std::string value;
    llvm::raw_string_ostream(value) << front.maxGradNorm;
    return fail("--clip-grad-norm must be positive (0 disables clipping), "
                "got " +
                value);
  }
  if (front.noSync && optimizer == OptimizerChoice::None)
    return fail("--no-sync needs an optimizer (--optimizer=sgd or adamw)");
  if (front.maxGradNorm > 0 && optimizer == OptimizerChoice::None)
    return fail("--clip-grad-norm needs an optimizer (--optimizer=sgd or "
                "adamw)");
  if (front.nesterov && !front.momentum)
    return fail("--nesterov needs --momentum");
  return success();
}

/// The NVPTX subtarget of LLVM, to check GPUs and PTX features against.
static std::unique_ptr<llvm::MCSubtargetInfo> getNVPTXInfo() {
  LLVMInitializeNVPTXTargetInfo();
  LLVMInitializeNVPTXTargetMC();
  std::string error;
  llvm::Triple triple("nvptx64-nvidia-cuda");
  const llvm::Target *nvptx = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!nvptx) {
    (void)fail("this LLVM has no NVPTX backend: " + error);
    return nullptr;
  }
  return std::unique_ptr<llvm::MCSubtargetInfo>(
      nvptx->createMCSubtargetInfo(triple, "", ""));
}

/// Checks the --cuda-* options of --target=cuda: ptxas where the format
/// needs it, and a GPU and PTX features LLVM's NVPTX backend knows (it would
/// otherwise warn and compile for another GPU).
static LogicalResult verifyCudaOptions(const LowerPipelineOptions &lower) {
  StringRef format = lower.cudaFormat, path = lower.cudaPath;
  if (format != "isa" && !llvm::sys::fs::can_execute(path + "/bin/ptxas"))
    return fail("--cuda-format=" + format + " needs ptxas, which is not in " +
                path + "/bin; pass --cuda-path=<CUDA toolkit> or " +
                "--cuda-format=isa");
  std::unique_ptr<llvm::MCSubtargetInfo> info = getNVPTXInfo();
  if (!info)
    return failure();
  StringRef chip = lower.cudaChip;
  if (!info->isCPUStringValid(chip))
    return fail("--cuda-chip=" + chip + " is not a GPU LLVM knows; use " +
                "sm_XY (sm_80 for A100, sm_90 for H100)");
  for (StringRef feature : llvm::split(lower.cudaFeatures, ',')) {
    feature = feature.trim();
    if (feature.empty())
      continue;
    StringRef name = feature.drop_front(feature[0] == '+' || feature[0] == '-');
    if (!llvm::any_of(
            info->getAllProcessorFeatures(),
            [&](const llvm::SubtargetFeatureKV &kv) { return name == kv.Key; }))
      return fail("--cuda-features: '" + feature + "' is not a PTX feature " +
                  "LLVM knows (e.g. +ptx80)");
  }
  return success();
}

static LogicalResult verifyTarget(const CompileOptions &options) {
  const LowerPipelineOptions &lower = options.lower;
  if (isDeviceTarget(lower.target) && options.emit == EmitKind::Shared)
    return fail("--target=" + stringifyTarget(lower.target) +
                " makes executables (or mlir, llvm, obj), not "
                "--emit=shared: a host would have to pass device buffers");
  StringRef format = lower.cudaFormat;
  if (format != "fatbin" && format != "bin" && format != "isa")
    return fail("--cuda-format expects fatbin, bin or isa, got '" + format +
                "'");
  if (options.front.offload != OffloadMode::None) {
    if (!isDeviceTarget(lower.target))
      return fail("--offload needs --target=cuda or cuda-emulated: on the "
                  "CPU, host memory is where everything already lives");
    if (!options.front.hasOptimizer())
      return fail("--offload needs an optimizer (--optimizer=sgd or adamw): "
                  "it moves the optimizer's work to the host");
  } else if (!options.front.offloadUnits.empty()) {
    return fail("--offload-units needs --offload=optimizer or params");
  }
  if (lower.target == Target::Cuda)
    return verifyCudaOptions(lower);
  return success();
}

/// --expert-parallel=N: groups of N ranks that split the experts.
static LogicalResult verifyExpertParallel(const CompileOptions &options) {
  int64_t groupSize = options.front.expertParallel;
  std::string flag = "--expert-parallel=" + std::to_string(groupSize);
  if (groupSize < 1)
    return fail(flag + ": expected a number of ranks, at least 1");
  if (groupSize == 1)
    return success();
  if (options.front.worldSize % groupSize != 0)
    return fail(flag + " must divide --world-size=" +
                std::to_string(options.front.worldSize));
  // Under hybrid sharding each replica group must hold every expert: one
  // replica group's ranks write the checkpoint, and the replicas average
  // what they hold alike.
  int64_t shards =
      options.front.worldSize / std::max<int64_t>(1, options.front.replicas);
  if (options.front.strategy == ShardingStrategy::HybridShard &&
      shards % groupSize != 0)
    return fail(flag +
                " with --strategy=hybrid-shard needs expert groups "
                "within a replica group: N must divide the " +
                std::to_string(shards) +
                " ranks of each (--mesh RxS: N divides S)");
  return success();
}

LogicalResult CompileOptions::verify() const {
  if (failed(verifyOptimizer(front)) || failed(verifyTarget(*this)) ||
      failed(verifyExpertParallel(*this)))
    return failure();
  if (!lower.machine.empty()) {
    std::string error;
    if (!getMachineModel(lower.machine, lower.link, lower.replicaLink, error))
      return fail(error);
  }
  return success();
}
