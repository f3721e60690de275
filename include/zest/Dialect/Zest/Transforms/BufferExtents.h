//===- BufferExtents.h - Where a buffer lives and what it may touch -*- C++
//-*-===//
//
// Which allocation or argument a view of a buffer belongs to, and the range
// of it the view may touch: what zest-outline-kernels needs to mark kernel
// arguments that cannot alias, and zest-fuse-rows to know which ops of a row
// group touch the same memory.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_DIALECT_ZEST_TRANSFORMS_BUFFEREXTENTS_H
#define ZEST_DIALECT_ZEST_TRANSFORMS_BUFFEREXTENTS_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseSet.h"

#include <limits>
#include <optional>

namespace mlir::zest {

/// Where a buffer lives: the allocation or entry-point argument it is a view
/// of, and the element range of that root it may touch (the whole root when
/// the offset or strides are dynamic).
struct Extent {
  Value root;
  int64_t begin = 0, end = std::numeric_limits<int64_t>::max();

  /// Whether two extents may share an element (same root, ranges meet).
  bool overlaps(const Extent &other) const {
    return root == other.root && begin < other.end && other.begin < end;
  }
};

/// Private functions whose buffer arguments are distinct buffers at every
/// call (zest-outline-regions' regions: see getDistinctArgFunctions).
using DistinctArgFunctions = llvm::DenseSet<Operation *>;

/// The extent of `memref`, a view (subview, cast, reshape) of an allocation
/// or of an argument of a public function or of one in `distinctArgs`;
/// nullopt for anything else (which may then alias any buffer).
std::optional<Extent> getExtent(Value memref,
                                const DistinctArgFunctions &distinctArgs);

/// The private functions with a body whose every call passes each buffer
/// argument a different root (allocation or entry-point argument): inside
/// them, distinct arguments are distinct buffers.
DistinctArgFunctions getDistinctArgFunctions(ModuleOp module);

} // namespace mlir::zest

#endif // ZEST_DIALECT_ZEST_TRANSFORMS_BUFFEREXTENTS_H
