//===- ScalarSlices.h - Scalars computed from buffer elements ---*- C++ -*-===//
//
// A step's glue reads a few scalars from buffers (the optimizer's learning
// rate and flags) and hands them to kernels. Where buffers live on a GPU the
// host cannot read them, so the kernels recompute those scalars themselves.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_DIALECT_ZEST_TRANSFORMS_SCALARSLICES_H
#define ZEST_DIALECT_ZEST_TRANSFORMS_SCALARSLICES_H

#include "mlir/IR/Value.h"
#include "llvm/ADT/SmallVector.h"

namespace mlir::zest {

/// The ops computing scalar `value` from buffer elements: `memref.load`s and
/// pure ops over them and constants, ordered so that they can be cloned
/// elsewhere one after the other; empty if `value` is computed any other
/// way or reads no buffer.
SmallVector<Operation *> getLoadedScalarSlice(Value value);

} // namespace mlir::zest

#endif // ZEST_DIALECT_ZEST_TRANSFORMS_SCALARSLICES_H
