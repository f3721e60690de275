//===- ScalarSlices.h - Values computed from buffer elements ----*- C++ -*-===//
//
// A step's glue reads a few scalars from buffers (the optimizer's learning
// rate and flags, the token ids an embedding's backward scatters by) and
// hands them, or views placed by them, to kernels. Where buffers live on a
// GPU the host cannot read them, so the kernels recompute those values.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_DIALECT_ZEST_TRANSFORMS_SCALARSLICES_H
#define ZEST_DIALECT_ZEST_TRANSFORMS_SCALARSLICES_H

#include "mlir/IR/Value.h"
#include "llvm/ADT/SmallVector.h"

namespace mlir::zest {

/// How a value is computed from buffer elements.
struct LoadedSlice {
  /// `memref.load`s and pure ops over them (index arithmetic, views),
  /// ordered so that they can be cloned elsewhere one after the other.
  SmallVector<Operation *> ops;
  /// What the ops use that they do not compute: the buffers loaded from,
  /// the views' sources, loop indices and other values the host has.
  SmallVector<Value> inputs;
};

/// The slice computing `value` (a scalar, or a view of a buffer whose
/// offsets or sizes are loaded); empty if `value` reads no buffer.
LoadedSlice getLoadedSlice(Value value);

} // namespace mlir::zest

#endif // ZEST_DIALECT_ZEST_TRANSFORMS_SCALARSLICES_H
