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
/// batch matmul, any number for a generic contraction (`acc + a * b` over
/// loops (batch..., m, n, k)); none for anything else. On tensors or
/// buffers.
std::optional<unsigned> getGemmBatchDims(linalg::LinalgOp op);

/// The layout of C[.., m, n] += op(A)[.., m, k] * op(B)[.., k, n] if the
/// indexing maps, over loops (batch..., m, n, k), read each operand as a
/// strided batch of matrices: its two matrix loops and batch loops (every
/// one for C; A and B may be shared across some), once each, in any order,
/// the innermost being a matrix loop (n for C). Attention's head split `[B, S,
/// H, Dh]` read as `[B, H, S, Dh]` is one: a matrix per (b, h) with rows H * Dh
/// apart.
std::optional<GemmLayout> getGemmLayout(ArrayRef<AffineMap> maps,
                                        unsigned batchDims);
std::optional<GemmLayout> getGemmLayout(linalg::LinalgOp op,
                                        unsigned batchDims);

/// The layout of a product of two matrices (no batch), if `op` is one.
std::optional<GemmLayout> getMatrixProductLayout(linalg::LinalgOp op);

} // namespace mlir::zest

#endif // ZEST_DIALECT_ZEST_TRANSFORMS_CONTRACTION_H
