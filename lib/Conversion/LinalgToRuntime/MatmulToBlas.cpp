//===- MatmulToBlas.cpp - Matrix products and linear layers to kernels ----===//

#include "FusedOpsToRuntime.h"
#include "KernelOperands.h"
#include "zest/Conversion/Passes.h"
#include "zest/Conversion/RuntimeCalls.h"
#include "zest/Conversion/RuntimeProducts.h"
#include "zest/Dialect/Zest/IR/ZestOps.h"
#include "zest/Dialect/Zest/Transforms/Contraction.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StructuredOpsUtils.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

namespace mlir::zest {
#define GEN_PASS_DEF_MATMULTOBLASPASS
#include "zest/Conversion/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;
using namespace mlir::zest;

namespace {

/// The `linalg.fill` of zero that writes all of `c` just before `op`, with
/// nothing in between that touches memory (only views and constants); null
/// if there is none. The product can then overwrite `c` instead of adding
/// to it, and the fill (a whole pass over the output) goes.
static linalg::FillOp getZeroFillBefore(Operation *op, Value c) {
  for (Operation *prev = op->getPrevNode(); prev; prev = prev->getPrevNode()) {
    if (auto fill = dyn_cast<linalg::FillOp>(prev))
      return fill.getDpsInits()[0] == c &&
                     matchPattern(fill.value(), m_AnyZeroFloat())
                 ? fill
                 : linalg::FillOp();
    if (!isMemoryEffectFree(prev))
      return {};
  }
  return {};
}

/// The product a BLAS-like call computes `op` with: all f32 (sgemm), or
/// bf16 or f16 operands into an f32 destination (widening_gemm, the form
/// of autocast's products); none for other types.
static std::optional<ProductKind> getProductKind(linalg::LinalgOp op,
                                                 bool batched) {
  Type a = getElementTypeOrSelf(op.getDpsInputs()[0].getType()),
       b = getElementTypeOrSelf(op.getDpsInputs()[1].getType()),
       c = getElementTypeOrSelf(op.getDpsInits()[0].getType());
  if (a != b || !c.isF32())
    return std::nullopt;
  if (a.isF32())
    return batched ? ProductKind::sgemm_batched : ProductKind::sgemm;
  if (a.isBF16() || a.isF16())
    return batched ? ProductKind::widening_gemm_batched
                   : ProductKind::widening_gemm;
  return std::nullopt;
}

/// One operand of a product on buffers, and the dimension of it that each
/// of the product's loops indexes (-1: none, a loop fixed by an enclosing
/// scf.for).
struct ProductOperand {
  Value memref;
  SmallVector<int64_t> dimOfLoop;

  ProductOperand(Value memref, AffineMap map)
      : memref(memref), dimOfLoop(map.getNumDims(), -1) {
    for (unsigned result = 0; result < map.getNumResults(); ++result)
      dimOfLoop[map.getDimPosition(result)] = result;
  }

  /// The operand at the indices `ivs` of the loops `fixed`: a rank-reduced
  /// subview, its dimensions renumbered; itself where it reads none of them.
  ProductOperand fix(OpBuilder &builder, Location loc, ArrayRef<unsigned> fixed,
                     ValueRange ivs) const {
    if (llvm::all_of(fixed, [&](unsigned loop) { return dimOfLoop[loop] < 0; }))
      return *this;
    auto type = cast<MemRefType>(memref.getType());
    int64_t rank = type.getRank();
    SmallVector<OpFoldResult> offsets(rank, builder.getIndexAttr(0)),
        sizes = memref::getMixedSizes(builder, loc, memref),
        strides(rank, builder.getIndexAttr(1));
    SmallVector<bool> dropped(rank, false);
    for (auto [loop, iv] : llvm::zip_equal(fixed, ivs)) {
      if (dimOfLoop[loop] < 0)
        continue; // shared by every index of the loop
      offsets[dimOfLoop[loop]] = iv;
      sizes[dimOfLoop[loop]] = builder.getIndexAttr(1);
      dropped[dimOfLoop[loop]] = true;
    }
    SmallVector<int64_t> shape, newDim(rank, -1);
    for (int64_t dim = 0; dim < rank; ++dim) {
      if (dropped[dim])
        continue;
      newDim[dim] = shape.size();
      shape.push_back(type.getDimSize(dim));
    }
    auto viewType = memref::SubViewOp::inferRankReducedResultType(
        shape, type, offsets, sizes, strides);
    ProductOperand view = *this;
    view.memref = memref::SubViewOp::create(builder, loc, viewType, memref,
                                            offsets, sizes, strides);
    for (int64_t &dim : view.dimOfLoop)
      dim = dim < 0 ? -1 : newDim[dim];
    return view;
  }
};

/// A call of a BLAS-like product (sgemm, widening_gemm, or their batched
/// forms) over operands in which every loop but the matrix loops and
/// `callBatch` is fixed.
struct ProductCall {
  const RuntimeProduct &product;
  GemmLayout layout;
  unsigned batchDims;
  std::optional<unsigned> callBatch;
  bool accumulate;
  bool cuda;

  void emit(OpBuilder &builder, Location loc,
            ArrayRef<ProductOperand> operands) const {
    SmallVector<memref::ExtractStridedMetadataOp, 3> metadata;
    for (const ProductOperand &operand : operands)
      metadata.push_back(memref::ExtractStridedMetadataOp::create(
          builder, loc, operand.memref));
    auto size = [&](unsigned i, unsigned loop) {
      return toI64(builder, loc,
                   metadata[i].getSizes()[operands[i].dimOfLoop[loop]]);
    };
    auto stride = [&](unsigned i, unsigned loop) {
      return toI64(builder, loc,
                   metadata[i].getStrides()[operands[i].dimOfLoop[loop]]);
    };
    auto flag = [&](bool value) -> Value {
      return arith::ConstantIntOp::create(builder, loc, value, 32);
    };
    unsigned m = batchDims, n = m + 1, k = m + 2;
    // Each operand's outer matrix loop: its rows are `ld` apart.
    unsigned rows[3] = {layout.transA ? k : m, layout.transB ? n : k, m};
    SmallVector<Value> args = {flag(layout.transA), flag(layout.transB)};
    if (callBatch)
      args.push_back(size(2, *callBatch));
    args.append({size(2, m), size(2, n), size(0, k)});
    for (unsigned i = 0; i < 3; ++i) {
      args.push_back(getElementPointer(builder, loc, operands[i].memref));
      args.push_back(stride(i, rows[i]));
      if (callBatch)
        args.push_back(stride(i, *callBatch));
    }
    args.push_back(flag(accumulate));
    callProduct(builder, loc, product, cuda, args);
  }
};

/// The batch loop a batched call iterates over: the longest that every
/// operand reads (a dynamic one counts as longest), the last of equals. The
/// other batch loops become scf.for loops around the call; with none, the
/// call is an unbatched product.
static std::optional<unsigned>
getCallBatchLoop(ArrayRef<ProductOperand> operands, unsigned batchDims) {
  auto c = cast<MemRefType>(operands[2].memref.getType());
  std::optional<unsigned> best;
  int64_t bestSize = -1;
  for (unsigned loop = 0; loop < batchDims; ++loop) {
    if (llvm::any_of(operands, [&](const ProductOperand &operand) {
          return operand.dimOfLoop[loop] < 0;
        }))
      continue;
    int64_t size = c.getDimSize(operands[2].dimOfLoop[loop]);
    if (ShapedType::isDynamic(size))
      size = std::numeric_limits<int64_t>::max();
    if (size >= bestSize) {
      best = loop;
      bestSize = size;
    }
  }
  return best;
}

struct LowerToBlas : public OpInterfaceRewritePattern<linalg::LinalgOp> {
  LowerToBlas(MLIRContext *ctx, bool cuda)
      : OpInterfaceRewritePattern(ctx), cuda(cuda) {}
  bool cuda;

  LogicalResult matchAndRewrite(linalg::LinalgOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasPureBufferSemantics())
      return rewriter.notifyMatchFailure(op, "not on buffers");
    std::optional<unsigned> batch = getGemmBatchDims(op);
    if (!batch)
      return rewriter.notifyMatchFailure(op, "not a product BLAS takes");
    std::optional<GemmLayout> layout = getGemmLayout(op, *batch);
    if (!layout)
      return rewriter.notifyMatchFailure(op, "not a plain product");
    if (!llvm::all_of(op->getOperands(), hasUnitInnerStride))
      return rewriter.notifyMatchFailure(op, "operands not row-contiguous");
    SmallVector<ProductOperand, 3> operands;
    for (OpOperand &operand : op->getOpOperands())
      operands.emplace_back(operand.get(), op.getMatchingIndexingMap(&operand));
    std::optional<unsigned> callBatch = getCallBatchLoop(operands, *batch);
    std::optional<ProductKind> kind = getProductKind(op, callBatch.has_value());
    if (!kind)
      return rewriter.notifyMatchFailure(
          op, "neither f32 (sgemm) nor 16-bit into f32 (widening_gemm)");

    Value c = op.getDpsInits()[0];
    linalg::FillOp zeroFill = getZeroFillBefore(op, c);
    SmallVector<unsigned> outerLoops;
    for (unsigned loop = 0; loop < *batch; ++loop)
      if (loop != callBatch)
        outerLoops.push_back(loop);
    ProductCall call{
        *lookupRuntimeProduct(*kind, getElementTypeOrSelf(operands[0].memref)),
        *layout,
        *batch,
        callBatch,
        !zeroFill,
        cuda};
    // Without outer loops, buildLoopNest builds the call alone.
    Location loc = op.getLoc();
    Value zero = arith::ConstantIndexOp::create(rewriter, loc, 0),
          one = arith::ConstantIndexOp::create(rewriter, loc, 1);
    SmallVector<Value> lbs(outerLoops.size(), zero),
        steps(outerLoops.size(), one), ubs;
    for (unsigned loop : outerLoops)
      ubs.push_back(
          memref::DimOp::create(rewriter, loc, c, operands[2].dimOfLoop[loop]));
    scf::buildLoopNest(rewriter, loc, lbs, ubs, steps,
                       [&](OpBuilder &builder, Location loc, ValueRange ivs) {
                         SmallVector<ProductOperand, 3> views;
                         for (const ProductOperand &operand : operands)
                           views.push_back(
                               operand.fix(builder, loc, outerLoops, ivs));
                         call.emit(builder, loc, views);
                       });
    rewriter.eraseOp(op);
    if (zeroFill)
      rewriter.eraseOp(zeroFill);
    return success();
  }
};

/// zest.linear on memrefs -> zest_linear_forward(_bf16, _f16).
struct LowerLinear : public KernelCallPattern<LinearOp> {
  using KernelCallPattern::KernelCallPattern;

  LogicalResult matchAndRewrite(LinearOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    return replaceWithKernelCall(
        op, rewriter, cuda, KernelOperands::Layout::UnitInnerStride,
        ProductKind::linear_forward,
        getElementTypeOrSelf(op.getInput().getType()),
        [&](KernelOperands &operands) -> SmallVector<Value> {
          RuntimeOperand x = operands.input(op.getInput()),
                         w = operands.input(op.getWeight()),
                         b = operands.input(op.getBias()),
                         y = operands.output(op.getOutput()),
                         pre = operands.output(op.getPreactivation());
          return {
              x.sizes[0],
              y.sizes[1],
              x.sizes[1],
              x.pointer,
              x.ld,
              w.pointer,
              w.ld,
              getFlag(rewriter, loc, op.getTransposeWeight()),
              b.pointer,
              getFlag(rewriter, loc, static_cast<int64_t>(op.getActivation())),
              pre.pointer,
              pre.ld,
              y.pointer,
              y.ld};
        });
  }
};

/// zest.linear_backward on memrefs -> zest_linear_backward(_bf16, _f16).
struct LowerLinearBackward : public KernelCallPattern<LinearBackwardOp> {
  using KernelCallPattern::KernelCallPattern;

  LogicalResult matchAndRewrite(LinearBackwardOp op,
                                PatternRewriter &rewriter) const override {
    return replaceWithKernelCall(
        op, rewriter, cuda, KernelOperands::Layout::UnitInnerStride,
        ProductKind::linear_backward,
        getElementTypeOrSelf(op.getGradOutput().getType()),
        [&](KernelOperands &operands) {
          return getBackwardArgs(op, rewriter, operands);
        });
  }

  /// zest_linear_backward's arguments: the layer's sizes and operands.
  static SmallVector<Value> getBackwardArgs(LinearBackwardOp op,
                                            OpBuilder &builder,
                                            KernelOperands &operands) {
    Location loc = op.getLoc();
    RuntimeOperand dy = operands.input(op.getGradOutput()),
                   pre = operands.input(op.getPreactivation()),
                   x = operands.input(op.getInput()),
                   w = operands.input(op.getWeight()),
                   dx = operands.output(op.getGradInput()),
                   dw = operands.output(op.getGradWeight()),
                   db = operands.output(op.getGradBias());
    // K: from the input, or the input gradient; unused without both.
    Value k;
    if (!x.sizes.empty())
      k = x.sizes[1];
    else if (!dx.sizes.empty())
      k = dx.sizes[1];
    else
      k = arith::ConstantIntOp::create(builder, loc, 0, 64);
    return {dy.sizes[0],
            dy.sizes[1],
            k,
            dy.pointer,
            dy.ld,
            pre.pointer,
            pre.ld,
            getFlag(builder, loc, static_cast<int64_t>(op.getActivation())),
            x.pointer,
            x.ld,
            w.pointer,
            w.ld,
            getFlag(builder, loc, op.getTransposeWeight()),
            dx.pointer,
            dx.ld,
            dw.pointer,
            dw.ld,
            getFlag(builder, loc, op.getTransposeGradWeight()),
            db.pointer};
  }
};

struct MatmulToBlasPass
    : public zest::impl::MatmulToBlasPassBase<MatmulToBlasPass> {
  using Base::Base;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    if (target != "cpu" && target != "cuda") {
      getOperation().emitError() << "zest-matmul-to-blas: unknown target '"
                                 << target << "' (cpu or cuda)";
      return signalPassFailure();
    }
    // The CUDA runtime's products (cuBLASLt) take device pointers.
    patterns.add<LowerToBlas, LowerLinear, LowerLinearBackward>(
        &getContext(), /*cuda=*/target == "cuda");
    populateAttentionToRuntimePatterns(patterns, /*cuda=*/target == "cuda");
    populateCrossEntropyToRuntimePatterns(patterns, /*cuda=*/target == "cuda");
    populateGroupedMatmulToRuntimePatterns(patterns,
                                           /*cuda=*/target == "cuda");
    populateExpertExchangeToRuntimePatterns(patterns);
    // Each op is rewritten once into calls no pattern matches: one walk,
    // linear in the size of the step, instead of the greedy driver's
    // iterations over the whole (one huge block) entry point.
    walkAndApplyPatterns(getOperation(), std::move(patterns));
  }
};

} // namespace
