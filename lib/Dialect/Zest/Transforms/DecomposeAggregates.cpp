//===- DecomposeAggregates.cpp - Decompose aggregate linalg ops -----------===//

#include "zest/Dialect/Zest/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"

namespace mlir::zest {
#define GEN_PASS_DEF_DECOMPOSEAGGREGATESPASS
#include "zest/Dialect/Zest/Transforms/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;

namespace {
struct DecomposeAggregatesPass
    : public zest::impl::DecomposeAggregatesPassBase<DecomposeAggregatesPass> {
  void runOnOperation() override {
    SmallVector<linalg::AggregatedOpInterface> aggregates;
    getOperation().walk(
        [&](linalg::AggregatedOpInterface op) { aggregates.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (linalg::AggregatedOpInterface op : aggregates) {
      rewriter.setInsertionPoint(op);
      FailureOr<SmallVector<Value>> replacements =
          op.decomposeOperation(rewriter);
      if (failed(replacements)) {
        op->emitOpError() << "cannot be decomposed into structured ops";
        return signalPassFailure();
      }
      rewriter.replaceOp(op, *replacements);
    }
  }
};
} // namespace
