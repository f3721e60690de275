//===- WriteCopiesInPlace.cpp - Ops write where their results are copied --===//
//
// Bufferized, a concatenation of one op's results (attention's q, k and v
// gradients joined into the fused projection's gradient) is a buffer per
// result that the op writes, then a copy of each into its slice of the
// concatenation. The op writes the slices directly instead: no copy, and
// the pieces' buffers go. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "zest/Dialect/Zest/Transforms/MemoryPlan.h"
#include "zest/Dialect/Zest/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::zest {
#define GEN_PASS_DEF_WRITECOPIESINPLACEPASS
#include "zest/Dialect/Zest/Transforms/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;

namespace {

/// Whether `op` is a view of its buffer operand: a subview or a reshape.
bool isView(Operation *op) {
  return isa<memref::SubViewOp, memref::ExpandShapeOp, memref::CollapseShapeOp>(
      op);
}

/// The buffer `value` views, and the views from `value` down to it.
Value getViewedBuffer(Value value, SmallVectorImpl<Operation *> &views) {
  while (Operation *op = value.getDefiningOp()) {
    if (!isView(op) || op->getNumOperands() != 1)
      break;
    views.push_back(op);
    value = op->getOperand(0);
  }
  return value;
}

/// The ops that read or write `buffer`, directly or through views.
void collectAccesses(Value buffer, SmallVectorImpl<Operation *> &accesses) {
  for (Operation *user : buffer.getUsers()) {
    if (isView(user))
      collectAccesses(user->getResult(0), accesses);
    else
      accesses.push_back(user);
  }
}

/// A static allocation in `block`.
memref::AllocOp getFreshBuffer(Value value, Block *block) {
  auto alloc = value.getDefiningOp<memref::AllocOp>();
  if (!alloc || alloc->getBlock() != block ||
      !alloc.getDynamicSizes().empty() || !alloc.getSymbolOperands().empty())
    return {};
  return alloc;
}

/// The arguments of private functions that every call passes a buffer of
/// their own: a static allocation in the call's block that the call passes
/// nowhere else (the out-parameters buffer-results-to-out-params made of a
/// region's results). In the callee nothing else aliases one, as nothing
/// else aliases a fresh allocation.
DenseSet<Value> getExclusiveArguments(ModuleOp module) {
  DenseSet<Value> exclusive;
  // One walk of the module finds every function's users.
  SymbolTableCollection tables;
  SymbolUserMap userMap(tables, module);
  for (auto func : module.getOps<func::FuncOp>()) {
    ArrayRef<Operation *> users = userMap.getUsers(func);
    if (!func.isPrivate() || func.isExternal() || users.empty())
      continue;
    for (BlockArgument arg : func.getArguments()) {
      bool ownBuffer = llvm::all_of(users, [&](Operation *user) {
        auto call = dyn_cast<func::CallOp>(user);
        if (!call || call.getCallee() != func.getSymName())
          return false;
        Value operand = call.getOperand(arg.getArgNumber());
        return getFreshBuffer(operand, call->getBlock()) &&
               llvm::count(call.getOperands(), operand) == 1;
      });
      if (ownBuffer)
        exclusive.insert(arg);
    }
  }
  return exclusive;
}

/// The destination operand of `op` that is `buffer`, if `op` (not a call)
/// only writes it there.
OpOperand *getWriteOnlyInit(Operation *op, Value buffer) {
  auto dps = dyn_cast<DestinationStyleOpInterface>(op);
  if (!dps || isa<CallOpInterface>(op))
    return nullptr;
  OpOperand *init = nullptr;
  for (OpOperand &operand : op->getOpOperands()) {
    if (operand.get() != buffer)
      continue;
    if (init || !dps.isDpsInit(&operand))
      return nullptr;
    init = &operand;
  }
  if (!init)
    return nullptr;
  if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op))
    return linalgOp.payloadUsesValueFromOperand(init) ? nullptr : init;
  auto effects = dyn_cast<MemoryEffectOpInterface>(op);
  if (!effects)
    return nullptr;
  SmallVector<MemoryEffects::EffectInstance> instances;
  effects.getEffectsOnValue(buffer, instances);
  bool reads = llvm::any_of(instances, [](auto &instance) {
    return isa<MemoryEffects::Read>(instance.getEffect());
  });
  return reads ? nullptr : init;
}

/// Whether `subview` is a slice of its source with static offsets, sizes
/// and strides that keeps its rank.
bool isStaticSlice(memref::SubViewOp subview) {
  return subview->getNumOperands() == 1 &&
         subview.getType().getRank() == subview.getSourceType().getRank();
}

/// The box of `buffer` (offsets and sizes) that `view` covers, if it is a
/// chain of static, unit-stride, rank-preserving subviews of `buffer` (a
/// half of a rotary embedding's part of q), possibly reshaped after them:
/// reshapes keep what a view covers.
std::optional<std::pair<SmallVector<int64_t>, SmallVector<int64_t>>>
getBox(Value view, Value buffer) {
  SmallVector<Operation *> views;
  if (getViewedBuffer(view, views) != buffer || views.empty())
    return std::nullopt;
  // Subviews next to the buffer, reshapes after them.
  auto reshapes = llvm::find_if(llvm::reverse(views), [](Operation *op) {
    return !isa<memref::SubViewOp>(op);
  });
  if (reshapes == llvm::reverse(views).begin() ||
      llvm::any_of(llvm::make_range(reshapes, llvm::reverse(views).end()),
                   llvm::IsaPred<memref::SubViewOp>))
    return std::nullopt;
  SmallVector<int64_t> offsets, sizes;
  for (Operation *op :
       llvm::make_range(llvm::reverse(views).begin(), reshapes)) {
    auto subview = cast<memref::SubViewOp>(op);
    if (!isStaticSlice(subview) || !subview.hasUnitStride())
      return std::nullopt;
    if (offsets.empty())
      offsets.assign(subview.getStaticOffsets().size(), 0);
    for (auto [offset, inner] : llvm::zip(offsets, subview.getStaticOffsets()))
      offset += inner;
    sizes.assign(subview.getStaticSizes().begin(),
                 subview.getStaticSizes().end());
  }
  return std::make_pair(offsets, sizes);
}

/// Whether views `a` and `b` of `buffer` are static boxes that do not
/// overlap.
bool areDisjoint(Value a, Value b, Value buffer) {
  auto boxA = getBox(a, buffer), boxB = getBox(b, buffer);
  if (!boxA || !boxB)
    return false;
  for (auto [offsetA, sizeA, offsetB, sizeB] :
       llvm::zip(boxA->first, boxA->second, boxB->first, boxB->second))
    if (offsetA + sizeA <= offsetB || offsetB + sizeB <= offsetA)
      return true;
  return false;
}

/// The type of a buffer of type `type` reshaped to `shape` by
/// `reassociation` (an expansion where `shape` has more dimensions), or
/// failure if the strided layout does not allow it.
FailureOr<MemRefType>
getReshapedType(MemRefType type, ArrayRef<int64_t> shape,
                ArrayRef<ReassociationIndices> reassociation) {
  if (static_cast<int64_t>(shape.size()) > type.getRank())
    return memref::ExpandShapeOp::computeExpandedType(type, shape,
                                                      reassociation);
  if (!memref::CollapseShapeOp::isGuaranteedCollapsible(type, reassociation))
    return failure();
  return memref::CollapseShapeOp::computeCollapsedType(type, reassociation);
}

/// The reassociation of a reshape (an expand_shape or collapse_shape).
SmallVector<ReassociationIndices> getReassociation(Operation *reshape) {
  if (auto collapse = dyn_cast<memref::CollapseShapeOp>(reshape))
    return collapse.getReassociationIndices();
  return cast<memref::ExpandShapeOp>(reshape).getReassociationIndices();
}

/// The type of `type` reshaped back through `reshape` (a view of the
/// source), or failure if the strided layout does not allow it.
FailureOr<MemRefType> getUnreshapedType(MemRefType type, Operation *reshape) {
  return getReshapedType(
      type, cast<MemRefType>(reshape->getOperand(0).getType()).getShape(),
      getReassociation(reshape));
}

/// Whether every operand of `op` that views `buffer` is disjoint from
/// `view`.
bool accessesApart(Operation *op, Value buffer, Value view) {
  return llvm::all_of(op->getOperands(), [&](Value operand) {
    SmallVector<Operation *> views;
    return getViewedBuffer(operand, views) != buffer ||
           areDisjoint(operand, view, buffer);
  });
}

/// Whether an op after `first` and before `last` accesses `buffer` other
/// than through views disjoint from `view` (the other parts of a
/// concatenation, copied in between: Pythia's q and k gradients beside the
/// v gradient that attention's backward writes).
bool isAccessedBetween(Value buffer, Value view, Operation *first,
                       Operation *last) {
  SmallVector<Operation *> accesses;
  collectAccesses(buffer, accesses);
  Block *block = last->getBlock();
  return llvm::any_of(accesses, [&](Operation *op) {
    if (op == last || op == first)
      return false;
    Operation *ancestor = block->findAncestorOpInBlock(*op);
    if (!ancestor)
      return true; // another block's: not ordered with the two
    return first->isBeforeInBlock(ancestor) &&
           ancestor->isBeforeInBlock(last) && !accessesApart(op, buffer, view);
  });
}

/// `view` reshaped back through `reshape` to `type`.
Value unreshape(RewriterBase &rewriter, Operation *reshape, Value view,
                MemRefType type) {
  Location loc = reshape->getLoc();
  if (isa<memref::CollapseShapeOp>(reshape))
    return memref::ExpandShapeOp::create(rewriter, loc, type, view,
                                         getReassociation(reshape));
  return memref::CollapseShapeOp::create(rewriter, loc, type, view,
                                         getReassociation(reshape));
}

/// The type of view `op` (a static, rank-preserving subview or a reshape)
/// taken of a buffer of type `source` instead of its operand, or failure
/// where the strided layout does not allow it.
FailureOr<MemRefType> getViewTypeOn(Operation *op, MemRefType source) {
  if (auto subview = dyn_cast<memref::SubViewOp>(op)) {
    if (!isStaticSlice(subview))
      return failure();
    return memref::SubViewOp::inferResultType(
        source, subview.getStaticOffsets(), subview.getStaticSizes(),
        subview.getStaticStrides());
  }
  return getReshapedType(
      source, cast<MemRefType>(op->getResult(0).getType()).getShape(),
      getReassociation(op));
}

/// The types of `copy`'s target view reshaped back through `reshapes` (the
/// source's, from the copied value down to its buffer), or failure where a
/// strided layout does not allow it.
FailureOr<SmallVector<MemRefType>>
getUnreshapedTypes(memref::CopyOp copy, ArrayRef<Operation *> reshapes) {
  SmallVector<MemRefType> types;
  auto type = cast<MemRefType>(copy.getTarget().getType());
  for (Operation *reshape : reshapes) {
    FailureOr<MemRefType> unreshaped = getUnreshapedType(type, reshape);
    if (failed(unreshaped))
      return failure();
    types.push_back(type = *unreshaped);
  }
  return types;
}

/// `copy`'s target view, its views (`targetViews`) taken again at the
/// insertion point and reshaped back through `reshapes` to `types`: where
/// the source's buffer is written instead.
Value retakeTargetView(RewriterBase &rewriter, memref::CopyOp copy,
                       ArrayRef<Operation *> targetViews,
                       ArrayRef<Operation *> reshapes,
                       ArrayRef<MemRefType> types) {
  IRMapping mapping;
  for (Operation *view : llvm::reverse(targetViews))
    rewriter.clone(*view, mapping);
  Value view = mapping.lookupOrDefault(copy.getTarget());
  for (auto [reshape, reshapedType] : llvm::zip(reshapes, types))
    view = unreshape(rewriter, reshape, view, reshapedType);
  return view;
}

/// Erases `copy`, the reshapes of its source left without users, and the
/// source's buffer.
void eraseCopy(RewriterBase &rewriter, memref::CopyOp copy,
               ArrayRef<Operation *> reshapes, memref::AllocOp source) {
  rewriter.eraseOp(copy);
  for (Operation *reshape : reshapes)
    if (reshape->use_empty())
      rewriter.eraseOp(reshape);
  rewriter.eraseOp(source);
}

/// A copy taken apart: the buffer its source views and the views from the
/// copied value down to it (`reshapes`), the buffer its target views and
/// the views down to that.
struct CopyEnds {
  memref::AllocOp source;
  SmallVector<Operation *> reshapes, targetViews;
  Value target;
  memref::AllocOp targetAlloc;

  CopyEnds(memref::CopyOp copy) {
    Block *block = copy->getBlock();
    source = getFreshBuffer(getViewedBuffer(copy.getSource(), reshapes), block);
    target = getViewedBuffer(copy.getTarget(), targetViews);
    targetAlloc = getFreshBuffer(target, block);
  }

  /// Whether both buffers are fresh allocations of the copy's block (the
  /// target may instead be one of its arguments that nothing else aliases,
  /// among `exclusive`), and not the same one.
  bool areOwn(memref::CopyOp copy, const DenseSet<Value> &exclusive) {
    bool ownArgument =
        exclusive.contains(target) &&
        cast<BlockArgument>(target).getOwner() == copy->getBlock();
    return source && (targetAlloc || ownArgument) &&
           source.getResult() != target;
  }
};

/// A copy of a buffer one op only writes (through reshapes) into a view of
/// a fresh buffer (or an argument only it aliases) nothing accesses from
/// that op up to the copy: the op writes the view instead.
struct WriteCopyInPlace : public OpRewritePattern<memref::CopyOp> {
  WriteCopyInPlace(MLIRContext *context, const DenseSet<Value> &exclusive)
      : OpRewritePattern(context), exclusive(exclusive) {}

  LogicalResult matchAndRewrite(memref::CopyOp copy,
                                PatternRewriter &rewriter) const override {
    CopyEnds ends(copy);
    auto &[source, reshapes, targetViews, target, targetAlloc] = ends;
    // A source that is a slice of a buffer the op writes only there (a
    // part of a concatenation written apart) is written through the
    // target's view just as well.
    bool sliced = !reshapes.empty() &&
                  llvm::all_of(reshapes, llvm::IsaPred<memref::SubViewOp>);
    if (!ends.areOwn(copy, exclusive) ||
        (!sliced && llvm::any_of(reshapes, llvm::IsaPred<memref::SubViewOp>)))
      return rewriter.notifyMatchFailure(copy, "not between fresh buffers");
    Operation *writer = getOnlyWriter(source, copy);
    Value written = sliced ? copy.getSource() : source.getResult();
    OpOperand *init = writer && accessesOnce(writer, source)
                          ? getWriteOnlyInit(writer, written)
                          : nullptr;
    if (!init || !writer->isBeforeInBlock(copy) ||
        isAccessedBetween(target, copy.getTarget(), writer, copy) ||
        !writesApart(writer, target, copy.getTarget()))
      return rewriter.notifyMatchFailure(copy, "no write-only op to move");
    // The target's view as the writer's destination: the source's
    // reshapes undone, outermost first.
    FailureOr<SmallVector<MemRefType>> types = getUnreshapedTypes(
        copy, sliced ? ArrayRef<Operation *>() : ArrayRef(reshapes));
    if (failed(types))
      return rewriter.notifyMatchFailure(copy, "view cannot be reshaped");
    if (targetAlloc && !targetAlloc->isBeforeInBlock(writer))
      rewriter.moveOpBefore(targetAlloc, writer);
    rewriter.setInsertionPoint(writer);
    Value view =
        retakeTargetView(rewriter, copy, targetViews, reshapes, *types);
    rewriter.modifyOpInPlace(writer, [&] { init->set(view); });
    eraseCopy(rewriter, copy, reshapes, source);
    return success();
  }

private:
  /// The one op other than `copy` that accesses `buffer`, in its block.
  static Operation *getOnlyWriter(memref::AllocOp buffer, memref::CopyOp copy) {
    SmallVector<Operation *> accesses;
    collectAccesses(buffer, accesses);
    Operation *writer = nullptr;
    for (Operation *op : accesses) {
      if (op == copy)
        continue;
      if (writer || op->getBlock() != copy->getBlock())
        return nullptr;
      writer = op;
    }
    return writer;
  }

  /// Whether one operand of `op` alone views `buffer`.
  static bool accessesOnce(Operation *op, memref::AllocOp buffer) {
    return llvm::count_if(op->getOperands(), [&](Value operand) {
             SmallVector<Operation *> views;
             return getViewedBuffer(operand, views) == buffer.getResult();
           }) == 1;
  }

  /// Whether `writer` accesses `buffer` only by writing parts of it apart
  /// from `view` (the slices of the same concatenation it already writes).
  static bool writesApart(Operation *writer, Value buffer, Value view) {
    for (OpOperand &operand : writer->getOpOperands()) {
      SmallVector<Operation *> views;
      if (getViewedBuffer(operand.get(), views) != buffer)
        continue;
      if (getWriteOnlyInit(writer, operand.get()) != &operand ||
          !areDisjoint(operand.get(), view, buffer))
        return false;
    }
    return true;
  }

  const DenseSet<Value> &exclusive;
};

/// A fresh buffer that several ops access before its one copy into a view
/// of a fresh buffer (or an argument only it aliases): a sum started from a
/// fill or from a copy of the old gradient, then copied into the unit's
/// gradient buffer; a gradient assembled from parts (Pythia's q and k
/// gradients: the rotary embedding's backward writes the rotated part, its
/// pass-through another op) copied into the fused projection's gradient.
/// Where nothing accesses the copied part of the target from the buffer's
/// first use up to the copy and nothing accesses the buffer after it, every
/// access uses the target's view instead (its views retaken there): the
/// copy and the buffer go.
struct ForwardIntoCopyTarget : public OpRewritePattern<memref::CopyOp> {
  ForwardIntoCopyTarget(MLIRContext *context, const DenseSet<Value> &exclusive)
      : OpRewritePattern(context, /*benefit=*/0), exclusive(exclusive) {}

  LogicalResult matchAndRewrite(memref::CopyOp copy,
                                PatternRewriter &rewriter) const override {
    CopyEnds ends(copy);
    auto &[source, reshapes, targetViews, target, targetAlloc] = ends;
    if (!ends.areOwn(copy, exclusive) ||
        llvm::any_of(reshapes, llvm::IsaPred<memref::SubViewOp>))
      return rewriter.notifyMatchFailure(copy, "not between fresh buffers");
    // The target's view in the source's shape, its reshapes undone.
    FailureOr<SmallVector<MemRefType>> types =
        getUnreshapedTypes(copy, reshapes);
    if (failed(types))
      return rewriter.notifyMatchFailure(copy, "view cannot be reshaped");
    auto type = types->empty() ? cast<MemRefType>(copy.getTarget().getType())
                               : types->back();
    // The source's first user: the target is allocated there, as late as
    // the source was used (earlier, it could raise the peak).
    Operation *first = copy;
    for (Operation *user : source->getUsers())
      if (user->getBlock() == copy->getBlock() && user->isBeforeInBlock(first))
        first = user;
    if (!canForward(source.getResult(), type, copy) ||
        !accessesApart(first, target, copy.getTarget()) ||
        isAccessedBetween(target, copy.getTarget(), first, copy))
      return rewriter.notifyMatchFailure(copy, "accessed elsewhere");
    if (targetAlloc && !targetAlloc->isBeforeInBlock(first)) {
      // Allocated earlier, a target larger than the source would hold more
      // from the source's first use on than the source did.
      std::optional<int64_t> targetBytes =
          zest::getStaticBufferBytes(targetAlloc.getType());
      std::optional<int64_t> sourceBytes =
          zest::getStaticBufferBytes(source.getType());
      if (!targetBytes || !sourceBytes || *targetBytes > *sourceBytes)
        return rewriter.notifyMatchFailure(copy, "target allocated later");
      rewriter.moveOpBefore(targetAlloc, first);
    }
    rewriter.setInsertionPoint(first);
    forward(rewriter, source.getResult(),
            retakeTargetView(rewriter, copy, targetViews, reshapes, *types),
            copy);
    eraseCopy(rewriter, copy, reshapes, source);
    return success();
  }

private:
  /// Whether every access of `value` (through views, which can be taken of a
  /// buffer of type `type` instead) is a non-call op in the copy's block
  /// before the copy.
  static bool canForward(Value value, MemRefType type, memref::CopyOp copy) {
    return llvm::all_of(value.getUsers(), [&](Operation *user) {
      if (user == copy)
        return true;
      if (user->getBlock() != copy->getBlock() ||
          !user->isBeforeInBlock(copy) || isa<CallOpInterface>(user))
        return false;
      if (!isView(user))
        return true;
      FailureOr<MemRefType> viewType = getViewTypeOn(user, type);
      return succeeded(viewType) &&
             canForward(user->getResult(0), *viewType, copy);
    });
  }

  /// Has every access of `value` but `copy` use `replacement`, views taken
  /// again of it.
  static void forward(PatternRewriter &rewriter, Value value, Value replacement,
                      memref::CopyOp copy) {
    for (OpOperand &use : llvm::make_early_inc_range(value.getUses())) {
      Operation *user = use.getOwner();
      if (user == copy)
        continue;
      if (!isView(user)) {
        rewriter.modifyOpInPlace(user, [&] { use.set(replacement); });
        continue;
      }
      rewriter.setInsertionPoint(user);
      Operation *view = rewriter.clone(*user);
      view->setOperand(0, replacement);
      view->getResult(0).setType(
          *getViewTypeOn(user, cast<MemRefType>(replacement.getType())));
      forward(rewriter, user->getResult(0), view->getResult(0), copy);
      if (user->use_empty())
        rewriter.eraseOp(user);
    }
  }

  const DenseSet<Value> &exclusive;
};

/// A copy of a view onto the same view of the same buffer (what an op that
/// wrote its part in place leaves of the insertion): nothing to copy, and
/// it would count as an access between another part's writer and copy.
struct EraseSelfCopy : public OpRewritePattern<memref::CopyOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(memref::CopyOp copy,
                                PatternRewriter &rewriter) const override {
    if (!isSameView(copy.getSource(), copy.getTarget()))
      return rewriter.notifyMatchFailure(copy, "copies between buffers");
    rewriter.eraseOp(copy);
    return success();
  }

private:
  /// Whether `a` and `b` are one value or equal views of one value.
  static bool isSameView(Value a, Value b) {
    if (a == b)
      return true;
    Operation *viewA = a.getDefiningOp(), *viewB = b.getDefiningOp();
    return viewA && viewB && isView(viewA) && viewA->getNumOperands() == 1 &&
           OperationEquivalence::isEquivalentTo(
               viewA, viewB, OperationEquivalence::IgnoreLocations);
  }
};

struct WriteCopiesInPlacePass
    : public zest::impl::WriteCopiesInPlacePassBase<WriteCopiesInPlacePass> {
  void runOnOperation() override {
    DenseSet<Value> exclusive = getExclusiveArguments(getOperation());
    RewritePatternSet patterns(&getContext());
    patterns.add<WriteCopyInPlace, ForwardIntoCopyTarget>(&getContext(),
                                                          exclusive);
    patterns.add<EraseSelfCopy>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
