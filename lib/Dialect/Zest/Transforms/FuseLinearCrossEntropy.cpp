//===- FuseLinearCrossEntropy.cpp - The LM head fused into its loss -------===//
//
// The head's logits are the largest tensor of a language model's step
// (`[tokens, vocabulary]`: 4.2 GB in bf16 for Llama-3-8B at 2 x 8192
// tokens), and nothing needs them whole: each row's loss and gradient
// depend on that row alone. Fusing the head's product, the loss, its
// backward and the head's two gradient products into one op that walks the
// rows in chunks keeps one chunk of logits alive instead (Liger-Kernel's
// fused linear cross-entropy, Wijmans et al.'s cut cross-entropy).
//
//===----------------------------------------------------------------------===//

#include "zest/Dialect/Zest/IR/ZestOps.h"
#include "zest/Dialect/Zest/Transforms/Contraction.h"
#include "zest/Dialect/Zest/Transforms/ElementwiseFusion.h"
#include "zest/Dialect/Zest/Transforms/LinearMatching.h"
#include "zest/Dialect/Zest/Transforms/Passes.h"
#include "zest/Dialect/Zest/Transforms/Transforms.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::zest {
#define GEN_PASS_DEF_FUSELINEARCROSSENTROPYPASS
#include "zest/Dialect/Zest/Transforms/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;
using namespace mlir::zest;

namespace {

/// The head's forward product `logits = x * op(W)`.
struct HeadProduct {
  Operation *op;
  Value input, weight;
  bool transposeWeight;
};

/// The product defining `logits` if it is a plain `x * op(W)` from zeros,
/// in linalg or as a `zest.linear` without bias or activation.
std::optional<HeadProduct> matchHeadProduct(Value logits) {
  if (auto linear = logits.getDefiningOp<LinearOp>()) {
    if (linear.getActivation() != Activation::None || linear.getBias() ||
        linear.getPreactivation())
      return std::nullopt;
    return HeadProduct{linear, linear.getInput(), linear.getWeight(),
                       linear.getTransposeWeight()};
  }
  auto product = logits.getDefiningOp<linalg::LinalgOp>();
  if (!product || !product.hasPureTensorSemantics() ||
      product->getNumResults() != 1 || !isZeroFill(product.getDpsInits()[0]))
    return std::nullopt;
  std::optional<GemmLayout> layout = getMatrixProductLayout(product);
  if (!layout || layout->transA)
    return std::nullopt;
  return HeadProduct{product, product.getDpsInputs()[0],
                     product.getDpsInputs()[1], layout->transB};
}

/// The head's gradients computed from the logits' gradient `g`: the ops
/// computing them, the values they yield and where they were written.
struct HeadGradients {
  SmallVector<Operation *, 2> ops;
  Value gradInput, gradWeight;
  Value gradInputInit, gradWeightInit;
  bool transposeGradWeight = false;
  /// `gradInput` is the 16-bit rounding of the fused op's f32 gradient.
  bool roundGradInput = false;
};

/// True if `value`'s elements are f32: what the fused op's gradients are.
bool isF32(Value value) { return getElementTypeOrSelf(value).isF32(); }

/// Records a `zest.linear_backward` of the head that reads `g` (f32: the
/// fused op's gradients are f32).
LogicalResult addLinearBackward(LinearBackwardOp backward, Value g,
                                const HeadProduct &head, HeadGradients &grads) {
  if (backward.getGradOutput() != g || !isF32(backward->getResult(0)) ||
      backward.getActivation() != Activation::None || backward.getGradBias() ||
      (backward.getWeight() &&
       (backward.getWeight() != head.weight ||
        backward.getTransposeWeight() != head.transposeWeight)) ||
      (backward.getInput() && backward.getInput() != head.input) ||
      grads.gradInput || grads.gradWeight)
    return failure();
  unsigned result = 0;
  if (backward.getGradInput()) {
    grads.gradInput = backward->getResult(result++);
    grads.gradInputInit = backward.getGradInput();
  }
  if (backward.getGradWeight()) {
    grads.gradWeight = backward->getResult(result);
    grads.gradWeightInit = backward.getGradWeight();
    grads.transposeGradWeight = backward.getTransposeGradWeight();
  }
  grads.ops.push_back(backward);
  return success();
}

/// Records a linalg product from zeros that reads `g` (operand `index`) as
/// one of the head's gradients: `g * op(W)^T`, `g^T * x` or `x^T * g`.
LogicalResult addProduct(linalg::LinalgOp product, unsigned index,
                         const HeadProduct &head, HeadGradients &grads) {
  std::optional<GemmLayout> layout = getMatrixProductLayout(product);
  std::optional<LinearGradient> gradient =
      layout ? getLinearGradient(*layout, index) : std::nullopt;
  if (!gradient || !product.hasPureTensorSemantics() ||
      product->getNumResults() != 1 || !isF32(product->getResult(0)) ||
      !isZeroFill(product.getDpsInits()[0]))
    return failure();
  Value other = product.getDpsInputs()[1 - index];
  Value init = getZeroFillDestination(product.getDpsInits()[0]);
  if (gradient->ofInput && other == head.weight &&
      gradient->transposed == head.transposeWeight && !grads.gradInput) {
    grads.gradInput = product->getResult(0);
    grads.gradInputInit = init;
  } else if (!gradient->ofInput && other == head.input && !grads.gradWeight) {
    grads.gradWeight = product->getResult(0);
    grads.gradWeightInit = init;
    grads.transposeGradWeight = gradient->transposed;
  } else {
    return failure();
  }
  grads.ops.push_back(product);
  return success();
}

/// Records autocast's rounded input gradient `round(g * op(W)^T)`, which
/// zest-fuse-linear made a 16-bit `zest.linear` of `g`: the fused op's f32
/// gradient, rounded, has the same values.
LogicalResult addRoundedLinear(LinearOp linear, Value g,
                               const HeadProduct &head, HeadGradients &grads) {
  if (linear.getInput() != g || linear.getWeight() != head.weight ||
      linear.getTransposeWeight() == head.transposeWeight ||
      linear.getActivation() != Activation::None || linear.getBias() ||
      linear.getPreactivation() || isF32(linear->getResult(0)) ||
      grads.gradInput)
    return failure();
  grads.gradInput = linear->getResult(0);
  grads.roundGradInput = true;
  grads.ops.push_back(linear);
  return success();
}

/// Sorts every reader of `g` into the head's gradients; fails if one is
/// anything else.
FailureOr<HeadGradients> matchHeadGradients(Value g, const HeadProduct &head) {
  HeadGradients grads;
  for (OpOperand &use : g.getUses()) {
    Operation *user = use.getOwner();
    LogicalResult added = failure();
    if (auto backward = dyn_cast<LinearBackwardOp>(user))
      added = addLinearBackward(backward, g, head, grads);
    else if (auto linear = dyn_cast<LinearOp>(user))
      added = addRoundedLinear(linear, g, head, grads);
    else if (auto product = dyn_cast<linalg::LinalgOp>(user))
      added = addProduct(product, use.getOperandNumber(), head, grads);
    if (failed(added))
      return failure();
  }
  if (grads.ops.empty())
    return failure();
  return grads;
}

/// `value` where `anchor` runs: itself, or a clone of the constant that
/// defines it; null if neither.
Value getAvailable(Value value, Operation *anchor, PatternRewriter &rewriter) {
  if (isAvailableAt(value, anchor))
    return value;
  Operation *def = value.getDefiningOp();
  if (!def || !def->hasTrait<OpTrait::ConstantLike>())
    return nullptr;
  return rewriter.clone(*def)->getResult(0);
}

/// A destination where the fused op can write what an op after `anchor`
/// wrote into `init`: `init` (moved up to `anchor`) where that is possible,
/// else a fresh tensor of `result`'s type. An empty tensor defined later
/// moves up itself: what else writes into it (the sum of a tied weight's
/// two gradients) then still shares its buffer, as before the fusion.
Value getDestination(Value init, Value result, Operation *anchor,
                     PatternRewriter &rewriter) {
  auto empty = init ? init.getDefiningOp<tensor::EmptyOp>() : nullptr;
  if (empty && empty->getBlock() == anchor->getBlock() &&
      empty.getDynamicSizes().empty()) {
    if (anchor->isBeforeInBlock(empty))
      rewriter.moveOpBefore(empty, anchor);
    return init;
  }
  if (init && succeeded(getDestinationAt(init, anchor, /*rewriter=*/nullptr)))
    return *getDestinationAt(init, anchor, &rewriter);
  return createEmpty(rewriter, anchor->getLoc(), result.getType());
}

UnitAttr unitIf(PatternRewriter &rewriter, bool set) {
  return set ? rewriter.getUnitAttr() : UnitAttr();
}

/// The loss `ce`, its backward and the head around them, as one
/// zest.linear_cross_entropy where `ce` was.
struct FuseHeadIntoLoss : public OpRewritePattern<CrossEntropyOp> {
  FuseHeadIntoLoss(MLIRContext *ctx, int64_t chunkRows)
      : OpRewritePattern(ctx), chunkRows(chunkRows) {}
  int64_t chunkRows;

  LogicalResult matchAndRewrite(CrossEntropyOp ce,
                                PatternRewriter &rewriter) const override {
    Value logits = ce.getLogits();
    if (ce.getReduction() == LossReduction::None ||
        !ce.hasPureTensorSemantics() || !isLinearMatrix(logits))
      return rewriter.notifyMatchFailure(ce, "not a loss with a mean or sum");
    std::optional<HeadProduct> head = matchHeadProduct(logits);
    if (!head || !isLinearMatrix(head->input) ||
        !isLinearMatrix(head->weight) ||
        !haveOneElementType({logits, head->input, head->weight}) ||
        !isAvailableAt(head->input, ce) || !isAvailableAt(head->weight, ce))
      return rewriter.notifyMatchFailure(ce, "logits of no plain head");
    CrossEntropyBackwardOp backward = getOnlyBackward(ce);
    if (!backward)
      return rewriter.notifyMatchFailure(
          ce, "the logits or log-sum-exps are read by more than its backward");
    FailureOr<HeadGradients> grads =
        matchHeadGradients(backward->getResult(0), *head);
    if (failed(grads))
      return rewriter.notifyMatchFailure(
          ce, "the logits' gradient is read by more than the head's backward");
    Block *block = ce->getBlock();
    if (head->op->getBlock() != block || backward->getBlock() != block ||
        llvm::any_of(grads->ops,
                     [&](Operation *op) { return op->getBlock() != block; }))
      return rewriter.notifyMatchFailure(ce, "spans blocks");

    rewriter.setInsertionPoint(ce);
    Value gradLoss = getAvailable(backward.getGradLoss(), ce, rewriter);
    if (!gradLoss)
      return rewriter.notifyMatchFailure(
          ce, "the loss's gradient is computed after the loss");
    replace(ce, backward, *head, *grads, gradLoss, rewriter);
    return success();
  }

private:
  /// The backward of `ce` if it is the only other reader of the logits and
  /// the only reader of the log-sum-exps, with the same loss.
  static CrossEntropyBackwardOp getOnlyBackward(CrossEntropyOp ce) {
    Value logits = ce.getLogits(), lse = ce->getResult(1);
    if (!lse.hasOneUse())
      return nullptr;
    auto backward = dyn_cast<CrossEntropyBackwardOp>(*lse.getUsers().begin());
    if (!backward || backward.getLogits() != logits ||
        backward.getTarget() != ce.getTarget() ||
        backward.getReduction() != ce.getReduction() ||
        backward.getIgnoreIndex() != ce.getIgnoreIndex() ||
        backward.getLabelSmoothing() != ce.getLabelSmoothing() ||
        backward.getGradLogits() == logits)
      return nullptr;
    for (Operation *user : logits.getUsers())
      if (user != ce && user != backward)
        return nullptr;
    return backward;
  }

  void replace(CrossEntropyOp ce, CrossEntropyBackwardOp backward,
               const HeadProduct &head, const HeadGradients &grads,
               Value gradLoss, PatternRewriter &rewriter) const {
    Location loc = ce.getLoc();
    auto logitsType = cast<RankedTensorType>(ce.getLogits().getType());
    int64_t rows = logitsType.getDimSize(0), classes = logitsType.getDimSize(1),
            k = cast<RankedTensorType>(head.input.getType()).getDimSize(1);
    int64_t chunk =
        std::max<int64_t>(1, std::min(rows, chunkRows > 0 ? chunkRows : k));
    Type f32 = rewriter.getF32Type();
    Value loss = getDestination(ce.getLoss(), ce->getResult(0), ce, rewriter);
    Value workspace = tensor::EmptyOp::create(rewriter, loc,
                                              ArrayRef<int64_t>{chunk, classes},
                                              logitsType.getElementType());
    Value lse =
        tensor::EmptyOp::create(rewriter, loc, ArrayRef<int64_t>{rows}, f32);
    Value gradInput, gradWeight;
    SmallVector<Type> results = {loss.getType(), workspace.getType(),
                                 lse.getType()};
    if (grads.gradInput) {
      gradInput =
          grads.roundGradInput
              ? createEmpty(rewriter, loc,
                            cast<RankedTensorType>(grads.gradInput.getType())
                                .clone(f32))
              : getDestination(grads.gradInputInit, grads.gradInput, ce,
                               rewriter);
      results.push_back(gradInput.getType());
    }
    if (grads.gradWeight) {
      gradWeight =
          getDestination(grads.gradWeightInit, grads.gradWeight, ce, rewriter);
      results.push_back(grads.gradWeight.getType());
    }
    auto fused = LinearCrossEntropyOp::create(
        rewriter, loc, results, ce.getReductionAttr(), ce.getIgnoreIndexAttr(),
        ce.getLabelSmoothingAttr(), unitIf(rewriter, head.transposeWeight),
        unitIf(rewriter, grads.transposeGradWeight), gradLoss, head.input,
        head.weight, ce.getTarget(), loss, workspace, lse, gradInput,
        gradWeight);
    unsigned next = 3;
    if (grads.gradInput) {
      Value gradInput = fused->getResult(next++);
      if (grads.roundGradInput)
        gradInput = convertElements(rewriter, loc, gradInput,
                                    getElementTypeOrSelf(grads.gradInput));
      rewriter.replaceAllUsesWith(grads.gradInput, gradInput);
    }
    if (grads.gradWeight)
      rewriter.replaceAllUsesWith(grads.gradWeight, fused->getResult(next));
    rewriter.replaceAllUsesWith(ce->getResult(0), fused->getResult(0));
    for (Operation *op : grads.ops)
      rewriter.eraseOp(op);
    rewriter.eraseOp(backward);
    rewriter.eraseOp(ce);
    rewriter.eraseOp(head.op);
  }
};

struct FuseLinearCrossEntropyPass
    : public zest::impl::FuseLinearCrossEntropyPassBase<
          FuseLinearCrossEntropyPass> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseHeadIntoLoss>(&getContext(), chunkRows);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns),
                                     getStraightLineRewriteConfig())))
      signalPassFailure();
  }
};

} // namespace
