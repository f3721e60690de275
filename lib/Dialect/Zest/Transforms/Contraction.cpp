//===- Contraction.cpp - Recognizing matrix products in linalg ------------===//

#include "zest/Dialect/Zest/Transforms/Contraction.h"

using namespace mlir;
using namespace mlir::zest;

std::optional<GemmLayout> mlir::zest::getGemmLayout(ArrayRef<AffineMap> maps,
                                                    unsigned batchDims) {
  unsigned loops = batchDims + 3;
  if (maps.size() != 3)
    return std::nullopt;
  unsigned m = batchDims, n = batchDims + 1, k = batchDims + 2;
  // Each operand reads its two matrix loops and batch loops, once each, in
  // any order: a strided batch of matrices. C reads every batch loop; A or
  // B may leave some out (a matrix shared by those batches, as grouped-query
  // attention shares a key head among query heads).
  auto readsExactly = [&](AffineMap map, unsigned row, unsigned col,
                          bool everyBatch) {
    if (map.getNumDims() != loops || !map.isProjectedPermutation())
      return false;
    unsigned batchesRead = 0;
    for (unsigned loop = 0; loop < batchDims; ++loop)
      batchesRead += map.isFunctionOfDim(loop);
    if (everyBatch && batchesRead != batchDims)
      return false;
    return map.getNumResults() == batchesRead + 2 && map.isFunctionOfDim(row) &&
           map.isFunctionOfDim(col);
  };
  if (!readsExactly(maps[0], m, k, false) ||
      !readsExactly(maps[1], k, n, false) || !readsExactly(maps[2], m, n, true))
    return std::nullopt;
  // The innermost dimension of each operand (stride 1 on buffers) is one of
  // its matrix loops: C's is n; A's is k, or m when A is read transposed;
  // B's is n, or k when transposed.
  auto innermost = [](AffineMap map) {
    return map.getDimPosition(map.getNumResults() - 1);
  };
  if (innermost(maps[2]) != n)
    return std::nullopt;
  return GemmLayout{/*transA=*/innermost(maps[0]) == m,
                    /*transB=*/innermost(maps[1]) == k};
}

std::optional<GemmLayout> mlir::zest::getGemmLayout(linalg::LinalgOp op,
                                                    unsigned batchDims) {
  if (op.getNumLoops() != batchDims + 3)
    return std::nullopt;
  return getGemmLayout(op.getIndexingMapsArray(), batchDims);
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
  if (loops < 3)
    return std::nullopt;
  // Loops are (batch..., m, n, k): all parallel but the last.
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
