//===- ZestOps.h - Zest dialect ops, attributes and types -------*- C++ -*-===//

#ifndef ZEST_DIALECT_ZEST_IR_ZESTOPS_H
#define ZEST_DIALECT_ZEST_IR_ZESTOPS_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "zest/Dialect/Zest/IR/ZestDialect.h"

#include "zest/Dialect/Zest/IR/ZestEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "zest/Dialect/Zest/IR/ZestAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "zest/Dialect/Zest/IR/ZestTypes.h.inc"

#define GET_OP_CLASSES
#include "zest/Dialect/Zest/IR/ZestOps.h.inc"

namespace mlir::zest {
/// The safetensors name of an element type ("F32", "BF16", "I64", ...),
/// used by the manifest and the model descriptor so that host tools need no
/// MLIR type parser. Other types print as MLIR does.
std::string getDTypeName(Type type);
} // namespace mlir::zest

#endif // ZEST_DIALECT_ZEST_IR_ZESTOPS_H
