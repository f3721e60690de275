//===- KernelOperands.h - Memrefs passed to runtime kernels -----*- C++ -*-===//
//
// The runtime's kernels take a pointer and row strides (fused linear,
// attention's arrays) or a pointer alone (contiguous row-major arrays:
// attention's mask and log-sum-exp). An operand in a layout the kernel
// cannot take goes through a contiguous copy: inputs are copied in before
// the call, destinations copied out after it.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_LIB_CONVERSION_LINALGTORUNTIME_KERNELOPERANDS_H
#define ZEST_LIB_CONVERSION_LINALGTORUNTIME_KERNELOPERANDS_H

#include "zest/Conversion/RuntimeProducts.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::zest {

/// True if `value` is a memref whose innermost stride is 1: a
/// row-contiguous matrix, or a contiguous vector.
bool hasUnitInnerStride(Value value);

/// A 32-bit integer constant: the flags and enums of the C API.
Value getFlag(OpBuilder &builder, Location loc, int64_t value);

/// The pointer, row stride (leading dimension), sizes and strides (i64) of
/// an optional operand; a null pointer and zeros when absent.
struct RuntimeOperand {
  Value pointer, ld;
  SmallVector<Value, 4> sizes, strides;
};

/// The operands of a kernel call, each in the layout the kernel takes.
/// The deallocation pipeline frees the copies.
class KernelOperands {
public:
  /// What the kernel takes: rows with a unit inner stride (any row
  /// stride), or whole contiguous row-major arrays.
  enum class Layout { UnitInnerStride, Contiguous };

  KernelOperands(OpBuilder &builder, Location loc,
                 Layout layout = Layout::UnitInnerStride)
      : builder(builder), loc(loc), layout(layout) {}

  /// An operand in the call's layout, or in `layout` where given.
  RuntimeOperand input(Value memref, std::optional<Layout> layout = {});
  RuntimeOperand output(Value memref, std::optional<Layout> layout = {});

  /// Emits the copies out; call after the kernel call.
  void finish();

private:
  bool takes(Value memref, Layout layout) const;
  RuntimeOperand get(Value memref);
  Value allocLike(Value memref);

  OpBuilder &builder;
  Location loc;
  Layout layout;
  SmallVector<std::pair<Value, Value>> copyOut;
};

/// A pattern that lowers a fused op on buffers to one call of the CPU
/// runtime's kernels or, when `cuda`, of the CUDA runtime's.
template <typename OpTy>
struct KernelCallPattern : public OpRewritePattern<OpTy> {
  KernelCallPattern(MLIRContext *ctx, bool cuda)
      : OpRewritePattern<OpTy>(ctx), cuda(cuda) {}
  bool cuda;
};

/// Replaces `op`, a fused op on buffers, by one call of the runtime's
/// `kind` for `storage` (zest_cuda_* when `cuda`) with the arguments
/// `buildArgs` makes from its operands, then the copies out; fails on
/// tensors.
LogicalResult replaceWithKernelCall(
    Operation *op, PatternRewriter &rewriter, bool cuda,
    KernelOperands::Layout layout, ProductKind kind, Type storage,
    llvm::function_ref<SmallVector<Value>(KernelOperands &)> buildArgs);

} // namespace mlir::zest

#endif // ZEST_LIB_CONVERSION_LINALGTORUNTIME_KERNELOPERANDS_H
