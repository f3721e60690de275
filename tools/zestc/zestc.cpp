//===- zestc.cpp - Zest compiler driver -----------------------------------===//
//
//   zestc model.mlir -o train --world-size=4 --leaf-modules='layers.*'
//   mpirun -np 4 ./train --steps 10
//
//===----------------------------------------------------------------------===//

#include "zest/Driver/Compiler.h"
#include "zest/Driver/Diagnostics.h"
#include "zest/InitAllZest.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SourceMgr.h"

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
static cl::opt<bool> blockUnits(
    "block-units",
    cl::desc("Without a leaf option, each repeated block class of an imported "
             "model (its decoder layer) is a unit (default true)"),
    cl::init(true), cl::cat(category));
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
    cl::desc(
        "Fuse linear layers (product, bias, activation and their "
        "backward) into BLAS calls (oneDNN or OpenBLAS) with fused epilogues "
        "(default true; --fuse-linear=false keeps them apart)"),
    cl::init(true), cl::cat(category));
static cl::opt<bool> fuseLoss(
    "fuse-loss",
    cl::desc("Fuse the LM head's product, its cross-entropy and both their "
             "backwards into one op over chunks of rows, so that the [tokens, "
             "vocabulary] logits never exist whole (default true, with "
             "--fuse-linear; --fuse-loss=false keeps them apart)"),
    cl::init(true), cl::cat(category));
static cl::opt<bool> fuseElementwise(
    "fuse-elementwise",
    cl::desc("Fuse elementwise ops into the loop nests that read them "
             "(default true; --fuse-elementwise=false keeps them apart)"),
    cl::init(true), cl::cat(category));
static cl::opt<bool> fuseRows(
    "fuse-rows",
    cl::desc("--target=cuda(-emulated): run the ops of a normalization (its "
             "sums, centring, scaling, and the residual add or activation "
             "beside them) as one kernel of a block per row (default true; "
             "--fuse-rows=false launches them one by one)"),
    cl::init(true), cl::cat(category));
static cl::opt<bool>
    vectorize("vectorize",
              cl::desc("Tile and vectorize loop nests in MLIR, and on "
                       "--target=cuda(-emulated) give an elementwise kernel's "
                       "threads 16-byte accesses (default true; "
                       "--vectorize=false leaves vectorization to LLVM and "
                       "gives each thread one element)"),
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
static cl::opt<int64_t> expertParallel(
    "expert-parallel",
    cl::desc("Expert parallelism: each of N ranks holds 1/N of every "
             "mixture-of-experts layer's experts, and tokens travel to "
             "their experts' ranks and back (1: every rank computes every "
             "expert, sharded like any parameter)"),
    cl::value_desc("N"), cl::init(1), cl::cat(category));
static cl::opt<std::string>
    mesh("mesh",
         cl::desc("hybrid-shard: RxS arranges R * S ranks as R replica "
                  "groups of S consecutive ranks that shard each unit"),
         cl::value_desc("RxS"), cl::cat(category));
static cl::opt<std::string> memoryBudget(
    "memory-budget",
    cl::desc("Peak pool bytes per rank the step may use (suffixes KiB, MiB, "
             "GiB): the prefetch depth (up to --prefetch, default 2), the "
             "units kept gathered for backward and the units recomputing "
             "their forward (where nothing fits without, or where that "
             "makes room for a faster schedule) are chosen to fit it, the "
             "fastest the cost model predicts"),
    cl::value_desc("bytes"), cl::cat(category));
static cl::opt<std::string> bucketBytes(
    "bucket-bytes",
    cl::desc("Merge consecutive collectives of several units into one while "
             "their buffers add up to at most this many bytes (suffixes KiB, "
             "MiB, GiB; default 0: one collective per unit)"),
    cl::value_desc("bytes"), cl::cat(category));
static cl::opt<std::string> activationCheckpointing(
    "activation-checkpointing",
    cl::desc("What units keep of their forward for their backward: none "
             "(everything, the default), full (their inputs; the rest is "
             "recomputed before their backward, from the parameters the "
             "backward gathers anyway) or selective (their inputs and the "
             "linear layers' outputs the backward reads; norms, softmax and "
             "attention are recomputed). Given, --memory-budget keeps it; "
             "else the budget may recompute units where that fits or pays"),
    cl::init("none"), cl::cat(category));
static cl::list<std::string>
    acUnits("ac-units",
            cl::desc("Units checkpointed, as globs of unit names (default: "
                     "every unit but the root); a glob may end in :full or "
                     ":selective, the mode of the units it names, the first "
                     "match winning (modes mixed per unit)"),
            cl::CommaSeparated, cl::cat(category));
static cl::opt<std::string> offload(
    "offload",
    cl::desc("What lives in pinned host memory instead of on the GPU "
             "(--target=cuda, cuda-emulated): none (the default) or optimizer "
             "(optimizer state, f32 master shards and gradient accumulators, "
             "updated on the host as each gradient shard arrives, as "
             "ZeRO-Offload) or params (that, and the shards copied to the "
             "device for each gather only). Given, --memory-budget keeps it; "
             "else the budget may offload where nothing fits without"),
    cl::init("none"), cl::cat(category));
static cl::list<std::string>
    offloadUnits("offload-units",
                 cl::desc("Units offloaded, as globs of unit names (default: "
                          "every unit)"),
                 cl::CommaSeparated, cl::cat(category));
static cl::opt<bool> planOnly(
    "plan-only",
    cl::desc("Stop after the memory plan and the cost model: print the "
             "report (--report is implied unless --report-json is given) and "
             "make no code and no output file, for models too large to "
             "compile or run here"),
    cl::init(false), cl::cat(category));
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
               cl::desc("Folder with libzest_runtime.a and libzest_trainer.a "
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
static cl::opt<bool> cudaGraphs(
    "cuda-graphs",
    cl::desc("GPU targets: each entry point's work is captured as a CUDA "
             "graph at its second call and replayed with one launch at the "
             "next ones (default true; false: every call enqueues its "
             "kernels from the host)"),
    cl::init(true), cl::cat(category));
static cl::opt<bool> printPipelineFlag("print-pipeline",
                                       cl::desc("Print the passes zestc runs"),
                                       cl::cat(category));

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
  bool hybrid = shard.strategy == ShardingStrategy::HybridShard;
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

/// Reads a byte-count flag (`what` names its use in the error, `example` a
/// value) into `bytes`; zero is accepted only with `allowZero`.
static LogicalResult parseByteFlag(cl::opt<std::string> &flag,
                                   StringRef adjective, StringRef example,
                                   bool allowZero, int64_t &bytes) {
  if (!flag.getNumOccurrences())
    return success();
  std::optional<int64_t> parsed = parseBytes(flag);
  if (parsed && (*parsed > 0 || (allowZero && *parsed == 0))) {
    bytes = *parsed;
    return success();
  }
  llvm::errs() << "zestc: error: --" << flag.ArgStr << " expects " << adjective
               << "number of bytes, optionally with KiB, MiB or GiB (e.g. --"
               << flag.ArgStr << "=" << example << "), got '" << flag << "'\n";
  return failure();
}

static std::vector<std::string> toVector(const cl::list<std::string> &list) {
  return std::vector<std::string>(list.begin(), list.end());
}

/// Parses flag `name`'s value `text` as one of `values` (an enum's
/// symbolize function), or reports what it expects.
template <typename T>
static LogicalResult parseChoice(StringRef name, StringRef text,
                                 std::optional<T> value, StringRef expected,
                                 T &result) {
  if (!value) {
    llvm::errs() << "zestc: error: --" << name << " expects " << expected
                 << ", got '" << text << "'\n";
    return failure();
  }
  result = *value;
  return success();
}

/// zestc's flags into the options of the front phase.
static LogicalResult setFrontOptions(FrontPipelineOptions &front) {
  front.worldSize = worldSize;
  front.expertParallel = expertParallel;
  front.leafModules = toVector(leafModules);
  front.leafClasses = toVector(leafClasses);
  front.minUnitNumel = minUnitNumel;
  front.blockUnits = blockUnits;
  front.ignore = toVector(ignore);
  front.manifest = manifest;
  front.momentum = momentum;
  front.nesterov = nesterov;
  front.maxGradNorm = clipGradNorm;
  front.noSync = noSync;
  front.prefetch = prefetch;
  front.acUnits = toVector(acUnits);
  front.offloadUnits = toVector(offloadUnits);
  auto wireType = [](StringRef text) {
    return text.empty() ? std::optional<WireType>(WireType::F32)
                        : symbolizeWireType(text);
  };
  return success(
      succeeded(parseChoice(
          "optimizer", optimizer, symbolizeOptimizerChoice(optimizer),
          "sgd, adamw or none", front.optimizer.getValue())) &&
      succeeded(parseChoice("activation-checkpointing", activationCheckpointing,
                            symbolizeCheckpointMode(activationCheckpointing),
                            "none, full or selective",
                            front.activationCheckpointing.getValue())) &&
      succeeded(parseChoice("offload", offload, symbolizeOffloadMode(offload),
                            "none, optimizer or params",
                            front.offload.getValue())) &&
      succeeded(parseChoice("strategy", strategy,
                            symbolizeShardingStrategy(strategy),
                            "full-shard, shard-grad-op, no-shard or "
                            "hybrid-shard",
                            front.strategy.getValue())) &&
      succeeded(parseChoice("param-dtype", paramDtype, wireType(paramDtype),
                            "bf16, f16 or f32", front.paramDtype.getValue())) &&
      succeeded(parseChoice("reduce-dtype", reduceDtype, wireType(reduceDtype),
                            "bf16, f16 or f32", front.reduceDtype.getValue())));
}

/// zestc's flags into the options of the lowering phases.
static LogicalResult setLowerOptions(LowerPipelineOptions &lower) {
  if (failed(parseChoice("target", target, symbolizeTarget(target),
                         "cpu or cuda", lower.target.getValue())))
    return failure();
  lower.cudaChip = cudaChip;
  lower.cudaFeatures = cudaFeatures;
  lower.cudaFormat = cudaFormat;
  lower.cudaPath = cudaPath;
  lower.cudaGraphs = cudaGraphs;
  lower.fuseLinear = fuseLinear;
  lower.fuseLoss = fuseLoss;
  lower.fuseElementwise = fuseElementwise;
  lower.fuseRows = fuseRows;
  lower.vectorize = vectorize;
  lower.outlineRegions = outlineRegions;
  lower.reportJson = reportJson;
  lower.reportText = reportText;
  lower.machine = machine;
  lower.link = link;
  lower.replicaLink = replicaLink;
  if ((!link.empty() || !replicaLink.empty()) && machine.empty())
    lower.machine = "cpu";
  return success();
}

/// The runtime libraries' folder: --runtime-dir, $ZEST_RUNTIME_DIR, or
/// ../lib next to zestc.
static std::string getRuntimeDir(const char *argv0) {
  if (!runtimeDir.empty())
    return runtimeDir;
  if (auto env = llvm::sys::Process::GetEnv("ZEST_RUNTIME_DIR"))
    return *env;
  SmallString<256> dir(llvm::sys::fs::getMainExecutable(
      argv0, reinterpret_cast<void *>(&defaultOutput)));
  llvm::sys::path::remove_filename(dir);
  llvm::sys::path::append(dir, "..", "lib");
  return std::string(dir);
}

/// Every flag into `options`, checked.
static LogicalResult buildCompileOptions(CompileOptions &options,
                                         const char *argv0) {
  if (failed(setFrontOptions(options.front)) ||
      failed(setLowerOptions(options.lower)))
    return failure();
  options.emit = emit;
  options.optLevel = optLevel;
  // The mesh first: it sets the world size the checks read.
  if (failed(applyMesh(options.front)) || failed(options.verify()) ||
      failed(parseByteFlag(bucketBytes, "a ", "4MiB", /*allowZero=*/true,
                           options.front.bucketBytes.getValue())) ||
      failed(parseByteFlag(memoryBudget, "a positive ", "512MiB",
                           /*allowZero=*/false,
                           options.lower.memoryBudget.getValue())))
    return failure();
  // A budget chooses the depth: up to 2 unless --prefetch says otherwise.
  if (memoryBudget.getNumOccurrences() && !prefetch.getNumOccurrences())
    options.front.prefetch = 2;
  options.planOnly = planOnly;
  options.checkpointingChosen = activationCheckpointing.getNumOccurrences() > 0;
  options.offloadChosen = offload.getNumOccurrences() > 0;
  if (planOnly && reportJson.empty())
    options.lower.reportText = true;
  options.output = outputFile.empty() ? defaultOutput() : outputFile;
  options.runtimeDir = getRuntimeDir(argv0);
  return success();
}

/// Parses the model, fixes its schedule under the budget and compiles it.
static LogicalResult compile(CompileOptions &options) {
  DialectRegistry registry;
  registerAllZestDialects(registry);
  MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  llvm::SourceMgr sourceMgr;
  CompactDiagnosticHandler handler(sourceMgr, &ctx);
  std::string error;
  auto file = openInputFile(inputFile, &error);
  if (!file) {
    llvm::errs() << "zestc: error: " << error << "\n";
    return failure();
  }
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &ctx);
  if (!module)
    return failure();
  FailureOr<std::optional<Schedule>> schedule =
      chooseSchedule(*module, options);
  if (failed(schedule))
    return failure();
  if (*schedule)
    applySchedule(options.front, **schedule);
  return compileModel(*module, options);
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
  if (failed(buildCompileOptions(options, argv[0])))
    return 1;
  if (printPipelineFlag) {
    printPipeline(options, llvm::outs());
    return 0;
  }
  return failed(compile(options)) ? 1 : 0;
}
