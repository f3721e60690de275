//===- InitAllZest.h - Register Zest with a tool ----------------*- C++ -*-===//
//
// One place that lists what every Zest tool registers: the Zest dialect, the
// upstream dialects of the input contract, and all Zest passes.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_INITALLZEST_H
#define ZEST_INITALLZEST_H

#include "mlir/IR/DialectRegistry.h"

namespace mlir::zest {

/// Adds the Zest dialect and the upstream dialects model IR uses (func,
/// linalg, tensor, arith, math, ...) to `registry`.
void registerAllZestDialects(DialectRegistry &registry);

/// Registers all Zest passes and pipelines with the global pass registry.
void registerAllZestPasses();

} // namespace mlir::zest

#endif // ZEST_INITALLZEST_H
