//===- ApproximateMath.cpp - Polynomial approximations of math functions --===//
//
// libm calls are scalar and opaque: a tanh-GELU loop that calls tanhf per
// element cannot be vectorized. Upstream MLIR's polynomial approximations
// (mlir/Dialect/Math/Transforms) are plain arithmetic that LLVM vectorizes;
// this pass applies them to the functions named in `functions`.
//
//===----------------------------------------------------------------------===//

#include "zest/Dialect/Zest/Transforms/Passes.h"

#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::zest {
#define GEN_PASS_DEF_APPROXIMATEMATHPASS
#include "zest/Dialect/Zest/Transforms/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;

namespace {
struct ApproximateMathPass
    : public zest::impl::ApproximateMathPassBase<ApproximateMathPass> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    static constexpr StringRef kDefault[] = {"tanh", "erf",   "exp", "expm1",
                                             "log",  "log1p", "log2"};
    auto selected = [&](StringRef name) {
      return functions.empty() ? llvm::is_contained(kDefault, name)
                               : llvm::is_contained(functions, name);
    };
    populateMathPolynomialApproximationPatterns(patterns, selected);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
