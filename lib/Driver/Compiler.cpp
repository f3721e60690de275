//===- Compiler.cpp - The zestc compilation pipeline ----------------------===//

#include "zest/Driver/Compiler.h"
#include "zest/Conversion/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/Bitcode/BitcodeWriter.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"
#include "llvm/Transforms/Utils/Cloning.h"

#include <mutex>
#include <thread>

using namespace mlir;
using namespace mlir::zest;

// The lowering, as a textual pipeline so --print-pipeline shows exactly what
// runs (and any step can be replayed with zest-opt).
static constexpr const char *kLoweringHead = "zest-lower-optimizer,"
                                             "convert-zest-to-runtime,";
// Linear layers are recognized before their activations are approximated
// (a polynomial tanh is not recognizable) and before bufferization.
static constexpr const char *kFuseLinear = "zest-fuse-linear,";
// After the linear layers (which want their activations apart) and before
// the optimizer is lowered (its in-place update stays one op).
static constexpr const char *kFuseElementwise =
    "func.func(zest-fuse-elementwise),";
// Repeated blocks are computed by one function each, so everything below
// works on one copy of a stack's block.
static constexpr const char *kOutlineRegions = "zest-outline-regions,";
static constexpr const char *kLoweringPipeline =
    "func.func(zest-decompose-aggregates),"
    // bf16 (and f16) arithmetic and math run in f32, rounded back after each
    // op, as PyTorch's CPU kernels do; then the f32 math is approximated.
    "func.func(math-extend-to-supported-types),"
    // x^n for a constant n (PyTorch's pow(x, 3) in GELU) as products: LLVM's
    // powi takes no vector exponent once vectorized.
    "func.func(math-expand-ops{ops=fpowi}),"
    "func.func(arith-emulate-unsupported-floats{source-types=bf16,f16 "
    "target-type=f32}),"
    "func.func(zest-approximate-math),"
    // A concatenation's slices overwrite its fill.
    "func.func(zest-drop-overwritten-fills),"
    // Ops whose destination is a slice of a bigger tensor (gradients packed
    // into a unit's flat buffer) write there directly instead of being copied.
    "eliminate-empty-tensors,"
    "one-shot-bufferize{bufferize-function-boundaries "
    "function-boundary-type-conversion=identity-layout-map},"
    // In-place updates (shard, optimizer state, gradient accumulator) come
    // back as their argument buffers: no result, no copy.
    "canonicalize,"
    // A region's in-place updates come back as the buffers its caller
    // passed in (once canonicalize has folded the branches that yield them).
    "drop-equivalent-buffer-results,"
    "zest-drop-updated-results,"
    "buffer-results-to-out-params{modify-public-functions "
    "hoist-static-allocs},";
// Then zest-matmul-to-blas for the target (buildBufferizationPipeline).
static constexpr const char *kDeallocation =
    // buffer-deallocation-pipeline, with owned allocations split out before
    // the (pairwise) simplification.
    "expand-realloc,canonicalize,ownership-based-buffer-deallocation,"
    "canonicalize,func.func(zest-split-owned-deallocs),"
    "buffer-deallocation-simplification,bufferization-lower-deallocations,"
    "cse,canonicalize,"
    "func.func(zest-free-after-last-use),"
    "canonicalize,";
// Every allocation and free of the step is now where it will run:
// zest-plan-memory replays them here (buildLoweringPipeline).
static constexpr const char *kLoweringKernels =
    // Sums in a blocked order LLVM vectorizes.
    "func.func(zest-reassociate-reductions),"
    // Identical loop nests (one per block of a stack) are compiled once.
    "zest-outline-kernels,";
// Each distinct kernel is vectorized once (without it, LLVM's loop
// vectorizer is left to vectorize the scalar loops).
static constexpr const char *kVectorize = "func.func(zest-vectorize),";
static constexpr const char *kLoweringTail =
    // What zest-vectorize leaves (transfers that are not contiguous, ops it
    // does not vectorize) becomes loops.
    "convert-vector-to-scf{full-unroll},"
    "convert-linalg-to-loops,"
    // Views at dynamic offsets (a scatter's rows) leave affine.apply behind.
    "expand-strided-metadata,"
    "lower-affine,"
    "convert-scf-to-cf,"
    // Intrinsics first (sqrt, rsqrt, ...), libm for whatever is left.
    "convert-math-to-llvm,"
    "convert-math-to-libm,"
    // Every vector reduction comes from zest-vectorize, which vectorizes
    // only reductions whose order may change: combine lanes as a tree.
    "convert-vector-to-llvm{reassociate-fp-reductions},"
    "finalize-memref-to-llvm{use-generic-functions},"
    // bf16 <-> f32 conversions as integer arithmetic, inlined (LLVM may
    // still form a vector fptrunc to bf16, which calls the runtime's
    // __truncsfbf2: runtime/common/SoftFloat.cpp).
    "arith-expand{include-bf16},"
    "convert-arith-to-llvm,"
    "convert-index-to-llvm,"
    // Function bodies behind a branch, so that signature conversion stays
    // linear (Passes.td).
    "func.func(zest-split-entry-block),"
    "convert-cf-to-llvm,"
    "convert-func-to-llvm,"
    // Padding of vector transfers the vectorizer does not need.
    "convert-ub-to-llvm,";
// The end of the lowering for the CPU; --target=cuda turns the launches into
// runtime calls first (buildLoweringPipeline).
static constexpr const char *kReconcile = "reconcile-unrealized-casts";

static void parseBuiltinPipeline(StringRef text, OpPassManager &pm) {
  if (failed(parsePassPipeline(text.rtrim(','), pm)))
    llvm::report_fatal_error("zest: the built-in lowering pipeline does not "
                             "parse");
}

void mlir::zest::buildFrontPipeline(OpPassManager &pm,
                                    const CompileOptions &options) {
  buildShardPipeline(pm, options.shard);
  if (options.optimizer)
    pm.addPass(createInsertOptimizerPass(*options.optimizer));
  // After the updates exist: they move down with their reduce-scatter's wait.
  ScheduleCollectivesPassOptions schedule;
  schedule.prefetch = options.prefetch;
  schedule.strategy = options.shard.strategy;
  schedule.keepUnits.assign(options.keepUnits.begin(), options.keepUnits.end());
  schedule.unitPrefetch.assign(options.unitPrefetch.begin(),
                               options.unitPrefetch.end());
  schedule.bucketBytes = options.bucketBytes;
  pm.addPass(createScheduleCollectivesPass(schedule));
  // The calling convention is fixed before the descriptor describes it.
  pm.addPass(createPrepareEntryPointsPass());
}

void mlir::zest::buildBufferizationPipeline(OpPassManager &pm,
                                            const CompileOptions &options) {
  std::string pipeline = options.fuseLinear ? kFuseLinear : "";
  if (options.fuseElementwise)
    pipeline += kFuseElementwise;
  pipeline += kLoweringHead;
  if (options.outlineRegions)
    pipeline += kOutlineRegions;
  pipeline += kLoweringPipeline;
  pipeline += "zest-matmul-to-blas{target=" + options.target + "},";
  pipeline += kDeallocation;
  parseBuiltinPipeline(pipeline, pm);
}

/// --target=cuda: every kernel becomes GPU launches (zest-map-kernels-to-gpu)
/// whose bodies upstream outlines into gpu.modules and lowers to NVVM; the
/// host side is lowered by the common tail, then gpu-to-llvm turns launches
/// into the GPU runtime's calls (mgpuLaunchKernel, ...) and the modules are
/// serialized.
static std::string getCudaKernelsPipeline(const CompileOptions &options) {
  return "zest-outline-kernels{device-buffers},"
         "zest-map-kernels-to-gpu,"
         "lower-affine,"
         "gpu-kernel-outlining,"
         "nvvm-attach-target{chip=" +
         options.cudaChip + " features=" + options.cudaFeatures +
         " O=3},"
         "expand-strided-metadata,"
         "convert-scf-to-cf,"
         "gpu.module(convert-gpu-to-nvvm,canonicalize,cse,"
         "reconcile-unrealized-casts),";
}

void mlir::zest::buildLoweringPipeline(OpPassManager &pm,
                                       const CompileOptions &options) {
  buildBufferizationPipeline(pm, options);
  PlanMemoryPassOptions plan;
  plan.reportJson = options.reportJson;
  plan.reportText = options.reportText;
  plan.memoryBudget = options.memoryBudget;
  plan.machine = options.machine;
  plan.link = options.link;
  plan.replicaLink = options.replicaLink;
  pm.addPass(createPlanMemoryPass(plan));
  if (options.target == "cuda") {
    // Launches become runtime calls before the casts are reconciled.
    parseBuiltinPipeline(
        getCudaKernelsPipeline(options) + kLoweringTail + "gpu-to-llvm," +
            kReconcile + ",gpu-module-to-binary{format=" + options.cudaFormat +
            " toolkit=" + options.cudaPath + "}",
        pm);
    return;
  }
  std::string pipeline = kLoweringKernels;
  if (options.vectorize)
    pipeline += kVectorize;
  pipeline += kLoweringTail;
  pipeline += kReconcile;
  parseBuiltinPipeline(pipeline, pm);
}

void mlir::zest::stripRoleAttributes(func::FuncOp func, bool keepUnits) {
  // `zest.updated` stays for zest-drop-updated-results.
  auto isZest = [&](NamedAttribute attr) {
    return attr.getName().getValue().starts_with("zest.") &&
           attr.getName() != ZestDialect::kUpdatedAttrName &&
           !(keepUnits && attr.getName() == ZestDialect::kUnitArgAttrName);
  };
  auto strip = [&](DictionaryAttr attrs) {
    SmallVector<NamedAttribute> kept;
    if (attrs)
      llvm::copy_if(attrs.getValue(), std::back_inserter(kept),
                    [&](NamedAttribute attr) { return !isZest(attr); });
    return DictionaryAttr::get(func.getContext(), kept);
  };
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
    func.setArgAttrs(i, strip(func.getArgAttrDict(i)));
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
    func.setResultAttrs(i, strip(func.getResultAttrDict(i)));
  func->removeAttr(ZestDialect::kOptimizerAttrName);
}

/// Names of the entry points, in descriptor order.
static SmallVector<std::string> getEntryPoints(ModuleOp module) {
  SmallVector<std::string> names;
  for (auto func : module.getOps<func::FuncOp>())
    if (!func.isExternal() && func.isPublic())
      names.push_back(func.getSymName().str());
  return names;
}

/// Checks what the host driver can call: tensors in, tensors out, and no
/// name that clashes with the driver's own symbols.
static LogicalResult checkEntryPoints(ModuleOp module) {
  if (getEntryPoints(module).empty())
    return emitError(module.getLoc())
           << "the module has no entry point: zestc compiles the public "
           << "functions with a body";
  bool ok = true;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isExternal() || !func.isPublic())
      continue;
    if (func.getSymName() == "main" || func.getSymName().starts_with("zest_")) {
      func.emitError() << "entry point name '" << func.getSymName()
                       << "' clashes with the runtime; rename the function";
      ok = false;
    }
    auto isStaticTensor = [](Type type) {
      auto tensor = dyn_cast<RankedTensorType>(type);
      return tensor && tensor.hasStaticShape();
    };
    for (auto [i, type] : llvm::enumerate(func.getArgumentTypes()))
      if (!isStaticTensor(type)) {
        func.emitError() << "argument #" << i << " of entry point @"
                         << func.getSymName() << " has type " << type
                         << "; entry points take statically shaped tensors";
        ok = false;
      }
    for (auto [i, type] : llvm::enumerate(func.getResultTypes()))
      if (!isStaticTensor(type)) {
        func.emitError() << "result #" << i << " of entry point @"
                         << func.getSymName() << " has type " << type
                         << "; entry points return statically shaped tensors";
        ok = false;
      }
  }
  return success(ok);
}

/// Adds what the host driver links against: `zest_model_descriptor`, and
/// `zest_model_entries`, one `void (*)(void **descriptors)` per entry point
/// that unpacks the memref descriptor pointers into its C interface.
static LogicalResult addHostInterface(llvm::Module &module,
                                      ArrayRef<std::string> entries,
                                      StringRef descriptor, StringRef target) {
  llvm::LLVMContext &ctx = module.getContext();
  llvm::Type *ptr = llvm::PointerType::getUnqual(ctx);
  auto *packedType = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {ptr},
                                             /*isVarArg=*/false);
  SmallVector<llvm::Constant *> table;
  for (const std::string &name : entries) {
    llvm::Function *cInterface = module.getFunction("_mlir_ciface_" + name);
    if (!cInterface)
      return failure();
    auto *packed =
        llvm::Function::Create(packedType, llvm::GlobalValue::InternalLinkage,
                               "zest_entry_" + name, module);
    llvm::IRBuilder<> builder(llvm::BasicBlock::Create(ctx, "entry", packed));
    SmallVector<llvm::Value *> args;
    for (unsigned i = 0, e = cInterface->arg_size(); i < e; ++i) {
      llvm::Value *slot = builder.CreateConstGEP1_64(ptr, packed->getArg(0), i);
      args.push_back(builder.CreateLoad(ptr, slot));
    }
    builder.CreateCall(cInterface, args);
    builder.CreateRetVoid();
    table.push_back(packed);
  }
  auto *tableType = llvm::ArrayType::get(ptr, table.size());
  new llvm::GlobalVariable(module, tableType, /*isConstant=*/true,
                           llvm::GlobalValue::ExternalLinkage,
                           llvm::ConstantArray::get(tableType, table),
                           "zest_model_entries");
  llvm::Constant *text =
      llvm::ConstantDataArray::getString(ctx, descriptor, /*AddNull=*/true);
  new llvm::GlobalVariable(module, text->getType(), /*isConstant=*/true,
                           llvm::GlobalValue::ExternalLinkage, text,
                           "zest_model_descriptor");
  // Where the step computes: the driver picks a CUDA backend for "cuda".
  llvm::Constant *where =
      llvm::ConstantDataArray::getString(ctx, target, /*AddNull=*/true);
  new llvm::GlobalVariable(module, where->getType(), /*isConstant=*/true,
                           llvm::GlobalValue::ExternalLinkage, where,
                           "zest_model_target");
  return success();
}

static std::unique_ptr<llvm::TargetMachine> createHostTargetMachine(
    std::string &error,
    llvm::CodeGenOptLevel level = llvm::CodeGenOptLevel::Default) {
  // Once: code generation may create target machines from two threads.
  static std::once_flag initialized;
  std::call_once(initialized, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return nullptr;
  llvm::SubtargetFeatures features;
  for (auto &[feature, enabled] : llvm::sys::getHostCPUFeatures())
    features.AddFeature(feature, enabled);
  return std::unique_ptr<llvm::TargetMachine>(target->createTargetMachine(
      triple, llvm::sys::getHostCPUName(), features.getString(),
      llvm::TargetOptions(), llvm::Reloc::PIC_, std::nullopt, level));
}

/// Writes `path` with `write`, reporting a file that cannot be created; the
/// file is kept only if `write` succeeds.
static LogicalResult
writeOutput(StringRef path, Location loc,
            function_ref<LogicalResult(llvm::raw_pwrite_stream &)> write) {
  std::error_code ec;
  llvm::ToolOutputFile out(path, ec, llvm::sys::fs::OF_None);
  if (ec)
    return emitError(loc) << "cannot write '" << path << "': " << ec.message();
  if (failed(write(out.os())))
    return failure();
  out.keep();
  return success();
}

/// Writes the object code of `module` to `path`. Returns an error message,
/// empty on success: no MLIR diagnostics, so any thread may call it.
static std::string writeObject(llvm::Module &module,
                               llvm::TargetMachine &machine, StringRef path) {
  std::error_code ec;
  llvm::ToolOutputFile out(path, ec, llvm::sys::fs::OF_None);
  if (ec)
    return "cannot write '" + path.str() + "': " + ec.message();
  llvm::legacy::PassManager pm;
  if (machine.addPassesToEmitFile(pm, out.os(), nullptr,
                                  llvm::CodeGenFileType::ObjectFile))
    return "the target cannot emit object files";
  pm.run(module);
  out.keep();
  return "";
}

static LogicalResult emitObject(llvm::Module &module,
                                llvm::TargetMachine &machine, StringRef path,
                                Location loc) {
  std::string error = writeObject(module, machine, path);
  if (!error.empty())
    return emitError(loc) << error;
  return success();
}

/// Links `object` with the runtime (and, for executables, the training
/// driver), MPI and OpenBLAS using the system C++ compiler driver; for
/// --target=cuda also the CUDA runtime library, CUDA, cuBLASLt and NCCL.
static LogicalResult link(ArrayRef<std::string> objects,
                          const CompileOptions &options, Location loc) {
  auto cxx = llvm::sys::findProgramByName("c++");
  if (!cxx)
    cxx = llvm::sys::findProgramByName("g++");
  if (!cxx)
    return emitError(loc) << "no C++ compiler driver (c++ or g++) to link "
                          << "with; install g++ or use --emit=obj";
  SmallString<256> runtime(options.runtimeDir), driver(options.runtimeDir),
      cudaRuntime(options.runtimeDir);
  llvm::sys::path::append(runtime, "libzest_runtime.a");
  llvm::sys::path::append(driver, "libzest_driver.a");
  llvm::sys::path::append(cudaRuntime, "libzest_runtime_cuda.a");
  bool cuda = options.target == "cuda";
  if (cuda && StringRef(ZEST_CUDA_LINK_LIBRARIES).empty())
    return emitError(loc) << "this zestc was built without the CUDA runtime "
                          << "(ZEST_ENABLE_CUDA=OFF or no CUDA toolkit): "
                          << "--target=cuda can emit mlir, llvm or obj only";
  SmallVector<StringRef> libs = {runtime, driver};
  if (cuda)
    libs.push_back(cudaRuntime);
  for (StringRef lib : libs)
    if (!llvm::sys::fs::exists(lib))
      return emitError(loc) << "runtime library '" << lib
                            << "' not found; pass --runtime-dir=<folder>";
  std::vector<std::string> args = {*cxx, "-o", options.output};
  if (options.emit == EmitKind::Shared)
    args.push_back("-shared");
  llvm::append_range(args, objects);
  if (options.emit == EmitKind::Executable)
    args.push_back(std::string(driver));
  // The CUDA backends, kernel launches and cuBLASLt products, before the
  // core runtime they build on.
  if (cuda)
    args.push_back(std::string(cudaRuntime));
  // A shared library exports the whole runtime C API (zest_init, ...), even
  // the parts its model does not call.
  if (options.emit == EmitKind::Shared)
    args.push_back("-Wl,--whole-archive");
  args.push_back(std::string(runtime));
  if (options.emit == EmitKind::Shared)
    args.push_back("-Wl,--no-whole-archive");
  for (StringRef lib : llvm::split(ZEST_LINK_LIBRARIES, ';'))
    if (!lib.empty())
      args.push_back(lib.str());
  if (cuda)
    for (StringRef lib : llvm::split(ZEST_CUDA_LINK_LIBRARIES, ';'))
      if (!lib.empty())
        args.push_back(lib.str());
  args.insert(args.end(), {"-lm", "-lpthread"});
  SmallVector<StringRef> argRefs(args.begin(), args.end());
  std::string error;
  int rc =
      llvm::sys::ExecuteAndWait(*cxx, argRefs, std::nullopt, {}, 0, 0, &error);
  if (rc != 0)
    return emitError(loc) << "linking '" << options.output << "' failed ("
                          << (error.empty() ? "exit " + std::to_string(rc)
                                            : error)
                          << ")";
  return success();
}

/// Moves the glue out of `module` into a module of its own: entry points
/// (marked `optnone`), their C-interface and host wrappers, and every global
/// variable. `module` keeps the kernels. Local symbols become hidden
/// external ones so the two objects link.
static std::unique_ptr<llvm::Module> splitOffGlue(llvm::Module &module) {
  unsigned unnamed = 0;
  for (llvm::GlobalValue &value : module.global_values()) {
    if (value.isDeclaration() || !value.hasLocalLinkage())
      continue;
    if (!value.hasName())
      value.setName("zest.global." + std::to_string(unnamed++));
    value.setLinkage(llvm::GlobalValue::ExternalLinkage);
    value.setVisibility(llvm::GlobalValue::HiddenVisibility);
  }
  auto isGlue = [](const llvm::GlobalValue *value) {
    auto *function = dyn_cast<llvm::Function>(value);
    if (!function)
      return true; // global variables: the descriptor, the entry table
    StringRef name = function->getName();
    return function->hasFnAttribute(llvm::Attribute::OptimizeNone) ||
           name.starts_with("_mlir_ciface_") || name.starts_with("zest_entry_");
  };
  llvm::ValueToValueMapTy map;
  std::unique_ptr<llvm::Module> glue =
      llvm::CloneModule(module, map, [&](const llvm::GlobalValue *value) {
        return isGlue(value);
      });
  for (llvm::Function &function : module)
    if (!function.isDeclaration() && isGlue(&function))
      function.deleteBody();
  // Constructor and destructor lists (--target=cuda's kernel module loads)
  // live on in the glue, which refers to their functions here.
  for (llvm::GlobalVariable &variable :
       llvm::make_early_inc_range(module.globals()))
    if (variable.hasAppendingLinkage())
      variable.eraseFromParent();
  for (llvm::GlobalVariable &variable : module.globals())
    if (variable.hasInitializer()) {
      variable.setInitializer(nullptr);
      variable.setComdat(nullptr);
    }
  return glue;
}

/// Emits the object of the module in `bitcode` to `path` at `-O optLevel`,
/// in an LLVM context of its own (callable from any thread). Returns an error
/// message, empty on success.
static std::string emitObjectInNewContext(ArrayRef<char> bitcode, int optLevel,
                                          StringRef path) {
  llvm::LLVMContext context;
  llvm::Expected<std::unique_ptr<llvm::Module>> module = llvm::parseBitcodeFile(
      llvm::MemoryBufferRef(StringRef(bitcode.data(), bitcode.size()),
                            "kernels"),
      context);
  if (!module)
    return "cannot reload the kernels: " + llvm::toString(module.takeError());
  std::string error;
  std::unique_ptr<llvm::TargetMachine> machine = createHostTargetMachine(
      error, llvm::CodeGenOpt::getLevel(optLevel).value_or(
                 llvm::CodeGenOptLevel::Default));
  if (!machine)
    return "no native target: " + error;
  return writeObject(**module, *machine, path);
}

LogicalResult mlir::zest::compileModel(ModuleOp module,
                                       const CompileOptions &options,
                                       llvm::raw_ostream &printPipelineTo) {
  MLIRContext *ctx = module.getContext();
  PassManager front(ctx);
  buildFrontPipeline(front, options);
  applyDefaultTimingPassManagerCLOptions(front);
  if (failed(applyPassManagerCLOptions(front)) || failed(front.run(module)) ||
      failed(checkEntryPoints(module)))
    return failure();
  std::string descriptor = buildModelDescriptor(module);
  SmallVector<std::string> entries = getEntryPoints(module);
  // What each entry point's C interface takes once in-place updates are
  // dropped: one descriptor per argument and per remaining result.
  llvm::StringMap<unsigned> expectedInterfaceArgs;
  // The descriptor carries the argument and result roles from here on.
  for (auto func : module.getOps<func::FuncOp>()) {
    unsigned updated = 0;
    for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
      updated += bool(func.getResultAttr(i, ZestDialect::kUpdatedAttrName));
    expectedInterfaceArgs[func.getSymName()] =
        func.getNumArguments() + func.getNumResults() - updated;
    stripRoleAttributes(func, options.outlineRegions);
  }

  PassManager lower(ctx);
  buildLoweringPipeline(lower, options);
  applyDefaultTimingPassManagerCLOptions(lower);
  if (failed(applyPassManagerCLOptions(lower)) || failed(lower.run(module)))
    return failure();
  // Kernels whose buffers never overlap: mark the pointers LLVM accesses
  // them through (convert-func-to-llvm does not carry `llvm.noalias` over).
  module.walk([](LLVM::LLVMFuncOp func) {
    func->removeAttr(ZestDialect::kKernelAttrName);
    auto positions = func->getAttrOfType<DenseI64ArrayAttr>(
        ZestDialect::kNoAliasPointersAttrName);
    if (!positions)
      return;
    for (int64_t position : positions.asArrayRef())
      func.setArgAttr(position, LLVM::LLVMDialect::getNoAliasAttrName(),
                      UnitAttr::get(func.getContext()));
    func->removeAttr(ZestDialect::kNoAliasPointersAttrName);
  });
  // Units are compile-time metadata; the descriptor carries them on.
  for (Operation &op : llvm::make_early_inc_range(module.getOps()))
    if (isa<UnitOp, BucketOp>(op))
      op.erase();
  // Anything not in the LLVM dialect now is an op the lowering does not
  // handle: name it where the model wrote it.
  WalkResult leftover = module.walk([](Operation *op) {
    if (isa<ModuleOp>(op) || isa<LLVM::LLVMDialect>(op->getDialect()))
      return WalkResult::advance();
    if (isa<UnrealizedConversionCastOp>(op))
      return WalkResult::advance(); // reported through its operand's producer
    // --target=cuda: serialized kernels and their launches, which the GPU
    // dialect's translation turns into LLVM IR.
    if (isa<gpu::BinaryOp, gpu::LaunchFuncOp>(op))
      return WalkResult::skip();
    op->emitError() << "zestc cannot lower '" << op->getName()
                    << "' to machine code: the operation is not supported by "
                    << "the lowering pipeline (zestc --print-pipeline)";
    return WalkResult::interrupt();
  });
  if (leftover.wasInterrupted())
    return failure();
  // A shard, optimizer state or accumulator that bufferization could not
  // update in place would come back as an extra result the host does not
  // expect: refuse rather than silently train on stale values.
  for (const std::string &name : entries) {
    auto cInterface =
        module.lookupSymbol<LLVM::LLVMFuncOp>("_mlir_ciface_" + name);
    if (cInterface &&
        cInterface.getNumArguments() != expectedInterfaceArgs.lookup(name))
      return emitError(cInterface.getLoc())
             << "entry point @" << name << " could not update its "
             << "parameters and optimizer state in place (internal error: "
             << "please report it with the model)";
  }
  if (options.emit == EmitKind::Mlir)
    return writeOutput(options.output, module.getLoc(),
                       [&](llvm::raw_pwrite_stream &os) {
                         module.print(os);
                         return success();
                       });

  registerBuiltinDialectTranslation(*ctx);
  registerLLVMDialectTranslation(*ctx);
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, llvmContext, "zest-model");
  if (!llvmModule)
    return emitError(module.getLoc()) << "translation to LLVM IR failed";
  if (failed(
          addHostInterface(*llvmModule, entries, descriptor, options.target)))
    return emitError(module.getLoc()) << "an entry point lost its C interface";

  std::string error;
  std::unique_ptr<llvm::TargetMachine> machine = createHostTargetMachine(error);
  if (!machine)
    return emitError(module.getLoc()) << "no native target: " << error;
  llvmModule->setDataLayout(machine->createDataLayout());
  llvmModule->setTargetTriple(machine->getTargetTriple());
  // With the loop nests outlined into kernels, an entry point is straight-
  // line glue (allocations, views, calls) whose size grows with the model:
  // optimizing and scheduling it gains nothing at run time and makes code
  // generation superlinear in the number of blocks. Only kernels are
  // optimized.
  for (const std::string &name : entries)
    if (llvm::Function *entry = llvmModule->getFunction(name)) {
      entry->addFnAttr(llvm::Attribute::NoInline);
      entry->addFnAttr(llvm::Attribute::OptimizeNone);
    }
  if (llvm::Error err = makeOptimizingTransformer(
          options.optLevel, 0, machine.get())(llvmModule.get()))
    return emitError(module.getLoc())
           << "LLVM optimization failed: " << llvm::toString(std::move(err));

  if (options.emit == EmitKind::Llvm)
    return writeOutput(options.output, module.getLoc(),
                       [&](llvm::raw_pwrite_stream &os) {
                         llvmModule->print(os, nullptr);
                         return success();
                       });
  if (options.emit == EmitKind::Object)
    return emitObject(*llvmModule, *machine, options.output, module.getLoc());

  // Glue and kernels are compiled apart, at the same time: the glue (entry
  // points, their wrappers, the descriptor) at -O0, whose fast register
  // allocation is linear in its size, the kernels at -O N in a thread of
  // their own.
  std::unique_ptr<llvm::Module> glue = splitOffGlue(*llvmModule);
  SmallVector<std::string> objects;
  SmallVector<llvm::FileRemover> removers;
  for (int i = 0; i < 2; ++i) {
    SmallString<128> object;
    if (std::error_code ec =
            llvm::sys::fs::createTemporaryFile("zest-model", "o", object))
      return emitError(module.getLoc())
             << "cannot create a temporary object file: " << ec.message();
    objects.push_back(std::string(object));
    removers.emplace_back(object);
  }
  SmallVector<char, 0> kernelBitcode;
  {
    llvm::raw_svector_ostream os(kernelBitcode);
    llvm::WriteBitcodeToFile(*llvmModule, os);
  }
  std::string kernelError;
  std::thread kernels([&] {
    kernelError =
        emitObjectInNewContext(kernelBitcode, options.optLevel, objects[1]);
  });
  std::unique_ptr<llvm::TargetMachine> glueMachine =
      createHostTargetMachine(error, llvm::CodeGenOptLevel::None);
  LogicalResult glueResult =
      glueMachine ? emitObject(*glue, *glueMachine, objects[0], module.getLoc())
                  : failure();
  kernels.join();
  if (!glueMachine)
    return emitError(module.getLoc()) << "no native target: " << error;
  if (!kernelError.empty())
    return emitError(module.getLoc()) << kernelError;
  if (failed(glueResult))
    return failure();
  return link(objects, options, module.getLoc());
}
