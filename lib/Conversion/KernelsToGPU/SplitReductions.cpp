//===- SplitReductions.cpp - Large reductions to a scalar, in two stages --===//
//
// For the device targets: a reduction of many elements to a scalar (the
// squared norm of a unit's gradient for clipping) would run on one block of
// a GPU. Split into per-chunk partial results and their combination, it
// runs on one block per chunk, then one block. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "zest/Conversion/Passes.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

namespace mlir::zest {
#define GEN_PASS_DEF_SPLITREDUCTIONSPASS
#include "zest/Conversion/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;

namespace {

/// Chunks of at least this many elements: a block's threads, one each.
constexpr int64_t kMinChunk = 256;
/// At most this many chunks (blocks), combined by one block.
constexpr int64_t kMaxChunks = 1024;

/// The number of chunks to split a reduction of `size` elements into: the
/// most that divide it evenly, none if no split helps.
int64_t getChunks(int64_t size) {
  for (int64_t chunks = std::min(kMaxChunks, size / kMinChunk); chunks > 1;
       --chunks)
    if (size % chunks == 0)
      return chunks;
  return 0;
}

/// Whether `op` reduces all its (one) dimension to a tensor scalar.
bool isScalarReduction(linalg::LinalgOp op) {
  return op.hasPureTensorSemantics() && op.getNumLoops() == 1 &&
         op.getNumReductionLoops() == 1 && op.getNumDpsInits() == 1 &&
         cast<ShapedType>(op.getDpsInitOperand(0)->get().getType()).getRank() ==
             0;
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

  void runOnOperation() override {
    SmallVector<linalg::LinalgOp> candidates;
    getOperation().walk([&](linalg::LinalgOp op) {
      if (!isScalarReduction(op))
        return;
      int64_t size = op.getStaticLoopRanges().front();
      if (!ShapedType::isDynamic(size) && size >= minElements)
        candidates.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (linalg::LinalgOp op : candidates) {
      int64_t chunks = getChunks(op.getStaticLoopRanges().front());
      if (!chunks)
        continue;
      rewriter.setInsertionPoint(op);
      // Chunks outermost ([chunks, size / chunks]): each partial result
      // reduces a contiguous run, which a block reads coalesced.
      auto control = [&](linalg::LinalgOp) {
        return linalg::SplitReductionOptions{chunks, 0,
                                             /*innerParallel=*/false};
      };
      // A combiner linalg cannot split (no neutral element) stays whole.
      FailureOr<linalg::SplitReductionResult> split =
          linalg::splitReduction(rewriter, op, control);
      if (succeeded(split))
        hoistPartialResults(*split);
    }
  }
};

} // namespace
