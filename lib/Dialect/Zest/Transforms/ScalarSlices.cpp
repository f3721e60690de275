//===- ScalarSlices.cpp - Scalars computed from buffer elements -----------===//

#include "zest/Dialect/Zest/Transforms/ScalarSlices.h"

#include "mlir/Analysis/TopologicalSortUtils.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;

SmallVector<Operation *> zest::getLoadedScalarSlice(Value value) {
  if (isa<ShapedType>(value.getType()))
    return {};
  llvm::SetVector<Operation *> slice;
  SmallVector<Value> work = {value};
  bool loads = false;
  while (!work.empty()) {
    Operation *op = work.pop_back_val().getDefiningOp();
    if (!op)
      return {};
    if (slice.contains(op))
      continue;
    if (auto load = dyn_cast<memref::LoadOp>(op)) {
      loads = true;
      slice.insert(op);
      llvm::append_range(work, load.getIndices());
      continue;
    }
    if (!isPure(op) || op->getNumRegions() != 0)
      return {};
    slice.insert(op);
    llvm::append_range(work, op->getOperands());
  }
  if (!loads)
    return {};
  return llvm::to_vector(topologicalSort(slice));
}
