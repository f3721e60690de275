//===- LinearMatching.h - Shared matching of linear layers ------*- C++ -*-===//
//
// What the passes that fuse linear layers into Zest ops (zest-fuse-linear,
// zest-fuse-linear-cross-entropy) ask of linalg on tensors: the types the
// fused kernels store, where a value is available, and where a fused op may
// write a destination that a product used to fill.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_DIALECT_ZEST_TRANSFORMS_LINEARMATCHING_H
#define ZEST_DIALECT_ZEST_TRANSFORMS_LINEARMATCHING_H

#include "zest/Dialect/Zest/Transforms/Contraction.h"

#include "mlir/IR/PatternMatch.h"

#include <optional>

namespace mlir::zest {

/// True if `value` is a statically shaped tensor of rank `rank` in a type
/// the kernels store: f32, bf16 or f16.
bool isStaticLinearType(Value value, int64_t rank);
inline bool isLinearMatrix(Value value) { return isStaticLinearType(value, 2); }
inline bool isLinearVector(Value value) { return isStaticLinearType(value, 1); }

/// True if the given values (null ones skipped) share one element type: a
/// fused layer is all f32, all bf16 or all f16.
bool haveOneElementType(ValueRange values);

/// True if `value` is available where `op` runs: defined in an enclosing
/// block before `op` (or its ancestor there), or a block argument of one.
bool isAvailableAt(Value value, Operation *op);

/// The gradient of a linear layer that a matrix product with `layout`
/// computes from the layer's output gradient `g`, read as its operand
/// `gIndex`: the input's, `g * op(W)` (the other operand is W, `[out, in]`
/// when `transposed`), or the weight's, `g^T * x` (`transposed`: `[out,
/// in]`, `g` first) or `x^T * g` (the other operand is x).
struct LinearGradient {
  bool ofInput, transposed;
};
std::optional<LinearGradient> getLinearGradient(GemmLayout layout,
                                                unsigned gIndex);

/// True if `init` is a `linalg.fill` of 0.0 (however many ops read it).
bool isZeroFill(Value init);

/// The destination of `init` if it is a `linalg.fill` of 0.0 used only
/// there, or of an empty tensor: a product or sum that starts from zeros
/// writes its destination.
Value getZeroFillDestination(Value init);

/// A `tensor.empty` of `type`, a ranked tensor type.
Value createEmpty(PatternRewriter &rewriter, Location loc, Type type);

/// The destination `init` (written, never read) as a value available at
/// `anchor`, where the fused op goes: `init` itself, a fresh tensor for a
/// `tensor.empty`, or the same slice (through `expand_shape`) of an earlier
/// version of the buffer it was extracted from, when the `insert_slice`s in
/// between write elsewhere: gradients packed into a unit's flat buffer stay
/// in place. Without `rewriter`, only checks that this is possible.
FailureOr<Value> getDestinationAt(Value init, Operation *anchor,
                                  PatternRewriter *rewriter);

} // namespace mlir::zest

#endif // ZEST_DIALECT_ZEST_TRANSFORMS_LINEARMATCHING_H
