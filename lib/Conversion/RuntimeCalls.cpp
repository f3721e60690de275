//===- RuntimeCalls.cpp - Building calls into the Zest runtime ------------===//

#include "zest/Conversion/RuntimeCalls.h"
#include "zest/Conversion/RuntimeProducts.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace mlir::zest;

func::FuncOp mlir::zest::getOrDeclareRuntimeFn(ModuleOp module, StringRef name,
                                               TypeRange args,
                                               TypeRange results) {
  if (auto existing = module.lookupSymbol<func::FuncOp>(name))
    return existing;
  OpBuilder builder = OpBuilder::atBlockEnd(module.getBody());
  auto fn = func::FuncOp::create(builder, module.getLoc(), name,
                                 builder.getFunctionType(args, results));
  fn.setPrivate();
  return fn;
}

func::CallOp mlir::zest::callRuntime(OpBuilder &builder, Location loc,
                                     StringRef name, TypeRange results,
                                     ValueRange args) {
  Operation *scope = builder.getInsertionBlock()->getParentOp();
  auto module = scope->getParentOfType<ModuleOp>();
  if (!module)
    module = cast<ModuleOp>(scope);
  func::FuncOp fn =
      getOrDeclareRuntimeFn(module, name, ValueRange(args).getTypes(), results);
  return func::CallOp::create(builder, loc, fn, args);
}

/// Whether `type` is how a call passes a C parameter of kind `param`.
static bool isParamType(ProductParam param, Type type) {
  switch (param) {
  case ProductParam::I32:
    return type.isSignlessInteger(32);
  case ProductParam::I64:
    return type.isSignlessInteger(64);
  case ProductParam::F32:
    return type.isF32();
  case ProductParam::Pointer:
    return isa<LLVM::LLVMPointerType>(type);
  }
  return false;
}

func::CallOp mlir::zest::callProduct(OpBuilder &builder, Location loc,
                                     const RuntimeProduct &product, bool cuda,
                                     ValueRange args) {
  StringRef name = product.getName(cuda);
  bool matches =
      args.size() == product.params.size() &&
      llvm::all_of(llvm::zip(product.params, args.getTypes()), [](auto pair) {
        return isParamType(std::get<0>(pair), std::get<1>(pair));
      });
  if (!matches)
    llvm::report_fatal_error(llvm::Twine("zest: the call to ") + name +
                             " does not match its declaration in "
                             "zest_runtime.h");
  return callRuntime(builder, loc, name, {}, args);
}

Value mlir::zest::toI64(OpBuilder &builder, Location loc, Value value) {
  return arith::IndexCastOp::create(builder, loc, builder.getI64Type(), value);
}

Value mlir::zest::getElementPointer(OpBuilder &builder, Location loc,
                                    Value memref) {
  auto type = cast<MemRefType>(memref.getType());
  Value base =
      memref::ExtractAlignedPointerAsIndexOp::create(builder, loc, memref);
  auto metadata =
      memref::ExtractStridedMetadataOp::create(builder, loc, memref);
  int64_t elementBytes = llvm::divideCeil(type.getElementTypeBitWidth(), 8);
  Value scale = arith::ConstantIndexOp::create(builder, loc, elementBytes);
  Value offsetBytes =
      arith::MulIOp::create(builder, loc, metadata.getOffset(), scale);
  Value address = arith::AddIOp::create(builder, loc, base, offsetBytes);
  return LLVM::IntToPtrOp::create(
      builder, loc, LLVM::LLVMPointerType::get(builder.getContext()),
      toI64(builder, loc, address));
}
