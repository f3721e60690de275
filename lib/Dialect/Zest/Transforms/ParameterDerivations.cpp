//===- ParameterDerivations.cpp - Values computed from parameters alone ---===//

#include "ParameterDerivations.h"
#include "zest/Dialect/Zest/Transforms/ElementwiseFusion.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace mlir::zest;

/// The operand of `op` that carries the derived value, if `op` is a kind
/// of derivation: its init (where it has one) must be a fresh tensor.
static OpOperand *getDerivedOperand(Operation *op) {
  if (op->getNumResults() != 1 ||
      !isa<RankedTensorType>(op->getResult(0).getType()))
    return nullptr;
  if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(op))
    return &op->getOpOperand(0);
  auto dps = dyn_cast<DestinationStyleOpInterface>(op);
  if (!dps || !isa<linalg::TransposeOp, linalg::GenericOp>(op) ||
      dps.getNumDpsInits() != 1 ||
      !dps.getDpsInits()[0].getDefiningOp<tensor::EmptyOp>())
    return nullptr;
  // A generic only as autocast's casts.
  if (isa<linalg::GenericOp>(op) && !getElementConversion(op))
    return nullptr;
  return dps.getDpsInputOperand(0);
}

ParameterDerivations mlir::zest::findParameterDerivations(
    Block &body, function_ref<Operation *(BlockArgument)> unitOf) {
  ParameterDerivations derivations;
  for (Operation &op : body) {
    OpOperand *derived = getDerivedOperand(&op);
    if (!derived)
      continue;
    Value source = derived->get();
    Operation *unit = nullptr;
    if (auto arg = dyn_cast<BlockArgument>(source))
      unit = arg.getOwner() == &body ? unitOf(arg) : nullptr;
    else
      unit = derivations.lookup(source.getDefiningOp());
    if (unit)
      derivations[&op] = unit;
  }
  return derivations;
}

Value mlir::zest::cloneDerivation(OpBuilder &builder, Value value,
                                  ParameterDerivations &derivations,
                                  IRMapping &mapping) {
  if (Value cloned = mapping.lookupOrNull(value))
    return cloned;
  Operation *op = value.getDefiningOp();
  if (!op || !derivations.contains(op))
    return value; // a parameter
  OpOperand *derived = getDerivedOperand(op);
  mapping.map(derived->get(),
              cloneDerivation(builder, derived->get(), derivations, mapping));
  // The fresh init, cloned too: each recomputation writes its own tensor.
  if (auto dps = dyn_cast<DestinationStyleOpInterface>(op)) {
    Operation *empty = dps.getDpsInits()[0].getDefiningOp();
    builder.clone(*empty, mapping);
  }
  Operation *clone = builder.clone(*op, mapping);
  // A derivation in its own right: a still later interval that reads it
  // derives it again from its own gather.
  derivations[clone] = derivations.lookup(op);
  return clone->getResult(0);
}

void mlir::zest::eraseUnusedDerivations(
    const ParameterDerivations &derivations) {
  for (auto it = derivations.rbegin(); it != derivations.rend(); ++it) {
    Operation *op = it->first;
    if (!op->use_empty())
      continue;
    Operation *empty = nullptr;
    if (auto dps = dyn_cast<DestinationStyleOpInterface>(op))
      empty = dps.getDpsInits()[0].getDefiningOp();
    op->erase();
    if (empty && empty->use_empty())
      empty->erase();
  }
}
