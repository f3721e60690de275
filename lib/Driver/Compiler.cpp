//===- Compiler.cpp - The zestc compilation pipeline ----------------------===//

#include "zest/Driver/Compiler.h"
#include "zest/Conversion/ModelDescriptor.h"
#include "zest/Conversion/Passes.h"
#include "zest/Dialect/Zest/IR/ZestOps.h"
#include "zest/Dialect/Zest/Transforms/CostModel.h"

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

/// Runs the passes `build` adds on `module`, with the command line's pass
/// manager options (--mlir-timing, --mlir-print-ir-after, ...).
static LogicalResult runPasses(ModuleOp module,
                               function_ref<void(OpPassManager &)> build) {
  PassManager pm(module.getContext());
  build(pm);
  applyDefaultTimingPassManagerCLOptions(pm);
  if (failed(applyPassManagerCLOptions(pm)))
    return failure();
  return pm.run(module);
}

void mlir::zest::printPipeline(const CompileOptions &options,
                               llvm::raw_ostream &os) {
  MLIRContext ctx;
  auto print = [&](StringRef phase, function_ref<void(OpPassManager &)> build) {
    PassManager pm(&ctx);
    build(pm);
    os << phase << ": ";
    pm.printAsTextualPipeline(os);
    os << "\n";
  };
  print("sharding",
        [&](OpPassManager &pm) { buildFrontPipeline(pm, options.front); });
  print("describing",
        [&](OpPassManager &pm) { buildDescribePipeline(pm, options.lower); });
  print("lowering",
        [&](OpPassManager &pm) { buildLoweringPipeline(pm, options.lower); });
  print("finalizing", [&](OpPassManager &pm) { buildFinalizePipeline(pm); });
  os << "then: translate to LLVM IR, add the host interface, optimize -O"
     << options.optLevel << ", emit an object, link\n";
}

/// What zest-describe-model recorded for the host: the descriptor text and
/// the entry points, in its order.
struct HostInterface {
  std::string descriptor;
  SmallVector<std::string> entries;
  /// GPU targets: the profile's table (getKernelProfileTable); else empty.
  std::string kernelProfile;
};

/// What ZEST_KERNEL_TIMES prints beside each kernel's time: a line
/// `machine <name> <rates per us...>` (the cost model's machine: --machine,
/// else h100-nvlink), then `kernel <name> <bytes read> <bytes written>
/// <operations> <predicted us>` per launch of each kernel of
/// zest-outline-kernels, the prediction the cost model's.
static std::string getKernelProfileTable(ModuleOp module,
                                         StringRef machineName) {
  std::optional<MachineModel> machine =
      lookupMachine(machineName.empty() ? "h100-nvlink" : machineName);
  auto work =
      module->getAttrOfType<DictionaryAttr>(ZestDialect::kKernelWorkAttrName);
  if (!machine || !work)
    return "";
  std::string table;
  llvm::raw_string_ostream os(table);
  os << "machine " << machine->name << " " << machine->vectorFlopsPerUs << " "
     << machine->gemmFlopsPerUs << " " << machine->halfGemmFlopsPerUs << " "
     << machine->memoryBytesPerUs << " " << machine->kernelOverheadUs << " "
     << machine->peakMemoryBytesPerUs << " " << machine->peakVectorFlopsPerUs
     << " " << machine->peakGemmFlopsPerUs << " "
     << machine->peakHalfGemmFlopsPerUs << "\n";
  for (NamedAttribute kernel : work) {
    auto counts = dyn_cast<DenseI64ArrayAttr>(kernel.getValue());
    if (!counts || counts.size() < 3)
      continue;
    KernelWork work{counts[0], counts[1], counts[2]};
    // Per launch, as the profile times them: a call's work and prediction
    // spread over its launches (zest-map-kernels-to-gpu counted them).
    int64_t launches = counts.size() > 3 ? std::max<int64_t>(1, counts[3]) : 1;
    os << "kernel " << kernel.getName().getValue() << " "
       << work.bytesRead / launches << " " << work.bytesWritten / launches
       << " " << work.flops / launches << " "
       << getKernelUs(work, *machine) / launches << "\n";
  }
  return table;
}

static FailureOr<HostInterface> getHostInterface(ModuleOp module) {
  auto descriptor =
      module->getAttrOfType<StringAttr>(ZestDialect::kModelDescriptorAttrName);
  if (!descriptor)
    return emitError(module.getLoc())
           << "the lowered module has no model descriptor (internal error: "
           << "zest-describe-model did not run)";
  FailureOr<SmallVector<EntryPointRecord>> entries =
      getEntryPointRecords(module);
  if (failed(entries))
    return failure();
  HostInterface host{descriptor.getValue().str(), {}};
  for (const EntryPointRecord &entry : *entries)
    host.entries.push_back(entry.name);
  return host;
}

/// Adds what the host driver links against: `zest_model_descriptor`, and
/// `zest_model_entries`, one `void (*)(void **descriptors)` per entry point
/// that unpacks the memref descriptor pointers into its C interface.
static LogicalResult addHostInterface(llvm::Module &module,
                                      const HostInterface &host,
                                      StringRef target, bool cudaGraphs) {
  ArrayRef<std::string> entries = host.entries;
  StringRef descriptor = host.descriptor;
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
  // Where the step computes: the driver picks a CUDA backend for "cuda" and
  // "cuda-emulated".
  llvm::Constant *where =
      llvm::ConstantDataArray::getString(ctx, target, /*AddNull=*/true);
  new llvm::GlobalVariable(module, where->getType(), /*isConstant=*/true,
                           llvm::GlobalValue::ExternalLinkage, where,
                           "zest_model_target");
  // Whether the driver runs the entry points as CUDA graphs (zestc
  // --cuda-graphs; GPU targets only).
  auto *i32 = llvm::Type::getInt32Ty(ctx);
  new llvm::GlobalVariable(module, i32, /*isConstant=*/true,
                           llvm::GlobalValue::ExternalLinkage,
                           llvm::ConstantInt::get(i32, cudaGraphs ? 1 : 0),
                           "zest_model_cuda_graphs");
  // Read by ZEST_KERNEL_TIMES (runtime/cuda-nccl/KernelTimes.cpp).
  llvm::Constant *profile = llvm::ConstantDataArray::getString(
      ctx, host.kernelProfile, /*AddNull=*/true);
  new llvm::GlobalVariable(module, profile->getType(), /*isConstant=*/true,
                           llvm::GlobalValue::ExternalLinkage, profile,
                           "zest_model_kernel_profile");
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
/// program), MPI and OpenBLAS using the system C++ compiler driver; for
/// --target=cuda also the CUDA runtime library, CUDA, cuBLASLt and NCCL;
/// for --target=cuda-emulated the runtime library of the emulated device.
static LogicalResult link(ArrayRef<std::string> objects,
                          const CompileOptions &options, Location loc) {
  auto cxx = llvm::sys::findProgramByName("c++");
  if (!cxx)
    cxx = llvm::sys::findProgramByName("g++");
  if (!cxx)
    return emitError(loc) << "no C++ compiler driver (c++ or g++) to link "
                          << "with; install g++ or use --emit=obj";
  SmallString<256> runtime(options.runtimeDir), trainer(options.runtimeDir),
      cudaRuntime(options.runtimeDir);
  llvm::sys::path::append(runtime, "libzest_runtime.a");
  llvm::sys::path::append(trainer, "libzest_trainer.a");
  Target target = options.lower.target;
  llvm::sys::path::append(cudaRuntime, target == Target::CudaEmulated
                                           ? "libzest_runtime_cuda_emulated.a"
                                           : "libzest_runtime_cuda.a");
  bool device = isDeviceTarget(target);
  // The real GPU also needs CUDA, cuBLASLt and NCCL.
  bool cuda = target == Target::Cuda;
  if (device && StringRef(ZEST_CUDA_LINK_LIBRARIES).empty())
    return emitError(loc) << "this zestc was built without the CUDA runtime "
                          << "(ZEST_ENABLE_CUDA=OFF or no CUDA toolkit): "
                          << "--target=" << stringifyTarget(target)
                          << " can emit mlir, llvm or obj only";
  SmallVector<StringRef> libs = {runtime, trainer};
  if (device)
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
    args.push_back(std::string(trainer));
  // The CUDA backends, kernel launches and cuBLASLt products (or the
  // emulated device they run on), before the core runtime they build on.
  if (device)
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

/// Translates the lowered `module` to LLVM IR with the host interface, and
/// optimizes its kernels for `machine` at `-O optLevel`.
static std::unique_ptr<llvm::Module>
translateToLLVMIR(ModuleOp module, const CompileOptions &options,
                  llvm::TargetMachine &machine,
                  llvm::LLVMContext &llvmContext) {
  FailureOr<HostInterface> host = getHostInterface(module);
  if (failed(host))
    return nullptr;
  registerBuiltinDialectTranslation(*module.getContext());
  registerLLVMDialectTranslation(*module.getContext());
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, llvmContext, "zest-model");
  if (!llvmModule) {
    emitError(module.getLoc()) << "translation to LLVM IR failed";
    return nullptr;
  }
  bool cudaGraphs =
      isDeviceTarget(options.lower.target) && options.lower.cudaGraphs;
  if (isDeviceTarget(options.lower.target))
    host->kernelProfile = getKernelProfileTable(module, options.lower.machine);
  if (failed(addHostInterface(*llvmModule, *host,
                              stringifyTarget(options.lower.target),
                              cudaGraphs))) {
    emitError(module.getLoc()) << "an entry point lost its C interface";
    return nullptr;
  }
  llvmModule->setDataLayout(machine.createDataLayout());
  llvmModule->setTargetTriple(machine.getTargetTriple());
  // With the loop nests outlined into kernels, an entry point is straight-
  // line glue (allocations, views, calls) whose size grows with the model:
  // optimizing and scheduling it gains nothing at run time and makes code
  // generation superlinear in the number of blocks. Only kernels are
  // optimized.
  for (const std::string &name : host->entries)
    if (llvm::Function *entry = llvmModule->getFunction(name)) {
      entry->addFnAttr(llvm::Attribute::NoInline);
      entry->addFnAttr(llvm::Attribute::OptimizeNone);
    }
  if (llvm::Error err = makeOptimizingTransformer(options.optLevel, 0,
                                                  &machine)(llvmModule.get())) {
    emitError(module.getLoc())
        << "LLVM optimization failed: " << llvm::toString(std::move(err));
    return nullptr;
  }
  return llvmModule;
}

/// Glue and kernels are compiled apart, at the same time: the glue (entry
/// points, their wrappers, the descriptor) at -O0, whose fast register
/// allocation is linear in its size, the kernels at -O N in a thread of
/// their own; then both objects are linked.
static LogicalResult emitAndLink(llvm::Module &llvmModule,
                                 const CompileOptions &options, Location loc) {
  std::unique_ptr<llvm::Module> glue = splitOffGlue(llvmModule);
  SmallVector<std::string> objects;
  SmallVector<llvm::FileRemover> removers;
  for (int i = 0; i < 2; ++i) {
    SmallString<128> object;
    if (std::error_code ec =
            llvm::sys::fs::createTemporaryFile("zest-model", "o", object))
      return emitError(loc)
             << "cannot create a temporary object file: " << ec.message();
    objects.push_back(std::string(object));
    removers.emplace_back(object);
  }
  SmallVector<char, 0> kernelBitcode;
  {
    llvm::raw_svector_ostream os(kernelBitcode);
    llvm::WriteBitcodeToFile(llvmModule, os);
  }
  std::string kernelError;
  std::thread kernels([&] {
    kernelError =
        emitObjectInNewContext(kernelBitcode, options.optLevel, objects[1]);
  });
  std::string error;
  std::unique_ptr<llvm::TargetMachine> glueMachine =
      createHostTargetMachine(error, llvm::CodeGenOptLevel::None);
  LogicalResult glueResult =
      glueMachine ? emitObject(*glue, *glueMachine, objects[0], loc)
                  : failure();
  kernels.join();
  if (!glueMachine)
    return emitError(loc) << "no native target: " << error;
  if (!kernelError.empty())
    return emitError(loc) << kernelError;
  if (failed(glueResult))
    return failure();
  return link(objects, options, loc);
}

LogicalResult mlir::zest::compileModel(ModuleOp module,
                                       const CompileOptions &options) {
  if (failed(runPasses(module, [&](OpPassManager &pm) {
        buildFrontPipeline(pm, options.front);
      })))
    return failure();
  if (options.planOnly)
    return runPasses(module, [&](OpPassManager &pm) {
      buildPlanPipeline(pm, options.lower);
    });
  if (failed(runPasses(module, [&](OpPassManager &pm) {
        buildLowerToLLVMPipeline(pm, options.lower);
      })))
    return failure();
  Location loc = module.getLoc();
  if (options.emit == EmitKind::Mlir)
    return writeOutput(options.output, loc, [&](llvm::raw_pwrite_stream &os) {
      module.print(os);
      return success();
    });

  std::string error;
  std::unique_ptr<llvm::TargetMachine> machine = createHostTargetMachine(error);
  if (!machine)
    return emitError(loc) << "no native target: " << error;
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateToLLVMIR(module, options, *machine, llvmContext);
  if (!llvmModule)
    return failure();
  if (options.emit == EmitKind::Llvm)
    return writeOutput(options.output, loc, [&](llvm::raw_pwrite_stream &os) {
      llvmModule->print(os, nullptr);
      return success();
    });
  if (options.emit == EmitKind::Object)
    return emitObject(*llvmModule, *machine, options.output, loc);
  return emitAndLink(*llvmModule, options, loc);
}
