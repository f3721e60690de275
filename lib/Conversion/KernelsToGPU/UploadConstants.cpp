//===- UploadConstants.cpp - Constant buffers in device memory ------------===//
//
// For the device targets: a constant global (a non-splat constant of the
// model, a table) is host data, which no kernel may read. Each use becomes
// a device buffer of the step, filled from the global. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "zest/Conversion/Passes.h"

#include "mlir/IR/SymbolTable.h"

namespace mlir::zest {
#define GEN_PASS_DEF_UPLOADCONSTANTSPASS
#include "zest/Conversion/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;

namespace {

constexpr StringLiteral kUploadConstant = "zest_upload_constant";

/// `memref`'s aligned pointer (`index`, extracted from it) as an LLVM
/// pointer.
Value getPointer(OpBuilder &builder, Location loc, Value memref,
                 Operation **extract = nullptr) {
  auto index =
      memref::ExtractAlignedPointerAsIndexOp::create(builder, loc, memref);
  if (extract)
    *extract = index;
  Value address =
      arith::IndexCastOp::create(builder, loc, builder.getI64Type(), index);
  return LLVM::IntToPtrOp::create(
      builder, loc, LLVM::LLVMPointerType::get(builder.getContext()), address);
}

/// Replaces `get`'s uses by a device buffer the step allocates and fills.
LogicalResult upload(memref::GetGlobalOp get, SymbolTable &symbols) {
  auto global = symbols.lookup<memref::GlobalOp>(get.getName());
  MemRefType type = get.getType();
  if (!global || !global.getConstant())
    return get.emitError("zest-upload-constants: '")
           << get.getName()
           << "' is not a constant global; a device target keeps no "
              "mutable state on the host";
  if (!type.hasStaticShape() || !type.getLayout().isIdentity() ||
      !type.getElementType().isIntOrIndexOrFloat())
    return get.emitError("zest-upload-constants: a constant of type ")
           << type << " cannot be uploaded (static shapes of scalars only)";
  OpBuilder builder(get);
  builder.setInsertionPointAfter(get);
  Location loc = get.getLoc();
  auto device = memref::AllocOp::create(builder, loc, type);
  Value to = getPointer(builder, loc, device);
  Operation *read = nullptr;
  Value from = getPointer(builder, loc, get, &read);
  unsigned bits = type.getElementType().isIndex()
                      ? 64
                      : type.getElementType().getIntOrFloatBitWidth();
  Value bytes =
      arith::ConstantIntOp::create(builder, loc, builder.getI64Type(),
                                   type.getNumElements() * ((bits + 7) / 8));
  func::CallOp::create(builder, loc, kUploadConstant, TypeRange{},
                       ValueRange{to, from, bytes});
  get.getResult().replaceAllUsesExcept(device, read);
  return success();
}

struct UploadConstantsPass
    : public zest::impl::UploadConstantsPassBase<UploadConstantsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<memref::GetGlobalOp> gets;
    module.walk([&](memref::GetGlobalOp get) { gets.push_back(get); });
    if (gets.empty())
      return;
    SymbolTable symbols(module);
    for (memref::GetGlobalOp get : gets)
      if (failed(upload(get, symbols)))
        return signalPassFailure();
    if (symbols.lookup(kUploadConstant))
      return;
    OpBuilder builder = OpBuilder::atBlockBegin(module.getBody());
    auto ptr = LLVM::LLVMPointerType::get(&getContext());
    auto copy = func::FuncOp::create(
        builder, module.getLoc(), kUploadConstant,
        builder.getFunctionType({ptr, ptr, builder.getI64Type()}, {}));
    copy.setPrivate();
  }
};

} // namespace
