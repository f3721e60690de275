//===- FuseElementwise.cpp - Elementwise producers into consumers ---------===//
//
// Each linalg op becomes its own loop nest and full pass over memory; a chain
// of elementwise ops writes and re-reads a temporary per link. Upstream's
// elementwise fusion does the rewrite; this pass decides where it pays off
// for Zest: never into a matrix product (BLAS needs the plain product), never
// duplicating a producer's work.
//
//===----------------------------------------------------------------------===//

#include "zest/Dialect/Zest/Transforms/Contraction.h"
#include "zest/Dialect/Zest/Transforms/ElementwiseFusion.h"
#include "zest/Dialect/Zest/Transforms/Passes.h"
#include "zest/Dialect/Zest/Transforms/Transforms.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::zest {
#define GEN_PASS_DEF_FUSEELEMENTWISEPASS
#include "zest/Dialect/Zest/Transforms/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;
using namespace mlir::zest;

namespace {

/// True if fusing the producer of `operand` into its consumer saves a pass
/// without costing work (ElementwiseFusion.h).
bool isProfitable(OpOperand &operand) {
  auto consumer = cast<linalg::LinalgOp>(operand.getOwner());
  auto producer = operand.get().getDefiningOp<linalg::GenericOp>();
  if (!producer || getGemmBatchDims(consumer) ||
      producer.getNumParallelLoops() != producer.getNumLoops())
    return false;
  for (Value result : producer->getResults())
    for (OpOperand &use : result.getUses())
      if (&use != &operand)
        return false;
  // A broadcasting read would recompute each element many times; a cast
  // (a 16-bit weight widened for a LayerNorm) is worth recomputing rather
  // than a pass over memory and, on a GPU, a launch of its own.
  return consumer.getMatchingIndexingMap(&operand).isPermutation() ||
         getElementConversion(producer);
}

} // namespace

FailureOr<linalg::GenericOp>
mlir::zest::fuseElementwiseProducer(RewriterBase &rewriter,
                                    OpOperand &operand) {
  if (!isa<linalg::GenericOp>(operand.getOwner()) ||
      !linalg::areElementwiseOpsFusable(&operand) || !isProfitable(operand))
    return failure();
  Operation *consumer = operand.getOwner();
  Operation *producer = operand.get().getDefiningOp();
  FailureOr<linalg::ElementwiseOpFusionResult> fused =
      linalg::fuseElementwiseOps(rewriter, &operand);
  if (failed(fused))
    return failure();
  // Only the consumer read the producer: its results are replaced with the
  // consumer's, and the producer is dead.
  for (auto [original, replacement] : fused->replacements)
    if (original.getDefiningOp() != producer)
      rewriter.replaceAllUsesWith(original, replacement);
  rewriter.eraseOp(consumer);
  rewriter.eraseOp(producer);
  return cast<linalg::GenericOp>(fused->fusedOp);
}

bool mlir::zest::isPointwise(linalg::GenericOp generic) {
  return generic.getNumDpsInputs() == 1 && generic.getNumDpsInits() == 1 &&
         generic.isAllParallelLoops() &&
         llvm::all_of(generic.getIndexingMapsArray(),
                      [](AffineMap map) { return map.isIdentity(); });
}

Operation *mlir::zest::getElementConversion(Operation *op) {
  auto generic = dyn_cast_or_null<linalg::GenericOp>(op);
  if (!generic || !isPointwise(generic))
    return nullptr;
  Block &body = generic.getRegion().front();
  Operation &cast = body.front();
  bool converts = isa<arith::TruncFOp, arith::ExtFOp>(cast) &&
                  body.getOperations().size() == 2 &&
                  cast.getOperand(0) == body.getArgument(0) &&
                  body.getTerminator()->getOperand(0) == cast.getResult(0);
  return converts ? &cast : nullptr;
}

Value mlir::zest::convertElements(OpBuilder &builder, Location loc,
                                  Value tensor, Type elementType) {
  auto type = cast<RankedTensorType>(tensor.getType());
  auto resultType = type.clone(elementType);
  Value init =
      tensor::EmptyOp::create(builder, loc, resultType.getShape(), elementType);
  unsigned rank = type.getRank();
  AffineMap id = builder.getMultiDimIdentityMap(rank);
  bool widens = elementType.getIntOrFloatBitWidth() >
                type.getElementType().getIntOrFloatBitWidth();
  return linalg::GenericOp::create(
             builder, loc, resultType, tensor, init,
             SmallVector<AffineMap>{id, id},
             SmallVector<utils::IteratorType>(rank,
                                              utils::IteratorType::parallel),
             [&](OpBuilder &b, Location l, ValueRange args) {
               Value converted =
                   widens ? arith::ExtFOp::create(b, l, elementType, args[0])
                                .getResult()
                          : arith::TruncFOp::create(b, l, elementType, args[0])
                                .getResult();
               linalg::YieldOp::create(b, l, converted);
             })
      .getResult(0);
}

namespace {

struct FuseElementwiseProducer : public OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::GenericOp consumer,
                                PatternRewriter &rewriter) const override {
    for (OpOperand &operand : consumer->getOpOperands())
      if (succeeded(fuseElementwiseProducer(rewriter, operand)))
        return success();
    return rewriter.notifyMatchFailure(consumer, "no producer to fuse");
  }
};

/// A `linalg.reduce` fed by a fusable producer becomes a generic, which the
/// pattern above then fuses: a sum of squares reads its input once.
struct GeneralizeReduceWithProducer
    : public OpRewritePattern<linalg::ReduceOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::ReduceOp reduce,
                                PatternRewriter &rewriter) const override {
    if (!reduce.hasPureTensorSemantics() ||
        llvm::none_of(reduce.getDpsInputOperands(),
                      [](OpOperand *input) { return isProfitable(*input); }))
      return rewriter.notifyMatchFailure(reduce, "no producer to fuse");
    if (failed(linalg::generalizeNamedOp(
            rewriter, cast<linalg::LinalgOp>(reduce.getOperation()))))
      return rewriter.notifyMatchFailure(reduce, "cannot generalize");
    return success();
  }
};

struct FuseElementwisePass
    : public zest::impl::FuseElementwisePassBase<FuseElementwisePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseElementwiseProducer, GeneralizeReduceWithProducer>(
        &getContext());
    // Results nothing reads are not computed: the indices of torch's
    // max.dim in every softmax (a compare and select per element, and an
    // index buffer) when only the maximum is used.
    linalg::populateEraseUnusedOperandsAndResultsPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns),
                                     getStraightLineRewriteConfig())))
      signalPassFailure();
  }
};

} // namespace
