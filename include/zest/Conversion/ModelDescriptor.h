//===- ModelDescriptor.h - The text record of a sharded model ---*- C++ -*-===//
//
// What the host driver learns about a compiled model: units, parameters and
// entry-point signatures, one record per line (the format is documented in
// ModelDescriptor.cpp and docs/Runtime.md; runtime/trainer parses it).
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_CONVERSION_MODELDESCRIPTOR_H
#define ZEST_CONVERSION_MODELDESCRIPTOR_H

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace mlir::zest {

/// The model descriptor of a module sharded by `zest-front` (its units and
/// the roles of its entry points' arguments and results).
std::string buildModelDescriptor(ModuleOp shardedModule);

} // namespace mlir::zest

#endif // ZEST_CONVERSION_MODELDESCRIPTOR_H
