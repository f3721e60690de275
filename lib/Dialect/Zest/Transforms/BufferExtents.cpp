//===- BufferExtents.cpp - Where a buffer lives and what it may touch ----===//
//
// See BufferExtents.h.
//
//===----------------------------------------------------------------------===//

#include "zest/Dialect/Zest/Transforms/BufferExtents.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using zest::DistinctArgFunctions;
using zest::Extent;

std::optional<Extent>
zest::getExtent(Value memref, const DistinctArgFunctions &distinctArgs) {
  auto type = dyn_cast<MemRefType>(memref.getType());
  if (!type)
    return std::nullopt;
  Extent extent;
  SmallVector<int64_t> strides;
  int64_t offset;
  if (type.hasStaticShape() &&
      succeeded(type.getStridesAndOffset(strides, offset)) &&
      !ShapedType::isDynamic(offset) &&
      llvm::none_of(strides, ShapedType::isDynamic)) {
    extent.begin = offset;
    extent.end = offset + 1;
    for (auto [size, stride] : llvm::zip(type.getShape(), strides))
      extent.end += (size - 1) * stride;
  }
  // Views that keep the base pointer: the layout offset is relative to it.
  Value value = memref;
  while (Operation *producer = value.getDefiningOp()) {
    if (isa<memref::AllocOp, memref::AllocaOp>(producer)) {
      extent.root = value;
      return extent;
    }
    if (!isa<memref::SubViewOp, memref::CastOp, memref::ExpandShapeOp,
             memref::CollapseShapeOp>(producer))
      return std::nullopt;
    value = cast<ViewLikeOpInterface>(producer).getViewSource();
  }
  // Only an entry point's arguments are known to be distinct buffers, and
  // those of a private function every call passes distinct buffers to.
  auto arg = cast<BlockArgument>(value);
  auto func = dyn_cast<FunctionOpInterface>(arg.getOwner()->getParentOp());
  if (!arg.getOwner()->isEntryBlock() || !func ||
      !(func.isPublic() || distinctArgs.contains(func)))
    return std::nullopt;
  extent.root = value;
  return extent;
}

zest::DistinctArgFunctions zest::getDistinctArgFunctions(ModuleOp module) {
  DenseMap<Operation *, bool> distinct;
  SymbolTableCollection symbols;
  module.walk([&](func::CallOp call) {
    auto callee = symbols.lookupNearestSymbolFrom<func::FuncOp>(
        call, call.getCalleeAttr());
    if (!callee || callee.isExternal() || callee.isPublic())
      return;
    bool &isDistinct = distinct.try_emplace(callee, true).first->second;
    SmallVector<Value> roots;
    for (Value operand : call.getOperands()) {
      if (!isa<MemRefType>(operand.getType()))
        continue;
      std::optional<Extent> extent = getExtent(operand, {});
      if (!extent || llvm::is_contained(roots, extent->root))
        isDistinct = false;
      else
        roots.push_back(extent->root);
    }
  });
  DistinctArgFunctions functions;
  for (auto [function, isDistinct] : distinct)
    if (isDistinct)
      functions.insert(function);
  return functions;
}
