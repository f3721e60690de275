//===- ScheduleCollectives.cpp - Asynchronous, prefetched collectives -----===//
//
// A synchronous collective stalls the step for its whole transfer. Split into
// start and wait, the transfer can run while other units compute; where the
// two halves go decides how much overlaps and how much memory the in-flight
// buffers hold. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "zest/Dialect/Zest/Transforms/Passes.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::zest {
#define GEN_PASS_DEF_SCHEDULECOLLECTIVESPASS
#include "zest/Dialect/Zest/Transforms/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;
using namespace mlir::zest;

namespace {

/// The later of `point` and the position right after `value`'s definition
/// (both in `block`).
Block::iterator afterDefinition(Block *block, Block::iterator point,
                                Value value) {
  Operation *def = value.getDefiningOp();
  if (!def || def->getBlock() != block)
    return point; // an argument, or defined above: dominates the block
  if (point == block->end() || def->isBeforeInBlock(&*point))
    return point;
  return std::next(Block::iterator(def));
}

/// Replaces `op` (a synchronous collective) by `start` + `wait` at its
/// position and returns the wait.
template <typename StartOp, typename SyncOp, typename... Args>
WaitOp splitCollective(SyncOp op, Args &&...args) {
  OpBuilder builder(op);
  auto future = FutureType::get(op.getContext(), op.getResult().getType());
  auto start = StartOp::create(builder, op.getLoc(), future,
                               std::forward<Args>(args)...);
  auto wait = WaitOp::create(builder, op.getLoc(), op.getResult().getType(),
                             start.getFuture());
  op.getResult().replaceAllUsesWith(wait.getResult());
  op.erase();
  return wait;
}

/// Moves each all-gather's start to right after the wait `prefetch` gathers
/// earlier (the top of the block for the first ones), keeping the starts in
/// program order.
void scheduleGathers(Block *block, unsigned prefetch) {
  SmallVector<AllGatherOp> gathers(block->getOps<AllGatherOp>());
  SmallVector<WaitOp> waits;
  for (AllGatherOp gather : gathers)
    waits.push_back(splitCollective<AllGatherStartOp>(gather, gather.getShard(),
                                                      gather.getUnitAttr()));
  Operation *previous = nullptr;
  for (auto [index, wait] : llvm::enumerate(waits)) {
    Operation *start = wait.getFuture().getDefiningOp();
    Block::iterator point =
        index >= prefetch ? std::next(Block::iterator(waits[index - prefetch]))
                          : block->begin();
    if (previous)
      point = afterDefinition(block, point, previous->getResult(0));
    point = afterDefinition(block, point, start->getOperand(0));
    // Never later than the wait itself.
    if (point == block->end() || wait->isBeforeInBlock(&*point))
      point = Block::iterator(start);
    start->moveBefore(block, point);
    previous = start;
  }
}

/// The ops of `block` before `point` that read `value`, transitively, in
/// block order; failure if one of them may not move down to `point` (it has
/// memory effects other than a `zest.update`'s, whose shard and state only
/// it touches).
FailureOr<SmallVector<Operation *>> getMovableReaders(Value value,
                                                      Operation *point) {
  Block *block = point->getBlock();
  llvm::SetVector<Operation *> readers;
  SmallVector<Value> worklist{value};
  while (!worklist.empty()) {
    Value current = worklist.pop_back_val();
    for (Operation *user : current.getUsers()) {
      Operation *op = block->findAncestorOpInBlock(*user);
      if (!op || !op->isBeforeInBlock(point))
        continue; // already after the point
      if (!readers.insert(op))
        continue;
      if (!isa<UpdateOp>(op) && !isMemoryEffectFree(op))
        return failure();
      llvm::append_range(worklist, op->getResults());
    }
  }
  SmallVector<Operation *> sorted = readers.takeVector();
  llvm::sort(sorted,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return sorted;
}

/// Each reduce-scatter waits right after the next one starts, with the ops
/// that read its result.
void scheduleReduceScatters(Block *block) {
  SmallVector<ReduceScatterOp> scatters(block->getOps<ReduceScatterOp>());
  SmallVector<WaitOp> waits;
  for (ReduceScatterOp scatter : scatters)
    waits.push_back(splitCollective<ReduceScatterStartOp>(
        scatter, scatter.getReductionAttr(), scatter.getInput(),
        scatter.getUnitAttr()));
  for (unsigned i = 0; i + 1 < waits.size(); ++i) {
    Operation *nextStart = waits[i + 1].getFuture().getDefiningOp();
    Operation *point = nextStart->getNextNode();
    if (!waits[i]->isBeforeInBlock(nextStart))
      continue;
    FailureOr<SmallVector<Operation *>> readers =
        getMovableReaders(waits[i].getResult(), point);
    if (failed(readers))
      continue; // a reader that cannot move: the wait stays before it
    waits[i]->moveBefore(point);
    for (Operation *reader : *readers)
      reader->moveBefore(point);
  }
}

struct ScheduleCollectivesPass
    : public zest::impl::ScheduleCollectivesPassBase<ScheduleCollectivesPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (prefetch == 0 || func.isExternal())
      return;
    Block *body = &func.getBody().front();
    scheduleGathers(body, prefetch);
    scheduleReduceScatters(body);
  }
};
} // namespace
