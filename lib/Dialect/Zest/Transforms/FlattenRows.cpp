//===- FlattenRows.cpp - Linear layers over N-D activations as matrices ---===//
//
// A linear layer applied to a [B, S, D] activation is a matrix product over
// B*S rows. Importers spell it in several ways: a 2-D product between
// reshapes with the bias add and activation left on the 3-D view (PyTorch's
// own decomposition), a batch matmul with the weight broadcast over B
// (torch-mlir's matmul; zest-fold-transposes has the product read the
// weight in place by then), or a generic over loops (b, s, n, k). These
// patterns bring all of them to 2-D so that the linear patterns see one
// form: row loops that every operand reads contiguously are merged
// (collapse_shape / expand_shape are views after bufferization).
//
//===----------------------------------------------------------------------===//

#include "zest/Dialect/Zest/Transforms/Contraction.h"
#include "zest/Dialect/Zest/Transforms/Transforms.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::zest;

namespace {

/// True if `op` is a pure tensor op on static tensors of an element type
/// the fused linear kernels take (f32, bf16) whose indexing maps are
/// projected permutations. (Flattening is a reshape whatever the type; it
/// pays only where a fused layer follows.)
bool isStaticLinearTensorOp(linalg::LinalgOp op) {
  if (!op.hasPureTensorSemantics())
    return false;
  for (Value operand : op->getOperands()) {
    auto type = dyn_cast<RankedTensorType>(operand.getType());
    if (!type || !type.hasStaticShape() ||
        !isa<Float32Type, BFloat16Type>(type.getElementType()))
      return false;
  }
  return llvm::all_of(op.getIndexingMapsArray(), [](AffineMap map) {
    return map.isProjectedPermutation();
  });
}

/// True if `op` already meets 2-D code: an input is a reshaped value or a
/// result is reshaped. Only such ops (and batched products) are flattened,
/// so the rest of the program keeps its shapes.
bool touchesReshape(linalg::LinalgOp op) {
  for (Value input : op.getDpsInputs())
    if (input.getDefiningOp<tensor::ExpandShapeOp>())
      return true;
  for (Value result : op->getResults())
    for (Operation *user : result.getUsers())
      if (isa<tensor::CollapseShapeOp>(user))
        return true;
  return false;
}

/// Merges runs of adjacent loops of the same kind that every operand reads
/// contiguously (the rows of a [B, S, D] activation), keeping the loop of
/// the output's last dimension apart so an elementwise op stays a matrix.
/// Reductions (`linalg.reduce`) are generalized first: a bias gradient is
/// a sum over b and s.
struct FlattenRows : public OpInterfaceRewritePattern<linalg::LinalgOp> {
  using OpInterfaceRewritePattern::OpInterfaceRewritePattern;

  LogicalResult matchAndRewrite(linalg::LinalgOp linalgOp,
                                PatternRewriter &rewriter) const override {
    if (!isa<linalg::GenericOp, linalg::ReduceOp>(linalgOp))
      return rewriter.notifyMatchFailure(linalgOp, "not a generic or reduce");
    unsigned loops = linalgOp.getNumLoops();
    std::optional<unsigned> batchDims = getGemmBatchDims(linalgOp);
    bool product =
        batchDims && *batchDims == 1 && isa<linalg::GenericOp>(linalgOp);
    if (loops < 3 || linalgOp.getNumDpsInits() != 1 ||
        !isStaticLinearTensorOp(linalgOp) ||
        !(product || touchesReshape(linalgOp)))
      return rewriter.notifyMatchFailure(linalgOp,
                                         "not an N-D op next to 2-D code");
    AffineMap outputMap =
        linalgOp.getMatchingIndexingMap(linalgOp.getDpsInitOperand(0));
    std::optional<unsigned> columnLoop;
    if (outputMap.getNumResults() > 0)
      columnLoop = outputMap.getDimPosition(outputMap.getNumResults() - 1);
    SmallVector<AffineMap> maps = linalgOp.getIndexingMapsArray();
    SmallVector<utils::IteratorType> iterators =
        linalgOp.getIteratorTypesArray();
    SmallVector<ReassociationIndices> groups;
    for (unsigned first = 0; first < loops;) {
      ReassociationIndices group = {first};
      for (unsigned next = first + 1;
           next < loops && next != columnLoop && first != columnLoop &&
           iterators[next] == iterators[first];
           ++next) {
        ReassociationIndices longer = group;
        longer.push_back(next);
        if (!linalg::areDimSequencesPreserved(maps, longer))
          break;
        group = std::move(longer);
      }
      first += group.size();
      if (group.size() > 1)
        groups.push_back(std::move(group));
    }
    if (groups.empty())
      return rewriter.notifyMatchFailure(linalgOp, "no rows to merge");
    auto op = dyn_cast<linalg::GenericOp>(linalgOp.getOperation());
    if (!op) {
      FailureOr<linalg::GenericOp> generic =
          linalg::generalizeNamedOp(rewriter, linalgOp);
      if (failed(generic))
        return rewriter.notifyMatchFailure(linalgOp, "cannot generalize");
      op = *generic;
    }
    // The generic form is already a rewrite: collapsing cannot fail for
    // the groups checked above, and if it did the op would stay valid.
    FailureOr<linalg::CollapseResult> collapsed =
        linalg::collapseOpIterationDims(op, groups, rewriter);
    if (succeeded(collapsed))
      rewriter.replaceOp(op, collapsed->results);
    else if (op == linalgOp.getOperation())
      return rewriter.notifyMatchFailure(op, "could not collapse loops");
    return success();
  }
};

/// collapse_shape(broadcast(v)) -> broadcast(v') when every merged group
/// is made only of broadcast dimensions or only of `v`'s: a bias broadcast
/// over [B, S, N] becomes one over [B*S, N].
struct CollapseBroadcast : public OpRewritePattern<tensor::CollapseShapeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(tensor::CollapseShapeOp collapse,
                                PatternRewriter &rewriter) const override {
    auto broadcast = collapse.getSrc().getDefiningOp<linalg::BroadcastOp>();
    if (!broadcast || !broadcast->hasOneUse() ||
        !broadcast.hasPureTensorSemantics())
      return rewriter.notifyMatchFailure(collapse, "not a broadcast");
    ArrayRef<int64_t> dims = broadcast.getDimensions();
    SmallVector<int64_t> newDims;
    // The input's dimensions merge as the output's non-broadcast ones do.
    SmallVector<ReassociationIndices> inputGroups;
    int64_t inputDim = 0;
    for (auto [index, group] :
         llvm::enumerate(collapse.getReassociationIndices())) {
      unsigned broadcastDims = llvm::count_if(
          group, [&](int64_t dim) { return llvm::is_contained(dims, dim); });
      if (broadcastDims == group.size()) {
        newDims.push_back(index);
        continue;
      }
      if (broadcastDims != 0)
        return rewriter.notifyMatchFailure(collapse, "mixed group");
      ReassociationIndices inputGroup;
      for (size_t i = 0; i < group.size(); ++i)
        inputGroup.push_back(inputDim++);
      inputGroups.push_back(std::move(inputGroup));
    }
    Location loc = collapse.getLoc();
    Value input = broadcast.getInput();
    if (llvm::any_of(inputGroups, [](auto &g) { return g.size() > 1; }))
      input =
          tensor::CollapseShapeOp::create(rewriter, loc, input, inputGroups);
    Value init = tensor::CollapseShapeOp::create(
        rewriter, loc, broadcast.getInit(), collapse.getReassociationIndices());
    rewriter.replaceOpWithNewOp<linalg::BroadcastOp>(collapse, input, init,
                                                     newDims);
    return success();
  }
};

} // namespace

void mlir::zest::populateFlattenRowsPatterns(RewritePatternSet &patterns) {
  MLIRContext *ctx = patterns.getContext();
  patterns.add<FlattenRows, CollapseBroadcast>(ctx);
  populateReadOperandsInPlacePatterns(patterns);
  // collapse(expand(x)) -> x, and reshapes of fills and empties, so the
  // flattened ops meet the 2-D values they came from.
  tensor::CollapseShapeOp::getCanonicalizationPatterns(patterns, ctx);
  tensor::ExpandShapeOp::getCanonicalizationPatterns(patterns, ctx);
  tensor::EmptyOp::getCanonicalizationPatterns(patterns, ctx);
  tensor::populateFoldTensorEmptyPatterns(patterns);
  linalg::FillOp::getCanonicalizationPatterns(patterns, ctx);
}
