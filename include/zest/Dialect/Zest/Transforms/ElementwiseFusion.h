//===- ElementwiseFusion.h - Fusing elementwise producers -------*- C++ -*-===//
//
// The rule zest-fuse-elementwise applies, for passes that create elementwise
// producers after it ran (convert-zest-to-runtime's mixed-precision widening).
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

} // namespace mlir::zest

#endif // ZEST_DIALECT_ZEST_TRANSFORMS_ELEMENTWISEFUSION_H
