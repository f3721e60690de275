//===- ScheduleCollectives.cpp - Kept units, prefetched collectives -------===//
//
// A synchronous collective stalls the step for its whole transfer. Split into
// start and wait, the transfer can run while other units compute; where the
// two halves go decides how much overlaps and how much memory the in-flight
// buffers hold. A unit kept gathered from forward to backward trades its
// re-gather for memory. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "CollectiveScheduling.h"
#include "zest/Dialect/Zest/Transforms/Passes.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"

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

/// Prefetch depth of each unit (`unit-prefetch`, else `prefetch`).
struct Depths {
  unsigned defaultDepth = 0;
  llvm::StringMap<unsigned> units;

  unsigned of(StringRef unit) const {
    auto it = units.find(unit);
    return it == units.end() ? defaultDepth : it->second;
  }
  /// A gather's depth: its unit's, or the deepest of its bucket's members.
  unsigned of(AllGatherStartOp start) const {
    unsigned depth = 0;
    // Held here: iterating a member of the temporary would read freed memory.
    std::optional<CollectiveLayout> layout =
        lookupCollectiveLayout(start, start.getUnitAttr());
    for (UnitOp unit : layout->units)
      depth = std::max(depth, of(unit.getSymName()));
    return depth;
  }
  bool any() const {
    return defaultDepth > 0 || llvm::any_of(units, [](const auto &entry) {
             return entry.second > 0;
           });
  }
};

/// Moves each all-gather's start to right after the wait as many gathers
/// earlier as its depth (the top of the block for the first ones), keeping
/// the starts in program order.
void scheduleGathers(Block *block, const Depths &depths) {
  SmallVector<AllGatherOp> gathers(block->getOps<AllGatherOp>());
  SmallVector<WaitOp> waits;
  for (AllGatherOp gather : gathers)
    waits.push_back(splitCollective<AllGatherStartOp>(gather, gather.getShard(),
                                                      gather.getUnitAttr()));
  Operation *previous = nullptr;
  for (auto [index, wait] : llvm::enumerate(waits)) {
    auto start = cast<AllGatherStartOp>(wait.getFuture().getDefiningOp());
    unsigned prefetch = depths.of(start);
    // A bucket's shards are packed right before its gather starts.
    auto pack = start->getOperand(0).getDefiningOp<PackOp>();
    ValueRange shards =
        pack ? pack->getOperands() : ValueRange(start->getOperands());
    Block::iterator point =
        index >= prefetch ? std::next(Block::iterator(waits[index - prefetch]))
                          : block->begin();
    // (Depth 0: right after its own wait, so it stays before it.)
    if (previous)
      point = afterDefinition(block, point, previous->getResult(0));
    for (Value shard : shards)
      point = afterDefinition(block, point, shard);
    previous = start;
    // Never later than the wait itself: then it stays where it is.
    if (point == block->end() || wait->isBeforeInBlock(&*point))
      continue;
    if (!pack) {
      start->moveBefore(block, point);
      continue;
    }
    pack->moveBefore(block, point); // `point` may be the pack itself
    start->moveAfter(pack);
  }
}

/// True for a hybrid-sharding all-reduce across replicas (either half of
/// the asynchronous form). It may move with the gradient shard it reduces:
/// the replica group's collectives keep their order, and every rank moves
/// them alike.
bool isReplicaReduction(Operation *op) {
  if (auto wait = dyn_cast<WaitOp>(op))
    op = wait.getFuture().getDefiningOp();
  if (auto reduce = dyn_cast_or_null<AllReduceOp>(op))
    return reduce.getAcrossReplicas();
  auto start = dyn_cast_or_null<AllReduceStartOp>(op);
  return start && start.getAcrossReplicas();
}
} // namespace

FailureOr<SmallVector<Operation *>>
mlir::zest::getMovableReaders(Value value, Operation *point) {
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
      if (!isa<UpdateOp>(op) && !isReplicaReduction(op) &&
          !isMemoryEffectFree(op))
        return failure();
      llvm::append_range(worklist, op->getResults());
    }
  }
  SmallVector<Operation *> sorted = readers.takeVector();
  llvm::sort(sorted,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return sorted;
}

namespace {

/// Splits a synchronous gradient reduction into start and wait.
WaitOp splitReduction(Operation *op) {
  if (auto scatter = dyn_cast<ReduceScatterOp>(op))
    return splitCollective<ReduceScatterStartOp>(
        scatter, scatter.getReductionAttr(), scatter.getInput(),
        scatter.getUnitAttr());
  auto reduce = cast<AllReduceOp>(op);
  return splitCollective<AllReduceStartOp>(
      reduce, reduce.getReductionAttr(), reduce.getInput(),
      reduce.getUnitAttr(), reduce.getAcrossReplicasAttr());
}

/// Moves `wait` and the ops that read its result (transitively) to right
/// after `start`, unless one of them cannot move.
void waitAfter(WaitOp wait, Operation *start) {
  Operation *point = start->getNextNode();
  if (!wait->isBeforeInBlock(start))
    return;
  FailureOr<SmallVector<Operation *>> readers =
      getMovableReaders(wait.getResult(), point);
  if (failed(readers))
    return; // a reader that cannot move: the wait stays before it
  wait->moveBefore(point);
  for (Operation *reader : *readers)
    reader->moveBefore(point);
}

/// Each gradient reduction (reduce-scatter, or all-reduce of a replicated
/// unit) waits right after the next one starts, with the ops that read its
/// result. Under hybrid sharding a reduce-scatter's readers include its
/// all-reduce across replicas, which therefore starts after the next unit's
/// reduce-scatter; each of those then waits right after the next gradient
/// reduction that starts after it.
void scheduleReductions(Block *block) {
  SmallVector<Operation *> reductions, acrossReplicas;
  for (Operation &op : *block) {
    auto reduce = dyn_cast<AllReduceOp>(op);
    if (reduce && reduce.getAcrossReplicas())
      acrossReplicas.push_back(&op);
    else if (isa<ReduceScatterOp, AllReduceOp>(op))
      reductions.push_back(&op);
  }
  SmallVector<WaitOp> waits = llvm::map_to_vector(reductions, splitReduction);
  SmallVector<WaitOp> replicaWaits =
      llvm::map_to_vector(acrossReplicas, splitReduction);
  for (unsigned i = 0; i + 1 < waits.size(); ++i)
    waitAfter(waits[i], waits[i + 1].getFuture().getDefiningOp());
  for (WaitOp wait : replicaWaits) {
    Operation *start = wait.getFuture().getDefiningOp();
    auto next = llvm::find_if(waits, [&](WaitOp other) {
      return start->isBeforeInBlock(other.getFuture().getDefiningOp());
    });
    if (next != waits.end())
      waitAfter(wait, next->getFuture().getDefiningOp());
  }
}

/// Replaces every gather of a kept unit's shard after the first by the
/// first one's result: the forward's gathered buffer serves backward too.
void keepGathered(Block *block, const DenseSet<StringRef> &kept) {
  DenseMap<std::pair<Value, StringRef>, AllGatherOp> first;
  for (AllGatherOp gather :
       llvm::make_early_inc_range(block->getOps<AllGatherOp>())) {
    if (!kept.contains(gather.getUnit()))
      continue;
    auto [it, inserted] =
        first.try_emplace({gather.getShard(), gather.getUnit()}, gather);
    if (inserted)
      continue;
    gather.getResult().replaceAllUsesWith(it->second.getResult());
    gather.erase();
  }
}

struct ScheduleCollectivesPass
    : public zest::impl::ScheduleCollectivesPassBase<ScheduleCollectivesPass> {
  using Base::Base;

  /// The sharded units to keep gathered; failure (reported) for an unknown
  /// strategy or a named unit that is not a sharded unit of the module.
  FailureOr<DenseSet<StringRef>> getKeptUnits(ModuleOp module) {
    std::optional<ShardingStrategy> kind = symbolizeShardingStrategy(strategy);
    if (!kind) {
      emitError(module.getLoc())
          << "unknown strategy '" << strategy
          << "' for zest-schedule-collectives: use full-shard, "
          << "shard-grad-op, no-shard or hybrid-shard";
      return failure();
    }
    DenseSet<StringRef> kept;
    for (UnitOp unit : module.getOps<UnitOp>())
      if (*kind == ShardingStrategy::ShardGradOp && unit.isSharded())
        kept.insert(unit.getSymName());
    for (const std::string &name : keepUnits) {
      auto unit = module.lookupSymbol<UnitOp>(name);
      if (!unit || !unit.isSharded()) {
        emitError(module.getLoc())
            << "cannot keep '" << name << "' gathered: "
            << (unit ? "the unit is replicated (never gathered)"
                     : "the module has no unit of that name");
        return failure();
      }
      kept.insert(unit.getSymName());
    }
    return kept;
  }

  /// The depth of every unit; failure (reported) for a malformed entry or
  /// a name that is not a sharded unit.
  FailureOr<Depths> getDepths(ModuleOp module) {
    Depths depths;
    depths.defaultDepth = prefetch;
    for (const std::string &entry : unitPrefetch) {
      auto [name, text] = StringRef(entry).rsplit(':');
      unsigned depth;
      if (text.getAsInteger(10, depth)) {
        emitError(module.getLoc())
            << "unit-prefetch entry '" << entry
            << "' is not <unit>:<depth> (e.g. layers.0:2)";
        return failure();
      }
      auto unit = module.lookupSymbol<UnitOp>(name);
      if (!unit || !unit.isSharded()) {
        emitError(module.getLoc())
            << "cannot prefetch '" << name << "': "
            << (unit ? "the unit is replicated (never gathered)"
                     : "the module has no unit of that name");
        return failure();
      }
      depths.units[unit.getSymName()] = depth;
    }
    return depths;
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<DenseSet<StringRef>> kept = getKeptUnits(module);
    FailureOr<Depths> depths = getDepths(module);
    if (failed(kept) || failed(depths))
      return signalPassFailure();
    // Units some function gathers more than once: the re-gathered ones.
    DenseSet<StringRef> regathered;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      Block *body = &func.getBody().front();
      keepGathered(body, *kept);
      DenseMap<StringRef, int64_t> gathers; // names held by the ops' attrs
      for (AllGatherOp gather : body->getOps<AllGatherOp>())
        if (++gathers[gather.getUnit()] == 2)
          regathered.insert(gather.getUnit());
      if (bucketBytes > 0)
        bucketCollectives(body, bucketBytes);
      if (!depths->any())
        continue;
      scheduleGathers(body, *depths);
      scheduleReductions(body);
    }
    // The decisions, for the report. A unit gathered once for forward and
    // backward (the last one, whose uses are adjacent) is kept too; so is
    // every unit of a forward-only function.
    Builder builder(module.getContext());
    for (UnitOp unit : module.getOps<UnitOp>()) {
      if (!unit.isSharded())
        continue;
      unit->setAttr(ZestDialect::kPrefetchAttrName,
                    builder.getI64IntegerAttr(depths->of(unit.getSymName())));
      if (!regathered.contains(unit.getSymName()))
        unit->setAttr(ZestDialect::kKeepAttrName, builder.getUnitAttr());
    }
  }
};
} // namespace
