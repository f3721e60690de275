//===- ExpertExchangeToRuntime.cpp - Expert parallelism's exchanges -------===//
//
// zest.expert_routing, zest.expert_dispatch and zest.expert_combine on
// memrefs become one blocking call each of the runtime
// (runtime/common/ExpertExchange.cpp), every operand a contiguous row-major
// array. Only exchanges over groups of several ranks are left by then: a
// group of one folds away.
//
//===----------------------------------------------------------------------===//

#include "FusedOpsToRuntime.h"
#include "KernelOperands.h"
#include "zest/Conversion/RuntimeCalls.h"
#include "zest/Dialect/Zest/IR/ZestOps.h"
#include "zest_runtime.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/TypeUtilities.h"

#include <type_traits>

using namespace mlir;
using namespace mlir::zest;

namespace {

Value getI64(OpBuilder &builder, Location loc, int64_t value) {
  return arith::ConstantIntOp::create(builder, loc, value, 64);
}

/// The runtime's code of a row type (f32, bf16 or f16: the verifier's).
int64_t getRowDType(Type type) {
  Type element = getElementTypeOrSelf(type);
  return element.isF32() ? ZEST_F32 : element.isBF16() ? ZEST_BF16 : ZEST_F16;
}

/// The ends' pointer, bit width and count: the arguments every exchange
/// call starts its layout with.
SmallVector<Value> getEndsArgs(OpBuilder &builder, Location loc,
                               KernelOperands &operands, Value ends) {
  auto type = cast<MemRefType>(ends.getType());
  return {operands.input(ends).pointer,
          getI64(builder, loc, type.getElementTypeBitWidth()),
          getI64(builder, loc, type.getDimSize(0))};
}

/// zest.expert_routing -> zest_expert_routing(ends, bits, experts, routing,
/// local_ends).
struct LowerRouting : public OpRewritePattern<ExpertRoutingOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ExpertRoutingOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasPureBufferSemantics())
      return failure();
    Location loc = op.getLoc();
    KernelOperands operands(rewriter, loc, KernelOperands::Layout::Contiguous);
    SmallVector<Value> args =
        getEndsArgs(rewriter, loc, operands, op.getEnds());
    args.push_back(operands.output(op.getRouting()).pointer);
    args.push_back(operands.output(op.getLocalEnds()).pointer);
    callRuntime(rewriter, loc, "zest_expert_routing", {}, args);
    operands.finish();
    rewriter.eraseOp(op);
    return success();
  }
};

/// zest.expert_dispatch / _combine -> zest_expert_dispatch / _combine(rows,
/// in rows, cols, dtype, ends, bits, experts, routing, out, out rows).
template <typename OpTy>
struct LowerRowExchange : public OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;

  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasPureBufferSemantics())
      return failure();
    constexpr bool dispatch = std::is_same_v<OpTy, ExpertDispatchOp>;
    Location loc = op.getLoc();
    KernelOperands operands(rewriter, loc, KernelOperands::Layout::Contiguous);
    auto inType = cast<MemRefType>(op.getInput().getType());
    auto outType = cast<MemRefType>(op.getOutput().getType());
    SmallVector<Value> args = {operands.input(op.getInput()).pointer,
                               getI64(rewriter, loc, inType.getDimSize(0)),
                               getI64(rewriter, loc, outType.getDimSize(1)),
                               getFlag(rewriter, loc, getRowDType(outType))};
    args.append(getEndsArgs(rewriter, loc, operands, op.getEnds()));
    args.push_back(operands.input(op.getRouting()).pointer);
    args.push_back(operands.output(op.getOutput()).pointer);
    args.push_back(getI64(rewriter, loc, outType.getDimSize(0)));
    callRuntime(rewriter, loc,
                dispatch ? "zest_expert_dispatch" : "zest_expert_combine", {},
                args);
    operands.finish();
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void mlir::zest::populateExpertExchangeToRuntimePatterns(
    RewritePatternSet &patterns) {
  patterns.add<LowerRouting, LowerRowExchange<ExpertDispatchOp>,
               LowerRowExchange<ExpertCombineOp>>(patterns.getContext());
}
