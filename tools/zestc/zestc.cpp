//===- zestc.cpp - Zest compiler driver -----------------------------------===//
//
//   zestc model.mlir -o train --world-size=4 --leaf-modules='layers.*'
//   mpirun -np 4 ./train --steps 10
//
//===----------------------------------------------------------------------===//

#include "zest/Conversion/Passes.h"
#include "zest/Dialect/Zest/Transforms/CostModel.h"
#include "zest/Driver/Compiler.h"
#include "zest/InitAllZest.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/TargetParser/Triple.h"

using namespace mlir;
using namespace mlir::zest;
namespace cl = llvm::cl;

static cl::OptionCategory category("zestc options");
static cl::opt<std::string> inputFile(cl::Positional, cl::desc("<model.mlir>"),
                                      cl::init("-"), cl::cat(category));
static cl::opt<std::string> outputFile("o", cl::desc("Output file"),
                                       cl::value_desc("file"),
                                       cl::cat(category));
static cl::opt<EmitKind> emit(
    "emit", cl::desc("What to produce"), cl::init(EmitKind::Executable),
    cl::values(clEnumValN(EmitKind::Mlir, "mlir",
                          "lowered MLIR (LLVM dialect)"),
               clEnumValN(EmitKind::Llvm, "llvm", "optimized LLVM IR"),
               clEnumValN(EmitKind::Object, "obj", "object file"),
               clEnumValN(EmitKind::Executable, "exe",
                          "executable with the training driver (default)"),
               clEnumValN(EmitKind::Shared, "shared",
                          "shared library with the C ABI of docs/Runtime.md")),
    cl::cat(category));
static cl::opt<int64_t> worldSize("world-size",
                                  cl::desc("Data-parallel ranks (default 1)"),
                                  cl::init(1), cl::cat(category));
static cl::list<std::string>
    leafModules("leaf-modules", cl::desc("Module path globs made units"),
                cl::CommaSeparated, cl::cat(category));
static cl::list<std::string> leafClasses("leaf-classes",
                                         cl::desc("Module classes made units"),
                                         cl::CommaSeparated, cl::cat(category));
static cl::opt<int64_t>
    minUnitNumel("min-unit-numel",
                 cl::desc("Size-based auto-wrap threshold (0: off)"),
                 cl::init(0), cl::cat(category));
static cl::list<std::string>
    ignore("ignore", cl::desc("Parameter FQN globs kept replicated"),
           cl::CommaSeparated, cl::cat(category));
static cl::opt<std::string> manifest("manifest",
                                     cl::desc("Write the layout manifest"),
                                     cl::value_desc("file.json"),
                                     cl::cat(category));
static cl::opt<std::string>
    optimizer("optimizer",
              cl::desc("Optimizer compiled into training steps: sgd "
                       "(default), adamw, or none (return gradient shards)"),
              cl::init("sgd"), cl::cat(category));
static cl::opt<bool> momentum("momentum",
                              cl::desc("sgd: keep a momentum buffer"),
                              cl::cat(category));
static cl::opt<bool> nesterov("nesterov",
                              cl::desc("sgd with --momentum: Nesterov"),
                              cl::cat(category));
static cl::opt<double> clipGradNorm(
    "clip-grad-norm",
    cl::desc("Clip gradients to this global L2 norm before each optimizer "
             "step, as torch.nn.utils.clip_grad_norm_ (0: no clipping)"),
    cl::init(0.0), cl::cat(category));
static cl::opt<bool> noSync(
    "no-sync",
    cl::desc("Gradient accumulation without a reduce per micro-batch (FSDP's "
             "no_sync): each rank keeps every unit's full gradient summed "
             "over the micro-batches of --accum and reduces it once per step"),
    cl::init(false), cl::cat(category));
static cl::opt<bool> fuseLinear(
    "fuse-linear",
    cl::desc("Fuse linear layers (product, bias, activation and their "
             "backward) into OpenBLAS calls with fused epilogues "
             "(default true; --fuse-linear=false keeps them apart)"),
    cl::init(true), cl::cat(category));
static cl::opt<bool> fuseElementwise(
    "fuse-elementwise",
    cl::desc("Fuse elementwise ops into the loop nests that read them "
             "(default true; --fuse-elementwise=false keeps them apart)"),
    cl::init(true), cl::cat(category));
static cl::opt<bool>
    vectorize("vectorize",
              cl::desc("Tile and vectorize loop nests in MLIR (default true; "
                       "--vectorize=false leaves vectorization to LLVM)"),
              cl::init(true), cl::cat(category));
static cl::opt<bool> outlineRegions(
    "outline-regions",
    cl::desc("Compute each unit's forward and backward in functions, one per "
             "distinct block (default true; --outline-regions=false keeps "
             "one entry point body)"),
    cl::init(true), cl::cat(category));
static cl::opt<unsigned> prefetch(
    "prefetch",
    cl::desc("All-gathers in flight ahead of the unit computing, with "
             "reduce-scatters overlapping the next unit's backward (0: "
             "synchronous collectives, the default; 1: FSDP's prefetch)"),
    cl::init(0), cl::cat(category));
static cl::opt<std::string> strategy(
    "strategy",
    cl::desc("Sharding strategy: full-shard (ZeRO-3: parameters re-gathered "
             "for backward, the default), shard-grad-op (ZeRO-2: gathered "
             "parameters kept from forward to backward), no-shard (DDP: "
             "replicated units, gradients all-reduced) or hybrid-shard "
             "(HSDP: full-shard within groups of ranks, gradient shards "
             "all-reduced across groups; needs --mesh)"),
    cl::init("full-shard"), cl::cat(category));
static cl::opt<std::string> paramDtype(
    "param-dtype",
    cl::desc("Mixed precision (FSDP's MixedPrecision.param_dtype): bf16 or "
             "f16 sends f32 units' gathers in that type, half the bytes; the "
             "shards stay f32 (the optimizer's master copy) and so does the "
             "computation"),
    cl::init(""), cl::cat(category));
static cl::opt<std::string> reduceDtype(
    "reduce-dtype",
    cl::desc("Mixed precision (reduce_dtype): bf16 or f16 reduces f32 "
             "units' gradients in that type (f32 by default)"),
    cl::init(""), cl::cat(category));
static cl::opt<std::string>
    mesh("mesh",
         cl::desc("hybrid-shard: RxS arranges R * S ranks as R replica "
                  "groups of S consecutive ranks that shard each unit"),
         cl::value_desc("RxS"), cl::cat(category));
static cl::opt<std::string> memoryBudget(
    "memory-budget",
    cl::desc("Peak pool bytes per rank the step may use (suffixes KiB, MiB, "
             "GiB): the prefetch depth (up to --prefetch, default 2) and the "
             "units kept gathered for backward are chosen to fit it"),
    cl::value_desc("bytes"), cl::cat(category));
static cl::opt<std::string> bucketBytes(
    "bucket-bytes",
    cl::desc("Merge consecutive collectives of several units into one while "
             "their buffers add up to at most this many bytes (suffixes KiB, "
             "MiB, GiB; default 0: one collective per unit)"),
    cl::value_desc("bytes"), cl::cat(category));
static cl::opt<std::string> reportJson(
    "report-json",
    cl::desc("Write the report (units and their schedule, collectives, "
             "predicted peak pool and gathered bytes) as JSON"),
    cl::value_desc("file.json"), cl::cat(category));
static cl::opt<bool> reportText(
    "report",
    cl::desc("Print the report (units and their schedule, collectives, "
             "predicted peak pool and gathered bytes)"),
    cl::init(false), cl::cat(category));
static cl::opt<std::string> machine(
    "machine",
    cl::desc("Predict step time in the report on this machine: cpu (this "
             "project's CPU) or h100-nvlink (one GPU of an 8 x H100 node)"),
    cl::cat(category));
static cl::opt<std::string>
    link("link",
         cl::desc("The report's machine with this link instead: <GB/s>,"
                  "<latency us>, as ZEST_LINK"),
         cl::cat(category));
static cl::opt<std::string> replicaLink(
    "replica-link",
    cl::desc("The report's machine with this link between the replica groups "
             "of a hybrid mesh: <GB/s>,<latency us>, as ZEST_REPLICA_LINK"),
    cl::cat(category));
static cl::opt<int> optLevel("O", cl::desc("LLVM optimization level"),
                             cl::init(2), cl::Prefix, cl::cat(category));
static cl::opt<std::string>
    runtimeDir("runtime-dir",
               cl::desc("Folder with libzest_runtime.a and libzest_driver.a "
                        "(default: ../lib next to zestc)"),
               cl::cat(category));
static cl::opt<std::string>
    target("target",
           cl::desc("Where the step computes: cpu (default) or cuda (GPU "
                    "kernels for an NVIDIA GPU)"),
           cl::init("cpu"), cl::cat(category));
static cl::opt<std::string>
    cudaChip("cuda-chip", cl::desc("--target=cuda: the GPU (default sm_90)"),
             cl::init("sm_90"), cl::cat(category));
static cl::opt<std::string>
    cudaFeatures("cuda-features",
                 cl::desc("--target=cuda: PTX features (default +ptx80)"),
                 cl::init("+ptx80"), cl::cat(category));
static cl::opt<std::string> cudaFormat(
    "cuda-format",
    cl::desc("--target=cuda: how kernels are embedded: fatbin (default) or "
             "bin (need ptxas from --cuda-path), isa (PTX text)"),
    cl::init("fatbin"), cl::cat(category));
static cl::opt<std::string>
    cudaPath("cuda-path",
             cl::desc("--target=cuda: the CUDA toolkit with ptxas (default "
                      "/usr/local/cuda)"),
             cl::init("/usr/local/cuda"), cl::cat(category));
static cl::opt<bool> printPipeline("print-pipeline",
                                   cl::desc("Print the passes zestc runs"),
                                   cl::cat(category));

/// Checks the --cuda-* options of --target=cuda: ptxas where the format
/// needs it, and a GPU and PTX features LLVM's NVPTX backend knows (it would
/// otherwise warn and compile for another GPU).
static LogicalResult checkCudaOptions() {
  if (cudaFormat != "isa" &&
      !llvm::sys::fs::can_execute(cudaPath + "/bin/ptxas")) {
    llvm::errs() << "zestc: error: --cuda-format=" << cudaFormat
                 << " needs ptxas, which is not in " << cudaPath
                 << "/bin; pass --cuda-path=<CUDA toolkit> or "
                 << "--cuda-format=isa\n";
    return failure();
  }
  StringRef chip = cudaChip;
  LLVMInitializeNVPTXTargetInfo();
  LLVMInitializeNVPTXTargetMC();
  std::string error;
  llvm::Triple triple("nvptx64-nvidia-cuda");
  const llvm::Target *nvptx = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!nvptx) {
    llvm::errs() << "zestc: error: this LLVM has no NVPTX backend: " << error
                 << "\n";
    return failure();
  }
  std::unique_ptr<llvm::MCSubtargetInfo> info(
      nvptx->createMCSubtargetInfo(triple, "", ""));
  if (!info->isCPUStringValid(chip)) {
    llvm::errs() << "zestc: error: --cuda-chip=" << chip
                 << " is not a GPU LLVM knows; use sm_XY (sm_80 for A100, "
                 << "sm_90 for H100)\n";
    return failure();
  }
  for (StringRef feature : llvm::split(cudaFeatures, ',')) {
    feature = feature.trim();
    if (feature.empty())
      continue;
    StringRef name = feature.drop_front(feature[0] == '+' || feature[0] == '-');
    if (!llvm::any_of(info->getAllProcessorFeatures(),
                      [&](const llvm::SubtargetFeatureKV &kv) {
                        return name == kv.Key;
                      })) {
      llvm::errs() << "zestc: error: --cuda-features: '" << feature
                   << "' is not a PTX feature LLVM knows (e.g. +ptx80)\n";
      return failure();
    }
  }
  return success();
}

static std::string defaultOutput() {
  StringRef stem = llvm::sys::path::stem(inputFile);
  switch (emit) {
  case EmitKind::Mlir:
    return (stem + ".lowered.mlir").str();
  case EmitKind::Llvm:
    return (stem + ".ll").str();
  case EmitKind::Object:
    return (stem + ".o").str();
  case EmitKind::Shared:
    return ("lib" + stem + ".so").str();
  case EmitKind::Executable:
    return stem.str();
  }
  return "a.out";
}

/// Bytes from "N", "NKiB", "NMiB" or "NGiB" (N may have a fraction).
static std::optional<int64_t> parseBytes(StringRef text) {
  double scale = 1;
  for (auto [suffix, factor] : {std::pair<StringRef, double>{"KiB", 1024.0},
                                {"MiB", 1024.0 * 1024},
                                {"GiB", 1024.0 * 1024 * 1024},
                                {"B", 1.0}})
    if (text.consume_back(suffix)) {
      scale = factor;
      break;
    }
  double value;
  if (text.trim().getAsDouble(value) || !(value >= 0) || value * scale > 9e18)
    return std::nullopt;
  return static_cast<int64_t>(value * scale);
}

/// --mesh=RxS with --strategy=hybrid-shard: R replica groups of S ranks
/// (--world-size, if given, must be R * S).
static LogicalResult applyMesh(ShardPipelineOptions &shard) {
  bool hybrid = strategy == "hybrid-shard";
  if (!hybrid && mesh.getNumOccurrences()) {
    llvm::errs() << "zestc: error: --mesh needs --strategy=hybrid-shard\n";
    return failure();
  }
  if (!hybrid)
    return success();
  long long replicas = 0, shards = 0;
  char extra = 0;
  if (std::sscanf(mesh.c_str(), "%lldx%lld%c", &replicas, &shards, &extra) !=
          2 ||
      replicas < 1 || shards < 1) {
    llvm::errs() << "zestc: error: --strategy=hybrid-shard needs "
                 << "--mesh=RxS (R replica groups of S ranks, e.g. --mesh=2x4 "
                 << "for 8 ranks), got '" << mesh << "'\n";
    return failure();
  }
  if (worldSize.getNumOccurrences() && worldSize != replicas * shards) {
    llvm::errs() << "zestc: error: --mesh=" << mesh << " has "
                 << replicas * shards << " ranks but --world-size=" << worldSize
                 << "\n";
    return failure();
  }
  shard.worldSize = replicas * shards;
  shard.replicas = replicas;
  return success();
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  registerAllZestPasses();
  // --mlir-timing, --mlir-print-ir-after=<pass>, ...: for looking inside the
  // pipeline (hidden from --help, which lists zestc's own options).
  registerPassManagerCLOptions();
  registerMLIRContextCLOptions();
  registerDefaultTimingManagerCLOptions();
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv,
                              "zestc: Zest model IR to sharded executables\n");

  CompileOptions options;
  options.shard.worldSize = worldSize;
  options.shard.leafModules =
      std::vector<std::string>(leafModules.begin(), leafModules.end());
  options.shard.leafClasses =
      std::vector<std::string>(leafClasses.begin(), leafClasses.end());
  options.shard.minUnitNumel = minUnitNumel;
  options.shard.paramDtype = paramDtype;
  options.shard.reduceDtype = reduceDtype;
  options.shard.ignore = std::vector<std::string>(ignore.begin(), ignore.end());
  options.shard.manifest = manifest;
  if (optimizer == "none") {
    options.optimizer.reset();
  } else if (optimizer == "sgd" || optimizer == "adamw") {
    options.optimizer->optimizer = optimizer;
    options.optimizer->momentum = momentum;
    options.optimizer->nesterov = nesterov;
    options.optimizer->maxGradNorm = clipGradNorm;
    options.optimizer->noSync = noSync;
  } else {
    llvm::errs() << "zestc: error: --optimizer expects sgd, adamw or none, "
                 << "got '" << optimizer << "'\n";
    return 1;
  }
  if ((momentum || nesterov) && optimizer != "sgd") {
    llvm::errs() << "zestc: error: --momentum and --nesterov need "
                 << "--optimizer=sgd\n";
    return 1;
  }
  if (!(clipGradNorm >= 0)) {
    llvm::errs() << "zestc: error: --clip-grad-norm must be positive (0 "
                 << "disables clipping), got " << clipGradNorm << "\n";
    return 1;
  }
  if (noSync && optimizer == "none") {
    llvm::errs() << "zestc: error: --no-sync needs an optimizer "
                 << "(--optimizer=sgd or adamw)\n";
    return 1;
  }
  if (clipGradNorm > 0 && optimizer == "none") {
    llvm::errs() << "zestc: error: --clip-grad-norm needs an optimizer "
                 << "(--optimizer=sgd or adamw)\n";
    return 1;
  }
  if (nesterov && !momentum) {
    llvm::errs() << "zestc: error: --nesterov needs --momentum\n";
    return 1;
  }
  if (target != "cpu" && target != "cuda") {
    llvm::errs() << "zestc: error: --target expects cpu or cuda, got '"
                 << target << "'\n";
    return 1;
  }
  if (target == "cuda" && emit == EmitKind::Shared) {
    llvm::errs() << "zestc: error: --target=cuda makes executables (or "
                 << "mlir, llvm, obj), not --emit=shared: a host would have "
                 << "to pass device buffers\n";
    return 1;
  }
  if (cudaFormat != "fatbin" && cudaFormat != "bin" && cudaFormat != "isa") {
    llvm::errs() << "zestc: error: --cuda-format expects fatbin, bin or isa, "
                 << "got '" << cudaFormat << "'\n";
    return 1;
  }
  if (target == "cuda" && failed(checkCudaOptions()))
    return 1;
  options.target = target;
  options.cudaChip = cudaChip;
  options.cudaFeatures = cudaFeatures;
  options.cudaFormat = cudaFormat;
  options.cudaPath = cudaPath;
  options.emit = emit;
  options.optLevel = optLevel;
  options.fuseLinear = fuseLinear;
  options.fuseElementwise = fuseElementwise;
  options.vectorize = vectorize;
  options.outlineRegions = outlineRegions;
  options.prefetch = prefetch;
  if (!isShardingStrategy(strategy)) {
    llvm::errs() << "zestc: error: --strategy expects full-shard, "
                 << "shard-grad-op, no-shard or hybrid-shard, got '" << strategy
                 << "'\n";
    return 1;
  }
  options.shard.strategy = strategy;
  if (failed(applyMesh(options.shard)))
    return 1;
  if (bucketBytes.getNumOccurrences()) {
    std::optional<int64_t> bytes = parseBytes(bucketBytes);
    if (!bytes || *bytes < 0) {
      llvm::errs() << "zestc: error: --bucket-bytes expects a number of "
                   << "bytes, optionally with KiB, MiB or GiB (e.g. "
                   << "--bucket-bytes=4MiB), got '" << bucketBytes << "'\n";
      return 1;
    }
    options.bucketBytes = *bytes;
  }
  if (memoryBudget.getNumOccurrences()) {
    std::optional<int64_t> budget = parseBytes(memoryBudget);
    if (!budget || *budget <= 0) {
      llvm::errs() << "zestc: error: --memory-budget expects a positive "
                   << "number of bytes, optionally with KiB, MiB or GiB "
                   << "(e.g. --memory-budget=512MiB), got '" << memoryBudget
                   << "'\n";
      return 1;
    }
    options.memoryBudget = *budget;
    if (!prefetch.getNumOccurrences())
      options.prefetch = 2;
  }
  options.reportJson = reportJson;
  options.reportText = reportText;
  options.machine = machine;
  options.link = link;
  options.replicaLink = replicaLink;
  if ((!link.empty() || !replicaLink.empty()) && machine.empty())
    options.machine = "cpu";
  if (!options.machine.empty()) {
    std::string error;
    if (!getMachineModel(options.machine, options.link, options.replicaLink,
                         error)) {
      llvm::errs() << "zestc: error: " << error << "\n";
      return 1;
    }
  }
  options.output = outputFile.empty() ? defaultOutput() : outputFile;
  if (!runtimeDir.empty()) {
    options.runtimeDir = runtimeDir;
  } else if (auto env = llvm::sys::Process::GetEnv("ZEST_RUNTIME_DIR")) {
    options.runtimeDir = *env;
  } else {
    SmallString<256> dir(llvm::sys::fs::getMainExecutable(
        argv[0], reinterpret_cast<void *>(&defaultOutput)));
    llvm::sys::path::remove_filename(dir);
    llvm::sys::path::append(dir, "..", "lib");
    options.runtimeDir = std::string(dir);
  }

  if (printPipeline) {
    MLIRContext ctx;
    PassManager front(&ctx), lower(&ctx);
    buildFrontPipeline(front, options);
    buildLoweringPipeline(lower, options);
    llvm::outs() << "sharding: ";
    front.printAsTextualPipeline(llvm::outs());
    llvm::outs() << "\nlowering: ";
    lower.printAsTextualPipeline(llvm::outs());
    llvm::outs() << "\nthen: translate to LLVM IR, add the host interface, "
                 << "optimize -O" << optLevel << ", emit an object, link\n";
    return 0;
  }

  DialectRegistry registry;
  registerAllZestDialects(registry);
  MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &ctx);
  std::string error;
  auto file = openInputFile(inputFile, &error);
  if (!file) {
    llvm::errs() << "zestc: error: " << error << "\n";
    return 1;
  }
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &ctx);
  if (!module)
    return 1;
  if (failed(chooseSchedule(*module, options)))
    return 1;
  return failed(compileModel(*module, options, llvm::outs())) ? 1 : 0;
}
