//===- Contraction.cpp - Recognizing matrix products in linalg ------------===//

#include "zest/Dialect/Zest/Transforms/Contraction.h"

using namespace mlir;
using namespace mlir::zest;

std::optional<GemmLayout> mlir::zest::getGemmLayout(linalg::LinalgOp op,
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

/// `value` without an arith.extf: a 16-bit operand widened to the
/// accumulator's type (linalg.matmul's semantics for mixed types).
static Value stripExtension(Value value) {
  auto ext = value.getDefiningOp<arith::ExtFOp>();
  return ext ? ext.getIn() : value;
}

/// True if the region computes `acc + a * b` (either order, each operand
/// possibly widened first) over the two inputs: a generic that is a
/// matrix product in disguise.
static bool isMulAddBody(linalg::GenericOp op) {
  Block &body = op.getRegion().front();
  if (body.getNumArguments() != 3)
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
  Value lhs = stripExtension(mul.getLhs()), rhs = stripExtension(mul.getRhs());
  unsigned extensions = (lhs != mul.getLhs()) + (rhs != mul.getRhs());
  // The mul, the add, the yield and the extensions: nothing else.
  if (body.getOperations().size() != 3 + extensions)
    return false;
  return (lhs == a && rhs == b) || (lhs == b && rhs == a);
}

std::optional<unsigned> mlir::zest::getGemmBatchDims(linalg::LinalgOp op) {
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

std::optional<GemmLayout>
mlir::zest::getMatrixProductLayout(linalg::LinalgOp op) {
  std::optional<unsigned> batch = getGemmBatchDims(op);
  if (!batch || *batch != 0)
    return std::nullopt;
  return getGemmLayout(op, 0);
}
