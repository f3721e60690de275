//===- ExpertParallel.cpp - Experts split over expert groups --------------===//
//
// Sets the expert groups of the expert exchanges zest-import writes around
// every experts computation. Over one rank they fold away. Over N ranks each
// rank keeps 1 / N of every experts' parameter, and the rows its experts
// receive (at most N times its own: every row of the group) flow through
// the experts' computation in buffers of that worst case, so the memory
// plan holds whatever the routing.
//
//===----------------------------------------------------------------------===//

#include "zest/Dialect/Zest/IR/ZestOps.h"
#include "zest/Dialect/Zest/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir::zest {
#define GEN_PASS_DEF_EXPERTPARALLELPASS
#include "zest/Dialect/Zest/Transforms/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;
using namespace mlir::zest;

namespace {

/// `type` with dimension `dim` of size `size`.
RankedTensorType withDim(Type type, unsigned dim, int64_t size) {
  auto tensor = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(tensor.getShape());
  shape[dim] = size;
  return tensor.clone(shape);
}

/// Over one rank the exchanges move nothing: the ops' own folders and
/// canonicalization remove them.
LogicalResult foldSingleRankExchanges(func::FuncOp func) {
  SmallVector<Operation *> exchanges;
  func.walk([&](Operation *op) {
    if (isa<ExpertRoutingOp, ExpertDispatchOp, ExpertCombineOp>(op))
      exchanges.push_back(op);
  });
  if (exchanges.empty())
    return success();
  RewritePatternSet patterns(func.getContext());
  ExpertRoutingOp::getCanonicalizationPatterns(patterns, func.getContext());
  return applyOpPatternsGreedily(exchanges, std::move(patterns));
}

/// Splits one function's experts over groups of `groupSize` ranks.
class ExpertSplitter {
public:
  ExpertSplitter(func::FuncOp func, int64_t groupSize)
      : func(func), groupSize(groupSize), builder(func.getContext()) {}

  LogicalResult run();

private:
  LogicalResult splitRouting(ExpertRoutingOp op);
  LogicalResult resize(Operation *op);
  LogicalResult resizeGroupedProduct(GroupedMatmulOp op);
  LogicalResult resizeWeightGrad(GroupedMatmulWeightGradOp op);
  LogicalResult resizeGeneric(linalg::GenericOp op);
  LogicalResult resizeSlice(tensor::ExtractSliceOp op);
  LogicalResult checkExpertParams();
  /// A destination like `init` (a tensor.empty or a splat constant) with
  /// dimension `dim` of size `size`, or null.
  Value resizeInit(Operation *user, Value init, unsigned dim, int64_t size);
  /// Records that `result` carries resized rows (dimension 0).
  void markResized(Value result, int64_t rows) {
    result.setType(withDim(result.getType(), 0, rows));
    resized.insert(result);
  }
  bool isResized(Value value) const { return resized.contains(value); }
  /// The rows a resized value has: the group's worst case.
  static int64_t getRows(Value value) {
    return cast<ShapedType>(value.getType()).getDimSize(0);
  }
  LogicalResult cannotResize(Operation *op) {
    return op->emitOpError()
           << "cannot run on an expert group's received rows (--expert-"
              "parallel): between zest.expert_dispatch and "
              "zest.expert_combine only grouped products, elementwise ops "
              "and column slices or concatenations can";
  }

  func::FuncOp func;
  int64_t groupSize;
  OpBuilder builder;
  /// Values whose rows are the received rows.
  DenseSet<Value> resized;
  /// Parameters that are experts' weights, and this rank's share of them.
  llvm::SetVector<BlockArgument> expertParams;
};

LogicalResult ExpertSplitter::splitRouting(ExpertRoutingOp op) {
  int64_t experts = op.getExperts();
  if (experts % groupSize != 0)
    return op.emitOpError()
           << "routes to " << experts << " experts, which expert groups of "
           << groupSize
           << " ranks cannot split (--expert-parallel must divide every "
              "layer's number of experts)";
  builder.setInsertionPoint(op);
  Value local = op.getLocalEnds();
  auto localType = withDim(local.getType(), 0, experts / groupSize);
  op.getLocalEndsMutable().assign(tensor::EmptyOp::create(
      builder, op.getLoc(), localType.getShape(), localType.getElementType()));
  op.getResult(1).setType(localType);
  op.setGroupSize(groupSize);
  return success();
}

Value ExpertSplitter::resizeInit(Operation *user, Value init, unsigned dim,
                                 int64_t size) {
  builder.setInsertionPoint(user);
  auto type = withDim(init.getType(), dim, size);
  if (init.getDefiningOp<tensor::EmptyOp>())
    return tensor::EmptyOp::create(builder, user->getLoc(), type.getShape(),
                                   type.getElementType());
  DenseElementsAttr splat;
  if (matchPattern(init, m_Constant(&splat)) && splat.isSplat())
    return arith::ConstantOp::create(builder, user->getLoc(),
                                     splat.resizeSplat(type));
  return {};
}

LogicalResult ExpertSplitter::resizeGroupedProduct(GroupedMatmulOp op) {
  if (!isResized(op.getInput()))
    return cannotResize(op);
  auto param = dyn_cast<BlockArgument>(op.getWeight());
  if (!param ||
      !func.getArgAttr(param.getArgNumber(), ZestDialect::kParamAttrName))
    return op.emitOpError()
           << "multiplies received rows with weights that are not a "
              "parameter; expert parallelism splits the experts' parameters";
  expertParams.insert(param);
  int64_t rows = getRows(op.getInput());
  op.getOutputMutable().assign(resizeInit(op, op.getOutput(), 0, rows));
  markResized(op.getResult(0), rows);
  return success();
}

LogicalResult ExpertSplitter::resizeWeightGrad(GroupedMatmulWeightGradOp op) {
  if (!isResized(op.getInput()) || !isResized(op.getGradOutput()))
    return cannotResize(op);
  int64_t local = cast<ShapedType>(op.getOffsets().getType()).getDimSize(0);
  op.getGradWeightMutable().assign(
      resizeInit(op, op.getGradWeight(), 0, local));
  op.getResult(0).setType(withDim(op.getResult(0).getType(), 0, local));
  return success();
}

LogicalResult ExpertSplitter::resizeGeneric(linalg::GenericOp op) {
  // The loop over rows: dimension 0 of the resized operands.
  std::optional<unsigned> rowLoop;
  int64_t rows = 0;
  for (OpOperand *input : op.getDpsInputOperands()) {
    if (!isResized(input->get()))
      continue;
    AffineMap map = op.getMatchingIndexingMap(input);
    auto dim = dyn_cast<AffineDimExpr>(map.getResult(0));
    if (!dim || (rowLoop && *rowLoop != dim.getPosition()))
      return cannotResize(op);
    rowLoop = dim.getPosition();
    rows = getRows(input->get());
  }
  if (!rowLoop)
    return cannotResize(op);
  for (OpOperand &operand : op->getOpOperands()) {
    AffineMap map = op.getMatchingIndexingMap(&operand);
    std::optional<unsigned> dim =
        map.getResultPosition(getAffineDimExpr(*rowLoop, op.getContext()));
    if (!dim || isResized(operand.get()))
      continue;
    Value init = resizeInit(op, operand.get(), *dim, rows);
    if (!init)
      return cannotResize(op);
    operand.set(init);
  }
  for (OpResult result : op->getResults()) {
    OpOperand *init = op.getDpsInitOperand(result.getResultNumber());
    result.setType(init->get().getType());
    AffineMap map = op.getMatchingIndexingMap(init);
    if (map.getNumResults() > 0 &&
        map.getResult(0) == getAffineDimExpr(*rowLoop, op.getContext()))
      resized.insert(result);
  }
  return success();
}

LogicalResult ExpertSplitter::resizeSlice(tensor::ExtractSliceOp op) {
  // All of the rows the op had before the source was resized.
  int64_t rows = getRows(op.getSource());
  if (op.getStaticOffsets()[0] != 0 || op.getStaticStrides()[0] != 1 ||
      op.getStaticSizes()[0] * groupSize != rows ||
      op.getResultType().getRank() != op.getSourceType().getRank())
    return cannotResize(op);
  SmallVector<int64_t> sizes(op.getStaticSizes());
  sizes[0] = rows;
  op.setStaticSizes(sizes);
  markResized(op.getResult(), rows);
  return success();
}

LogicalResult ExpertSplitter::resize(Operation *op) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<ExpertDispatchOp>([&](ExpertDispatchOp dispatch) {
        int64_t rows =
            groupSize *
            cast<ShapedType>(dispatch.getInput().getType()).getDimSize(0);
        dispatch.setGroupSize(groupSize);
        dispatch.getOutputMutable().assign(
            resizeInit(dispatch, dispatch.getOutput(), 0, rows));
        markResized(dispatch.getResult(0), rows);
        return success();
      })
      .Case<ExpertCombineOp>([&](ExpertCombineOp combine) {
        if (!isResized(combine.getInput()))
          return cannotResize(combine);
        combine.setGroupSize(groupSize);
        return success();
      })
      .Case<GroupedMatmulOp>([&](GroupedMatmulOp product) {
        return resizeGroupedProduct(product);
      })
      .Case<GroupedMatmulWeightGradOp>([&](GroupedMatmulWeightGradOp grad) {
        return resizeWeightGrad(grad);
      })
      .Case<linalg::GenericOp>(
          [&](linalg::GenericOp generic) { return resizeGeneric(generic); })
      .Case<tensor::ExtractSliceOp>(
          [&](tensor::ExtractSliceOp slice) { return resizeSlice(slice); })
      .Case<tensor::ConcatOp>([&](tensor::ConcatOp concat) {
        if (concat.getDim() == 0 ||
            !llvm::all_of(concat.getInputs(),
                          [&](Value input) { return isResized(input); }))
          return cannotResize(concat);
        int64_t rows = getRows(concat.getInputs()[0]);
        markResized(concat.getResult(), rows);
        return success();
      })
      .Default([&](Operation *other) { return cannotResize(other); });
}

LogicalResult ExpertSplitter::checkExpertParams() {
  for (BlockArgument param : expertParams) {
    for (OpOperand &use : param.getUses()) {
      auto product = dyn_cast<GroupedMatmulOp>(use.getOwner());
      if (!product || use.get() != product.getWeight() ||
          !isResized(product.getInput()))
        return use.getOwner()->emitOpError()
               << "uses experts' parameter "
               << func.getArgAttr(param.getArgNumber(),
                                  ZestDialect::kParamAttrName)
               << " other than as a grouped product's weights; expert "
                  "parallelism cannot split it (per-expert biases are not "
                  "supported yet)";
    }
    int64_t experts = cast<ShapedType>(param.getType()).getDimSize(0);
    param.setType(withDim(param.getType(), 0, experts / groupSize));
    func.setArgAttr(param.getArgNumber(), ZestDialect::kExpertParallelAttrName,
                    builder.getI64IntegerAttr(groupSize));
  }
  return success();
}

LogicalResult ExpertSplitter::run() {
  SmallVector<ExpertRoutingOp> routings;
  func.walk([&](ExpertRoutingOp op) { routings.push_back(op); });
  for (ExpertRoutingOp routing : routings)
    if (failed(splitRouting(routing)))
      return failure();
  for (Operation &op : llvm::make_early_inc_range(func.getBody().getOps())) {
    bool reads =
        isa<ExpertDispatchOp>(op) ||
        llvm::any_of(op.getOperands(), [&](Value v) { return isResized(v); });
    if (reads && failed(resize(&op)))
      return failure();
  }
  for (Value value : resized)
    for (Operation *user : value.getUsers())
      if (user->getParentOp() != func)
        return cannotResize(user);
  if (failed(checkExpertParams()))
    return failure();
  auto returnOp = cast<func::ReturnOp>(func.getBody().back().getTerminator());
  func.setType(FunctionType::get(func.getContext(),
                                 func.getBody().getArgumentTypes(),
                                 returnOp.getOperandTypes()));
  return success();
}

struct ExpertParallelPass
    : public zest::impl::ExpertParallelPassBase<ExpertParallelPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (groupSize < 1) {
      module.emitError() << "zest-expert-parallel: group-size must be at "
                            "least 1, got "
                         << groupSize;
      return signalPassFailure();
    }
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      if (groupSize == 1) {
        if (failed(foldSingleRankExchanges(func)))
          return signalPassFailure();
        continue;
      }
      if (failed(ExpertSplitter(func, groupSize).run()))
        return signalPassFailure();
    }
  }
};

} // namespace
