//===- MapKernelsToGPU.cpp - Outlined kernels as GPU launches -------------===//
//
// Each linalg op of a `zest.kernel` function becomes a gpu.launch over its
// parallel iterations, linearized into 1-D blocks. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "BlockReductions.h"
#include "VectorizeLoops.h"
#include "zest/Conversion/Passes.h"
#include "zest/Dialect/Zest/IR/ZestDialect.h"
#include "zest/Dialect/Zest/Transforms/ScalarSlices.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::zest {
#define GEN_PASS_DEF_MAPKERNELSTOGPUPASS
#include "zest/Conversion/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;

/// `op` as a linalg.generic whose parallel iterators come first (in their
/// order), so the loop lowering gives one outer scf.parallel over all of
/// them: a column sum is one thread per column, not one launch per row.
static FailureOr<linalg::GenericOp> getParallelFirst(RewriterBase &rewriter,
                                                     linalg::LinalgOp op) {
  auto generic = dyn_cast<linalg::GenericOp>(op.getOperation());
  if (!generic) {
    FailureOr<linalg::GenericOp> generalized =
        linalg::generalizeNamedOp(rewriter, op);
    if (failed(generalized))
      return failure();
    generic = *generalized;
  }
  SmallVector<utils::IteratorType> iterators = generic.getIteratorTypesArray();
  SmallVector<unsigned> order;
  for (bool parallel : {true, false})
    for (auto [i, iterator] : llvm::enumerate(iterators))
      if (linalg::isParallelIterator(iterator) == parallel)
        order.push_back(i);
  if (llvm::is_sorted(order))
    return generic;
  return linalg::interchangeGenericOp(rewriter, generic, order);
}

/// An empty launch of `grid` x `block` threads (1-D) before `before`, its
/// body ready for ops before its terminator.
static gpu::LaunchOp createLaunch(RewriterBase &rewriter, Location loc,
                                  Operation *before, int64_t grid,
                                  int64_t block) {
  rewriter.setInsertionPoint(before);
  Value one = arith::ConstantIndexOp::create(rewriter, loc, 1);
  Value gridX = arith::ConstantIndexOp::create(rewriter, loc, grid);
  Value blockX = arith::ConstantIndexOp::create(rewriter, loc, block);
  auto launch =
      gpu::LaunchOp::create(rewriter, loc, gridX, one, one, blockX, one, one);
  rewriter.setInsertionPointToEnd(&launch.getBody().front());
  gpu::TerminatorOp::create(rewriter, loc);
  return launch;
}

/// Moves `ops` into a launch of one thread before `before`.
static void launchOnOneThread(RewriterBase &rewriter, Location loc,
                              Operation *before, ArrayRef<Operation *> ops) {
  gpu::LaunchOp launch =
      createLaunch(rewriter, loc, before, /*grid=*/1, /*block=*/1);
  Operation *terminator = launch.getBody().front().getTerminator();
  for (Operation *op : ops)
    op->moveBefore(terminator);
}

/// `linear` split into indices over `ranges`, innermost fastest.
static SmallVector<Value> delinearize(OpBuilder &builder, Location loc,
                                      Value linear, ArrayRef<int64_t> ranges) {
  SmallVector<Value> indices(ranges.size());
  for (int64_t d = ranges.size() - 1; d >= 0; --d) {
    if (d == 0) {
      indices[d] = linear;
      break;
    }
    Value range = arith::ConstantIndexOp::create(builder, loc, ranges[d]);
    indices[d] = arith::RemUIOp::create(builder, loc, linear, range);
    linear = arith::DivUIOp::create(builder, loc, linear, range);
  }
  return indices;
}

/// Replaces `loop` (no results, constant bounds) by a launch of one thread
/// per iteration, `blockSize` threads per block; true if it could.
static bool launchPerIteration(RewriterBase &rewriter, scf::ParallelOp loop,
                               int64_t blockSize) {
  if (loop.getNumResults() != 0)
    return false;
  SmallVector<int64_t> lower, step, count;
  int64_t total = 1;
  for (auto [lb, ub, st] :
       llvm::zip(loop.getLowerBound(), loop.getUpperBound(), loop.getStep())) {
    std::optional<int64_t> l = getConstantIntValue(lb),
                           u = getConstantIntValue(ub),
                           s = getConstantIntValue(st);
    if (!l || !u || !s || *s <= 0)
      return false;
    lower.push_back(*l);
    step.push_back(*s);
    count.push_back(*u > *l ? llvm::divideCeil(*u - *l, *s) : 0);
    total *= count.back();
  }
  if (total == 0) {
    rewriter.eraseOp(loop);
    return true;
  }
  Location loc = loop.getLoc();
  int64_t block = std::min(blockSize, total);
  gpu::LaunchOp launch =
      createLaunch(rewriter, loc, loop, llvm::divideCeil(total, block), block);
  rewriter.setInsertionPointToStart(&launch.getBody().front());
  auto constant = [&](int64_t value) -> Value {
    return arith::ConstantIndexOp::create(rewriter, loc, value);
  };
  Value id = arith::AddIOp::create(rewriter, loc,
                                   arith::MulIOp::create(rewriter, loc,
                                                         launch.getBlockIds().x,
                                                         constant(block)),
                                   launch.getThreadIds().x);
  // The last block's threads past the end do nothing.
  if (total % block != 0) {
    Value inRange = arith::CmpIOp::create(
        rewriter, loc, arith::CmpIPredicate::ult, id, constant(total));
    auto guard = scf::IfOp::create(rewriter, loc, inRange);
    rewriter.setInsertionPointToStart(&guard.getThenRegion().front());
  }
  // Innermost dimension fastest, so neighbouring threads touch neighbouring
  // elements of row-major buffers.
  IRMapping mapping;
  SmallVector<Value> iterations = delinearize(rewriter, loc, id, count);
  for (int64_t d = 0, e = loop.getNumLoops(); d < e; ++d) {
    Value index = iterations[d];
    if (step[d] != 1)
      index = arith::MulIOp::create(rewriter, loc, index, constant(step[d]));
    if (lower[d] != 0)
      index = arith::AddIOp::create(rewriter, loc, index, constant(lower[d]));
    mapping.map(loop.getInductionVars()[d], index);
  }
  for (Operation &op : loop.getBody()->without_terminator())
    rewriter.clone(op, mapping);
  rewriter.eraseOp(loop);
  return true;
}

/// A copy of `combiner`'s op combining `lhs` and `rhs`.
static Value combine(RewriterBase &rewriter, const zest::Combiner &combiner,
                     Value lhs, Value rhs) {
  Operation *clone = rewriter.clone(*combiner.combine);
  clone->setOperands({lhs, rhs});
  return clone->getResult(0);
}

/// `map`'s results at `dims`, one affine.apply each.
static SmallVector<Value> getIndices(RewriterBase &rewriter, Location loc,
                                     AffineMap map, ArrayRef<Value> dims) {
  SmallVector<Value> indices;
  for (unsigned r = 0; r < map.getNumResults(); ++r)
    indices.push_back(
        affine::AffineApplyOp::create(rewriter, loc, map.getSubMap({r}), dims));
  return indices;
}

/// `op`'s sum or maximum (parallel iterators first) for the output element
/// at `outputIvs`, over the reduction iterations `first`, `first + step`,
/// ... (linearized), in a register, at the rewriter's insertion point;
/// returns it.
static Value emitPartialReduction(RewriterBase &rewriter, linalg::GenericOp op,
                                  const zest::BlockReduction &reduction,
                                  ArrayRef<Value> outputIvs, Value first,
                                  int64_t step) {
  const zest::Combiner &combiner = reduction.combiner;
  ArrayRef<int64_t> reductionRanges =
      ArrayRef(op.getStaticLoopRanges()).drop_front(op.getNumParallelLoops());
  Location loc = op.getLoc();
  Value identity = arith::ConstantOp::create(rewriter, loc, combiner.identity);
  auto loop = scf::ForOp::create(
      rewriter, loc, first,
      arith::ConstantIndexOp::create(rewriter, loc, reduction.total),
      arith::ConstantIndexOp::create(rewriter, loc, step),
      ValueRange{identity});
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPointToStart(loop.getBody());
  SmallVector<Value> ivs(outputIvs);
  llvm::append_range(
      ivs, delinearize(rewriter, loc, loop.getInductionVar(), reductionRanges));
  IRMapping mapping;
  for (OpOperand *input : op.getDpsInputOperands()) {
    Value element = input->get();
    if (isa<MemRefType>(element.getType()))
      element = memref::LoadOp::create(
          rewriter, loc, element,
          getIndices(rewriter, loc, op.getMatchingIndexingMap(input), ivs));
    mapping.map(op.getMatchingBlockArgument(input), element);
  }
  for (Operation &bodyOp : op.getBody()->without_terminator())
    if (&bodyOp != combiner.combine)
      rewriter.clone(bodyOp, mapping);
  scf::YieldOp::create(rewriter, loc,
                       combine(rewriter, combiner, loop.getRegionIterArgs()[0],
                               mapping.lookupOrDefault(combiner.element)));
  return loop.getResult(0);
}

/// Stores `result`, `op`'s reduction for the output element at `outputIvs`,
/// combined with the buffer's element unless the buffer holds the identity.
static void storeReduction(RewriterBase &rewriter, linalg::GenericOp op,
                           const zest::Combiner &combiner,
                           ArrayRef<Value> outputIvs, Value result,
                           bool initIsIdentity) {
  Location loc = op.getLoc();
  // The output reads only the parallel dimensions (the reductions' are
  // the loop's, out of scope here).
  OpOperand *init = op.getDpsInitOperand(0);
  SmallVector<Value> outputDims(outputIvs);
  outputDims.append(op.getNumReductionLoops(),
                    arith::ConstantIndexOp::create(rewriter, loc, 0));
  SmallVector<Value> outIndices =
      getIndices(rewriter, loc, op.getMatchingIndexingMap(init), outputDims);
  if (!initIsIdentity)
    result = combine(
        rewriter, combiner,
        memref::LoadOp::create(rewriter, loc, init->get(), outIndices), result);
  memref::StoreOp::create(rewriter, loc, result, init->get(), outIndices);
}

/// `op`'s sum or maximum (a block reduction, parallel iterators first) for
/// the output element `outputIndex` (linearized) on the `block` threads of
/// a launch, at the rewriter's insertion point inside it: each thread
/// combines a strided share in a register, the block combines the partial
/// results in a tree (gpu.all_reduce) and thread 0 stores the result
/// (storeReduction). A fixed order (no atomics): deterministic.
static void emitBlockReduction(RewriterBase &rewriter, linalg::GenericOp op,
                               const zest::BlockReduction &reduction,
                               Value outputIndex, Value thread, int64_t block,
                               bool initIsIdentity) {
  Location loc = op.getLoc();
  SmallVector<Value> outputIvs = delinearize(
      rewriter, loc, outputIndex,
      ArrayRef(op.getStaticLoopRanges()).take_front(op.getNumParallelLoops()));
  Value partial =
      emitPartialReduction(rewriter, op, reduction, outputIvs, thread, block);
  Value result = gpu::AllReduceOp::create(
                     rewriter, loc, partial,
                     gpu::AllReduceOperationAttr::get(rewriter.getContext(),
                                                      reduction.combiner.kind),
                     /*uniform=*/true)
                     .getResult();
  Value first =
      arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq, thread,
                            arith::ConstantIndexOp::create(rewriter, loc, 0));
  auto store = scf::IfOp::create(rewriter, loc, first);
  rewriter.setInsertionPointToStart(&store.getThenRegion().front());
  storeReduction(rewriter, op, reduction.combiner, outputIvs, result,
                 initIsIdentity);
  rewriter.setInsertionPointAfter(store);
}

/// A sum or maximum over `op`'s reduction iterations as one block of up to
/// `blockSize` threads per output element (emitBlockReduction). Taken for
/// reductions to a scalar, and for reductions along the inputs' contiguous
/// dimension of at least a warp (a row of a LayerNorm or a softmax: the
/// block reads the row coalesced, where one thread per row would stride
/// across rows); a column sum keeps one thread per column. True if `op`
/// (parallel iterators first) was replaced.
static bool launchBlockReduction(RewriterBase &rewriter, linalg::GenericOp op,
                                 int64_t blockSize, bool initIsIdentity) {
  std::optional<zest::BlockReduction> reduction = zest::getBlockReduction(op);
  if (!reduction)
    return false;
  int64_t block = std::max<int64_t>(1, std::min(blockSize, reduction->total));
  gpu::LaunchOp launch =
      createLaunch(rewriter, op.getLoc(), op, reduction->outputs, block);
  rewriter.setInsertionPointToStart(&launch.getBody().front());
  emitBlockReduction(rewriter, op, *reduction, launch.getBlockIds().x,
                     launch.getThreadIds().x, block, initIsIdentity);
  rewriter.eraseOp(op);
  return true;
}

/// A register reduction that is no block reduction (a column sum, whose
/// inputs' contiguous dimension is a parallel one) as one thread per output
/// element, each combining its elements in a register and storing once
/// (storeReduction): neighbouring threads read neighbouring elements, and
/// no thread reads and writes the output per element. True if `op`
/// (parallel iterators first) was replaced.
static bool launchThreadReduction(RewriterBase &rewriter, linalg::GenericOp op,
                                  int64_t blockSize, bool initIsIdentity) {
  std::optional<zest::BlockReduction> reduction =
      zest::getRegisterReduction(op);
  if (!reduction || op.getNumParallelLoops() == 0)
    return false;
  Location loc = op.getLoc();
  rewriter.setInsertionPoint(op);
  SmallVector<Value> lower, upper, steps;
  for (int64_t range : ArrayRef(op.getStaticLoopRanges())
                           .take_front(op.getNumParallelLoops())) {
    lower.push_back(arith::ConstantIndexOp::create(rewriter, loc, 0));
    upper.push_back(arith::ConstantIndexOp::create(rewriter, loc, range));
    steps.push_back(arith::ConstantIndexOp::create(rewriter, loc, 1));
  }
  auto loop = scf::ParallelOp::create(rewriter, loc, lower, upper, steps);
  rewriter.setInsertionPointToStart(loop.getBody());
  Value partial = emitPartialReduction(
      rewriter, op, *reduction, loop.getInductionVars(),
      arith::ConstantIndexOp::create(rewriter, loc, 0), /*step=*/1);
  storeReduction(rewriter, op, reduction->combiner, loop.getInductionVars(),
                 partial, initIsIdentity);
  rewriter.eraseOp(op);
  return launchPerIteration(rewriter, loop, blockSize);
}

/// Lowers `op`, an op of a kernel, to loops in GPU launches; an elementwise
/// op's threads access `vectorBytes` at a time where they can (0: one
/// element).
static LogicalResult mapToGPU(RewriterBase &rewriter, linalg::LinalgOp op,
                              int64_t blockSize, int64_t vectorBytes) {
  Location loc = op.getLoc();
  rewriter.setInsertionPoint(op);
  bool initIsIdentity = op->hasAttr(zest::kInitIsIdentityAttrName);
  FailureOr<linalg::GenericOp> generic = getParallelFirst(rewriter, op);
  if (failed(generic))
    return op.emitError("zest-map-kernels-to-gpu: cannot generalize this op");
  if (launchBlockReduction(rewriter, *generic, blockSize, initIsIdentity) ||
      launchThreadReduction(rewriter, *generic, blockSize, initIsIdentity))
    return success();
  if (initIsIdentity)
    return op.emitError("zest-map-kernels-to-gpu: a reduction whose initial "
                        "fill was folded away does not accumulate in "
                        "registers (internal error)");
  Operation *target = *generic;
  Block *block = target->getBlock();
  Operation *previous = target->getPrevNode();
  Operation *next = target->getNextNode();
  rewriter.setInsertionPoint(target);
  FailureOr<linalg::LinalgLoops> loops =
      linalg::linalgOpToParallelLoops(rewriter, *generic);
  if (failed(loops))
    return target->emitError(
        "zest-map-kernels-to-gpu: cannot lower this op to loops");
  rewriter.eraseOp(target);
  SmallVector<Operation *> created;
  for (Operation *it = previous ? previous->getNextNode() : &block->front();
       it != next; it = it->getNextNode())
    if (!it->hasTrait<OpTrait::ConstantLike>())
      created.push_back(it);
  if (created.empty())
    return success();
  // The usual case: the parallel dimensions' loop holds everything.
  auto parallel = dyn_cast<scf::ParallelOp>(created.front());
  if (created.size() == 1 && parallel) {
    if (vectorBytes > 0)
      if (scf::ParallelOp wide =
              zest::vectorizeInnermostLoop(rewriter, parallel, vectorBytes))
        parallel = wide;
    if (launchPerIteration(rewriter, parallel, blockSize))
      return success();
    created = {parallel};
  }
  // No parallel dimension (a sum to a scalar, a 0-d fill): one thread.
  launchOnOneThread(rewriter, loc, next, created);
  return success();
}

/// `op` lowered to loops at the rewriter's insertion point, if that gives
/// one scf.parallel (an elementwise op); null otherwise. `op` stays.
static scf::ParallelOp lowerToOneParallelLoop(RewriterBase &rewriter,
                                              linalg::LinalgOp op) {
  FailureOr<linalg::LinalgLoops> loops =
      linalg::linalgOpToParallelLoops(rewriter, op);
  if (failed(loops) || loops->size() != 1)
    return nullptr;
  return dyn_cast<scf::ParallelOp>(loops->front());
}

/// The constant trip counts of `loop` (bounds from 0 by 1).
static SmallVector<int64_t> getTripCounts(scf::ParallelOp loop) {
  SmallVector<int64_t> counts;
  for (Value upper : loop.getUpperBound())
    counts.push_back(*getConstantIntValue(upper));
  return counts;
}

/// `op` (all parallel, its first `split.rowLoops` loops the rows) for row
/// `row` of `launch`, at the end of its body: the `block` threads share
/// the row's elements in strides (thread 0 computes a row of one element),
/// `vectorBytes` at a time where they can (vectorizeInnermostLoop).
static LogicalResult emitRowElementwise(RewriterBase &rewriter,
                                        linalg::GenericOp op,
                                        zest::RowSplit split,
                                        gpu::LaunchOp launch, int64_t block,
                                        int64_t vectorBytes) {
  Location loc = op.getLoc();
  // The loops outside the launch: their bounds stay there, their body is
  // cloned in.
  rewriter.setInsertionPoint(launch);
  scf::ParallelOp parallel = lowerToOneParallelLoop(rewriter, op);
  if (!parallel)
    return op.emitError("zest-map-kernels-to-gpu: cannot lower this op of a "
                        "row kernel to one parallel loop");
  // Only a loop within the row is widened (the rows stay the blocks').
  if (vectorBytes > 0 && split.rowLoops < parallel.getNumLoops())
    if (scf::ParallelOp wide =
            zest::vectorizeInnermostLoop(rewriter, parallel, vectorBytes))
      parallel = wide;
  SmallVector<int64_t> ranges = getTripCounts(parallel);
  split.columns = 1;
  for (int64_t range : ArrayRef(ranges).drop_front(split.rowLoops))
    split.columns *= range;
  rewriter.setInsertionPoint(launch.getBody().front().getTerminator());
  Value thread = launch.getThreadIds().x;
  SmallVector<Value> ivs =
      delinearize(rewriter, loc, launch.getBlockIds().x,
                  ArrayRef(ranges).take_front(split.rowLoops));
  Value zero = arith::ConstantIndexOp::create(rewriter, loc, 0), column = zero;
  if (split.columns == 1) {
    Value first = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq,
                                        thread, zero);
    auto guard = scf::IfOp::create(rewriter, loc, first);
    rewriter.setInsertionPointToStart(guard.thenBlock());
  } else {
    auto columns = scf::ForOp::create(
        rewriter, loc, thread,
        arith::ConstantIndexOp::create(rewriter, loc, split.columns),
        arith::ConstantIndexOp::create(rewriter, loc, block));
    rewriter.setInsertionPointToStart(columns.getBody());
    column = columns.getInductionVar();
  }
  // The loops after the rows (of one iteration each in a row of one
  // element) from the column's linear index.
  llvm::append_range(ivs,
                     delinearize(rewriter, loc, column,
                                 ArrayRef(ranges).drop_front(split.rowLoops)));
  IRMapping mapping;
  mapping.map(parallel.getInductionVars(), ivs);
  for (Operation &bodyOp : parallel.getBody()->without_terminator())
    rewriter.clone(bodyOp, mapping);
  rewriter.eraseOp(parallel);
  rewriter.eraseOp(op);
  return success();
}

/// `group`, a row group of zest-fuse-rows, as one launch of a block per row:
/// its ops in order, each row's block running them one after the other,
/// with a barrier between them (an op reads what the one before wrote).
static LogicalResult launchRowKernel(RewriterBase &rewriter,
                                     scf::ExecuteRegionOp group,
                                     int64_t blockSize, int64_t vectorBytes) {
  int64_t rows =
      group->getAttrOfType<IntegerAttr>(zest::ZestDialect::kRowKernelAttrName)
          .getInt();
  // Views and constants go before the launch; the linalg ops run in it.
  SmallVector<linalg::LinalgOp> ops;
  for (Operation &op : llvm::make_early_inc_range(
           group.getRegion().front().without_terminator()))
    if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op))
      ops.push_back(linalgOp);
    else
      op.moveBefore(group);
  SmallVector<zest::RowSplit> splits;
  int64_t columns = 1;
  for (linalg::LinalgOp op : ops) {
    std::optional<zest::RowSplit> split = zest::getRowSplit(op, rows);
    if (!split)
      return op.emitError() << "zest-map-kernels-to-gpu: an op of a row kernel "
                               "does not split over its "
                            << rows << " rows";
    splits.push_back(*split);
    columns = std::max(columns, split->columns);
  }
  int64_t block = std::min<int64_t>(blockSize, llvm::alignTo(columns, 32));
  gpu::LaunchOp launch =
      createLaunch(rewriter, group.getLoc(), group, rows, block);
  Operation *end = launch.getBody().front().getTerminator();
  for (auto [i, op, split] : llvm::enumerate(ops, splits)) {
    if (i > 0) {
      rewriter.setInsertionPoint(end);
      gpu::BarrierOp::create(rewriter, op.getLoc());
    }
    bool initIsIdentity = op->hasAttr(zest::kInitIsIdentityAttrName);
    rewriter.setInsertionPoint(op);
    FailureOr<linalg::GenericOp> generic = getParallelFirst(rewriter, op);
    if (failed(generic))
      return op.emitError("zest-map-kernels-to-gpu: cannot generalize this op");
    if (!split.reduction) {
      if (failed(emitRowElementwise(rewriter, *generic, split, launch, block,
                                    vectorBytes)))
        return failure();
      continue;
    }
    rewriter.setInsertionPoint(end);
    emitBlockReduction(rewriter, *generic, *zest::getBlockReduction(*generic),
                       launch.getBlockIds().x, launch.getThreadIds().x, block,
                       initIsIdentity);
    rewriter.eraseOp(*generic);
  }
  rewriter.eraseOp(group);
  return success();
}

/// `loop`, marked by zest-outline-kernels (an embedding's backward: each
/// iteration adds a row where a loaded token id says), as one launch of a
/// thread per position of its elementwise op, each running the whole loop
/// for its position: `for i { s(i); parallel p { b(i, p) } }` becomes
/// `parallel p { for i { s(i); b(i, p) } }`, legal because the iterations
/// touch each position in one thread only. One launch instead of one per
/// iteration (4096 per embedding for 8 x 512 tokens).
static LogicalResult launchPerPositionLoop(RewriterBase &rewriter,
                                           scf::ForOp loop, int64_t blockSize) {
  auto ops = loop.getBody()->getOps<linalg::LinalgOp>();
  if (!llvm::hasSingleElement(ops))
    return loop.emitError("zest-map-kernels-to-gpu: a per-position loop "
                          "holds one linalg op");
  linalg::LinalgOp op = *ops.begin();
  rewriter.setInsertionPoint(op);
  scf::ParallelOp inner = lowerToOneParallelLoop(rewriter, op);
  if (!inner)
    return op.emitError("zest-map-kernels-to-gpu: cannot lower the op of a "
                        "per-position loop to one parallel loop");
  rewriter.eraseOp(op);
  // The positions outside, with the same bounds: constants (static shapes),
  // which launchPerIteration needs anyway.
  rewriter.setInsertionPoint(loop);
  ValueRange innerBounds[3] = {inner.getLowerBound(), inner.getUpperBound(),
                               inner.getStep()};
  SmallVector<Value> bounds[3];
  for (auto [hoisted, values] : llvm::zip(bounds, innerBounds))
    for (Value value : values) {
      std::optional<int64_t> constant = getConstantIntValue(value);
      if (!constant)
        return loop.emitError("zest-map-kernels-to-gpu: a per-position loop "
                              "over rows of a dynamic size");
      hoisted.push_back(
          arith::ConstantIndexOp::create(rewriter, loop.getLoc(), *constant));
    }
  auto positions = scf::ParallelOp::create(rewriter, loop.getLoc(), bounds[0],
                                           bounds[1], bounds[2]);
  rewriter.moveOpBefore(loop, positions.getBody()->getTerminator());
  rewriter.inlineBlockBefore(inner.getBody(), inner,
                             positions.getInductionVars());
  rewriter.eraseOp(inner->getPrevNode()); // the inner loop's terminator
  rewriter.eraseOp(inner);
  loop->removeAttr(zest::ZestDialect::kPerPositionLoopAttrName);
  if (!launchPerIteration(rewriter, positions, blockSize))
    return loop.emitError(
        "zest-map-kernels-to-gpu: cannot launch this per-position loop");
  return success();
}

/// Moves a store the host part of a kernel still does (a scalar the glue
/// stored, outlined with device buffers) into a launch of one thread.
static void launchHostStores(RewriterBase &rewriter, func::FuncOp kernel) {
  SmallVector<memref::StoreOp> stores;
  kernel.walk([&](memref::StoreOp store) {
    if (!store->getParentOfType<gpu::LaunchOp>())
      stores.push_back(store);
  });
  for (memref::StoreOp store : stores)
    launchOnOneThread(rewriter, store.getLoc(), store, store.getOperation());
}

/// Whether the host cannot compute `value`: it reads buffer elements.
static bool readsDeviceMemory(Value value) {
  return !zest::getLoadedSlice(value).ops.empty();
}

/// The only op of `region` if it is a launch.
static gpu::LaunchOp getOnlyLaunch(Region &region) {
  if (region.empty() ||
      !llvm::hasSingleElement(region.front().without_terminator()))
    return nullptr;
  return dyn_cast<gpu::LaunchOp>(region.front().front());
}

/// Whether two launches have the same constant grid and block sizes.
static bool sameShape(gpu::LaunchOp a, gpu::LaunchOp b) {
  auto sizesOf = [](gpu::LaunchOp launch) {
    SmallVector<std::optional<int64_t>> sizes;
    for (Value size : launch.getOperands().take_back(6))
      sizes.push_back(getConstantIntValue(size));
    return sizes;
  };
  auto sizes = sizesOf(a);
  return llvm::all_of(sizes, [](auto size) { return size.has_value(); }) &&
         sizes == sizesOf(b);
}

/// Moves `launch`'s body to the end of `block` (before its terminator), on
/// `target`'s block and thread coordinates, and erases `launch`.
static void moveLaunchBody(RewriterBase &rewriter, gpu::LaunchOp launch,
                           gpu::LaunchOp target, Block *block) {
  Block &body = launch.getBody().front();
  rewriter.eraseOp(body.getTerminator());
  rewriter.inlineBlockBefore(&body, block->getTerminator(),
                             target.getBody().front().getArguments());
  rewriter.eraseOp(launch);
}

/// `branch` whose alternatives are one launch each of the same shape (the
/// optimizer's apply-or-accumulate) as one launch of the branch: one launch
/// per call instead of one per alternative. True if it was.
static bool mergeAlternatives(RewriterBase &rewriter, scf::IfOp branch) {
  gpu::LaunchOp then = getOnlyLaunch(branch.getThenRegion()),
                otherwise = getOnlyLaunch(branch.getElseRegion());
  if (!then || !otherwise || !sameShape(then, otherwise) ||
      then.getDynamicSharedMemorySize() ||
      otherwise.getDynamicSharedMemorySize())
    return false;
  rewriter.setInsertionPoint(branch);
  auto merged = gpu::LaunchOp::create(
      rewriter, branch.getLoc(), then.getGridSizeX(), then.getGridSizeY(),
      then.getGridSizeZ(), then.getBlockSizeX(), then.getBlockSizeY(),
      then.getBlockSizeZ());
  rewriter.setInsertionPointToEnd(&merged.getBody().front());
  gpu::TerminatorOp::create(rewriter, branch.getLoc());
  rewriter.setInsertionPointToStart(&merged.getBody().front());
  auto inside = scf::IfOp::create(rewriter, branch.getLoc(),
                                  branch.getCondition(), /*withElse=*/true);
  moveLaunchBody(rewriter, then, merged, inside.thenBlock());
  moveLaunchBody(rewriter, otherwise, merged, inside.elseBlock());
  rewriter.eraseOp(branch);
  return true;
}

/// `branch`, an scf.if without results whose condition reads buffer
/// elements, becomes its launches, each guarded inside by the condition
/// (then) or its negation (else): every thread checks it, the host does not.
/// Alternatives that are one launch each of the same shape become one
/// launch of the branch.
static LogicalResult predicateLaunches(RewriterBase &rewriter,
                                       scf::IfOp branch) {
  if (branch.getNumResults() != 0)
    return branch.emitError("zest-map-kernels-to-gpu: a branch with results "
                            "on a condition read from a buffer");
  // What the host computes under the branch (scalars, loads the launches
  // recompute) moves before it: only launches stay.
  for (Region *region : {&branch.getThenRegion(), &branch.getElseRegion()})
    for (Operation &op : llvm::make_early_inc_range(region->getOps())) {
      if (isa<gpu::LaunchOp>(op) || op.hasTrait<OpTrait::IsTerminator>())
        continue;
      if (!isPure(&op) && !isa<memref::LoadOp>(op))
        return op.emitError("zest-map-kernels-to-gpu: cannot run this on the "
                            "host under a condition read from a buffer");
      op.moveBefore(branch);
    }
  if (mergeAlternatives(rewriter, branch))
    return success();
  Location loc = branch.getLoc();
  Value condition = branch.getCondition();
  for (Region *region : {&branch.getThenRegion(), &branch.getElseRegion()}) {
    bool negate = region == &branch.getElseRegion();
    for (auto launch :
         llvm::make_early_inc_range(region->getOps<gpu::LaunchOp>())) {
      Block &body = launch.getBody().front();
      rewriter.setInsertionPointToStart(&body);
      Value guard = condition;
      if (negate)
        guard = arith::XOrIOp::create(
            rewriter, loc, condition,
            arith::ConstantIntOp::create(rewriter, loc, 1, 1));
      auto inner = scf::IfOp::create(rewriter, loc, guard);
      Operation *yield = inner.thenBlock()->getTerminator();
      for (Operation &guarded : llvm::make_early_inc_range(
               llvm::make_range(std::next(inner->getIterator()),
                                body.getTerminator()->getIterator())))
        guarded.moveBefore(yield);
      launch->moveBefore(branch);
    }
  }
  rewriter.eraseOp(branch);
  return success();
}

/// Recomputes inside `launch` each value (a scalar, a view placed by one) it
/// uses that the host part of its kernel computes from buffer elements.
static void sinkLoadedScalars(RewriterBase &rewriter, gpu::LaunchOp launch) {
  llvm::SetVector<Value> above;
  getUsedValuesDefinedAbove(launch.getBody(), above);
  IRMapping mapping;
  rewriter.setInsertionPointToStart(&launch.getBody().front());
  for (Value value : above)
    for (Operation *op : zest::getLoadedSlice(value).ops)
      if (!mapping.contains(op->getResult(0)))
        rewriter.clone(*op, mapping);
  for (Value value : above)
    if (Value inside = mapping.lookupOrNull(value))
      replaceAllUsesInRegionWith(value, inside, launch.getBody());
}

/// Erases host ops of `kernel` left without uses (the loads whose values
/// are now recomputed on the device).
static void eraseDeadHostOps(RewriterBase &rewriter, func::FuncOp kernel) {
  SmallVector<Operation *> ops;
  kernel.walk([&](Operation *op) {
    if (!op->getParentOfType<gpu::LaunchOp>())
      ops.push_back(op);
  });
  // Post-order: users come after what they use, so erase from the back.
  for (Operation *op : llvm::reverse(ops))
    if (isOpTriviallyDead(op))
      rewriter.eraseOp(op);
}

/// Everything of `kernel` that touches buffer elements ends up on the GPU.
static LogicalResult mapKernel(RewriterBase &rewriter, func::FuncOp kernel,
                               int64_t blockSize, int64_t vectorBytes) {
  SmallVector<scf::ForOp> perPosition;
  kernel.walk([&](scf::ForOp loop) {
    if (loop->hasAttr(zest::ZestDialect::kPerPositionLoopAttrName))
      perPosition.push_back(loop);
  });
  for (scf::ForOp loop : perPosition)
    if (failed(launchPerPositionLoop(rewriter, loop, blockSize)))
      return failure();
  SmallVector<scf::ExecuteRegionOp> rowGroups;
  kernel.walk([&](scf::ExecuteRegionOp group) {
    if (group->hasAttr(zest::ZestDialect::kRowKernelAttrName))
      rowGroups.push_back(group);
  });
  for (scf::ExecuteRegionOp group : rowGroups)
    if (failed(launchRowKernel(rewriter, group, blockSize, vectorBytes)))
      return failure();
  SmallVector<linalg::LinalgOp> ops;
  kernel.walk([&](linalg::LinalgOp op) { ops.push_back(op); });
  for (linalg::LinalgOp op : ops)
    if (failed(mapToGPU(rewriter, op, blockSize, vectorBytes)))
      return failure();
  launchHostStores(rewriter, kernel);
  SmallVector<scf::IfOp> branches;
  kernel.walk([&](scf::IfOp branch) {
    if (!branch->getParentOfType<gpu::LaunchOp>() &&
        readsDeviceMemory(branch.getCondition()))
      branches.push_back(branch); // innermost first
  });
  for (scf::IfOp branch : branches)
    if (failed(predicateLaunches(rewriter, branch)))
      return failure();
  kernel.walk(
      [&](gpu::LaunchOp launch) { sinkLoadedScalars(rewriter, launch); });
  eraseDeadHostOps(rewriter, kernel);
  return success();
}

/// Appends to each kernel's `zest.kernel_work` entry (bytes read, bytes
/// written, operations per call) the launches a call makes, so that the
/// profile, which times launches, predicts calls (a branch's alternatives
/// are launches that each test the condition).
static void recordLaunches(ModuleOp module) {
  auto work = module->getAttrOfType<DictionaryAttr>(
      zest::ZestDialect::kKernelWorkAttrName);
  if (!work)
    return;
  SmallVector<NamedAttribute> entries;
  for (NamedAttribute entry : work) {
    auto counts = dyn_cast<DenseI64ArrayAttr>(entry.getValue());
    auto kernel = module.lookupSymbol<func::FuncOp>(entry.getName());
    if (!counts || counts.size() != 3 || !kernel) {
      entries.push_back(entry);
      continue;
    }
    int64_t launches = 0;
    kernel.walk([&](gpu::LaunchOp) { ++launches; });
    SmallVector<int64_t> withLaunches(counts.asArrayRef());
    withLaunches.push_back(launches);
    entries.push_back(NamedAttribute(
        entry.getName(),
        DenseI64ArrayAttr::get(module.getContext(), withLaunches)));
  }
  module->setAttr(zest::ZestDialect::kKernelWorkAttrName,
                  DictionaryAttr::get(module.getContext(), entries));
}

namespace {
struct MapKernelsToGPUPass
    : public zest::impl::MapKernelsToGPUPassBase<MapKernelsToGPUPass> {
  using Base::Base;

  void runOnOperation() override {
    if (blockSize < 1 || blockSize > 1024) {
      getOperation().emitError()
          << "zest-map-kernels-to-gpu: block-size " << blockSize.getValue()
          << " is not between 1 and 1024 threads";
      return signalPassFailure();
    }
    if (!llvm::is_contained(ArrayRef<int64_t>{0, 4, 8, 16}, vectorBytes)) {
      getOperation().emitError()
          << "zest-map-kernels-to-gpu: vector-bytes " << vectorBytes.getValue()
          << " is none of 0 (one element), 4, 8 and 16";
      return signalPassFailure();
    }
    IRRewriter rewriter(&getContext());
    zest::foldReductionFills(getOperation());
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (!func->hasAttr(zest::ZestDialect::kKernelAttrName))
        continue;
      if (failed(mapKernel(rewriter, func, blockSize, vectorBytes)))
        return signalPassFailure();
    }
    recordLaunches(getOperation());
    // What is left on the host must not touch buffer elements: buffers live
    // in device memory, except in host kernels (offload: pinned host memory).
    WalkResult hostAccess = getOperation().walk([](Operation *op) {
      if (!isa<memref::LoadOp, memref::StoreOp, memref::CopyOp>(op) ||
          op->getParentOfType<gpu::LaunchOp>())
        return WalkResult::advance();
      auto func = op->getParentOfType<func::FuncOp>();
      if (func && func->hasAttr(zest::ZestDialect::kHostKernelAttrName))
        return WalkResult::advance();
      op->emitError() << "'" << op->getName()
                      << "' accesses buffer elements on the host, but "
                      << "--target=cuda keeps buffers in device memory, "
                      << "so this step cannot be compiled for the GPU yet "
                      << "(a scalar of the step is combined on the host; "
                      << "compile for the CPU, and report the model)";
      return WalkResult::interrupt();
    });
    if (hostAccess.wasInterrupted())
      signalPassFailure();
  }
};
} // namespace
