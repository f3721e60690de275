//===- ModelDescriptor.h - The text record of a sharded model ---*- C++ -*-===//
//
// What the host driver learns about a compiled model: units, parameters and
// entry-point signatures, one record per line (the format is documented in
// ModelDescriptor.cpp and docs/Runtime.md; runtime/trainer parses it).
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_CONVERSION_MODELDESCRIPTOR_H
#define ZEST_CONVERSION_MODELDESCRIPTOR_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace mlir::zest {

/// Whether `func` is an entry point the host driver calls: public, with a
/// body.
inline bool isEntryPoint(func::FuncOp func) {
  return !func.isExternal() && func.isPublic();
}

/// One record of the module's `zest.entry_points`: an entry point, in
/// descriptor order, and the number of memref descriptors its C interface
/// takes once in-place updates are dropped.
struct EntryPointRecord {
  std::string name;
  int64_t cInterfaceArgs;
};

/// Records `entries` on `module` (zest-describe-model).
void setEntryPointRecords(ModuleOp module, ArrayRef<EntryPointRecord> entries);

/// The records on `module` (none if it has none); a located error if one is
/// malformed.
FailureOr<SmallVector<EntryPointRecord>> getEntryPointRecords(ModuleOp module);

/// The model descriptor of a module sharded by `zest-front` (its units and
/// the roles of its entry points' arguments and results).
std::string buildModelDescriptor(ModuleOp shardedModule);

} // namespace mlir::zest

#endif // ZEST_CONVERSION_MODELDESCRIPTOR_H
