//===- VectorizeLoops.h - Elementwise loops in 16-byte accesses -*- C++ -*-===//
//
// zest-map-kernels-to-gpu gives an elementwise op a thread per iteration;
// a thread that loads one bf16 element issues a 2-byte access, and a warp
// moves 64 bytes per instruction where 16-byte accesses move 512. This
// widens the innermost loop of such an op so that each iteration handles a
// vector of consecutive elements, as PyTorch's vectorized elementwise
// kernels do.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_LIB_CONVERSION_KERNELSTOGPU_VECTORIZELOOPS_H
#define ZEST_LIB_CONVERSION_KERNELSTOGPU_VECTORIZELOOPS_H

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::zest {

/// `loop` (an elementwise op's loops: constant bounds from 0 by 1, a body of
/// loads, arithmetic and stores) with its innermost loop divided by a width
/// W, chosen so that the widest element accessed along it moves
/// `vectorBytes` bytes at a time: iteration `j` of the new innermost loop
/// covers elements `W*j` to `W*j + W - 1`. Each buffer indexed by the
/// innermost loop in its last, unit-stride dimension is read or written as
/// a vector<W> with the alignment of W elements when, at run time, every
/// such buffer starts at that alignment (its other strides being static
/// multiples of W); otherwise the iteration runs its W elements one by one.
/// Values that do not vary along the innermost loop stay scalars. Replaces
/// `loop` and returns the new loop; null (and `loop` unchanged) when the
/// innermost range is not a multiple of W or the body is not of that form.
scf::ParallelOp vectorizeInnermostLoop(RewriterBase &rewriter,
                                       scf::ParallelOp loop,
                                       int64_t vectorBytes);

} // namespace mlir::zest

#endif // ZEST_LIB_CONVERSION_KERNELSTOGPU_VECTORIZELOOPS_H
