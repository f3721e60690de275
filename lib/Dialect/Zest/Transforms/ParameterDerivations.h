//===- ParameterDerivations.h - Values computed from parameters alone -----===//
//
// A model often reshapes, transposes or casts a parameter before it uses
// it (autocast rounds each weight to bf16 after `W^T`), and its backward
// reads the same derived tensor again. Kept from forward to backward, that
// tensor costs the weight's bytes per layer (14 GB per rank for Llama 3 8B
// at W=8) while its unit is re-gathered anyway; recomputed from the
// re-gathered parameter it costs one pass over the weight, as FSDP's
// resharding after forward does.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_LIB_DIALECT_ZEST_TRANSFORMS_PARAMETERDERIVATIONS_H
#define ZEST_LIB_DIALECT_ZEST_TRANSFORMS_PARAMETERDERIVATIONS_H

#include "mlir/IR/Block.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"

namespace mlir::zest {

/// The top-level ops of a block that compute a value from one parameter
/// alone with a reshape, a transpose or an element-type conversion, each
/// with the unit whose parameter it reads, in block order.
using ParameterDerivations = llvm::MapVector<Operation *, Operation *>;

/// The derivations of `body`, given the unit whose parameter each block
/// argument holds (`unitOf`: null for other arguments).
ParameterDerivations
findParameterDerivations(Block &body,
                         function_ref<Operation *(BlockArgument)> unitOf);

/// `value` (a derivation's result or a parameter) recomputed at the
/// builder's insertion point from the parameters; `mapping` memoizes the
/// clones, which join `derivations`.
Value cloneDerivation(OpBuilder &builder, Value value,
                      ParameterDerivations &derivations, IRMapping &mapping);

/// Erases the derivations no one reads any more, last first.
void eraseUnusedDerivations(const ParameterDerivations &derivations);

} // namespace mlir::zest

#endif // ZEST_LIB_DIALECT_ZEST_TRANSFORMS_PARAMETERDERIVATIONS_H
