//===- MapKernelsToGPU.cpp - Outlined kernels as GPU launches -------------===//
//
// Each linalg op of a `zest.kernel` function becomes a gpu.launch over its
// parallel iterations, linearized into 1-D blocks. See Passes.td.
//
//===----------------------------------------------------------------------===//

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
  Value rest = id;
  for (int64_t d = loop.getNumLoops() - 1; d >= 0; --d) {
    Value index = rest;
    if (d > 0) {
      index = arith::RemUIOp::create(rewriter, loc, rest, constant(count[d]));
      rest = arith::DivUIOp::create(rewriter, loc, rest, constant(count[d]));
    }
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

/// The operand a sum adds to its accumulator: `op`'s body yields
/// `addf(acc, x)` (or `addf(x, acc)`) on f32, with the accumulator used
/// nowhere else and no iteration index read; null otherwise.
static Value getSummand(linalg::GenericOp op) {
  if (op.getNumDpsInits() != 1 || op.getNumResults() != 0)
    return {};
  Block *body = op.getBody();
  BlockArgument acc = body->getArguments().back();
  if (!acc.getType().isF32() || !acc.hasOneUse() ||
      !body->getOps<linalg::IndexOp>().empty())
    return {};
  auto add =
      body->getTerminator()->getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!add || add->getBlock() != body)
    return {};
  if (add.getLhs() == acc)
    return add.getRhs();
  if (add.getRhs() == acc)
    return add.getLhs();
  return {};
}

/// A sum of all of `op`'s iterations into a 0-d f32 buffer (a loss, a
/// squared norm) as one block of `blockSize` threads: each thread sums a
/// strided share in a register, the block combines the partial sums in a
/// tree (gpu.all_reduce) and one thread adds the total to the buffer. One
/// block keeps the order fixed (deterministic) without atomics. True if
/// `op` is such a sum and was replaced.
static bool launchBlockSum(RewriterBase &rewriter, linalg::GenericOp op,
                           int64_t blockSize) {
  Value summand = getSummand(op);
  if (!summand || op.getNumParallelLoops() != 0 ||
      op.getMatchingIndexingMap(op.getDpsInitOperand(0)).getNumResults() != 0)
    return false;
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  if (llvm::any_of(ranges, ShapedType::isDynamic))
    return false;
  int64_t total = 1;
  for (int64_t range : ranges)
    total *= range;
  Location loc = op.getLoc();
  int64_t block = std::max<int64_t>(1, std::min(blockSize, total));
  gpu::LaunchOp launch = createLaunch(rewriter, loc, op, /*grid=*/1, block);
  rewriter.setInsertionPointToStart(&launch.getBody().front());
  auto constant = [&](int64_t value) -> Value {
    return arith::ConstantIndexOp::create(rewriter, loc, value);
  };
  Value thread = launch.getThreadIds().x;
  Value zero =
      arith::ConstantOp::create(rewriter, loc, rewriter.getF32FloatAttr(0.0f));
  auto loop = scf::ForOp::create(rewriter, loc, thread, constant(total),
                                 constant(block), ValueRange{zero});
  rewriter.setInsertionPointToStart(loop.getBody());
  // The iteration's indices, innermost fastest.
  SmallVector<Value> ivs(ranges.size());
  Value rest = loop.getInductionVar();
  for (int64_t d = ranges.size() - 1; d >= 0; --d) {
    ivs[d] =
        d > 0 ? arith::RemUIOp::create(rewriter, loc, rest, constant(ranges[d]))
                    .getResult()
              : rest;
    if (d > 0)
      rest = arith::DivUIOp::create(rewriter, loc, rest, constant(ranges[d]));
  }
  IRMapping mapping;
  for (OpOperand *input : op.getDpsInputOperands()) {
    AffineMap map = op.getMatchingIndexingMap(input);
    SmallVector<Value> indices;
    for (unsigned r = 0; r < map.getNumResults(); ++r)
      indices.push_back(affine::AffineApplyOp::create(rewriter, loc,
                                                      map.getSubMap({r}), ivs));
    Value element = input->get();
    if (isa<MemRefType>(element.getType()))
      element = memref::LoadOp::create(rewriter, loc, element, indices);
    mapping.map(op.getMatchingBlockArgument(input), element);
  }
  Operation *add = op.getBody()->getTerminator()->getOperand(0).getDefiningOp();
  for (Operation &bodyOp : op.getBody()->without_terminator())
    if (&bodyOp != add)
      rewriter.clone(bodyOp, mapping);
  Value partial =
      arith::AddFOp::create(rewriter, loc, loop.getRegionIterArgs()[0],
                            mapping.lookupOrDefault(summand));
  scf::YieldOp::create(rewriter, loc, partial);
  rewriter.setInsertionPointAfter(loop);
  Value sum = gpu::AllReduceOp::create(
                  rewriter, loc, loop.getResult(0),
                  gpu::AllReduceOperationAttr::get(
                      rewriter.getContext(), gpu::AllReduceOperation::ADD),
                  /*uniform=*/true)
                  .getResult();
  Value first = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq,
                                      thread, constant(0));
  auto store = scf::IfOp::create(rewriter, loc, first);
  rewriter.setInsertionPointToStart(&store.getThenRegion().front());
  Value out = op.getDpsInits()[0];
  Value initial = memref::LoadOp::create(rewriter, loc, out, ValueRange{});
  memref::StoreOp::create(rewriter, loc,
                          arith::AddFOp::create(rewriter, loc, initial, sum),
                          out, ValueRange{});
  rewriter.eraseOp(op);
  return true;
}

/// Lowers `op`, an op of a kernel, to loops in GPU launches.
static LogicalResult mapToGPU(RewriterBase &rewriter, linalg::LinalgOp op,
                              int64_t blockSize) {
  Location loc = op.getLoc();
  rewriter.setInsertionPoint(op);
  FailureOr<linalg::GenericOp> generic = getParallelFirst(rewriter, op);
  if (failed(generic))
    return op.emitError("zest-map-kernels-to-gpu: cannot generalize this op");
  if (launchBlockSum(rewriter, *generic, blockSize))
    return success();
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
  if (created.size() == 1 && parallel &&
      launchPerIteration(rewriter, parallel, blockSize))
    return success();
  // No parallel dimension (a sum to a scalar, a 0-d fill): one thread.
  launchOnOneThread(rewriter, loc, next, created);
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
  return !zest::getLoadedScalarSlice(value).empty();
}

/// `branch`, an scf.if without results whose condition reads buffer
/// elements, becomes its launches, each guarded inside by the condition
/// (then) or its negation (else): every thread checks it, the host does not.
static LogicalResult predicateLaunches(RewriterBase &rewriter,
                                       scf::IfOp branch) {
  if (branch.getNumResults() != 0)
    return branch.emitError("zest-map-kernels-to-gpu: a branch with results "
                            "on a condition read from a buffer");
  Location loc = branch.getLoc();
  Value condition = branch.getCondition();
  for (Region *region : {&branch.getThenRegion(), &branch.getElseRegion()}) {
    if (region->empty())
      continue;
    bool negate = region == &branch.getElseRegion();
    for (Operation &op :
         llvm::make_early_inc_range(region->front().without_terminator())) {
      if (auto launch = dyn_cast<gpu::LaunchOp>(op)) {
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
      } else if (!isPure(&op) && !isa<memref::LoadOp>(op)) {
        return op.emitError("zest-map-kernels-to-gpu: cannot run this on the "
                            "host under a condition read from a buffer");
      }
      op.moveBefore(branch);
    }
  }
  rewriter.eraseOp(branch);
  return success();
}

/// Recomputes inside `launch` each value it uses that the host part of its
/// kernel computes from buffer elements.
static void sinkLoadedScalars(RewriterBase &rewriter, gpu::LaunchOp launch) {
  llvm::SetVector<Value> above;
  getUsedValuesDefinedAbove(launch.getBody(), above);
  IRMapping mapping;
  rewriter.setInsertionPointToStart(&launch.getBody().front());
  for (Value value : above)
    for (Operation *op : zest::getLoadedScalarSlice(value))
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
                               int64_t blockSize) {
  SmallVector<linalg::LinalgOp> ops;
  kernel.walk([&](linalg::LinalgOp op) { ops.push_back(op); });
  for (linalg::LinalgOp op : ops)
    if (failed(mapToGPU(rewriter, op, blockSize)))
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
    IRRewriter rewriter(&getContext());
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (!func->hasAttr(zest::ZestDialect::kKernelAttrName))
        continue;
      if (failed(mapKernel(rewriter, func, blockSize)))
        return signalPassFailure();
    }
    // What is left on the host must not touch buffer elements: buffers live
    // in device memory.
    WalkResult hostAccess = getOperation().walk([](Operation *op) {
      if (!isa<memref::LoadOp, memref::StoreOp, memref::CopyOp>(op) ||
          op->getParentOfType<gpu::LaunchOp>())
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
