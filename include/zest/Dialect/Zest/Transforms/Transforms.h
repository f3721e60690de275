//===- Transforms.h - Zest rewrite pattern sets -----------------*- C++ -*-===//

#ifndef ZEST_DIALECT_ZEST_TRANSFORMS_TRANSFORMS_H
#define ZEST_DIALECT_ZEST_TRANSFORMS_TRANSFORMS_H

#include "zest/Dialect/Zest/IR/ZestOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::zest {

/// Patterns that bring linear layers over N-D activations to matrices:
/// batched products read a broadcast weight directly (the patterns of
/// populateReadOperandsInPlacePatterns), and the row loops of products,
/// elementwise ops and reductions next to 2-D code are merged.
void populateFlattenRowsPatterns(RewritePatternSet &patterns);

/// Products read a transposed or broadcast operand in place, through their
/// indexing maps (zest-fold-transposes).
void populateReadOperandsInPlacePatterns(RewritePatternSet &patterns);

/// The greedy driver's configuration for Zest's rewrites of straight-line
/// code: no region simplification, which walks the whole module for
/// unreachable blocks and mergeable regions on every iteration and costs
/// more than the rewrites on a production-size step (Zest's rewrites create
/// no blocks).
GreedyRewriteConfig getStraightLineRewriteConfig();

/// A `linalg.fill` of a new empty tensor equal to `value` when `value` is a
/// static splat tensor constant (a destination that is written: bufferized,
/// the constant would be a global copied into a new buffer); null otherwise.
Value createFillOfSplat(OpBuilder &builder, Value value);

/// Parameter `param` of a unit out of `flat`, the unit's flat buffer from
/// element `start` on (in any element type): a slice reshaped to the
/// parameter's shape, views once bufferized.
Value sliceParameter(OpBuilder &builder, Location loc, Value flat,
                     ParamAttr param, int64_t start = 0);

/// The values `op` reads: its operands and what its regions use from
/// above (a linalg body's scalars), in order, once each.
SetVector<Value> getReadValues(Operation *op);

/// Whether `op` is a view of its one tensor operand: a slice or a reshape.
bool isTensorView(Operation *op);

/// The tensor `value` is a view of (through isTensorView ops), else
/// `value`.
Value getViewedTensor(Value value);

/// The units of `module` that `globs` name (an option's unit globs; the
/// diagnostics call it `optionName`), or every unit (but the root unless
/// `rootByDefault`) when there are none; failure (reported at the module)
/// for a bad glob or one that names no unit.
FailureOr<SmallVector<UnitOp>> selectUnits(ModuleOp module,
                                           ArrayRef<std::string> globs,
                                           StringRef optionName,
                                           bool rootByDefault);

/// An `--ac-units` entry `GLOB[:MODE]` split into its glob and the
/// checkpointing mode it names (empty where it names none).
std::pair<StringRef, StringRef> splitAcUnitsEntry(StringRef entry);

} // namespace mlir::zest

#endif // ZEST_DIALECT_ZEST_TRANSFORMS_TRANSFORMS_H
