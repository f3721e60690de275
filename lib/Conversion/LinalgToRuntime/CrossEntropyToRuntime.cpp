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
struct LowerCrossEntropyOp : public KernelCallPattern<OpTy> {
  using KernelCallPattern<OpTy>::KernelCallPattern;

  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    ProductKind kind = std::is_same_v<OpTy, CrossEntropyOp>
                           ? ProductKind::cross_entropy_forward
                           : ProductKind::cross_entropy_backward;
    return replaceWithKernelCall(
        op, rewriter, this->cuda, KernelOperands::Layout::UnitInnerStride, kind,
        getElementTypeOrSelf(op.getLogits().getType()),
        [&](KernelOperands &operands) {
          SmallVector<Value> args =
              getLossArgs(rewriter, op.getLoc(), operands, op);
          appendResultArgs(op, operands, args);
          return args;
        });
  }
};

/// zest.linear_cross_entropy on memrefs -> zest_linear_cross_entropy.
struct LowerLinearCrossEntropyOp
    : public KernelCallPattern<LinearCrossEntropyOp> {
  using KernelCallPattern::KernelCallPattern;

  LogicalResult matchAndRewrite(LinearCrossEntropyOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    return replaceWithKernelCall(
        op, rewriter, cuda, KernelOperands::Layout::UnitInnerStride,
        ProductKind::linear_cross_entropy,
        getElementTypeOrSelf(op.getInput().getType()),
        [&](KernelOperands &operands) {
          RuntimeOperand x = operands.input(op.getInput()),
                         w = operands.input(op.getWeight()),
                         target = operands.input(op.getTarget()),
                         gradLoss = operands.input(op.getGradLoss()),
                         logits = operands.output(op.getLogits()),
                         lse = operands.output(op.getLogsumexp()),
                         loss = operands.output(op.getLoss()),
                         dx = operands.output(op.getGradInput()),
                         dw = operands.output(op.getGradWeight());
          int64_t targetBits = getElementTypeOrSelf(op.getTarget().getType())
                                   .getIntOrFloatBitWidth();
          return SmallVector<Value>{
              x.sizes[0],
              logits.sizes[1],
              x.sizes[1],
              x.pointer,
              x.ld,
              w.pointer,
              w.ld,
              getFlag(rewriter, loc, op.getTransposeWeight()),
              target.pointer,
              getFlag(rewriter, loc, targetBits),
              arith::ConstantIntOp::create(rewriter, loc, op.getIgnoreIndex(),
                                           64),
              arith::ConstantOp::create(rewriter, loc,
                                        op.getLabelSmoothingAttr()),
              getFlag(rewriter, loc, static_cast<int64_t>(op.getReduction())),
              gradLoss.pointer,
              logits.sizes[0],
              logits.pointer,
              logits.ld,
              lse.pointer,
              loss.pointer,
              dx.pointer,
              dx.ld,
              dw.pointer,
              dw.ld,
              getFlag(rewriter, loc, op.getTransposeGradWeight())};
        });
  }
};

} // namespace

void mlir::zest::populateCrossEntropyToRuntimePatterns(
    RewritePatternSet &patterns, bool cuda) {
  patterns.add<LowerCrossEntropyOp<CrossEntropyOp>,
               LowerCrossEntropyOp<CrossEntropyBackwardOp>,
               LowerLinearCrossEntropyOp>(patterns.getContext(), cuda);
}
