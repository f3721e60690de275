//===- SplitReductions.cpp - Large reductions to a scalar, in two stages --===//
//
// For the device targets: a reduction of many elements to a scalar (a loss,
// the squared norm of a unit's gradient for clipping) would run on one
// block of a GPU, and a column sum (LayerNorm's and a bias's gradients) on
// one thread per column. Split into per-chunk partial results and their
// combination, each runs on many blocks, then a few. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "zest/Conversion/Passes.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

namespace mlir::zest {
#define GEN_PASS_DEF_SPLITREDUCTIONSPASS
#include "zest/Conversion/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;

namespace {

/// Scalar reductions: chunks of at least this many elements (a block's
/// threads, one each) ...
constexpr int64_t kMinChunk = 256;
/// ... and at most this many chunks (blocks), combined by one block.
constexpr int64_t kMaxChunks = 1024;
/// Strided reductions (a column sum): about this many threads, enough to
/// fill a GPU, each reducing at least kMinRows elements.
constexpr int64_t kTargetThreads = 1 << 17;
constexpr int64_t kMinRows = 16;

/// The largest divisor of `size` between 2 and `most`, or 0 if none.
int64_t getLargestDivisor(int64_t size, int64_t most) {
  for (int64_t divisor = std::min(most, size); divisor > 1; --divisor)
    if (size % divisor == 0)
      return divisor;
  return 0;
}

/// Whether `op` combines all its iterations into a tensor scalar.
bool isScalarReduction(linalg::LinalgOp op) {
  return op.hasPureTensorSemantics() && op.getNumLoops() >= 1 &&
         op.getNumReductionLoops() == op.getNumLoops() &&
         op.getNumDpsInits() == 1 &&
         cast<ShapedType>(op.getDpsInitOperand(0)->get().getType()).getRank() ==
             0;
}

/// Whether `op` reduces dimensions of which its first input holds none
/// innermost (a column sum, over the rows of a matrix or the batch and
/// sequence of a [B, S, D] array): zest-map-kernels-to-gpu gives such a
/// reduction one thread per result element, each reading every reduced
/// element.
bool isStridedReduction(linalg::LinalgOp op) {
  if (!op.hasPureTensorSemantics() || op.getNumDpsInits() != 1 ||
      op.getNumReductionLoops() == 0 || op.getNumParallelLoops() == 0 ||
      op.getNumDpsInputs() == 0)
    return false;
  AffineMap first = op.getMatchingIndexingMap(op.getDpsInputOperand(0));
  auto innermost = first.getNumResults()
                       ? dyn_cast<AffineDimExpr>(first.getResults().back())
                       : nullptr;
  return innermost && linalg::isParallelIterator(
                          op.getIteratorTypesArray()[innermost.getPosition()]);
}

/// The number of chunks to split `op`'s reduction into; 0 where none helps,
/// a size is dynamic or it has fewer than `minElements` iterations.
int64_t getChunks(linalg::LinalgOp op, int64_t minElements) {
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  if (llvm::any_of(ranges, ShapedType::isDynamic))
    return 0;
  int64_t reduced = 1, outputs = 1;
  for (auto [range, iterator] : llvm::zip(ranges, op.getIteratorTypesArray()))
    (linalg::isReductionIterator(iterator) ? reduced : outputs) *= range;
  if (reduced * outputs < minElements)
    return 0;
  if (outputs == 1)
    return getLargestDivisor(reduced,
                             std::min(kMaxChunks, reduced / kMinChunk));
  if (outputs * 2 > kTargetThreads)
    return 0;
  return getLargestDivisor(
      reduced, std::min(kTargetThreads / outputs, reduced / kMinRows));
}

/// `op` as a linalg.generic (named ops generalized in place); the
/// rewriter inserts before it.
FailureOr<linalg::GenericOp> asGeneric(RewriterBase &rewriter,
                                       linalg::LinalgOp op) {
  rewriter.setInsertionPoint(op);
  if (auto generic = dyn_cast<linalg::GenericOp>(op.getOperation()))
    return generic;
  return linalg::generalizeNamedOp(rewriter, op);
}

/// The loops `op` reduces over, if they are consecutive; else none.
ReassociationIndices getReductionLoops(linalg::LinalgOp op) {
  ReassociationIndices loops;
  for (auto [index, iterator] : llvm::enumerate(op.getIteratorTypesArray()))
    if (linalg::isReductionIterator(iterator)) {
      if (!loops.empty() && loops.back() != int64_t(index) - 1)
        return {};
      loops.push_back(index);
    }
  return loops;
}

/// `op` with its loops `group` (consecutive) collapsed into one, where
/// every operand holds those dimensions contiguously in order (a sum of
/// squares of a matrix; a column sum over a [B, S, D] array's B and S);
/// otherwise `op`.
linalg::LinalgOp collapseLoops(RewriterBase &rewriter, linalg::LinalgOp op,
                               const ReassociationIndices &group) {
  if (group.size() < 2 ||
      !linalg::areDimSequencesPreserved(op.getIndexingMapsArray(), {group}))
    return op;
  FailureOr<linalg::GenericOp> generic = asGeneric(rewriter, op);
  if (failed(generic))
    return op;
  op = *generic;
  FailureOr<linalg::CollapseResult> collapsed =
      linalg::collapseOpIterationDims(op, {group}, rewriter);
  if (failed(collapsed))
    return op;
  rewriter.replaceOp(op, collapsed->results);
  return collapsed->collapsedOp;
}

/// The reassociation collapsing away the dimensions of a result that its
/// indexing `map` pins to 0 (a keepdim sum's [1, N]), and the map without
/// them; none if no dimension is pinned.
std::optional<std::pair<SmallVector<ReassociationIndices>, AffineMap>>
getPinnedDimsCollapse(AffineMap map, ArrayRef<int64_t> shape) {
  SmallVector<ReassociationIndices> groups;
  SmallVector<AffineExpr> kept;
  ReassociationIndices group;
  for (auto [i, expr] : llvm::enumerate(map.getResults())) {
    group.push_back(i);
    auto constant = dyn_cast<AffineConstantExpr>(expr);
    if (constant && constant.getValue() == 0 && shape[i] == 1)
      continue;
    kept.push_back(expr);
    groups.push_back(std::move(group));
    group.clear();
  }
  if (kept.size() == map.getNumResults())
    return std::nullopt;
  if (!groups.empty())
    llvm::append_range(groups.back(), group);
  return std::make_pair(
      groups, AffineMap::get(map.getNumDims(), 0, kept, map.getContext()));
}

/// `op`, a reduction with one result, writing a result without the unit
/// dimensions its indexing map pins to 0, expanded back afterwards:
/// linalg::splitReduction needs results indexed by a projected permutation.
/// Otherwise `op`.
linalg::LinalgOp dropPinnedResultDims(RewriterBase &rewriter,
                                      linalg::LinalgOp op) {
  if (!op.hasPureTensorSemantics() || op.getNumDpsInits() != 1 ||
      op.getNumReductionLoops() == 0)
    return op;
  OpOperand *init = op.getDpsInitOperand(0);
  auto type = cast<RankedTensorType>(init->get().getType());
  auto collapse =
      getPinnedDimsCollapse(op.getMatchingIndexingMap(init), type.getShape());
  if (!collapse || !collapse->second.isProjectedPermutation())
    return op;
  FailureOr<linalg::GenericOp> generic = asGeneric(rewriter, op);
  if (failed(generic))
    return op;
  Location loc = generic->getLoc();
  Value collapsed = tensor::CollapseShapeOp::create(
      rewriter, loc, generic->getDpsInitOperand(0)->get(), collapse->first);
  SmallVector<AffineMap> maps = generic->getIndexingMapsArray();
  maps.back() = collapse->second;
  auto reduced = linalg::GenericOp::create(
      rewriter, loc, collapsed.getType(), generic->getInputs(), collapsed, maps,
      generic->getIteratorTypesArray());
  rewriter.inlineRegionBefore(generic->getRegion(), reduced.getRegion(),
                              reduced.getRegion().begin());
  rewriter.replaceOpWithNewOp<tensor::ExpandShapeOp>(
      *generic, type, reduced.getResult(0), collapse->first);
  return reduced;
}

/// Moves the partial results' initialization out of any branch around the
/// reduction (the gradient norm under the accumulate-or-apply branch): an
/// allocation inside would keep the branch, whose condition is read from
/// device memory, on the host.
void hoistPartialResults(linalg::SplitReductionResult &split) {
  Operation *anchor = split.splitLinalgOp;
  while (!isa<FunctionOpInterface>(anchor->getParentOp()))
    anchor = anchor->getParentOp();
  if (anchor == split.splitLinalgOp.getOperation())
    return;
  if (Operation *neutral = split.fillOp.getInputs()[0].getDefiningOp())
    neutral->moveBefore(anchor);
  split.initOrAlloc->moveBefore(anchor);
  split.fillOp->moveBefore(anchor);
}

struct SplitReductionsPass
    : public zest::impl::SplitReductionsPassBase<SplitReductionsPass> {
  using Base::Base;

  /// The chunks to split `op` into, 0 if it is not a reduction to split.
  int64_t getSplitChunks(linalg::LinalgOp op) {
    if (!isScalarReduction(op) && !isStridedReduction(op))
      return 0;
    return getChunks(op, minElements);
  }

  /// Splits `op` into `chunks` partial results and their combination, and
  /// that again while it is large enough (a column sum's 128 partial rows).
  void split(RewriterBase &rewriter, linalg::LinalgOp op, int64_t chunks) {
    for (; chunks; chunks = getSplitChunks(op)) {
      // Reductions over several dimensions as reductions over one.
      op = collapseLoops(rewriter, op, getReductionLoops(op));
      // One whose operands could not be collapsed stays.
      if (op.getNumReductionLoops() != 1)
        return;
      rewriter.setInsertionPoint(op);
      // Chunks outermost ([chunks, size / chunks] for a scalar,
      // [chunks, outputs...] for a column sum): each partial result reduces
      // a contiguous run, which a block (or neighbouring threads) reads
      // coalesced.
      auto control = [chunks](linalg::LinalgOp) {
        return linalg::SplitReductionOptions{chunks, 0,
                                             /*innerParallel=*/false};
      };
      // A combiner linalg cannot split (no neutral element) stays whole.
      FailureOr<linalg::SplitReductionResult> result =
          linalg::splitReduction(rewriter, op, control);
      if (failed(result))
        return;
      hoistPartialResults(*result);
      op = result->resultCombiningLinalgOp;
    }
  }

  void runOnOperation() override {
    SmallVector<std::pair<linalg::LinalgOp, int64_t>> candidates;
    IRRewriter rewriter(&getContext());
    SmallVector<linalg::LinalgOp> ops;
    getOperation().walk([&](linalg::LinalgOp op) { ops.push_back(op); });
    for (linalg::LinalgOp op : ops)
      if (getSplitChunks(op)) {
        linalg::LinalgOp reduced = dropPinnedResultDims(rewriter, op);
        candidates.push_back({reduced, getSplitChunks(reduced)});
      }
    for (auto [op, chunks] : candidates)
      split(rewriter, op, chunks);
  }
};

} // namespace
