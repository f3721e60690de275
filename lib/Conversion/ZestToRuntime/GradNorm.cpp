//===- GradNorm.cpp - The global gradient norm of gradient clipping -------===//
//
// zest.global_grad_norm (zest-insert-optimizer's clipping) becomes each
// unit's sum of squares, one all-reduce of their total over the world, and
// a square root: what torch.nn.utils.clip_grad_norm_ computes over all
// ranks' shards.
//
//===----------------------------------------------------------------------===//

#include "ZestToRuntime.h"
#include "zest/Conversion/RuntimeCalls.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::zest;
using namespace mlir::zest::zest_to_runtime;

/// A 0-d tensor holding zero, where sums of squares accumulate.
static Value buildZeroScalarTensor(OpBuilder &builder, Location loc) {
  Type f32 = builder.getF32Type();
  Value init = tensor::EmptyOp::create(builder, loc, ArrayRef<int64_t>{}, f32);
  Value zero =
      arith::ConstantOp::create(builder, loc, builder.getZeroAttr(f32));
  return linalg::FillOp::create(builder, loc, zero, init).getResult(0);
}

/// The sum of squares of `(accum ? accum + grad : grad) * scale`, added to
/// `init` (a 0-d tensor), as a 0-d tensor.
static Value buildSumOfSquares(OpBuilder &builder, Location loc, Value grad,
                               Value accum, Value scale, Value init) {
  SmallVector<Value> ins = {grad};
  if (accum)
    ins.push_back(accum);
  MLIRContext *ctx = builder.getContext();
  AffineMap id = AffineMap::getMultiDimIdentityMap(1, ctx);
  SmallVector<AffineMap> maps(ins.size(), id);
  maps.push_back(AffineMap::get(1, 0, ctx));
  auto sum = linalg::GenericOp::create(
      builder, loc, init.getType(), ins, init, maps,
      SmallVector<utils::IteratorType>{utils::IteratorType::reduction},
      [&](OpBuilder &b, Location l, ValueRange args) {
        Value g = args[0];
        if (accum)
          g = arith::AddFOp::create(b, l, args[1], g);
        Value e = arith::MulFOp::create(b, l, g, scale);
        Value square = arith::MulFOp::create(b, l, e, e);
        linalg::YieldOp::create(
            b, l,
            ValueRange{
                arith::AddFOp::create(b, l, args.back(), square).getResult()});
      });
  return sum.getResult(0);
}

namespace {

/// The global gradient norm: per unit the sum of squares of the gradient
/// the update applies (the accumulator is read only when accumulating),
/// divided by the number of ranks holding the same values (a replicated
/// unit's world, a sharded unit's replicas under hybrid sharding), summed
/// over ranks, then the square root.
struct LowerGlobalGradNorm : public OpRewritePattern<GlobalGradNormOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GlobalGradNormOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type f32 = rewriter.getF32Type();
    Value hyper = op.getHyper();
    auto hyperAt = [&](int64_t index) -> Value {
      Value position = arith::ConstantIndexOp::create(rewriter, loc, index);
      return tensor::ExtractOp::create(rewriter, loc, hyper, position);
    };
    Value zero =
        arith::ConstantOp::create(rewriter, loc, rewriter.getZeroAttr(f32));
    Value accumulate =
        arith::CmpFOp::create(rewriter, loc, arith::CmpFPredicate::UNE,
                              hyperAt(ZEST_HYPER_ACCUMULATE), zero);
    Value scale = hyperAt(ZEST_HYPER_GRAD_SCALE);
    Value total = zero;
    int64_t world = 1;
    for (auto [index, ref, grad] : llvm::enumerate(
             op.getUnits().getAsRange<FlatSymbolRefAttr>(), op.getGrads())) {
      auto unit = SymbolTable::lookupNearestSymbolFrom<UnitOp>(op, ref);
      world = std::max<int64_t>(world, unit.getNumRanks());
      // Without accumulators (no_sync) the gradient is the whole sum. With
      // them, both branches sum into the same buffer, so the branch leaves
      // nothing but computation on buffers (a kernel; on a GPU no host
      // scalar) once bufferization writes in place.
      Value init = buildZeroScalarTensor(rewriter, loc), sum;
      if (op.getAccums().empty()) {
        sum = buildSumOfSquares(rewriter, loc, grad, Value(), scale, init);
      } else {
        Value accum = op.getAccums()[index];
        sum =
            scf::IfOp::create(
                rewriter, loc, accumulate,
                [&](OpBuilder &b, Location l) {
                  scf::YieldOp::create(
                      b, l, buildSumOfSquares(b, l, grad, accum, scale, init));
                },
                [&](OpBuilder &b, Location l) {
                  scf::YieldOp::create(
                      b, l,
                      buildSumOfSquares(b, l, grad, Value(), scale, init));
                })
                .getResult(0);
      }
      Value partial =
          tensor::ExtractOp::create(rewriter, loc, sum, ValueRange{});
      int64_t copies =
          unit.isSharded() ? unit.getNumReplicas() : unit.getNumRanks();
      if (copies > 1)
        partial = arith::DivFOp::create(
            rewriter, loc, partial,
            arith::ConstantOp::create(
                rewriter, loc, rewriter.getF32FloatAttr(double(copies))));
      total = arith::AddFOp::create(rewriter, loc, total, partial);
    }
    if (world > 1) {
      auto vectorType = RankedTensorType::get({1}, f32);
      Value local =
          tensor::FromElementsOp::create(rewriter, loc, vectorType, total);
      CollectiveInfo info{"all_reduce",
                          local,
                          vectorType,
                          "grad-norm",
                          1,
                          Reduction::Sum,
                          /*gathers=*/false,
                          ZEST_GROUP_WORLD,
                          world};
      auto started = startCollective(rewriter, op, info);
      if (failed(started))
        return failure();
      Value summed = finishCollective(rewriter, loc, started->first,
                                      started->second, vectorType);
      Value first = arith::ConstantIndexOp::create(rewriter, loc, 0);
      total = tensor::ExtractOp::create(rewriter, loc, summed, first);
    }
    Value norm = math::SqrtOp::create(rewriter, loc, total);
    rewriter.replaceOpWithNewOp<tensor::FromElementsOp>(
        op, op.getNorm().getType(), norm);
    return success();
  }
};
} // namespace

void zest_to_runtime::populateGradNormPatterns(RewritePatternSet &patterns) {
  patterns.add<LowerGlobalGradNorm>(patterns.getContext());
}
