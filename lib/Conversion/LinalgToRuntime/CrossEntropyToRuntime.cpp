//===- CrossEntropyToRuntime.cpp - Fused cross-entropy to kernels ---------===//
//
// zest.cross_entropy and zest.cross_entropy_backward on memrefs become one
// call each to the runtime's cross-entropy kernels
// (runtime/kernels/CrossEntropy.cpp on the CPU, the CUDA runtime's for
// target=cuda): the logits and their gradient by rows with a unit inner
// stride, the targets, log-sum-exps and losses contiguous.
//
//===----------------------------------------------------------------------===//

#include "FusedOpsToRuntime.h"
#include "KernelOperands.h"
#include "zest/Conversion/RuntimeCalls.h"
#include "zest/Dialect/Zest/IR/ZestOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/TypeUtilities.h"

#include <type_traits>

using namespace mlir;
using namespace mlir::zest;

namespace {

/// The arguments both kernels start with: sizes, the logits, the targets
/// and the loss's attributes.
template <typename OpTy>
SmallVector<Value> getLossArgs(OpBuilder &builder, Location loc,
                               KernelOperands &operands, OpTy op) {
  RuntimeOperand logits = operands.input(op.getLogits()),
                 target = operands.input(op.getTarget());
  int64_t targetBits =
      getElementTypeOrSelf(op.getTarget().getType()).getIntOrFloatBitWidth();
  return {logits.sizes[0],
          logits.sizes[1],
          logits.pointer,
          logits.ld,
          target.pointer,
          getFlag(builder, loc, targetBits),
          arith::ConstantIntOp::create(builder, loc, op.getIgnoreIndex(), 64),
          arith::ConstantOp::create(builder, loc, op.getLabelSmoothingAttr()),
          getFlag(builder, loc, static_cast<int64_t>(op.getReduction()))};
}

/// The trailing arguments of zest_cross_entropy_forward: the loss and the
/// log-sum-exps it writes.
void appendResultArgs(CrossEntropyOp op, KernelOperands &operands,
                      SmallVectorImpl<Value> &args) {
  args.push_back(operands.output(op.getLoss()).pointer);
  args.push_back(operands.output(op.getLogsumexp()).pointer);
}

/// The trailing arguments of zest_cross_entropy_backward: the loss's
/// gradient, the log-sum-exps and the logits' gradient with its row stride.
void appendResultArgs(CrossEntropyBackwardOp op, KernelOperands &operands,
                      SmallVectorImpl<Value> &args) {
  args.push_back(operands.input(op.getGradLoss()).pointer);
  args.push_back(operands.input(op.getLogsumexp()).pointer);
  RuntimeOperand grad = operands.output(op.getGradLogits());
  args.append({grad.pointer, grad.ld});
}

/// zest.cross_entropy (_backward) on memrefs -> zest_cross_entropy_forward
/// (_backward), _bf16 or _f16 for 16-bit logits.
template <typename OpTy>
struct LowerCrossEntropyOp : public OpRewritePattern<OpTy> {
  LowerCrossEntropyOp(MLIRContext *ctx, bool cuda)
      : OpRewritePattern<OpTy>(ctx), cuda(cuda) {}
  bool cuda;

  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    ProductKind kind = std::is_same_v<OpTy, CrossEntropyOp>
                           ? ProductKind::cross_entropy_forward
                           : ProductKind::cross_entropy_backward;
    return replaceWithKernelCall(
        op, rewriter, cuda, KernelOperands::Layout::UnitInnerStride, kind,
        getElementTypeOrSelf(op.getLogits().getType()),
        [&](KernelOperands &operands) {
          SmallVector<Value> args =
              getLossArgs(rewriter, op.getLoc(), operands, op);
          appendResultArgs(op, operands, args);
          return args;
        });
  }
};

} // namespace

void mlir::zest::populateCrossEntropyToRuntimePatterns(
    RewritePatternSet &patterns, bool cuda) {
  patterns.add<LowerCrossEntropyOp<CrossEntropyOp>,
               LowerCrossEntropyOp<CrossEntropyBackwardOp>>(
      patterns.getContext(), cuda);
}
