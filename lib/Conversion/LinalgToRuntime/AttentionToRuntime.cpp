//===- AttentionToRuntime.cpp - Fused attention to kernels ----------------===//
//
// zest.attention and zest.attention_backward on memrefs become one call
// each to the runtime's FlashAttention kernels (runtime/kernels/Attention.cpp
// on the CPU, the CUDA runtime's for target=cuda), on contiguous row-major
// arrays: a strided view goes through a contiguous copy.
//
//===----------------------------------------------------------------------===//

#include "FusedOpsToRuntime.h"
#include "KernelOperands.h"
#include "zest/Conversion/RuntimeCalls.h"
#include "zest/Dialect/Zest/IR/ZestOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/TypeUtilities.h"

#include <type_traits>

using namespace mlir;
using namespace mlir::zest;

namespace {

/// The leading arguments both kernels share: sizes, scale, causal, the
/// query/key/value pointers and the mask with its kind and sizes.
SmallVector<Value> getCommonArgs(OpBuilder &builder, Location loc,
                                 KernelOperands &operands, Value query,
                                 Value key, Value value, Value mask,
                                 float scale, bool causal) {
  RuntimeOperand q = operands.input(query), k = operands.input(key),
                 v = operands.input(value), m = operands.input(mask);
  Type elementType = getElementTypeOrSelf(query.getType());
  int64_t kind = ZEST_ATTENTION_MASK_NONE;
  if (mask) {
    Type maskType = getElementTypeOrSelf(mask.getType());
    kind = maskType.isInteger(1)     ? ZEST_ATTENTION_MASK_BOOL
           : maskType == elementType ? ZEST_ATTENTION_MASK_SAME
                                     : ZEST_ATTENTION_MASK_F32;
  }
  SmallVector<Value> args = {q.sizes[0], q.sizes[1], k.sizes[1], q.sizes[2],
                             k.sizes[2], q.sizes[3], v.sizes[3]};
  args.push_back(
      arith::ConstantOp::create(builder, loc, builder.getF32FloatAttr(scale)));
  args.append({getFlag(builder, loc, causal), q.pointer, k.pointer, v.pointer,
               m.pointer, getFlag(builder, loc, kind)});
  for (unsigned dim = 0; dim < 4; ++dim)
    args.push_back(mask ? m.sizes[dim]
                        : arith::ConstantIntOp::create(builder, loc, 0, 64));
  return args;
}

/// The trailing arguments of zest_attention_forward: the output and the
/// log-sum-exp it writes.
void appendResultArgs(AttentionOp op, KernelOperands &operands,
                      SmallVectorImpl<Value> &args) {
  args.push_back(operands.output(op.getOutput()).pointer);
  args.push_back(operands.output(op.getLogsumexp()).pointer);
}

/// The trailing arguments of zest_attention_backward: the forward's output
/// and log-sum-exp, the output's gradient, and the gradients it writes.
void appendResultArgs(AttentionBackwardOp op, KernelOperands &operands,
                      SmallVectorImpl<Value> &args) {
  for (Value input : {op.getOutput(), op.getLogsumexp(), op.getGradOutput()})
    args.push_back(operands.input(input).pointer);
  for (Value output : {op.getGradQuery(), op.getGradKey(), op.getGradValue()})
    args.push_back(operands.output(output).pointer);
}

/// zest.attention (zest.attention_backward) on memrefs ->
/// zest_attention_forward (_backward), _bf16 or _f16 for 16-bit storage.
template <typename OpTy>
struct LowerAttentionOp : public KernelCallPattern<OpTy> {
  using KernelCallPattern<OpTy>::KernelCallPattern;

  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    ProductKind kind = std::is_same_v<OpTy, AttentionOp>
                           ? ProductKind::attention_forward
                           : ProductKind::attention_backward;
    return replaceWithKernelCall(
        op, rewriter, this->cuda, KernelOperands::Layout::Contiguous, kind,
        getElementTypeOrSelf(op.getQuery().getType()),
        [&](KernelOperands &operands) {
          SmallVector<Value> args =
              getCommonArgs(rewriter, op.getLoc(), operands, op.getQuery(),
                            op.getKey(), op.getValue(), op.getMask(),
                            op.getScale().convertToFloat(), op.getCausal());
          appendResultArgs(op, operands, args);
          return args;
        });
  }
};

} // namespace

void mlir::zest::populateAttentionToRuntimePatterns(RewritePatternSet &patterns,
                                                    bool cuda) {
  patterns.add<LowerAttentionOp<AttentionOp>,
               LowerAttentionOp<AttentionBackwardOp>>(patterns.getContext(),
                                                      cuda);
}
