//===- ZestToRuntime.cpp - Lower Zest ops to runtime calls ----------------===//
//
// The pass: gathered buckets unpacked first, then the patterns of each op
// family (Collectives.cpp, Views.cpp, GradNorm.cpp, Widening.cpp,
// HostCopies.cpp) with the greedy driver, and a located error for anything
// left.
//
//===----------------------------------------------------------------------===//

#include "ZestToRuntime.h"
#include "zest/Conversion/Passes.h"
#include "zest/Dialect/Zest/Transforms/Transforms.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::zest {
#define GEN_PASS_DEF_CONVERTZESTTORUNTIMEPASS
#include "zest/Conversion/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;
using namespace mlir::zest;
using namespace mlir::zest::zest_to_runtime;

namespace {

/// Buffers are freed after their last use by ownership-based deallocation.
struct DropRelease : public OpRewritePattern<ReleaseOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReleaseOp op,
                                PatternRewriter &rewriter) const override {
    rewriter.eraseOp(op);
    return success();
  }
};

struct ConvertZestToRuntimePass
    : public zest::impl::ConvertZestToRuntimePassBase<
          ConvertZestToRuntimePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    lowerGatheredUnpacks(module);
    RewritePatternSet patterns(&getContext());
    // Releases first, so no release keeps a gathered tensor alive.
    patterns.add<DropRelease>(&getContext(), /*benefit=*/2);
    populateCollectivePatterns(patterns);
    populateViewPatterns(patterns);
    populateGradNormPatterns(patterns);
    populateWideningPatterns(patterns);
    populateHostCopyPatterns(patterns);
    GreedyRewriteConfig config = getStraightLineRewriteConfig();
    config.enableFolding(false);
    if (failed(applyPatternsGreedily(module, std::move(patterns), config)))
      return signalPassFailure();
    // Anything left (an element type the runtime cannot move) is an error.
    // Fused linear, attention and cross-entropy ops are compute, lowered
    // after bufferization like the expert exchanges; barriers go with
    // bufferization.
    WalkResult result = module.walk([](Operation *op) {
      if (isa<ZestDialect>(op->getDialect()) && !isComputeOp(op) &&
          !isa<UnitOp, BucketOp, OptimizationBarrierOp, ExpertRoutingOp,
               ExpertDispatchOp, ExpertCombineOp>(op)) {
        op->emitOpError() << "cannot be lowered to the runtime: element "
                          << "types must be f32, f64, f16, bf16, i8, i32 or "
                          << "i64";
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
