//===- ScalarSlices.cpp - Values computed from buffer elements ------------===//

#include "zest/Dialect/Zest/Transforms/ScalarSlices.h"

#include "mlir/Analysis/TopologicalSortUtils.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

#include <functional>

using namespace mlir;

/// Whether a slice may compute `op` again elsewhere: a load, or a pure op
/// without regions giving a scalar or a view.
static bool isSliceable(Operation *op) {
  if (isa<memref::LoadOp>(op))
    return true;
  if (!isPure(op) || op->getNumRegions() != 0)
    return false;
  return llvm::all_of(op->getResultTypes(), [&](Type type) {
    return !isa<ShapedType>(type) || isa<ViewLikeOpInterface>(op);
  });
}

zest::LoadedSlice zest::getLoadedSlice(Value value) {
  // Ops that compute `value`, and whether each reads a buffer element.
  llvm::MapVector<Operation *, bool> reads;
  std::function<bool(Value)> visit = [&](Value current) -> bool {
    Operation *op = current.getDefiningOp();
    if (!op || !isSliceable(op))
      return false;
    if (auto it = reads.find(op); it != reads.end())
      return it->second;
    reads[op] = false;
    bool loads = isa<memref::LoadOp>(op);
    for (Value operand : op->getOperands())
      loads |= visit(operand);
    reads[op] = loads;
    return loads;
  };
  LoadedSlice slice;
  if (!visit(value))
    return slice;
  // Ops that read no buffer element stay where they are; their results
  // become the slice's inputs, like values no sliceable op computes.
  llvm::SetVector<Operation *> ops;
  for (auto [op, loads] : reads)
    if (loads)
      ops.insert(op);
  llvm::SetVector<Operation *> constants;
  llvm::SetVector<Value> inputs;
  for (Operation *op : ops)
    for (Value operand : op->getOperands()) {
      Operation *producer = operand.getDefiningOp();
      if (producer && producer->hasTrait<OpTrait::ConstantLike>())
        constants.insert(producer);
      else if (!producer || !ops.contains(producer))
        inputs.insert(operand);
    }
  ops.insert(constants.begin(), constants.end());
  slice.ops = llvm::to_vector(topologicalSort(ops));
  slice.inputs = inputs.takeVector();
  return slice;
}
