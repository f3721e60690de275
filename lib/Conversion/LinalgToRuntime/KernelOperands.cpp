//===- KernelOperands.cpp - Memrefs passed to runtime kernels -------------===//

#include "KernelOperands.h"
#include "zest/Conversion/RuntimeCalls.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

using namespace mlir;
using namespace mlir::zest;

bool mlir::zest::hasUnitInnerStride(Value value) {
  auto type = dyn_cast<MemRefType>(value.getType());
  if (!type || type.getRank() < 1)
    return false;
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(type.getStridesAndOffset(strides, offset)))
    return false;
  return strides.back() == 1;
}

Value mlir::zest::getFlag(OpBuilder &builder, Location loc, int64_t value) {
  return arith::ConstantIntOp::create(builder, loc, value, 32);
}

bool KernelOperands::takes(Value memref, Layout layout) const {
  if (cast<MemRefType>(memref.getType()).getRank() == 0)
    return true; // one element
  if (layout == Layout::UnitInnerStride)
    return hasUnitInnerStride(memref);
  auto type = cast<MemRefType>(memref.getType());
  return type.getLayout().isIdentity() ||
         type.areTrailingDimsContiguous(type.getRank());
}

RuntimeOperand KernelOperands::input(Value memref,
                                     std::optional<Layout> layout) {
  if (memref && !takes(memref, layout.value_or(this->layout))) {
    Value copy = allocLike(memref);
    memref::CopyOp::create(builder, loc, memref, copy);
    memref = copy;
  }
  return get(memref);
}

RuntimeOperand KernelOperands::output(Value memref,
                                      std::optional<Layout> layout) {
  if (memref && !takes(memref, layout.value_or(this->layout))) {
    Value copy = allocLike(memref);
    copyOut.emplace_back(copy, memref);
    memref = copy;
  }
  return get(memref);
}

void KernelOperands::finish() {
  for (auto [copy, memref] : copyOut)
    memref::CopyOp::create(builder, loc, copy, memref);
}

RuntimeOperand KernelOperands::get(Value memref) {
  RuntimeOperand operand;
  if (!memref) {
    operand.pointer = LLVM::ZeroOp::create(
        builder, loc, LLVM::LLVMPointerType::get(builder.getContext()));
    operand.ld = arith::ConstantIntOp::create(builder, loc, 0, 64);
    return operand;
  }
  operand.pointer = getElementPointer(builder, loc, memref);
  auto metadata =
      memref::ExtractStridedMetadataOp::create(builder, loc, memref);
  for (Value size : metadata.getSizes())
    operand.sizes.push_back(toI64(builder, loc, size));
  for (Value stride : metadata.getStrides())
    operand.strides.push_back(toI64(builder, loc, stride));
  operand.ld = operand.strides.empty()
                   ? arith::ConstantIntOp::create(builder, loc, 0, 64)
                   : operand.strides[0];
  return operand;
}

Value KernelOperands::allocLike(Value memref) {
  auto type = cast<MemRefType>(memref.getType());
  SmallVector<Value> dynamicSizes;
  for (int64_t i = 0; i < type.getRank(); ++i)
    if (type.isDynamicDim(i))
      dynamicSizes.push_back(memref::DimOp::create(builder, loc, memref, i));
  return memref::AllocOp::create(
      builder, loc, MemRefType::get(type.getShape(), type.getElementType()),
      dynamicSizes);
}

LogicalResult mlir::zest::replaceWithKernelCall(
    Operation *op, PatternRewriter &rewriter, bool cuda,
    KernelOperands::Layout layout, ProductKind kind, Type storage,
    llvm::function_ref<SmallVector<Value>(KernelOperands &)> buildArgs) {
  if (op->getNumResults() != 0)
    return rewriter.notifyMatchFailure(op, "not on buffers");
  KernelOperands operands(rewriter, op->getLoc(), layout);
  SmallVector<Value> args = buildArgs(operands);
  callProduct(rewriter, op->getLoc(), *lookupRuntimeProduct(kind, storage),
              cuda, args);
  operands.finish();
  rewriter.eraseOp(op);
  return success();
}
