//===- LowerOptimizer.cpp - zest.update to linalg on tensors --------------===//
//
// Each `zest.update` becomes scf.if's on its accumulate / apply flags around
// one fused elementwise linalg.generic per case, in destination-passing style
// so that bufferization updates shard, state and accumulator in place.
//
//===----------------------------------------------------------------------===//

#include "zest/Dialect/Zest/Transforms/Passes.h"
#include "zest/Dialect/Zest/Transforms/Transforms.h"
#include "zest_runtime.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::zest {
#define GEN_PASS_DEF_LOWEROPTIMIZERPASS
#include "zest/Dialect/Zest/Transforms/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;
using namespace mlir::zest;

namespace {

/// Scalars read once per step from the hyperparameter tensor.
struct Hyper {
  Value lr, weightDecay, beta1, beta2, eps, stepSize, biasCorrection2Sqrt,
      gradScale, accumulate, apply;
};

/// Element ranges [begin, end) of the flat buffer that must not change.
using Ranges = SmallVector<std::pair<int64_t, int64_t>>;

class UpdateLowering {
public:
  UpdateLowering(UpdateOp op, UnitOp unit, OpBuilder &builder)
      : op(op), unit(unit), b(builder), loc(op.getLoc()),
        type(cast<RankedTensorType>(op.getParam().getType())) {}

  SmallVector<Value> build();

private:
  Value constant(double value) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(value));
  }
  Hyper readHyper();
  Value maskBase();
  SmallVector<Value> buildStep(bool withAccum);
  Value buildStore(bool withAccum);
  /// scf.if `cond` whose branches yield what `thenFn` / `elseFn` build.
  SmallVector<Value> buildIf(Value cond, TypeRange types,
                             function_ref<SmallVector<Value>()> thenFn,
                             function_ref<SmallVector<Value>()> elseFn);

  UpdateOp op;
  UnitOp unit;
  OpBuilder &b;
  Location loc;
  RankedTensorType type;
  Hyper hyper;
  Ranges frozen;
  Value base; // global flat index of local element 0, when masking
};

} // namespace

Hyper UpdateLowering::readHyper() {
  auto read = [&](int index) -> Value {
    Value i = arith::ConstantIndexOp::create(b, loc, index);
    return tensor::ExtractOp::create(b, loc, op.getHyper(), ValueRange{i});
  };
  Value zero = constant(0.0);
  auto flag = [&](int index) {
    return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE, read(index),
                                 zero);
  };
  return {read(ZEST_HYPER_LR),
          read(ZEST_HYPER_WEIGHT_DECAY),
          read(ZEST_HYPER_BETA1),
          read(ZEST_HYPER_BETA2),
          read(ZEST_HYPER_EPS),
          read(ZEST_HYPER_STEP_SIZE),
          read(ZEST_HYPER_BIAS_CORRECTION2_SQRT),
          read(ZEST_HYPER_GRAD_SCALE),
          flag(ZEST_HYPER_ACCUMULATE),
          flag(ZEST_HYPER_APPLY)};
}

Value UpdateLowering::maskBase() {
  if (!unit.isSharded())
    return arith::ConstantIndexOp::create(b, loc, 0);
  Value rank = RankOp::create(b, loc, b.getIndexType());
  Value shard = arith::ConstantIndexOp::create(b, loc, unit.getShardSize());
  return arith::MulIOp::create(b, loc, rank, shard);
}

SmallVector<Value>
UpdateLowering::buildIf(Value cond, TypeRange types,
                        function_ref<SmallVector<Value>()> thenFn,
                        function_ref<SmallVector<Value>()> elseFn) {
  auto ifOp = scf::IfOp::create(b, loc, types, cond, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  scf::YieldOp::create(b, loc, thenFn());
  b.setInsertionPointToStart(ifOp.elseBlock());
  scf::YieldOp::create(b, loc, elseFn());
  return SmallVector<Value>(ifOp.getResults());
}

/// One optimizer step: ins (grad[, accum]), outs (param, state...).
SmallVector<Value> UpdateLowering::buildStep(bool withAccum) {
  SmallVector<Value> ins = {op.getGrad()};
  if (withAccum)
    ins.push_back(op.getAccum());
  SmallVector<Value> outs = {op.getParam()};
  llvm::append_range(outs, op.getState());
  MLIRContext *ctx = b.getContext();
  AffineMap id = AffineMap::getMultiDimIdentityMap(1, ctx);
  SmallVector<AffineMap> maps(ins.size() + outs.size(), id);
  bool adamw = op.getOptimizer() == Optimizer::AdamW;
  bool momentum = !adamw && !op.getState().empty();
  bool nesterov = op.getNesterov();
  // Loop-invariant scalars.
  Value one = constant(1.0);
  Value decay, lerpWeight, lerpRest, lerpLow, oneMinusBeta2;
  if (adamw) {
    Value half = constant(0.5);
    decay = arith::SubFOp::create(
        b, loc, one,
        arith::MulFOp::create(b, loc, hyper.lr, hyper.weightDecay));
    lerpWeight = arith::SubFOp::create(b, loc, one, hyper.beta1);
    lerpRest = arith::SubFOp::create(b, loc, one, lerpWeight);
    lerpLow = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT,
                                    lerpWeight, half);
    oneMinusBeta2 = arith::SubFOp::create(b, loc, one, hyper.beta2);
  }
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange(ValueRange(outs)), ins, outs, maps,
      SmallVector<utils::IteratorType>{utils::IteratorType::parallel},
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        auto add = [&](Value x, Value y) {
          return arith::AddFOp::create(nb, nl, x, y).getResult();
        };
        auto sub = [&](Value x, Value y) {
          return arith::SubFOp::create(nb, nl, x, y).getResult();
        };
        auto mul = [&](Value x, Value y) {
          return arith::MulFOp::create(nb, nl, x, y).getResult();
        };
        auto div = [&](Value x, Value y) {
          return arith::DivFOp::create(nb, nl, x, y).getResult();
        };
        Value g = args[0];
        if (withAccum)
          g = add(args[1], g);
        g = mul(g, hyper.gradScale);
        unsigned o = ins.size();
        Value p = args[o];
        SmallVector<Value> oldOut(args.begin() + o, args.end());
        SmallVector<Value> newOut;
        if (adamw) {
          // torch.optim.AdamW, single-tensor form.
          Value m = args[o + 1], v = args[o + 2];
          Value decayed = mul(p, decay);
          Value diff = sub(g, m);
          Value mLow = add(m, mul(lerpWeight, diff));
          Value mHigh = sub(g, mul(diff, lerpRest));
          Value m1 = arith::SelectOp::create(nb, nl, lerpLow, mLow, mHigh);
          Value v1 = add(mul(v, hyper.beta2), mul(mul(oneMinusBeta2, g), g));
          Value denom = add(
              div(math::SqrtOp::create(nb, nl, v1), hyper.biasCorrection2Sqrt),
              hyper.eps);
          Value p1 = sub(decayed, mul(hyper.stepSize, div(m1, denom)));
          newOut = {p1, m1, v1};
        } else {
          // torch.optim.SGD (dampening 0).
          Value d = add(g, mul(hyper.weightDecay, p));
          newOut = {p};
          if (momentum) {
            Value buf = add(mul(hyper.beta1, args[o + 1]), d);
            d = nesterov ? add(d, mul(hyper.beta1, buf)) : buf;
            newOut.push_back(buf);
          }
          newOut[0] = sub(p, mul(hyper.lr, d));
        }
        if (!frozen.empty()) {
          Value i = arith::AddIOp::create(
              nb, nl, linalg::IndexOp::create(nb, nl, 0), base);
          Value isFrozen;
          for (auto [lo, hi] : frozen) {
            auto cmp = [&](arith::CmpIPredicate pred, int64_t bound) {
              return arith::CmpIOp::create(
                  nb, nl, pred, i,
                  arith::ConstantIndexOp::create(nb, nl, bound));
            };
            Value in = arith::AndIOp::create(
                nb, nl, cmp(arith::CmpIPredicate::sge, lo),
                cmp(arith::CmpIPredicate::slt, hi));
            isFrozen =
                isFrozen ? arith::OrIOp::create(nb, nl, isFrozen, in) : in;
          }
          for (unsigned k = 0; k < newOut.size(); ++k)
            newOut[k] =
                arith::SelectOp::create(nb, nl, isFrozen, oldOut[k], newOut[k]);
        }
        linalg::YieldOp::create(nb, nl, newOut);
      });
  return SmallVector<Value>(generic.getResults());
}

/// The accumulator after a micro-batch that does not apply: grad, or
/// accum + grad, written into the accumulator's buffer. Both are generics:
/// a linalg.copy into the accumulator would let empty-tensor elimination
/// build the gradient inside the accumulator's buffer, which the other
/// branches still read, and bufferization would then copy the whole
/// accumulator on every micro-batch.
Value UpdateLowering::buildStore(bool withAccum) {
  AffineMap id = AffineMap::getMultiDimIdentityMap(1, b.getContext());
  return linalg::GenericOp::create(
             b, loc, type, ValueRange{op.getGrad()}, ValueRange{op.getAccum()},
             SmallVector<AffineMap>{id, id},
             SmallVector<utils::IteratorType>{utils::IteratorType::parallel},
             [&](OpBuilder &nb, Location nl, ValueRange args) {
               Value stored = args[0];
               if (withAccum)
                 stored = arith::AddFOp::create(nb, nl, args[1], args[0]);
               linalg::YieldOp::create(nb, nl, stored);
             })
      .getResult(0);
}

SmallVector<Value> UpdateLowering::build() {
  hyper = readHyper();
  for (StringRef name : op.getFrozen().getAsValueRange<StringAttr>()) {
    ParamAttr param = unit.lookupParam(name);
    frozen.push_back({param.getOffset(), param.getEnd()});
  }
  if (!frozen.empty())
    base = maskBase();
  // No accumulator: the gradient sums every micro-batch; always step.
  if (!op.getAccum())
    return buildStep(/*withAccum=*/false);
  SmallVector<Value> stepOuts = {op.getParam()};
  llvm::append_range(stepOuts, op.getState());
  // Both branches yield (param, state..., accum).
  SmallVector<Type> types(stepOuts.size() + 1, type);
  return buildIf(
      hyper.apply, types,
      [&] {
        SmallVector<Value> stepped = buildIf(
            hyper.accumulate, TypeRange(ValueRange(stepOuts)),
            [&] { return buildStep(/*withAccum=*/true); },
            [&] { return buildStep(/*withAccum=*/false); });
        stepped.push_back(op.getAccum());
        return stepped;
      },
      [&] {
        SmallVector<Value> unchanged = stepOuts;
        unchanged.push_back(
            buildIf(
                hyper.accumulate, type,
                [&] {
                  return SmallVector<Value>{buildStore(/*withAccum=*/true)};
                },
                [&] {
                  return SmallVector<Value>{buildStore(/*withAccum=*/false)};
                })
                .front());
        return unchanged;
      });
}

namespace {

struct LowerUpdate : public OpRewritePattern<UpdateOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(UpdateOp op,
                                PatternRewriter &rewriter) const override {
    auto unit =
        SymbolTable::lookupNearestSymbolFrom<UnitOp>(op, op.getUnitAttr());
    if (!unit)
      return rewriter.notifyMatchFailure(op, "unit not found");
    rewriter.replaceOp(op, UpdateLowering(op, unit, rewriter).build());
    return success();
  }
};

struct LowerOptimizerPass
    : public zest::impl::LowerOptimizerPassBase<LowerOptimizerPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<LowerUpdate>(&getContext());
    GreedyRewriteConfig config = getStraightLineRewriteConfig();
    config.enableFolding(false);
    if (failed(
            applyPatternsGreedily(getOperation(), std::move(patterns), config)))
      signalPassFailure();
  }
};

} // namespace
