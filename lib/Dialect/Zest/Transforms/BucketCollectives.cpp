//===- BucketCollectives.cpp - Several units per collective ---------------===//
//
// Every collective pays a fixed cost (a round of messages, a kernel launch)
// whatever its size, so a model with many small units pays it many times. A
// bucket moves several units' buffers in one collective, at the price of the
// copies in and out and of buffers held longer: gathered earlier, reduced
// later. Step of zest-schedule-collectives; see Passes.td.
//
//===----------------------------------------------------------------------===//

#include "CollectiveScheduling.h"
#include "zest/Dialect/Zest/IR/ZestOps.h"
#include "zest/Dialect/Zest/Transforms/MemoryPlan.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Dominance.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::zest;

namespace {

/// The kinds of collective a bucket may hold (one kind per bucket).
enum class Kind { Gather, Scatter, ReplicatedReduce, ReplicaReduce };

/// One synchronous collective over a unit, as bucketing sees it.
struct Member {
  Operation *op;
  Kind kind;
  UnitOp unit;
  Value input;
  /// The reduction of a gradient reduction; none for gathers.
  ReductionAttr reduction;
  /// The larger of its operand and result: the full buffer (the shard for
  /// an all-reduce across replicas).
  int64_t bytes;
};

std::optional<Member> getMember(Operation *op) {
  auto make = [&](Kind kind, FlatSymbolRefAttr ref, Value input,
                  ReductionAttr reduction) -> std::optional<Member> {
    auto unit = SymbolTable::lookupNearestSymbolFrom<UnitOp>(op, ref);
    if (!unit)
      return std::nullopt; // already a bucket
    int64_t bytes =
        std::max(getStaticBufferBytes(input.getType()).value_or(0),
                 getStaticBufferBytes(op->getResult(0).getType()).value_or(0));
    return Member{op, kind, unit, input, reduction, bytes};
  };
  return llvm::TypeSwitch<Operation *, std::optional<Member>>(op)
      .Case([&](AllGatherOp gather) {
        return make(Kind::Gather, gather.getUnitAttr(), gather.getShard(), {});
      })
      .Case([&](ReduceScatterOp scatter) {
        return make(Kind::Scatter, scatter.getUnitAttr(), scatter.getInput(),
                    scatter.getReductionAttr());
      })
      .Case([&](AllReduceOp reduce) {
        return make(reduce.getAcrossReplicas() ? Kind::ReplicaReduce
                                               : Kind::ReplicatedReduce,
                    reduce.getUnitAttr(), reduce.getInput(),
                    reduce.getReductionAttr());
      })
      .Default([](Operation *) { return std::nullopt; });
}

/// Ranks the collective runs over: one rank moves nothing worth merging.
int64_t getGroupSize(const Member &member) {
  UnitOp unit = member.unit;
  switch (member.kind) {
  case Kind::Gather:
  case Kind::Scatter:
    return unit.getWorldSize();
  case Kind::ReplicatedReduce:
    return unit.getNumRanks();
  case Kind::ReplicaReduce:
    return unit.getNumReplicas();
  }
  llvm_unreachable("unknown collective kind");
}

/// Whether `member` may join a bucket that starts with `first` and holds
/// `members`: same kind, layout and reduction, a unit not in it yet.
bool isCompatible(const Member &first, ArrayRef<Member> members,
                  const Member &member) {
  return member.kind == first.kind && member.reduction == first.reduction &&
         haveSameLayout(first.unit, member.unit) &&
         llvm::none_of(members,
                       [&](const Member &m) { return m.unit == member.unit; });
}

/// The bucket of `members`' units in this order: an existing declaration,
/// or a new one after the units.
FlatSymbolRefAttr getOrCreateBucket(ArrayRef<Member> members) {
  auto module = members.front().op->getParentOfType<ModuleOp>();
  MLIRContext *ctx = module.getContext();
  ArrayAttr units = ArrayAttr::get(
      ctx, llvm::map_to_vector(members, [](Member m) -> Attribute {
        return FlatSymbolRefAttr::get(m.unit.getSymNameAttr());
      }));
  Operation *last = nullptr;
  for (Operation &op : module.getOps()) {
    if (auto bucket = dyn_cast<BucketOp>(op))
      if (bucket.getUnits() == units)
        return FlatSymbolRefAttr::get(bucket.getSymNameAttr());
    if (isa<UnitOp, BucketOp>(op))
      last = &op;
  }
  unsigned index = 0;
  std::string name;
  do
    name = "bucket" + std::to_string(index++);
  while (module.lookupSymbol(name));
  OpBuilder builder(ctx);
  builder.setInsertionPointAfter(last);
  auto bucket = BucketOp::create(builder, module.getLoc(), name, units);
  return FlatSymbolRefAttr::get(bucket.getSymNameAttr());
}

/// The packed type of `values` (1-D, of one element type).
RankedTensorType getPackedType(ValueRange values) {
  int64_t numel = 0;
  for (Value value : values)
    numel += cast<RankedTensorType>(value.getType()).getNumElements();
  return RankedTensorType::get(
      {numel},
      cast<RankedTensorType>(values.front().getType()).getElementType());
}

/// Replaces each member's result by the bucket's part of it, and the
/// member by nothing.
void replaceMembers(ArrayRef<Member> members, ValueRange parts) {
  for (auto [member, part] : llvm::zip(members, parts)) {
    member.op->getResult(0).replaceAllUsesWith(part);
    member.op->erase();
  }
}

/// Replaces `members` (gathers, the first one earliest) by one gather of
/// their bucket where the first one was.
void emitGatherBucket(ArrayRef<Member> members) {
  Operation *first = members.front().op;
  OpBuilder builder(first);
  Location loc = first->getLoc();
  SmallVector<Value> shards =
      llvm::map_to_vector(members, [](const Member &m) { return m.input; });
  SmallVector<Type> fullTypes = llvm::map_to_vector(
      members, [](const Member &m) { return m.op->getResult(0).getType(); });
  RankedTensorType shardType = getPackedType(shards);
  UnitOp unit = members.front().unit;
  int64_t ranks = unit.getWorldSize();
  auto fullType = RankedTensorType::get({shardType.getNumElements() * ranks},
                                        shardType.getElementType());
  Value packed = PackOp::create(builder, loc, shardType, shards,
                                builder.getI64IntegerAttr(1));
  Value gathered = AllGatherOp::create(builder, loc, fullType, packed,
                                       getOrCreateBucket(members));
  auto unpack = UnpackOp::create(builder, loc, fullTypes, gathered,
                                 builder.getI64IntegerAttr(ranks));
  replaceMembers(members, unpack.getResults());
}

/// The ops reading the results of `members` before `last` (which joins
/// them), to move after the bucket; failure if one cannot move or `last`
/// itself needs one of them.
FailureOr<SmallVector<Operation *>> getDelayedReaders(ArrayRef<Member> members,
                                                      Operation *last) {
  llvm::SetVector<Operation *> readers;
  for (const Member &member : members) {
    FailureOr<SmallVector<Operation *>> own =
        getMovableReaders(member.op->getResult(0), last);
    if (failed(own))
      return failure();
    readers.insert_range(*own);
  }
  for (Value operand : last->getOperands()) {
    Operation *def = operand.getDefiningOp();
    if (def &&
        (readers.contains(def) ||
         llvm::any_of(members, [&](const Member &m) { return m.op == def; })))
      return failure();
  }
  SmallVector<Operation *> sorted = readers.takeVector();
  llvm::sort(sorted,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return sorted;
}

/// Replaces `members` (gradient reductions, the last one latest) by one
/// reduction of their bucket where the last one was; `readers` of the
/// earlier ones move down after it.
void emitReductionBucket(ArrayRef<Member> members,
                         ArrayRef<Operation *> readers) {
  const Member &last = members.back();
  OpBuilder builder(last.op);
  Location loc = last.op->getLoc();
  SmallVector<Value> inputs =
      llvm::map_to_vector(members, [](const Member &m) { return m.input; });
  SmallVector<Type> resultTypes = llvm::map_to_vector(
      members, [](const Member &m) { return m.op->getResult(0).getType(); });
  RankedTensorType packedType = getPackedType(inputs);
  // A reduce-scatter's rank r receives piece r of every member.
  UnitOp unit = last.unit;
  int64_t pieces =
      last.kind == Kind::Scatter ? unit.getWorldSize() : int64_t(1);
  // Shards that one unpack split, in order, are its operand again.
  Value packed = builder.createOrFold<PackOp>(
      loc, packedType, inputs, builder.getI64IntegerAttr(pieces));
  FlatSymbolRefAttr bucket = getOrCreateBucket(members);
  Value reduced;
  if (last.kind == Kind::Scatter)
    reduced = ReduceScatterOp::create(
        builder, loc,
        RankedTensorType::get({packedType.getNumElements() / pieces},
                              packedType.getElementType()),
        last.reduction, packed, bucket);
  else
    reduced = AllReduceOp::create(
        builder, loc, packedType, last.reduction, packed, bucket,
        last.kind == Kind::ReplicaReduce ? builder.getUnitAttr() : nullptr);
  auto unpack = UnpackOp::create(builder, loc, resultTypes, reduced,
                                 builder.getI64IntegerAttr(1));
  replaceMembers(members, unpack.getResults());
  Operation *after = unpack;
  for (Operation *reader : readers) {
    reader->moveAfter(after);
    after = reader;
  }
}

/// Merges runs of `kind` in `block`, greedily in program order.
void bucketKind(Block *block, Kind kind, int64_t bucketBytes) {
  SmallVector<Member> candidates;
  for (Operation &op : *block)
    if (std::optional<Member> member = getMember(&op);
        member && member->kind == kind && getGroupSize(*member) > 1)
      candidates.push_back(*member);
  DominanceInfo dominance(block->getParentOp());
  size_t index = 0;
  while (index < candidates.size()) {
    SmallVector<Member> members = {candidates[index]};
    SmallVector<Operation *> readers;
    int64_t bytes = members.front().bytes;
    size_t next = index + 1;
    for (; next < candidates.size(); ++next) {
      const Member &member = candidates[next];
      if (!isCompatible(members.front(), members, member) ||
          bytes + member.bytes > bucketBytes)
        break;
      if (kind == Kind::Gather) {
        // Gathered where the first one is: its shard must exist there.
        if (!dominance.properlyDominates(member.input, members.front().op))
          break;
      } else {
        // Reduced where this one is: the others' readers wait for it.
        FailureOr<SmallVector<Operation *>> delayed =
            getDelayedReaders(members, member.op);
        if (failed(delayed))
          break;
        readers = std::move(*delayed);
      }
      members.push_back(member);
      bytes += member.bytes;
    }
    if (members.size() > 1) {
      if (kind == Kind::Gather)
        emitGatherBucket(members);
      else
        emitReductionBucket(members, readers);
    }
    index = next;
  }
}

} // namespace

void mlir::zest::bucketCollectives(Block *block, int64_t bucketBytes) {
  // Reduce-scatter buckets first: their readers include the all-reduces
  // across replicas, which then follow one another and bucket in turn.
  for (Kind kind : {Kind::Gather, Kind::Scatter, Kind::ReplicatedReduce,
                    Kind::ReplicaReduce})
    bucketKind(block, kind, bucketBytes);
  // Unpacks whose every result was packed again.
  for (UnpackOp unpack : llvm::make_early_inc_range(block->getOps<UnpackOp>()))
    if (unpack->use_empty())
      unpack.erase();
}
