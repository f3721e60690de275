//===- FuseRows.cpp - A normalization's ops as one row kernel -------------===//
//
// Runs of linalg ops on buffers that a block of threads per row can run one
// after the other become one scf.execute_region marked zest.row_kernel,
// which zest-outline-kernels makes one kernel and zest-map-kernels-to-gpu
// one launch. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "BlockReductions.h"
#include "zest/Conversion/Passes.h"
#include "zest/Dialect/Zest/IR/ZestDialect.h"
#include "zest/Dialect/Zest/Transforms/BufferExtents.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::zest {
#define GEN_PASS_DEF_FUSEROWSPASS
#include "zest/Conversion/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;

namespace {

/// The elements of its root an operand touches for row `r` of a group:
/// `[offset + r * stride, offset + r * stride + width)`.
struct RowFootprint {
  int64_t offset, stride, width;
};

/// One buffer operand of a grouped op.
struct Access {
  bool write;
  std::optional<zest::Extent> extent;
  std::optional<RowFootprint> rows;
};

/// An op of a group: how it splits over the rows, what it touches.
struct Member {
  linalg::LinalgOp op;
  zest::RowSplit split;
  SmallVector<Access, 4> accesses;
};

/// A row group: its ops, and the ops between them it does not hold, which
/// move after it (a bias gradient's column sum amid a LayerNorm's backward).
struct Group {
  int64_t rows;
  SmallVector<Member, 4> members; // in program order
  SmallVector<Member, 4> deferred;
};

/// At most this many ops move out of a group's way.
constexpr size_t kMaxDeferred = 8;

/// Whether `op` may be in a group: a linalg op on buffers of static sizes
/// whose body reads no buffer.
bool isCandidate(Operation *op) {
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  if (!linalgOp || !linalgOp.hasPureBufferSemantics() ||
      linalgOp.getNumLoops() == 0 ||
      llvm::any_of(linalgOp.getStaticLoopRanges(), ShapedType::isDynamic))
    return false;
  llvm::SetVector<Value> above;
  getUsedValuesDefinedAbove(op->getRegions(), above);
  return llvm::none_of(
      above, [](Value value) { return isa<MemRefType>(value.getType()); });
}

/// Whether `op` may stand between grouped ops: moved before the group (a
/// view, a constant, an allocation) or after it (a free).
bool isMovable(Operation *op) {
  return isPure(op) || isa<memref::AllocOp, memref::DeallocOp>(op);
}

/// The rows `op` reduces to, if it is a block reduction along its rows.
std::optional<int64_t> getReducedRows(linalg::LinalgOp op) {
  unsigned parallel = op.getNumParallelLoops();
  if (parallel == 0 || parallel == op.getNumLoops())
    return std::nullopt;
  int64_t rows = 1;
  for (int64_t range : ArrayRef(op.getStaticLoopRanges()).take_front(parallel))
    rows *= range;
  if (!zest::getRowSplit(op, rows))
    return std::nullopt;
  return rows;
}

/// Where `operand` of `op` touches its root row by row, if it does: its
/// leading indices are the row loops in order over row-major contiguous
/// rows, and its other indices, which name no row loop, stay within a row.
std::optional<RowFootprint>
getRowFootprint(linalg::LinalgOp op, OpOperand &operand, unsigned rowLoops) {
  auto type = cast<MemRefType>(operand.get().getType());
  SmallVector<int64_t> strides;
  int64_t offset;
  if (!type.hasStaticShape() ||
      failed(type.getStridesAndOffset(strides, offset)) ||
      ShapedType::isDynamic(offset) ||
      llvm::any_of(strides, [](int64_t s) { return s < 0; }))
    return std::nullopt; // a dynamic stride is negative too
  AffineMap map = op.getMatchingIndexingMap(&operand);
  if (map.getNumResults() < rowLoops)
    return std::nullopt;
  for (auto [t, expr] : llvm::enumerate(map.getResults())) {
    auto dim = dyn_cast<AffineDimExpr>(expr);
    if (t < rowLoops ? !dim || dim.getPosition() != t
                     : llvm::any_of(llvm::seq(0u, rowLoops), [&](unsigned d) {
                         return expr.isFunctionOfDim(d);
                       }))
      return std::nullopt;
  }
  ArrayRef<int64_t> shape = type.getShape();
  for (unsigned t = 0; t + 1 < rowLoops; ++t)
    if (strides[t] != strides[t + 1] * shape[t + 1])
      return std::nullopt;
  RowFootprint footprint{offset, strides[rowLoops - 1], 1};
  for (size_t t = rowLoops; t < shape.size(); ++t)
    footprint.width += (shape[t] - 1) * strides[t];
  if (footprint.width > footprint.stride)
    return std::nullopt;
  return footprint;
}

/// `op`'s buffer operands, row by row where they are over `rowLoops` loops.
SmallVector<Access, 4> getAccesses(linalg::LinalgOp op, unsigned rowLoops,
                                   const zest::DistinctArgFunctions &distinct) {
  SmallVector<Access, 4> accesses;
  for (OpOperand &operand : op->getOpOperands()) {
    if (!isa<MemRefType>(operand.get().getType()))
      continue;
    accesses.push_back(
        {op.isDpsInit(&operand), zest::getExtent(operand.get(), distinct),
         rowLoops ? getRowFootprint(op, operand, rowLoops) : std::nullopt});
  }
  return accesses;
}

/// `op` as a member of a group of `rows` rows, if it splits over them.
std::optional<Member> getMember(linalg::LinalgOp op, int64_t rows,
                                const zest::DistinctArgFunctions &distinct) {
  std::optional<zest::RowSplit> split = zest::getRowSplit(op, rows);
  if (!split)
    return std::nullopt;
  return Member{op, *split, getAccesses(op, split->rowLoops, distinct)};
}

/// Whether `a` and `b` may touch the same element, one of them writing.
bool mayConflict(const Access &a, const Access &b) {
  if (!a.write && !b.write)
    return false;
  return !a.extent || !b.extent || a.extent->overlaps(*b.extent);
}

/// Whether blocks running different rows could see each other's work
/// through `a` and `b`, accesses of two different ops of a group: they may
/// conflict, and they do not both stay within rows whose elements of one
/// never meet another row's of the other.
bool conflict(const Access &a, const Access &b) {
  if (!mayConflict(a, b))
    return false;
  if (!a.rows || !b.rows || a.rows->stride != b.rows->stride)
    return true;
  // Row r of `a` and row r + t of `b` (t != 0) are disjoint for t = +-1,
  // hence for every t, when the offsets differ by at most a row less the
  // widths.
  int64_t delta = b.rows->offset - a.rows->offset, stride = a.rows->stride;
  return delta < a.rows->width - stride || delta > stride - b.rows->width;
}

/// Whether `member` may join `group`: no conflict with its ops, and none
/// with the ops it defers (`member` moves before them).
bool canJoin(const Member &member, const Group &group) {
  for (const Member &other : group.members)
    for (const Access &a : member.accesses)
      for (const Access &b : other.accesses)
        if (conflict(a, b))
          return false;
  for (const Member &other : group.deferred)
    for (const Access &a : member.accesses)
      for (const Access &b : other.accesses)
        if (mayConflict(a, b))
          return false;
  return true;
}

/// Splits `run`, consecutive candidates separated only by movable ops, into
/// groups: each around a block reduction, taking the neighbours before it
/// and after it that split over the same rows and do not conflict; ops
/// after it that do not join move after the group if the ones that join
/// later do not touch what they write or write what they read.
void formGroups(ArrayRef<linalg::LinalgOp> run,
                const zest::DistinctArgFunctions &distinct,
                std::vector<Group> &groups) {
  size_t start = 0;
  while (start < run.size()) {
    size_t seed = start;
    std::optional<int64_t> rows;
    for (; seed < run.size() && !(rows = getReducedRows(run[seed])); ++seed)
      ;
    if (!rows)
      return;
    Group group{*rows, {*getMember(run[seed], *rows, distinct)}, {}};
    auto join = [&](size_t i, bool before) {
      std::optional<Member> member = getMember(run[i], *rows, distinct);
      if (!member || !canJoin(*member, group))
        return false;
      group.members.insert(before ? group.members.begin() : group.members.end(),
                           std::move(*member));
      return true;
    };
    for (size_t i = seed; i > start && join(i - 1, /*before=*/true); --i)
      ;
    // Ops that do not join wait in group.deferred; they move after the
    // group only if an op after them joins (the first `moved` of them).
    size_t end = seed + 1, next = end, moved = 0;
    for (; end < run.size(); ++end) {
      if (join(end, /*before=*/false)) {
        next = end + 1;
        moved = group.deferred.size();
      } else if (group.deferred.size() < kMaxDeferred) {
        group.deferred.push_back(
            Member{run[end], {}, getAccesses(run[end], 0, distinct)});
      } else {
        break;
      }
    }
    group.deferred.truncate(moved);
    if (group.members.size() > 1)
      groups.push_back(std::move(group));
    start = next;
  }
}

/// Drops a fill of a reduction's output with its identity right before the
/// reduction: the reduction stores without reading (zest.init_is_identity).
void foldIdentityFills(Group &group) {
  for (size_t i = 0; i + 1 < group.members.size(); ++i) {
    auto fill = dyn_cast<linalg::FillOp>(group.members[i].op.getOperation());
    auto reduce =
        dyn_cast<linalg::GenericOp>(group.members[i + 1].op.getOperation());
    if (!fill || !reduce || !group.members[i + 1].split.reduction ||
        zest::getFilledBuffer(
            fill, zest::getBlockReduction(reduce)->combiner.identity) !=
            reduce.getDpsInits()[0])
      continue;
    reduce->setAttr(zest::kInitIsIdentityAttrName,
                    UnitAttr::get(reduce.getContext()));
    fill.erase();
    group.members.erase(group.members.begin() + i);
  }
}

/// Moves what stands between `group`'s ops out of their way (views,
/// constants and allocations before, the deferred ops and then the frees
/// after) and its ops into one scf.execute_region marked zest.row_kernel.
void materialize(Group &group) {
  Operation *first = group.members.front().op;
  Operation *last = group.members.back().op;
  llvm::SmallPtrSet<Operation *, 8> members, deferred;
  for (const Member &member : group.members)
    members.insert(member.op);
  for (const Member &member : group.deferred)
    deferred.insert(member.op);
  SmallVector<Operation *> after, frees; // deferred ops, then frees
  for (Operation *op = first->getNextNode(); op != last;) {
    Operation *next = op->getNextNode();
    if (deferred.contains(op))
      after.push_back(op);
    else if (isa<memref::DeallocOp>(op))
      frees.push_back(op);
    else if (!members.contains(op))
      op->moveBefore(first);
    op = next;
  }
  after.append(frees);
  for (Operation *op : after) {
    op->moveAfter(last);
    last = op;
  }
  foldIdentityFills(group);
  first = group.members.front().op;
  OpBuilder builder(first);
  auto region =
      scf::ExecuteRegionOp::create(builder, first->getLoc(), TypeRange{});
  region->setAttr(zest::ZestDialect::kRowKernelAttrName,
                  builder.getI64IntegerAttr(group.rows));
  Block *body = builder.createBlock(&region.getRegion());
  for (const Member &member : group.members)
    member.op->moveBefore(body, body->end());
  builder.setInsertionPointToEnd(body);
  scf::YieldOp::create(builder, region.getLoc());
}

struct FuseRowsPass : public zest::impl::FuseRowsPassBase<FuseRowsPass> {
  using Base::Base;

  void runOnOperation() override {
    zest::DistinctArgFunctions distinct =
        zest::getDistinctArgFunctions(getOperation());
    std::vector<Group> groups;
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      for (Block &block : func.getBody()) {
        SmallVector<linalg::LinalgOp> run;
        for (Operation &op : block) {
          if (isCandidate(&op)) {
            run.push_back(cast<linalg::LinalgOp>(op));
          } else if (!isMovable(&op)) {
            formGroups(run, distinct, groups);
            run.clear();
          }
        }
        formGroups(run, distinct, groups);
      }
    }
    for (Group &group : groups)
      materialize(group);
  }
};

} // namespace
