//===- AttentionToRuntime.cpp - Fused attention to kernels ----------------===//
//
// zest.attention and zest.attention_backward on memrefs become one call
// each to the runtime's FlashAttention kernels (runtime/kernels/Attention.cpp
// on the CPU, the CUDA runtime's for target=cuda). Queries, keys, values,
// outputs and gradients are passed where they lie, with their batch, head
// and row strides (a slice of a fused QKV projection, a sequence-major
// array); only an operand whose rows are not contiguous, and a mask or
// log-sum-exp that is not a contiguous array, go through a contiguous copy.
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

using Layout = KernelOperands::Layout;

/// The positions of the heads and rows among a 4-D operand's dimensions.
struct AttentionDims {
  unsigned heads, rows;
  explicit AttentionDims(bool sequenceMajor)
      : heads(sequenceMajor ? 2 : 1), rows(sequenceMajor ? 1 : 2) {}
};

/// The queries, keys and values as the kernels take them.
struct Inputs {
  RuntimeOperand q, k, v;
};

/// The leading arguments both kernels share: sizes, scale, causal, the
/// query/key/value pointers and the mask with its kind and sizes.
template <typename OpTy>
SmallVector<Value> getCommonArgs(OpBuilder &builder, Location loc,
                                 KernelOperands &operands, OpTy op,
                                 const Inputs &inputs) {
  AttentionDims dims(op.getSequenceMajor());
  const RuntimeOperand &q = inputs.q, &k = inputs.k, &v = inputs.v;
  RuntimeOperand m = operands.input(op.getMask(), Layout::Contiguous);
  Type elementType = getElementTypeOrSelf(op.getQuery().getType());
  int64_t kind = ZEST_ATTENTION_MASK_NONE;
  if (Value mask = op.getMask()) {
    Type maskType = getElementTypeOrSelf(mask.getType());
    kind = maskType.isInteger(1)     ? ZEST_ATTENTION_MASK_BOOL
           : maskType == elementType ? ZEST_ATTENTION_MASK_SAME
                                     : ZEST_ATTENTION_MASK_F32;
  }
  SmallVector<Value> args = {q.sizes[0],          q.sizes[dims.heads],
                             k.sizes[dims.heads], q.sizes[dims.rows],
                             k.sizes[dims.rows],  q.sizes[3],
                             v.sizes[3]};
  args.push_back(arith::ConstantOp::create(
      builder, loc, builder.getF32FloatAttr(op.getScale().convertToFloat())));
  args.append({getFlag(builder, loc, op.getCausal()), q.pointer, k.pointer,
               v.pointer, m.pointer, getFlag(builder, loc, kind)});
  for (unsigned dim = 0; dim < 4; ++dim)
    args.push_back(op.getMask()
                       ? m.sizes[dim]
                       : arith::ConstantIntOp::create(builder, loc, 0, 64));
  return args;
}

/// The batch, head and row strides of each of `arrays`, in order
/// (ZEST_ATTENTION_STRIDES).
void appendStrides(ArrayRef<RuntimeOperand> arrays, AttentionDims dims,
                   SmallVectorImpl<Value> &args) {
  for (const RuntimeOperand &array : arrays)
    args.append({array.strides[0], array.strides[dims.heads],
                 array.strides[dims.rows]});
}

/// The trailing arguments of zest_attention_forward: the output and the
/// log-sum-exp it writes, then the strides of q, k, v and the output.
void appendResultArgs(AttentionOp op, KernelOperands &operands,
                      const Inputs &inputs, SmallVectorImpl<Value> &args) {
  RuntimeOperand out = operands.output(op.getOutput());
  args.push_back(out.pointer);
  args.push_back(
      operands.output(op.getLogsumexp(), Layout::Contiguous).pointer);
  appendStrides({inputs.q, inputs.k, inputs.v, out},
                AttentionDims(op.getSequenceMajor()), args);
}

/// The trailing arguments of zest_attention_backward: the forward's output
/// and log-sum-exp, the output's gradient, and the gradients it writes,
/// then the strides of every 4-D operand.
void appendResultArgs(AttentionBackwardOp op, KernelOperands &operands,
                      const Inputs &inputs, SmallVectorImpl<Value> &args) {
  RuntimeOperand out = operands.input(op.getOutput()),
                 dout = operands.input(op.getGradOutput()),
                 dq = operands.output(op.getGradQuery()),
                 dk = operands.output(op.getGradKey()),
                 dv = operands.output(op.getGradValue());
  args.append({out.pointer,
               operands.input(op.getLogsumexp(), Layout::Contiguous).pointer,
               dout.pointer, dq.pointer, dk.pointer, dv.pointer});
  appendStrides({inputs.q, inputs.k, inputs.v, out, dout, dq, dk, dv},
                AttentionDims(op.getSequenceMajor()), args);
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
        op, rewriter, this->cuda, Layout::UnitInnerStride, kind,
        getElementTypeOrSelf(op.getQuery().getType()),
        [&](KernelOperands &operands) {
          Inputs inputs{operands.input(op.getQuery()),
                        operands.input(op.getKey()),
                        operands.input(op.getValue())};
          SmallVector<Value> args =
              getCommonArgs(rewriter, op.getLoc(), operands, op, inputs);
          appendResultArgs(op, operands, inputs, args);
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
