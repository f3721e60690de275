//===- MatmulToBlas.cpp - f32 matrix products to OpenBLAS calls -----------===//

#include "zest/Conversion/Passes.h"
#include "zest/Conversion/RuntimeCalls.h"

#include "mlir/Dialect/Utils/StructuredOpsUtils.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::zest {
#define GEN_PASS_DEF_MATMULTOBLASPASS
#include "zest/Conversion/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;
using namespace mlir::zest;

namespace {

/// How a product reads its operands: op(A) is A or A^T, op(B) is B or B^T.
struct GemmLayout {
  bool transA, transB;
};

/// Recognizes C[.., m, n] += A[.., m|k, k|m] * B[.., k|n, n|k] over loops
/// (batch?, m, n, k).
static std::optional<GemmLayout> matchGemm(linalg::LinalgOp op,
                                           unsigned batchDims) {
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  if (maps.size() != 3 || op.getNumLoops() != batchDims + 3)
    return std::nullopt;
  MLIRContext *ctx = op.getContext();
  auto dim = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
  unsigned m = batchDims, n = batchDims + 1, k = batchDims + 2;
  auto map = [&](unsigned a, unsigned b) {
    SmallVector<AffineExpr> results;
    for (unsigned i = 0; i < batchDims; ++i)
      results.push_back(dim(i));
    results.push_back(dim(a));
    results.push_back(dim(b));
    return AffineMap::get(batchDims + 3, 0, results, ctx);
  };
  if (maps[2] != map(m, n))
    return std::nullopt;
  GemmLayout layout;
  if (maps[0] == map(m, k))
    layout.transA = false;
  else if (maps[0] == map(k, m))
    layout.transA = true;
  else
    return std::nullopt;
  if (maps[1] == map(k, n))
    layout.transB = false;
  else if (maps[1] == map(n, k))
    layout.transB = true;
  else
    return std::nullopt;
  return layout;
}

/// True if `value` is an f32 memref whose innermost stride is 1.
static bool hasUnitInnerStride(Value value) {
  auto type = dyn_cast<MemRefType>(value.getType());
  if (!type || !type.getElementType().isF32() || type.getRank() < 2)
    return false;
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(type.getStridesAndOffset(strides, offset)))
    return false;
  return strides.back() == 1;
}

/// True if the region computes `acc + a * b` (either order) over the two
/// inputs: a generic that is a matrix product in disguise.
static bool isMulAddBody(linalg::GenericOp op) {
  Block &body = op.getRegion().front();
  if (body.getNumArguments() != 3 || body.getOperations().size() != 3)
    return false;
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  auto add = yield.getOperand(0).getDefiningOp<arith::AddFOp>();
  Value acc = body.getArgument(2);
  if (!add || (add.getLhs() != acc && add.getRhs() != acc))
    return false;
  auto mul = (add.getLhs() == acc ? add.getRhs() : add.getLhs())
                 .getDefiningOp<arith::MulFOp>();
  if (!mul)
    return false;
  Value a = body.getArgument(0), b = body.getArgument(1);
  return (mul.getLhs() == a && mul.getRhs() == b) ||
         (mul.getLhs() == b && mul.getRhs() == a);
}

/// Batch dimensions of a product BLAS can take: 0 for a matmul, 1 for a
/// batch matmul or a batched generic contraction; none for anything else.
static std::optional<unsigned> getBatchDims(linalg::LinalgOp op) {
  if (isa<linalg::MatmulOp>(op))
    return 0;
  if (isa<linalg::BatchMatmulOp>(op))
    return 1;
  auto generic = dyn_cast<linalg::GenericOp>(op.getOperation());
  if (!generic || generic.getNumDpsInputs() != 2 ||
      generic.getNumDpsInits() != 1 || !isMulAddBody(generic))
    return std::nullopt;
  unsigned loops = generic.getNumLoops();
  if (loops != 3 && loops != 4)
    return std::nullopt;
  // Loops are (batch?, m, n, k): all parallel but the last.
  SmallVector<utils::IteratorType> iterators = generic.getIteratorTypesArray();
  for (unsigned i = 0; i + 1 < loops; ++i)
    if (iterators[i] != utils::IteratorType::parallel)
      return std::nullopt;
  if (iterators.back() != utils::IteratorType::reduction)
    return std::nullopt;
  return loops - 3;
}

struct LowerToBlas : public OpInterfaceRewritePattern<linalg::LinalgOp> {
  using OpInterfaceRewritePattern::OpInterfaceRewritePattern;

  LogicalResult matchAndRewrite(linalg::LinalgOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasPureBufferSemantics())
      return rewriter.notifyMatchFailure(op, "not on buffers");
    std::optional<unsigned> batch = getBatchDims(op);
    if (!batch)
      return rewriter.notifyMatchFailure(op, "not a product BLAS takes");
    unsigned batchDims = *batch;
    std::optional<GemmLayout> layout = matchGemm(op, batchDims);
    if (!layout)
      return rewriter.notifyMatchFailure(op, "not a plain product");
    Value a = op.getDpsInputs()[0], b = op.getDpsInputs()[1],
          c = op.getDpsInits()[0];
    if (!hasUnitInnerStride(a) || !hasUnitInnerStride(b) ||
        !hasUnitInnerStride(c))
      return rewriter.notifyMatchFailure(op, "operands not row-contiguous");

    Location loc = op.getLoc();
    auto metadata = [&](Value memref) {
      return memref::ExtractStridedMetadataOp::create(rewriter, loc, memref);
    };
    auto i64 = [&](Value index) { return toI64(rewriter, loc, index); };
    auto i32 = [&](bool flag) -> Value {
      return arith::ConstantIntOp::create(rewriter, loc, flag ? 1 : 0, 32);
    };
    auto metaA = metadata(a), metaB = metadata(b), metaC = metadata(c);
    unsigned row = batchDims;
    // M, N from C; K from A (its column dim, or its row dim if transposed).
    Value m = i64(metaC.getSizes()[row]), n = i64(metaC.getSizes()[row + 1]);
    Value k = i64(metaA.getSizes()[layout->transA ? row : row + 1]);
    auto ld = [&](memref::ExtractStridedMetadataOp meta) {
      return i64(meta.getStrides()[row]);
    };
    SmallVector<Value> args = {i32(layout->transA), i32(layout->transB)};
    if (batchDims)
      args.push_back(i64(metaC.getSizes()[0]));
    args.append({m, n, k, getElementPointer(rewriter, loc, a), ld(metaA)});
    if (batchDims)
      args.push_back(i64(metaA.getStrides()[0]));
    args.append({getElementPointer(rewriter, loc, b), ld(metaB)});
    if (batchDims)
      args.push_back(i64(metaB.getStrides()[0]));
    args.append({getElementPointer(rewriter, loc, c), ld(metaC)});
    if (batchDims)
      args.push_back(i64(metaC.getStrides()[0]));
    callRuntime(rewriter, loc, batchDims ? "zest_sgemm_batched" : "zest_sgemm",
                {}, args);
    rewriter.eraseOp(op);
    return success();
  }
};

struct MatmulToBlasPass
    : public zest::impl::MatmulToBlasPassBase<MatmulToBlasPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<LowerToBlas>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
