//===- Contraction.h - Recognizing matrix products in linalg ----*- C++ -*-===//

#ifndef ZEST_DIALECT_ZEST_TRANSFORMS_CONTRACTION_H
#define ZEST_DIALECT_ZEST_TRANSFORMS_CONTRACTION_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"

#include <optional>

namespace mlir::zest {

/// How a product reads its operands: op(A) is A or A^T, op(B) is B or B^T.
struct GemmLayout {
  bool transA, transB;
};

/// Batch dimensions of a product BLAS can take: 0 for a matmul, 1 for a
/// batch matmul or a batched generic contraction (`acc + a * b` over loops
/// (batch?, m, n, k)); none for anything else. On tensors or buffers.
std::optional<unsigned> getGemmBatchDims(linalg::LinalgOp op);

/// The layout of C[.., m, n] += op(A)[.., m, k] * op(B)[.., k, n], if `op`'s
/// indexing maps are a plain or transposed product over loops
/// (batch?, m, n, k).
std::optional<GemmLayout> getGemmLayout(linalg::LinalgOp op,
                                        unsigned batchDims);

/// The layout of a product of two matrices (no batch), if `op` is one.
std::optional<GemmLayout> getMatrixProductLayout(linalg::LinalgOp op);

} // namespace mlir::zest

#endif // ZEST_DIALECT_ZEST_TRANSFORMS_CONTRACTION_H
