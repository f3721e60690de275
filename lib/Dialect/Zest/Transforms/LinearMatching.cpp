//===- LinearMatching.cpp - Shared matching of linear layers --------------===//

#include "zest/Dialect/Zest/Transforms/LinearMatching.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace mlir::zest;

bool mlir::zest::isStaticLinearType(Value value, int64_t rank) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || type.getRank() != rank || !type.hasStaticShape())
    return false;
  Type element = type.getElementType();
  return element.isF32() || element.isBF16() || element.isF16();
}

bool mlir::zest::haveOneElementType(ValueRange values) {
  Type type;
  for (Value value : values) {
    if (!value)
      continue;
    Type element = getElementTypeOrSelf(value.getType());
    if (type && element != type)
      return false;
    type = element;
  }
  return true;
}

bool mlir::zest::isAvailableAt(Value value, Operation *op) {
  Block *block = value.getParentBlock();
  Operation *ancestor = block->findAncestorOpInBlock(*op);
  if (!ancestor)
    return false;
  Operation *def = value.getDefiningOp();
  return !def || def->isBeforeInBlock(ancestor);
}

std::optional<LinearGradient> mlir::zest::getLinearGradient(GemmLayout layout,
                                                            unsigned gIndex) {
  if (gIndex == 0 && !layout.transA)
    return LinearGradient{/*ofInput=*/true, /*transposed=*/!layout.transB};
  if (gIndex <= 1 && layout.transA && !layout.transB)
    return LinearGradient{/*ofInput=*/false, /*transposed=*/gIndex == 0};
  return std::nullopt;
}

bool mlir::zest::isZeroFill(Value init) {
  auto fill = init.getDefiningOp<linalg::FillOp>();
  return fill && matchPattern(fill.value(), m_AnyZeroFloat());
}

Value mlir::zest::getZeroFillDestination(Value init) {
  if (!isZeroFill(init))
    return nullptr;
  Value destination = init.getDefiningOp<linalg::FillOp>().getDpsInits()[0];
  // CSE merges the equal fills of products of one shape (a Llama's bias-free
  // projections): a shared fill of an empty tensor still gives each reader
  // a destination of no content to write; a shared slice of a gradient
  // buffer does not.
  if (!init.hasOneUse() && !destination.getDefiningOp<tensor::EmptyOp>())
    return nullptr;
  return destination;
}

Value mlir::zest::createEmpty(PatternRewriter &rewriter, Location loc,
                              Type type) {
  auto tensor = cast<RankedTensorType>(type);
  return tensor::EmptyOp::create(rewriter, loc, tensor.getShape(),
                                 tensor.getElementType());
}

FailureOr<Value> mlir::zest::getDestinationAt(Value init, Operation *anchor,
                                              PatternRewriter *rewriter) {
  if (isAvailableAt(init, anchor))
    return init;
  Location loc = anchor->getLoc();
  if (init.getDefiningOp<tensor::EmptyOp>())
    return rewriter ? createEmpty(*rewriter, loc, init.getType()) : init;
  if (auto expand = init.getDefiningOp<tensor::ExpandShapeOp>()) {
    FailureOr<Value> source =
        getDestinationAt(expand.getSrc(), anchor, rewriter);
    if (failed(source) || !rewriter)
      return source;
    return tensor::ExpandShapeOp::create(
               *rewriter, loc, expand.getResultType(), *source,
               expand.getReassociationIndices(), expand.getMixedOutputShape())
        .getResult();
  }
  auto extract = init.getDefiningOp<tensor::ExtractSliceOp>();
  if (!extract || extract.getSourceType().getRank() != 1 ||
      !extract.hasUnitStride() || extract.getStaticOffsets()[0] < 0 ||
      ShapedType::isDynamic(extract.getStaticOffsets()[0]) ||
      ShapedType::isDynamic(extract.getStaticSizes()[0]))
    return failure();
  int64_t begin = extract.getStaticOffsets()[0],
          end = begin + extract.getStaticSizes()[0];
  Value source = extract.getSource();
  while (!isAvailableAt(source, anchor)) {
    auto insert = source.getDefiningOp<tensor::InsertSliceOp>();
    if (!insert || insert.getDestType().getRank() != 1 ||
        ShapedType::isDynamic(insert.getStaticOffsets()[0]) ||
        ShapedType::isDynamic(insert.getStaticSizes()[0]))
      return failure();
    int64_t insertBegin = insert.getStaticOffsets()[0],
            insertEnd = insertBegin + insert.getStaticSizes()[0];
    if (insertBegin < end && begin < insertEnd)
      return failure(); // the slice was written in between
    source = insert.getDest();
  }
  if (!rewriter)
    return init;
  return tensor::ExtractSliceOp::create(*rewriter, loc, extract.getType(),
                                        source, extract.getMixedOffsets(),
                                        extract.getMixedSizes(),
                                        extract.getMixedStrides())
      .getResult();
}
