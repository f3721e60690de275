//===- GroupedMatmulToRuntime.cpp - Grouped products to kernels -----------===//
//
// zest.grouped_matmul and zest.grouped_matmul_weight_grad on memrefs become
// one call each to the runtime's grouped products
// (runtime/kernels/GroupedMatmul.cpp on the CPU, the CUDA runtime's for
// target=cuda), every operand a contiguous row-major array.
//
//===----------------------------------------------------------------------===//

#include "FusedOpsToRuntime.h"
#include "KernelOperands.h"
#include "zest/Dialect/Zest/IR/ZestOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace mlir::zest;

namespace {

/// The shape arguments both kernels start with: rows, n, k, groups.
SmallVector<Value> getGroupShape(OpBuilder &builder, Location loc, int64_t rows,
                                 int64_t n, int64_t k, int64_t groups) {
  SmallVector<Value> args;
  for (int64_t size : {rows, n, k, groups})
    args.push_back(arith::ConstantIntOp::create(builder, loc, size, 64));
  return args;
}

/// The offsets' pointer and bit width.
void appendOffsets(OpBuilder &builder, Location loc, KernelOperands &operands,
                   Value offsets, SmallVectorImpl<Value> &args) {
  args.push_back(operands.input(offsets).pointer);
  args.push_back(
      getFlag(builder, loc,
              getElementTypeOrSelf(offsets.getType()).getIntOrFloatBitWidth()));
}

/// zest.grouped_matmul on memrefs -> zest_grouped_matmul (_bf16, _f16).
struct LowerGroupedMatmulOp : public KernelCallPattern<GroupedMatmulOp> {
  using KernelCallPattern::KernelCallPattern;

  LogicalResult matchAndRewrite(GroupedMatmulOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    return replaceWithKernelCall(
        op, rewriter, cuda, KernelOperands::Layout::Contiguous,
        ProductKind::grouped_matmul,
        getElementTypeOrSelf(op.getInput().getType()),
        [&](KernelOperands &operands) {
          SmallVector<Value> args =
              getGroupShape(rewriter, loc, op.getRows(), op.getN(), op.getK(),
                            op.getGroups());
          args.push_back(operands.input(op.getInput()).pointer);
          args.push_back(operands.input(op.getWeight()).pointer);
          args.push_back(getFlag(rewriter, loc, op.getTransposeWeight()));
          appendOffsets(rewriter, loc, operands, op.getOffsets(), args);
          args.push_back(operands.output(op.getOutput()).pointer);
          return args;
        });
  }
};

/// zest.grouped_matmul_weight_grad on memrefs ->
/// zest_grouped_matmul_weight_grad (_bf16, _f16).
struct LowerGroupedMatmulWeightGradOp
    : public KernelCallPattern<GroupedMatmulWeightGradOp> {
  using KernelCallPattern::KernelCallPattern;

  LogicalResult matchAndRewrite(GroupedMatmulWeightGradOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    return replaceWithKernelCall(
        op, rewriter, cuda, KernelOperands::Layout::Contiguous,
        ProductKind::grouped_matmul_weight_grad,
        getElementTypeOrSelf(op.getInput().getType()),
        [&](KernelOperands &operands) {
          SmallVector<Value> args =
              getGroupShape(rewriter, loc, op.getRows(), op.getN(), op.getK(),
                            op.getGroups());
          args.push_back(operands.input(op.getInput()).pointer);
          args.push_back(operands.input(op.getGradOutput()).pointer);
          appendOffsets(rewriter, loc, operands, op.getOffsets(), args);
          args.push_back(operands.output(op.getGradWeight()).pointer);
          args.push_back(getFlag(rewriter, loc, op.getTransposeWeight()));
          return args;
        });
  }
};

} // namespace

void mlir::zest::populateGroupedMatmulToRuntimePatterns(
    RewritePatternSet &patterns, bool cuda) {
  patterns.add<LowerGroupedMatmulOp, LowerGroupedMatmulWeightGradOp>(
      patterns.getContext(), cuda);
}
