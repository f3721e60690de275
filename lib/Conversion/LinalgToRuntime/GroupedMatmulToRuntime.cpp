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

#include <type_traits>

using namespace mlir;
using namespace mlir::zest;

namespace {

/// The operand each op multiplies its rows with (the weights, or the
/// output's gradient) and its destination.
Value getSecondInput(GroupedMatmulOp op) { return op.getWeight(); }
Value getSecondInput(GroupedMatmulWeightGradOp op) {
  return op.getGradOutput();
}
Value getDestination(GroupedMatmulOp op) { return op.getOutput(); }
Value getDestination(GroupedMatmulWeightGradOp op) {
  return op.getGradWeight();
}

/// zest.grouped_matmul (_weight_grad) on memrefs -> zest_grouped_matmul
/// (_weight_grad), _bf16 or _f16 for 16-bit storage: (rows, n, k, groups,
/// the input, the second input, the offsets and their width, the
/// destination), the layout flag after the weights (forward) or after the
/// weights' gradient.
template <typename OpTy>
struct LowerGroupedOp : public KernelCallPattern<OpTy> {
  using KernelCallPattern<OpTy>::KernelCallPattern;

  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    constexpr bool forward = std::is_same_v<OpTy, GroupedMatmulOp>;
    Location loc = op.getLoc();
    return replaceWithKernelCall(
        op, rewriter, this->cuda, KernelOperands::Layout::Contiguous,
        forward ? ProductKind::grouped_matmul
                : ProductKind::grouped_matmul_weight_grad,
        getElementTypeOrSelf(op.getInput().getType()),
        [&](KernelOperands &operands) {
          SmallVector<Value> args;
          for (int64_t size :
               {op.getRows(), op.getN(), op.getK(), op.getGroups()})
            args.push_back(
                arith::ConstantIntOp::create(rewriter, loc, size, 64));
          Value layout = getFlag(rewriter, loc, op.getTransposeWeight());
          Value offsets = op.getOffsets();
          args.push_back(operands.input(op.getInput()).pointer);
          args.push_back(operands.input(getSecondInput(op)).pointer);
          if (forward)
            args.push_back(layout);
          args.push_back(operands.input(offsets).pointer);
          args.push_back(getFlag(
              rewriter, loc,
              getElementTypeOrSelf(offsets.getType()).getIntOrFloatBitWidth()));
          args.push_back(operands.output(getDestination(op)).pointer);
          if (!forward)
            args.push_back(layout);
          return args;
        });
  }
};

} // namespace

void mlir::zest::populateGroupedMatmulToRuntimePatterns(
    RewritePatternSet &patterns, bool cuda) {
  patterns.add<LowerGroupedOp<GroupedMatmulOp>,
               LowerGroupedOp<GroupedMatmulWeightGradOp>>(patterns.getContext(),
                                                          cuda);
}
