//===- ModelContract.h - Zest model-IR input contract -----------*- C++ -*-===//
//
// The input contract (see docs/Contract.md): parameters are function
// arguments carrying `zest.param = "<fqn>"`, gradients are results carrying
// `zest.grad = "<fqn>"`, the loss result carries `zest.loss`. This analysis
// checks the contract once and gives every pass the same view of the model.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_DIALECT_ZEST_TRANSFORMS_MODELCONTRACT_H
#define ZEST_DIALECT_ZEST_TRANSFORMS_MODELCONTRACT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringMap.h"
#include <optional>

namespace mlir::zest {

/// The module path of a parameter: its FQN without the last component, ""
/// for a parameter of the root module ("layers.0.fc.weight" -> "layers.0.fc").
StringRef getModulePath(StringRef fqn);

/// A parameter of the model, shared by all functions that take it.
struct ModelParam {
  StringAttr fqn;
  RankedTensorType type;
  /// Where it is first declared (a function argument).
  Location loc;
};

/// A function that takes parameters (a training step or a forward pass).
struct ModelFunction {
  func::FuncOp func;
  /// (argument index, FQN) of every parameter argument, in argument order.
  SmallVector<std::pair<unsigned, StringAttr>> params;
  /// FQN -> index of the result holding its gradient.
  llvm::StringMap<unsigned> gradResults;
  /// Index of the `zest.loss` result, if any.
  std::optional<unsigned> lossResult;
};

class ModelContract {
public:
  /// Checks the contract on `module`, reporting every violation as an error
  /// at the offending function, argument or result. Fails if there was any.
  static FailureOr<ModelContract> analyze(ModuleOp module);

  /// All parameters by FQN, in order of first appearance.
  llvm::MapVector<StringAttr, ModelParam> params;
  /// Functions taking at least one parameter, in module order.
  SmallVector<ModelFunction> functions;
  /// `zest.module_classes` of the module (module path -> class), or null.
  DictionaryAttr moduleClasses;
};

} // namespace mlir::zest

#endif // ZEST_DIALECT_ZEST_TRANSFORMS_MODELCONTRACT_H
