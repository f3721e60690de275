//===- ElementwiseFusion.h - Fusing elementwise producers -------*- C++ -*-===//
//
// The rule zest-fuse-elementwise applies, for passes that create elementwise
// producers after it ran (convert-zest-to-runtime's mixed-precision widening),
// and what such elementwise ops are.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_DIALECT_ZEST_TRANSFORMS_ELEMENTWISEFUSION_H
#define ZEST_DIALECT_ZEST_TRANSFORMS_ELEMENTWISEFUSION_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"

namespace mlir::zest {

/// Fuses the producer of `operand` into its consumer (a linalg.generic) if
/// that saves a pass without costing work: an elementwise generic whose
/// results only the consumer reads, through this operand, each element once,
/// into a consumer that is not a matrix product. Replaces and erases both;
/// returns the fused op.
FailureOr<linalg::GenericOp> fuseElementwiseProducer(RewriterBase &rewriter,
                                                     OpOperand &operand);

/// Patterns that compute an elementwise generic reading a concatenation
/// (read only there) once per concatenated part, each into its slice of
/// the result, so that the parts' producers fuse into it and the
/// concatenation is never stored (a rotary embedding's rotate_half).
void populateSplitAtConcatPatterns(RewritePatternSet &patterns);

/// Patterns that compute two independent elementwise generics over the same
/// domain that read a common tensor the same way as one generic with the
/// results of both, at the later one's place (the per-part ops of a rotary
/// embedding): one loop nest reads that tensor once.
void populateFuseSiblingsPatterns(RewritePatternSet &patterns);

/// Whether `op` is a linalg.generic whose loops are all parallel: an
/// elementwise op, which reads and writes any layout through its maps.
bool isParallelGeneric(Operation *op);

/// Whether `generic` maps one input to one output element by element.
bool isPointwise(linalg::GenericOp generic);

/// Whether `generic` only copies its one input into a result of the same
/// type, reading and writing both through the same permutation: its result
/// is that input (a widening and a rounding fused, each of which also
/// transposed).
bool isCopyOfInput(linalg::GenericOp generic);
/// `tensor` with its elements rounded (truncf) or widened (extf) to
/// `elementType`: a pointwise linalg.generic into a new tensor, which fuses
/// with the model's own elementwise ops and runs wherever they run (a kernel
/// on a GPU). Given `permutation`, the generic reads `tensor` through it
/// (input dimension i is loop permutation[i]) and writes the loops' order.
Value convertElements(OpBuilder &builder, Location loc, Value tensor,
                      Type elementType, ArrayRef<int64_t> permutation = {});

/// The arith.truncf or arith.extf of `op` if it is a pointwise generic that
/// only converts its one input's element type (a cast autocast or the
/// mixed-precision lowering wrote); null otherwise.
Operation *getElementConversion(Operation *op);

/// The same for a generic of one input and one output whatever its
/// indexing maps: a conversion that may also permute its input (a weight
/// widened and transposed in one loop).
Operation *getBodyConversion(linalg::GenericOp generic);

} // namespace mlir::zest

#endif // ZEST_DIALECT_ZEST_TRANSFORMS_ELEMENTWISEFUSION_H
