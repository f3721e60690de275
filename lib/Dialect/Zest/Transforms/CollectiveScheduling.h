//===- CollectiveScheduling.h - Shared by the collective schedule -*- C++
//-*-===//
//
// Helpers zest-schedule-collectives shares between its steps (keep, bucket,
// place starts and waits).
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_LIB_DIALECT_ZEST_TRANSFORMS_COLLECTIVESCHEDULING_H
#define ZEST_LIB_DIALECT_ZEST_TRANSFORMS_COLLECTIVESCHEDULING_H

#include "mlir/IR/Block.h"
#include "mlir/Support/LLVM.h"

namespace mlir::zest {

/// The ops of `point`'s block before `point` that read `value`,
/// transitively, in block order; failure if one of them may not move down
/// to `point` (it has memory effects other than a `zest.update`'s, whose
/// shard and state only it touches, or a reduction across replicas').
FailureOr<SmallVector<Operation *>> getMovableReaders(Value value,
                                                      Operation *point);

/// Merges runs of the synchronous collectives of `block` into buckets of at
/// most `bucketBytes` bytes (BucketCollectives.cpp).
void bucketCollectives(Block *block, int64_t bucketBytes);

} // namespace mlir::zest

#endif // ZEST_LIB_DIALECT_ZEST_TRANSFORMS_COLLECTIVESCHEDULING_H
