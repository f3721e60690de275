//===- ReassociateReductions.cpp - Let LLVM vectorize float reductions ----===//
//
// A float sum lowered as written is a sequential chain of additions that
// LLVM may not reorder, so it stays scalar, and its rounding error grows
// with the length of the sum. Marking the combiner `reassoc` lets LLVM's
// loop vectorizer keep one partial sum per vector lane (and per unrolled
// copy) and add them at the end: a blocked order, vectorized and more
// accurate than the sequential one. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "zest/Dialect/Zest/Transforms/Passes.h"

namespace mlir::zest {
#define GEN_PASS_DEF_REASSOCIATEREDUCTIONSPASS
#include "zest/Dialect/Zest/Transforms/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;

/// Marks the combiner of `op`'s reduction into output `index`, when that
/// output is a float sum `out + x` (or `x + out`).
static void markSum(linalg::LinalgOp op, unsigned index) {
  Block *body = op.getBlock();
  auto yield = dyn_cast<linalg::YieldOp>(body->getTerminator());
  if (!yield)
    return;
  auto add = yield.getOperand(index).getDefiningOp<arith::AddFOp>();
  if (!add)
    return;
  BlockArgument out = op.getMatchingBlockArgument(op.getDpsInitOperand(index));
  if (add.getLhs() != out && add.getRhs() != out)
    return;
  add.setFastmath(add.getFastmath() | arith::FastMathFlags::reassoc);
}

namespace {
struct ReassociateReductionsPass
    : public zest::impl::ReassociateReductionsPassBase<
          ReassociateReductionsPass> {
  void runOnOperation() override {
    // linalg.generic, linalg.reduce, ...: any structured op with a body.
    getOperation().walk([](linalg::LinalgOp op) {
      if (!op.getBlock())
        return;
      if (op.getNumReductionLoops() == 0)
        return;
      for (unsigned i = 0, e = op.getNumDpsInits(); i < e; ++i)
        markSum(op, i);
    });
  }
};
} // namespace
