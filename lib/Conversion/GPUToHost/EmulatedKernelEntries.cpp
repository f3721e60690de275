//===- EmulatedKernelEntries.cpp - Emulated kernels, registered -----------===//
//
// Entries with the launch's calling convention for the host functions of
// zest-emulate-gpu-kernels, and a constructor registering them. See
// Passes.td.
//
//===----------------------------------------------------------------------===//

#include "zest/Conversion/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Interfaces/DataLayoutInterfaces.h"

namespace mlir::zest {
#define GEN_PASS_DEF_EMULATEDKERNELENTRIESPASS
#include "zest/Conversion/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;

namespace {

constexpr unsigned kLaunchValues = 9;

/// `void entry(void **params, const int64_t *launch)` calling `kernel`.
LLVM::LLVMFuncOp createEntry(OpBuilder &builder, LLVM::LLVMFuncOp kernel,
                             StringRef name) {
  MLIRContext *ctx = builder.getContext();
  Location loc = kernel.getLoc();
  auto ptr = LLVM::LLVMPointerType::get(ctx);
  auto i64 = builder.getI64Type();
  auto entry = LLVM::LLVMFuncOp::create(
      builder, loc, name,
      LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx), {ptr, ptr}));
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToStart(entry.addEntryBlock(builder));
  Value params = entry.getArgument(0), launch = entry.getArgument(1);
  unsigned numParams = kernel.getNumArguments() - kLaunchValues;
  SmallVector<Value> args;
  for (unsigned i = 0; i < kernel.getNumArguments(); ++i) {
    bool isParam = i < numParams;
    Value slot = LLVM::GEPOp::create(
        builder, loc, ptr, isParam ? Type(ptr) : Type(i64),
        isParam ? params : launch,
        ArrayRef<LLVM::GEPArg>{int32_t(isParam ? i : i - numParams)});
    // A parameter's slot points at its value; a launch value is in place.
    if (isParam)
      slot = LLVM::LoadOp::create(builder, loc, ptr, slot);
    args.push_back(
        LLVM::LoadOp::create(builder, loc, kernel.getArgumentTypes()[i], slot));
  }
  LLVM::CallOp::create(builder, loc, kernel, args);
  LLVM::ReturnOp::create(builder, loc, ValueRange{});
  return entry;
}

/// The address of a constant global holding `values`.
Value createI32Array(OpBuilder &builder, ModuleOp module, Location loc,
                     StringRef name, ArrayRef<int32_t> values) {
  auto type = LLVM::LLVMArrayType::get(builder.getI32Type(),
                                       std::max<size_t>(values.size(), 1));
  SmallVector<int32_t> data(values);
  if (data.empty())
    data.push_back(0);
  {
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointToStart(module.getBody());
    LLVM::GlobalOp::create(
        builder, loc, type, /*isConstant=*/true, LLVM::Linkage::Internal, name,
        DenseElementsAttr::get(
            RankedTensorType::get({int64_t(data.size())}, builder.getI32Type()),
            ArrayRef<int32_t>(data)));
  }
  return LLVM::AddressOfOp::create(
      builder, loc, LLVM::LLVMPointerType::get(module.getContext()), name);
}

/// Registers `kernel`'s `entry` from the constructor being built.
void registerKernel(OpBuilder &builder, ModuleOp module,
                    LLVM::LLVMFuncOp kernel, LLVM::LLVMFuncOp entry,
                    DictionaryAttr info, LLVM::LLVMFuncOp registerFn) {
  Location loc = kernel.getLoc();
  auto moduleName = cast<StringAttr>(info.get("module"));
  auto kernelName = cast<StringAttr>(info.get("name"));
  ArrayRef<int32_t> buffers =
      cast<DenseI32ArrayAttr>(info.get("buffers")).asArrayRef();
  std::string prefix = entry.getName().str();
  auto cString = [](StringAttr text) { return text.getValue().str() + '\0'; };
  auto i32 = [&](int64_t value) -> Value {
    return LLVM::ConstantOp::create(builder, loc, builder.getI32Type(),
                                    builder.getI32IntegerAttr(value));
  };
  DataLayout layout(module);
  SmallVector<int32_t> paramBytes;
  for (Type type : kernel.getArgumentTypes().drop_back(kLaunchValues))
    paramBytes.push_back(int32_t(layout.getTypeSize(type)));
  Value args[] = {
      LLVM::createGlobalString(loc, builder, prefix + ".module",
                               cString(moduleName), LLVM::Linkage::Internal),
      LLVM::createGlobalString(loc, builder, prefix + ".name",
                               cString(kernelName), LLVM::Linkage::Internal),
      LLVM::AddressOfOp::create(builder, loc, entry),
      i32(kernel.getNumArguments() - kLaunchValues),
      createI32Array(builder, module, loc, prefix + ".params", paramBytes),
      createI32Array(builder, module, loc, prefix + ".buffers", buffers),
      i32(buffers.size())};
  LLVM::CallOp::create(builder, loc, registerFn, args);
}

struct EmulatedKernelEntriesPass
    : public zest::impl::EmulatedKernelEntriesPassBase<
          EmulatedKernelEntriesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<LLVM::LLVMFuncOp> kernels;
    for (auto func : module.getOps<LLVM::LLVMFuncOp>())
      if (func->hasAttr("zest.emulated_kernel"))
        kernels.push_back(func);
    if (kernels.empty())
      return;
    MLIRContext *ctx = &getContext();
    Location loc = module.getLoc();
    OpBuilder builder(module.getBodyRegion());
    builder.setInsertionPointToEnd(module.getBody());
    auto ptr = LLVM::LLVMPointerType::get(ctx);
    auto i32 = builder.getI32Type();
    auto voidType = LLVM::LLVMVoidType::get(ctx);
    auto registerFn = LLVM::LLVMFuncOp::create(
        builder, loc, "zest_emulated_register_kernel",
        LLVM::LLVMFunctionType::get(voidType,
                                    {ptr, ptr, ptr, i32, ptr, ptr, i32}));
    auto ctor = LLVM::LLVMFuncOp::create(
        builder, loc, "__zest_emulated_register_kernels",
        LLVM::LLVMFunctionType::get(voidType, {}), LLVM::Linkage::Internal);
    SmallVector<LLVM::LLVMFuncOp> entries;
    for (LLVM::LLVMFuncOp kernel : kernels)
      entries.push_back(
          createEntry(builder, kernel, (kernel.getName() + "_entry").str()));
    builder.setInsertionPointToStart(ctor.addEntryBlock(builder));
    for (auto [kernel, entry] : llvm::zip(kernels, entries)) {
      auto info = cast<DictionaryAttr>(kernel->getAttr("zest.emulated_kernel"));
      registerKernel(builder, module, kernel, entry, info, registerFn);
      kernel->removeAttr("zest.emulated_kernel");
    }
    LLVM::ReturnOp::create(builder, loc, ValueRange{});
    builder.setInsertionPointToEnd(module.getBody());
    LLVM::GlobalCtorsOp::create(
        builder, loc, builder.getArrayAttr({FlatSymbolRefAttr::get(ctor)}),
        builder.getI32ArrayAttr({65535}),
        builder.getArrayAttr({LLVM::ZeroAttr::get(ctx)}));
  }
};

} // namespace
