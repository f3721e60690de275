//===- CheckpointActivations.cpp - Recompute a unit's forward -------------===//
//
// Activation checkpointing per unit, on the sharded step: what a unit's
// backward reads of its forward is recomputed right before the backward,
// from the unit's inputs and the parameters the backward gathers anyway, so
// only the inputs stay alive in between and no collective is added.
//
//===----------------------------------------------------------------------===//

#include "zest/Dialect/Zest/IR/ZestOps.h"
#include "zest/Dialect/Zest/Transforms/MemoryPlan.h"
#include "zest/Dialect/Zest/Transforms/Passes.h"
#include "zest/Dialect/Zest/Transforms/Transforms.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/Support/GlobPattern.h"

#include <limits>

namespace mlir::zest {
#define GEN_PASS_DEF_CHECKPOINTACTIVATIONSPASS
#include "zest/Dialect/Zest/Transforms/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;
using namespace mlir::zest;

namespace {

/// Whether `op` only views its first operand (reshapes, slices, casts).
bool isView(Operation *op) {
  return isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp,
             tensor::ExtractSliceOp, tensor::CastOp>(op);
}

/// The unit whose parameter `value` is (a `zest.unflatten`, or a view of
/// one), or null.
StringAttr getParamUnit(Value value) {
  while (Operation *producer = value.getDefiningOp()) {
    if (auto view = dyn_cast<UnflattenOp>(producer))
      return view.getUnitAttr().getAttr();
    if (!isView(producer))
      return {};
    value = producer->getOperand(0);
  }
  return {};
}

/// Whether `op` is computation a recomputation can repeat: no zest op (a
/// collective, a view of a gathered buffer) but attention, the loss and
/// grouped products, which compute on tensors alone, no memory effects.
bool isRecomputable(Operation *op) {
  return (!isa_and_nonnull<ZestDialect>(op->getDialect()) ||
          isa<AttentionOp, CrossEntropyOp, GroupedMatmulOp>(op)) &&
         isMemoryEffectFree(op) && !op->hasTrait<OpTrait::ConstantLike>() &&
         !isa<tensor::EmptyOp>(op);
}

/// Whether `op` is a constant or an empty tensor: what any clone may read.
bool isConstantOrEmpty(Operation *op) {
  return op &&
         (op->hasTrait<OpTrait::ConstantLike>() || isa<tensor::EmptyOp>(op));
}

/// A product (matrix, batched or grouped product, convolution, attention):
/// what the selective policy keeps rather than recomputes, as PyTorch's
/// selective checkpointing saves matmul and attention outputs.
bool isProduct(Operation *op) {
  if (isa<AttentionOp, GroupedMatmulOp>(op))
    return true;
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  return linalgOp && (linalg::isaContractionOpInterface(linalgOp) ||
                      linalg::isaConvolutionOpInterface(linalgOp));
}

/// The ops of `block` the loss (the result marked `zest.loss`) is computed
/// from: the forward. Empty without a loss.
DenseSet<Operation *> getForwardOps(func::FuncOp func, Block &block) {
  DenseSet<Operation *> forward;
  SmallVector<Value> worklist;
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
    if (func.getResultAttr(i, ZestDialect::kLossAttrName))
      worklist.push_back(block.getTerminator()->getOperand(i));
  while (!worklist.empty()) {
    Operation *producer = worklist.pop_back_val().getDefiningOp();
    if (!producer)
      continue;
    producer = block.findAncestorOpInBlock(*producer);
    if (producer && forward.insert(producer).second)
      llvm::append_range(worklist, getReadValues(producer));
  }
  return forward;
}

/// One function body's ops in order, and the unit each works for: the unit
/// whose parameters it reads, else that of its first user that has one
/// (zest-outline-regions' rule), so a block's forward and its backward are
/// each a run of ops working for the block's unit. Between two units'
/// forwards, the ops that read no parameter go to the earlier or the later
/// unit where the fewest bytes cross: a block's closing residual add is its
/// own, so the next block recomputes from its one input, not from the two
/// tensors the add reads.
class BodyLayout {
public:
  BodyLayout(Block &block, const DenseSet<Operation *> &forward)
      : block(block), forward(forward) {
    for (Operation &op : block.without_terminator())
      position[&op] = ops.size(), ops.push_back(&op);
    for (Operation *op : llvm::reverse(ops)) {
      if (!isRecomputable(op))
        continue;
      StringAttr unit = getOwnUnit(op);
      if (unit)
        ownUnit.insert(op);
      else
        unit = getUserUnit(op);
      if (unit)
        units[op] = unit;
    }
    placeForwardBoundaries();
  }

  StringAttr getUnit(Operation *op) const { return units.lookup(op); }

  /// The position of the op of the body that holds `op`, if any.
  std::optional<unsigned> getPosition(Operation *op) const {
    Operation *ancestor = block.findAncestorOpInBlock(*op);
    auto it = position.find(ancestor);
    if (it == position.end())
      return std::nullopt;
    return it->second;
  }

  Block &block;
  /// The ops the loss is computed from.
  const DenseSet<Operation *> &forward;
  SmallVector<Operation *> ops;

private:
  /// The unit of the parameters `op` reads, if exactly one.
  StringAttr getOwnUnit(Operation *op) const {
    StringAttr unit;
    for (Value value : getReadValues(op))
      if (StringAttr valueUnit = getParamUnit(value)) {
        if (unit && unit != valueUnit)
          return {};
        unit = valueUnit;
      }
    return unit;
  }

  /// The unit of `op`'s first user (in body order) that has one.
  StringAttr getUserUnit(Operation *op) const {
    std::optional<unsigned> first;
    StringAttr unit;
    for (Operation *user : op->getUsers()) {
      std::optional<unsigned> at = getPosition(user);
      if (!at || (first && *at >= *first))
        continue;
      if (StringAttr userUnit = units.lookup(ops[*at]))
        first = at, unit = userUnit;
    }
    return unit;
  }

  void placeForwardBoundaries();
  void placeBoundary(StringAttr before, ArrayRef<Operation *> run,
                     unsigned end);

  DenseMap<Operation *, unsigned> position;
  DenseMap<Operation *, StringAttr> units;
  DenseSet<Operation *> ownUnit;
};

/// Finds each run of forward ops without parameters between the last op
/// reading one unit's parameters and the first reading another's.
void BodyLayout::placeForwardBoundaries() {
  Operation *last = nullptr;
  SmallVector<Operation *> run;
  for (Operation *op : ops) {
    if (!forward.contains(op) || !units.count(op))
      continue;
    if (!ownUnit.contains(op)) {
      if (last)
        run.push_back(op);
      continue;
    }
    if (last && !run.empty() && getUnit(last) != getUnit(op))
      placeBoundary(getUnit(last), run, position.lookup(op));
    last = op, run.clear();
  }
}

/// Gives the ops of `run` before the cut to `before`, the unit whose
/// parameters were read last, and keeps the rest with the unit their users
/// gave them, cutting where the fewest bytes of values computed before are
/// read after: by the later units' forwards, or by any backward but that of
/// `before`. `end` is the position of the first op of the later unit.
void BodyLayout::placeBoundary(StringAttr before, ArrayRef<Operation *> run,
                               unsigned end) {
  StringAttr after = getUnit(run.back());
  if (llvm::any_of(run, [&](Operation *op) {
        StringAttr unit = getUnit(op);
        return unit != before && unit != after;
      }))
    return;
  // The values a cut can separate from their readers: those the run
  // computes or reads. Each with the index of the op in the run computing
  // it (-1 before the run) and the last position of a reader that counts.
  struct Crossing {
    int def;
    unsigned lastRead;
    int64_t bytes;
  };
  SmallVector<Crossing> values;
  DenseSet<Value> seen;
  auto consider = [&](Value value, int def) {
    if (isConstantOrEmpty(value.getDefiningOp()) || !seen.insert(value).second)
      return;
    unsigned lastRead = 0;
    for (Operation *user : value.getUsers()) {
      std::optional<unsigned> at = getPosition(user);
      if (!at)
        continue;
      Operation *reader = ops[*at];
      if (forward.contains(reader) || getUnit(reader) != before)
        lastRead = std::max(lastRead, *at);
    }
    values.push_back(
        {def, lastRead, getStaticBufferBytes(value.getType()).value_or(0)});
  };
  for (auto [index, op] : llvm::enumerate(run)) {
    for (Value read : getReadValues(op))
      consider(read, -1);
    for (Value result : op->getResults())
      consider(result, index);
  }
  // The cut before run[cut] (run.size(): after the whole run).
  unsigned best = 0;
  int64_t bestBytes = std::numeric_limits<int64_t>::max();
  for (unsigned cut = 0; cut <= run.size(); ++cut) {
    unsigned at = cut < run.size() ? position.lookup(run[cut]) : end;
    int64_t bytes = 0;
    for (const Crossing &value : values)
      if (value.def < static_cast<int>(cut) && value.lastRead >= at)
        bytes += value.bytes;
    if (bytes < bestBytes)
      best = cut, bestBytes = bytes;
  }
  for (Operation *op : run.take_front(best))
    units[op] = before;
}

/// Where a unit's forward and backward are in one body.
struct UnitSpan {
  /// The unit's ops the loss is computed from, in order.
  SmallVector<Operation *> forward;
  /// The first op after the forward's last that reads what it computed
  /// and is not forward itself: the backward starts here.
  Operation *backwardStart = nullptr;
};

/// `unit`'s forward and the start of its backward; no start where nothing
/// reads the forward afterwards, or nothing working for another unit lies
/// between (the last block of a stack: no memory to free in between).
UnitSpan findSpan(const BodyLayout &layout, StringAttr unit) {
  const DenseSet<Operation *> &forwardOps = layout.forward;
  UnitSpan span;
  for (Operation *op : layout.ops)
    if (forwardOps.contains(op) && layout.getUnit(op) == unit)
      span.forward.push_back(op);
  if (span.forward.empty())
    return span;
  // What the backward reads of this unit's forward alone: a value other
  // units' forward read too (an attention mask, rotary tables built in the
  // first block) is read by their backward as well, long before this
  // unit's backward starts.
  auto readByOtherForward = [&](Value value) {
    return llvm::any_of(value.getUsers(), [&](Operation *user) {
      std::optional<unsigned> at = layout.getPosition(user);
      Operation *op = at ? layout.ops[*at] : nullptr;
      return op && forwardOps.contains(op) && layout.getUnit(op) != unit;
    });
  };
  DenseSet<Value> computed;
  for (Operation *op : span.forward)
    for (Value result : op->getResults())
      if (!readByOtherForward(result))
        computed.insert(result);
  bool between = false;
  for (Operation *op = span.forward.back()->getNextNode();
       op && !op->hasTrait<OpTrait::IsTerminator>(); op = op->getNextNode()) {
    StringAttr opUnit = layout.getUnit(op);
    between |= opUnit && opUnit != unit;
    if (forwardOps.contains(op) ||
        llvm::none_of(getReadValues(op),
                      [&](Value v) { return computed.contains(v); }))
      continue;
    if (between)
      span.backwardStart = op;
    break;
  }
  return span;
}

struct CheckpointActivationsPass
    : public zest::impl::CheckpointActivationsPassBase<
          CheckpointActivationsPass> {
  using Base::Base;

  void runOnOperation() override;

private:
  bool checkpoint(const BodyLayout &layout, const UnitSpan &span, UnitOp unit,
                  CheckpointMode mode);
};

/// Whether `op` is an elementwise linalg op (every loop parallel).
bool isElementwise(Operation *op) {
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  return linalgOp && linalgOp.getNumLoops() == linalgOp.getNumParallelLoops();
}

/// The one op of `forward` that reads `op`'s single result, if there is
/// exactly one.
Operation *getOnlyForwardUser(Operation *op,
                              const DenseSet<Operation *> &forward) {
  if (op->getNumResults() != 1)
    return nullptr;
  Operation *only = nullptr;
  for (Operation *user : op->getResult(0).getUsers())
    if (forward.contains(user)) {
      if (only && only != user)
        return nullptr;
      only = user;
    }
  return only;
}

/// What the selective policy keeps of a forward: its products, each with
/// the elementwise chain its forward continues in (a bias, an activation;
/// the backward may read the links too): a linear layer as zest-fuse-linear
/// fuses it. Recomputing the activation instead would compute it outside
/// the fused kernel, rounding differently, and a product read by the
/// recomputation too could not be fused.
DenseSet<Operation *> getKeptLayers(ArrayRef<Operation *> ops,
                                    const DenseSet<Operation *> &forward) {
  DenseSet<Operation *> kept;
  for (Operation *op : ops) {
    if (!isProduct(op))
      continue;
    kept.insert(op);
    for (Operation *user = getOnlyForwardUser(op, forward);
         user && isElementwise(user) && kept.insert(user).second;
         user = getOnlyForwardUser(user, forward)) {
    }
  }
  return kept;
}

/// The values of `span`'s forward read from `start` on, and the forward
/// ops that compute them (without the products under the selective
/// policy, whose results are kept). Empty where something cannot be
/// recomputed.
std::pair<SmallVector<Value>, SetVector<Operation *>>
sliceSaved(const BodyLayout &layout, const UnitSpan &span, unsigned start,
           CheckpointMode mode) {
  DenseSet<Operation *> forward(span.forward.begin(), span.forward.end());
  DenseSet<Operation *> kept;
  if (mode == CheckpointMode::Selective)
    kept = getKeptLayers(span.forward, forward);
  auto isBackward = [&](Operation *user) {
    std::optional<unsigned> at = layout.getPosition(user);
    return at && *at >= start;
  };
  // Whether the backward reads `value`, directly or through views (the q,
  // k and v slices of a fused projection's output).
  std::function<bool(Value)> readFrom = [&](Value value) {
    return llvm::any_of(value.getUsers(), [&](Operation *user) {
      return isBackward(user) ||
             (isView(user) && llvm::any_of(user->getResults(), readFrom));
    });
  };
  auto readFromStart = [&](Operation *op) {
    return llvm::any_of(op->getResults(), readFrom);
  };
  SmallVector<Value> saved;
  for (Operation *op : span.forward)
    if (!kept.contains(op))
      for (Value result : op->getResults())
        if (llvm::any_of(result.getUsers(), isBackward))
          saved.push_back(result);
  // What the saved values are computed from. A kept layer the backward
  // does not read itself is recomputed where the slice needs it rather
  // than kept alive for the slice alone (attention's score blocks, which
  // only the log-sum-exp the backward reads comes from).
  auto recomputed = [&](Operation *op) {
    return op && op->getBlock() == &layout.block && forward.contains(op) &&
           (!kept.contains(op) || !readFromStart(op));
  };
  SetVector<Operation *> slice;
  SmallVector<Operation *> worklist;
  for (Value value : saved)
    worklist.push_back(value.getDefiningOp());
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    if (!slice.insert(op))
      continue;
    for (Value read : getReadValues(op))
      if (Operation *producer = read.getDefiningOp(); recomputed(producer))
        worklist.push_back(producer);
  }
  return {saved, slice};
}

/// Whether `op` computes its results from constants alone (a fill).
bool isComputedFromConstants(Operation *op) {
  return isRecomputable(op) && llvm::all_of(getReadValues(op), [](Value read) {
           return isConstantOrEmpty(read.getDefiningOp());
         });
}

/// Clones `op` with destinations of its own (its empty tensors cloned
/// where they are first written): writing into the forward's could keep
/// the forward's buffer alive until the recomputation.
void cloneWithOwnDestinations(OpBuilder &builder, Operation *op,
                              IRMapping &mapping) {
  for (Value read : getReadValues(op))
    if (isa_and_nonnull<tensor::EmptyOp>(read.getDefiningOp()) &&
        !mapping.contains(read))
      mapping.map(read,
                  builder.clone(*read.getDefiningOp(), mapping)->getResult(0));
  builder.clone(*op, mapping);
}

/// The re-gather of `unit` after `after` in its block, or null.
AllGatherOp findBackwardGather(UnitOp unit, Operation *after) {
  for (Operation *op = after->getNextNode(); op; op = op->getNextNode())
    if (auto gather = dyn_cast<AllGatherOp>(op))
      if (gather.getUnit() == unit.getSymName())
        return gather;
  return {};
}

/// Recomputes what `unit`'s backward reads of its forward (`span`) right
/// before that backward; false where the unit has no separate backward.
/// `layout` and `span` describe the body before any unit's recomputation:
/// the ops one unit inserts have no position, so they never count as
/// another unit's backward.
bool CheckpointActivationsPass::checkpoint(const BodyLayout &layout,
                                           const UnitSpan &span, UnitOp unit,
                                           CheckpointMode mode) {
  if (!span.backwardStart)
    return false;
  Operation *start = span.backwardStart;
  auto [saved, slice] =
      sliceSaved(layout, span, *layout.getPosition(start), mode);
  if (saved.empty())
    return false;
  // The parameters the recomputation reads: the backward's re-gather,
  // moved before the backward's first op if it was placed later (its
  // operand is the shard, an argument). A replicated unit's views are
  // read again as they are.
  AllGatherOp regather;
  if (unit.isSharded()) {
    regather = findBackwardGather(unit, span.forward.back());
    if (!regather || regather.getShard().getDefiningOp())
      return false;
    if (start->isBeforeInBlock(regather))
      regather->moveBefore(start);
  }
  OpBuilder builder(start);
  IRMapping mapping;
  for (Operation *op : slice)
    for (Value read : getReadValues(op)) {
      if (mapping.contains(read) || slice.contains(read.getDefiningOp()))
        continue;
      Operation *producer = read.getDefiningOp();
      if (auto view = dyn_cast_or_null<UnflattenOp>(producer)) {
        if (regather)
          mapping.map(read, UnflattenOp::create(
                                builder, view.getLoc(), view.getType(),
                                regather.getResult(), view.getUnitAttr(),
                                view.getParamAttr()));
        continue;
      }
      // A value computed from constants alone (a fill, which CSE shares
      // among blocks) is computed again rather than kept from the forward.
      if (producer && isComputedFromConstants(producer)) {
        cloneWithOwnDestinations(builder, producer, mapping);
        continue;
      }
      // What the unit reads from outside (its inputs, data, random
      // streams) is kept; behind a barrier, CSE cannot merge the
      // recomputation with the forward.
      if (isa<RankedTensorType>(read.getType()) && !isConstantOrEmpty(producer))
        mapping.map(read, OptimizationBarrierOp::create(builder, read.getLoc(),
                                                        read.getType(), read));
    }
  for (Operation *op : span.forward)
    if (slice.contains(op))
      cloneWithOwnDestinations(builder, op, mapping);
  unsigned from = *layout.getPosition(start);
  for (Value value : saved)
    value.replaceUsesWithIf(mapping.lookup(value), [&](OpOperand &use) {
      std::optional<unsigned> at = layout.getPosition(use.getOwner());
      return at && *at >= from;
    });
  return true;
}

/// The `units` entries as (glob, mode) pairs: an entry may end in `:full`
/// or `:selective`, the mode of the units it names; others take `mode`.
/// Fails with a diagnostic on an unknown mode.
static FailureOr<SmallVector<std::pair<std::string, CheckpointMode>>>
parseUnitModes(ModuleOp module, ArrayRef<std::string> entries,
               CheckpointMode mode) {
  SmallVector<std::pair<std::string, CheckpointMode>> parsed;
  for (StringRef entry : entries) {
    auto [glob, suffix] = splitAcUnitsEntry(entry);
    if (suffix.empty()) {
      parsed.push_back({glob.str(), mode});
      continue;
    }
    std::optional<CheckpointMode> unitMode = symbolizeCheckpointMode(suffix);
    if (!unitMode || *unitMode == CheckpointMode::None)
      return emitError(getModelDiagnosticLoc(module))
             << "--ac-units entry '" << entry << "': unknown mode '" << suffix
             << "' (use full or selective after the ':')";
    parsed.push_back({glob.str(), *unitMode});
  }
  return parsed;
}

/// The mode of `unit`: that of the first entry whose glob names it.
static CheckpointMode
getUnitMode(UnitOp unit,
            ArrayRef<std::pair<std::string, CheckpointMode>> entries,
            CheckpointMode mode) {
  for (auto &[text, entryMode] : entries)
    if (auto glob = llvm::GlobPattern::create(text);
        glob && glob->match(unit.getSymName()))
      return entryMode;
  return mode;
}

void CheckpointActivationsPass::runOnOperation() {
  ModuleOp module = getOperation();
  std::optional<CheckpointMode> parsed = symbolizeCheckpointMode(mode);
  if (!parsed) {
    emitError(module.getLoc()) << "unknown activation checkpointing mode '"
                               << mode << "': use none, full or selective";
    return signalPassFailure();
  }
  if (*parsed == CheckpointMode::None)
    return;
  FailureOr<SmallVector<std::pair<std::string, CheckpointMode>>> entries =
      parseUnitModes(module, units, *parsed);
  if (failed(entries))
    return signalPassFailure();
  SmallVector<std::string> globs;
  for (auto &[glob, unitMode] : *entries)
    globs.push_back(glob);
  FailureOr<SmallVector<UnitOp>> chosen =
      selectUnits(module, globs, "--ac-units", /*rootByDefault=*/false);
  if (failed(chosen))
    return signalPassFailure();
  SmallVector<CheckpointMode> modes;
  for (UnitOp unit : *chosen)
    modes.push_back(getUnitMode(unit, *entries, *parsed));
  DenseSet<Operation *> done;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isExternal())
      continue;
    Block &block = func.getBody().front();
    DenseSet<Operation *> forwardOps = getForwardOps(func, block);
    BodyLayout layout(block, forwardOps);
    // Every span first, on the body as it was: a recomputation placed
    // before an earlier unit's backward must not look like its start.
    SmallVector<UnitSpan> spans;
    for (UnitOp unit : *chosen)
      spans.push_back(findSpan(layout, unit.getSymNameAttr()));
    for (auto [unit, span, unitMode] : llvm::zip_equal(*chosen, spans, modes))
      if (checkpoint(layout, span, unit, unitMode))
        done.insert(unit);
  }
  for (auto [unit, unitMode] : llvm::zip_equal(*chosen, modes))
    if (done.contains(unit))
      unit->setAttr(
          ZestDialect::kCheckpointAttrName,
          StringAttr::get(&getContext(), stringifyCheckpointMode(unitMode)));
}

} // namespace
