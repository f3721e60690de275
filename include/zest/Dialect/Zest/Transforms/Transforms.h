//===- Transforms.h - Zest rewrite pattern sets -----------------*- C++ -*-===//

#ifndef ZEST_DIALECT_ZEST_TRANSFORMS_TRANSFORMS_H
#define ZEST_DIALECT_ZEST_TRANSFORMS_TRANSFORMS_H

#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::zest {

/// Patterns that bring linear layers over N-D activations to matrices:
/// batched products read a broadcast weight directly, and the row loops of
/// products, elementwise ops and reductions next to 2-D code are merged.
void populateFlattenRowsPatterns(RewritePatternSet &patterns);

/// A `linalg.fill` of a new empty tensor equal to `value` when `value` is a
/// static splat tensor constant (a destination that is written: bufferized,
/// the constant would be a global copied into a new buffer); null otherwise.
Value createFillOfSplat(OpBuilder &builder, Value value);

/// The values `op` reads: its operands and what its regions use from
/// above (a linalg body's scalars), in order, once each.
SetVector<Value> getReadValues(Operation *op);

} // namespace mlir::zest

#endif // ZEST_DIALECT_ZEST_TRANSFORMS_TRANSFORMS_H
