//===- BlockReductions.h - Reductions a block of threads shares -*- C++ -*-===//
//
// What zest-map-kernels-to-gpu runs as one block of threads per output
// element, and the folding of the fill that initializes such a reduction's
// output into the reduction (both in that pass).
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_LIB_CONVERSION_KERNELSTOGPU_BLOCKREDUCTIONS_H
#define ZEST_LIB_CONVERSION_KERNELSTOGPU_BLOCKREDUCTIONS_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/BuiltinOps.h"

#include <optional>

namespace mlir::zest {

/// Marks a reduction whose output was filled with its combiner's identity
/// just before (the fill is gone): it stores its result without reading
/// the output.
constexpr llvm::StringLiteral kInitIsIdentityAttrName = "zest.init_is_identity";

/// How a reduction's body combines: `combine(acc, x)` (or `combine(x, acc)`),
/// an addf or a maximumf on f32 or f64, with its identity.
struct Combiner {
  Operation *combine;
  Value element; // x
  gpu::AllReduceOperation kind;
  TypedAttr identity;
};

/// A reduction whose running value lives in registers: how it combines,
/// its outputs (the parallel iterations) and the elements each combines
/// (the reduction iterations).
struct BlockReduction {
  Combiner combiner;
  int64_t outputs = 1, total = 1;
};

/// `op` as a reduction zest-map-kernels-to-gpu accumulates in registers (a
/// block of threads or one thread per output element): a combiner, static
/// sizes, at least one reduction iterator.
std::optional<BlockReduction> getRegisterReduction(linalg::GenericOp op);

/// `op` as a block reduction if one takes it: a register reduction to a
/// scalar or along the first input's contiguous dimension over at least a
/// warp's 32 elements (its iterators in any order).
std::optional<BlockReduction> getBlockReduction(linalg::GenericOp op);

/// The buffer `fill` sets to `value` (a constant), or null if it fills
/// another value: what a reduction with that identity need not read.
Value getFilledBuffer(linalg::FillOp fill, Attribute value);

/// How an op of a row group (zest-fuse-rows) spreads over a block of threads
/// per row: its first `rowLoops` loops (all parallel, `rows` iterations in
/// all) pick the block's row, the others (`columns` iterations) are the
/// row's elements, which the block's threads share; a `reduction` reduces
/// them to one value per row (a block reduction).
struct RowSplit {
  unsigned rowLoops = 0;
  int64_t columns = 1;
  bool reduction = false;
};

/// `op`'s split over `rows` rows: for a reduction (parallel loops first, a
/// block reduction) its parallel loops, which must run `rows` iterations;
/// for an elementwise op the fewest leading loops that do. Static sizes
/// only; nullopt if no split fits.
std::optional<RowSplit> getRowSplit(linalg::LinalgOp op, int64_t rows);

/// In the step's glue, a call of a kernel that fills a buffer with a value
/// followed by a call of a kernel that reduces into that buffer as a
/// register reduction whose identity is that value: the fill's call goes,
/// and the reduction calls a copy of its kernel marked
/// kInitIsIdentityAttrName (named `<kernel>_from_identity`, its
/// zest.kernel_work entry copied): one launch less, which a LayerNorm's or a
/// softmax's rows and a bias gradient's column sums spend on a few hundred
/// bytes. Between the two calls may stand (at most 8) other calls whose
/// buffers are all known to be apart from the filled one (a column sum's
/// partial sums and its result are filled one after the other), and
/// allocations and frees of such buffers. Kernels no call makes any more go.
void foldReductionFills(ModuleOp module);

} // namespace mlir::zest

#endif // ZEST_LIB_CONVERSION_KERNELSTOGPU_BLOCKREDUCTIONS_H
