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

#include <cmath>

namespace mlir::zest {
#define GEN_PASS_DEF_APPROXIMATEMATHPASS
#include "zest/Dialect/Zest/Transforms/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;

namespace {

/// Upstream's log approximations treat a subnormal input as the smallest
/// normal (log(1e-45) came out as -87.3 instead of -103.3). Scale subnormal
/// inputs by 2^24 into the normal range and subtract 24 log(2) (or 24 for
/// log2) afterwards: two selects, no branch, still vectorizable.
template <typename LogOp>
struct ScaleSubnormalLogInput : public OpRewritePattern<LogOp> {
  ScaleSubnormalLogInput(MLIRContext *ctx, double log2Scale)
      : OpRewritePattern<LogOp>(ctx, /*benefit=*/2), log2Scale(log2Scale) {}

  LogicalResult matchAndRewrite(LogOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.getType().isF32() || op->hasAttr(kScaled))
      return failure();
    Location loc = op.getLoc();
    auto f32 = [&](float value) {
      return arith::ConstantOp::create(rewriter, loc,
                                       rewriter.getF32FloatAttr(value));
    };
    Value x = op.getOperand();
    Value subnormal = arith::CmpFOp::create(
        rewriter, loc, arith::CmpFPredicate::OLT, x, f32(0x1p-126f));
    Value scaled = arith::SelectOp::create(
        rewriter, loc, subnormal,
        arith::MulFOp::create(rewriter, loc, x, f32(0x1p24f)), x);
    auto log = LogOp::create(rewriter, loc, scaled);
    log->setAttr(kScaled, rewriter.getUnitAttr());
    Value corrected =
        arith::SubFOp::create(rewriter, loc, log, f32(float(24 * log2Scale)));
    rewriter.replaceOpWithNewOp<arith::SelectOp>(op, subnormal, corrected, log);
    return success();
  }

  static constexpr StringLiteral kScaled = "zest.subnormal_scaled";
  double log2Scale; // log(2^24) = 24 * log2Scale
};

struct ApproximateMathPass
    : public zest::impl::ApproximateMathPassBase<ApproximateMathPass> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    static constexpr StringRef kDefault[] = {"tanh", "erf",   "exp", "expm1",
                                             "log",  "log1p", "log2"};
    // Upstream asks with the full op name ("math.tanh").
    auto selected = [&](StringRef opName) {
      StringRef name = opName.drop_front(opName.starts_with("math.") ? 5 : 0);
      return functions.empty() ? llvm::is_contained(kDefault, name)
                               : llvm::is_contained(functions, name);
    };
    if (selected("math.log"))
      patterns.add<ScaleSubnormalLogInput<math::LogOp>>(&getContext(),
                                                        std::log(2.0));
    if (selected("math.log2"))
      patterns.add<ScaleSubnormalLogInput<math::Log2Op>>(&getContext(), 1.0);
    populateMathPolynomialApproximationPatterns(patterns, selected);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
