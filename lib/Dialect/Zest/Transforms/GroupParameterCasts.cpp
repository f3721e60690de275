//===- GroupParameterCasts.cpp - One cast per unit buffer -----------------===//
//
// Autocast rounds each weight to bf16 just before its layer reads it: one
// small kernel per weight, seven a Llama block in forward and seven again in
// backward, from the same gathered buffer. The rounding of a unit's
// parameters is one pass over the span of its flat buffer that they occupy
// instead, and each rounded weight a view into it. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "zest/Dialect/Zest/IR/ZestOps.h"
#include "zest/Dialect/Zest/Transforms/ElementwiseFusion.h"
#include "zest/Dialect/Zest/Transforms/Passes.h"
#include "zest/Dialect/Zest/Transforms/Transforms.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/OperationSupport.h"
#include "llvm/ADT/MapVector.h"

namespace mlir::zest {
#define GEN_PASS_DEF_GROUPPARAMETERCASTSPASS
#include "zest/Dialect/Zest/Transforms/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;
using namespace mlir::zest;

Value mlir::zest::sliceParameter(OpBuilder &builder, Location loc, Value flat,
                                 ParamAttr param, int64_t start) {
  auto flatType = cast<RankedTensorType>(flat.getType());
  RankedTensorType type = param.getValueType().clone(flatType.getElementType());
  Value slice = tensor::ExtractSliceOp::create(
      builder, loc, flat,
      ArrayRef<OpFoldResult>{builder.getIndexAttr(param.getOffset() - start)},
      ArrayRef<OpFoldResult>{builder.getIndexAttr(param.getNumElements())},
      ArrayRef<OpFoldResult>{builder.getIndexAttr(1)});
  if (type.getRank() == 1)
    return slice;
  if (type.getRank() == 0)
    return tensor::CollapseShapeOp::create(builder, loc, type, slice,
                                           ArrayRef<ReassociationIndices>{});
  ReassociationIndices all;
  for (int64_t i = 0; i < type.getRank(); ++i)
    all.push_back(i);
  return tensor::ExpandShapeOp::create(builder, loc, type, slice, {all});
}

namespace {

/// A pointwise cast of one parameter, and that parameter.
struct ParameterCast {
  linalg::GenericOp cast;
  ParamAttr param;
};

/// The casts that read the same flat buffer in one block and convert to
/// one element type the same way.
struct CastGroup {
  SmallVector<ParameterCast> casts;

  /// True if `cast` converts as the group's casts do (same op, same
  /// attributes: a rounding mode or fast-math flags).
  bool admits(linalg::GenericOp cast) const {
    Operation *first = getElementConversion(casts.front().cast);
    return OperationEquivalence::isEquivalentTo(
        first, getElementConversion(cast),
        OperationEquivalence::ignoreValueEquivalence,
        /*markEquivalent=*/nullptr, OperationEquivalence::IgnoreLocations);
  }
};

using GroupKey = std::tuple<Value, Type, Block *>;

/// Every cast of a parameter to a narrower float type (autocast's weight
/// casts), grouped by the buffer it reads, its block and its conversion.
llvm::MapVector<GroupKey, SmallVector<CastGroup>>
findParameterCasts(func::FuncOp func) {
  llvm::MapVector<GroupKey, SmallVector<CastGroup>> groups;
  func.walk([&](UnflattenOp unflatten) {
    auto unit = SymbolTable::lookupNearestSymbolFrom<UnitOp>(
        unflatten, unflatten.getUnitAttr());
    ParamAttr param = unit ? unit.lookupParam(unflatten.getParam()) : nullptr;
    if (!param)
      return;
    for (Operation *user : unflatten->getUsers()) {
      auto cast = dyn_cast<linalg::GenericOp>(user);
      if (!cast ||
          !isa_and_nonnull<arith::TruncFOp>(getElementConversion(cast)))
        continue;
      GroupKey key{unflatten.getFlat(), getElementTypeOrSelf(cast.getType(0)),
                   cast->getBlock()};
      SmallVector<CastGroup> &candidates = groups[key];
      auto group = llvm::find_if(
          candidates, [&](const CastGroup &g) { return g.admits(cast); });
      if (group == candidates.end())
        group = candidates.insert(candidates.end(), CastGroup());
      group->casts.push_back({cast, param});
    }
  });
  return groups;
}

/// Replaces the casts of `group` with views into one cast of the span of
/// `flat` their parameters occupy, placed where the first of them was.
void castOnce(RewriterBase &rewriter, Value flat, const CastGroup &group) {
  int64_t start = std::numeric_limits<int64_t>::max(), end = 0;
  linalg::GenericOp first = group.casts.front().cast;
  for (const ParameterCast &entry : group.casts) {
    start = std::min(start, entry.param.getOffset());
    end = std::max(end, entry.param.getEnd());
    if (entry.cast->isBeforeInBlock(first))
      first = entry.cast;
  }
  rewriter.setInsertionPoint(first);
  Location loc = first.getLoc();
  auto flatType = cast<RankedTensorType>(flat.getType());
  Value span = flat;
  if (start != 0 || end != flatType.getNumElements())
    span = tensor::ExtractSliceOp::create(
        rewriter, loc, flat,
        ArrayRef<OpFoldResult>{rewriter.getIndexAttr(start)},
        ArrayRef<OpFoldResult>{rewriter.getIndexAttr(end - start)},
        ArrayRef<OpFoldResult>{rewriter.getIndexAttr(1)});
  Type element = getElementTypeOrSelf(first.getType(0));
  auto narrowType = RankedTensorType::get({end - start}, element);
  Value init =
      tensor::EmptyOp::create(rewriter, loc, narrowType.getShape(), element);
  AffineMap id = rewriter.getMultiDimIdentityMap(1);
  auto once = linalg::GenericOp::create(rewriter, loc, TypeRange{narrowType},
                                        span, init, ArrayRef<AffineMap>{id, id},
                                        {utils::IteratorType::parallel});
  // The scalar body is the same at any rank: the first cast's, as it was.
  rewriter.cloneRegionBefore(first.getRegion(), once.getRegion(),
                             once.getRegion().end());
  SetVector<Operation *> unflattens;
  for (ParameterCast entry : group.casts) {
    unflattens.insert(entry.cast.getDpsInputs()[0].getDefiningOp());
    rewriter.setInsertionPoint(entry.cast);
    rewriter.replaceOp(entry.cast,
                       sliceParameter(rewriter, entry.cast.getLoc(),
                                      once.getResult(0), entry.param, start));
  }
  for (Operation *unflatten : unflattens)
    if (unflatten->use_empty())
      rewriter.eraseOp(unflatten);
}

struct GroupParameterCastsPass
    : public zest::impl::GroupParameterCastsPassBase<GroupParameterCastsPass> {
  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    for (auto &[key, groups] : findParameterCasts(getOperation()))
      for (const CastGroup &group : groups)
        if (group.casts.size() > 1)
          castOnce(rewriter, std::get<0>(key), group);
  }
};

} // namespace
