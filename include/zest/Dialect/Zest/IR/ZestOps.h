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
/// What a collective moves: the flat buffers of one unit, or those of a
/// bucket's units packed together (`zest.bucket`), described alike.
struct CollectiveLayout {
  /// The unit's or the bucket's name.
  StringRef name;
  bool sharded = false;
  /// Expert-parallel units: `replicas` are the copies of the expert groups.
  bool experts = false;
  int64_t worldSize = 1, replicas = 1;
  RankedTensorType shardType, flatType;
  /// Mixed precision: the element types gathers and gradient reductions
  /// send (null: the element type).
  Type gatherType, reduceType;
  /// The unit itself, or the bucket's members in packing order.
  SmallVector<UnitOp> units;
  /// Ranks the job runs on: world_size ranks per replica.
  int64_t getNumRanks() const { return worldSize * replicas; }
};

/// Whether one collective may move the buffers of `a` and `b` together (a
/// bucket): same kind, element type, world_size, replicas and communication
/// types.
bool haveSameLayout(UnitOp a, UnitOp b);

/// Resolves `ref`, seen from `from`, to a unit or a bucket; nullopt if it
/// names neither or the bucket's members do not share one layout (the
/// bucket's verifier reports which). Uses `symbolTables` when given.
std::optional<CollectiveLayout>
lookupCollectiveLayout(Operation *from, FlatSymbolRefAttr ref,
                       SymbolTableCollection *symbolTables = nullptr);

/// The safetensors name of an element type ("F32", "BF16", "I64", ...),
/// used by the manifest and the model descriptor so that host tools need no
/// MLIR type parser. Other types print as MLIR does.
std::string getDTypeName(Type type);

/// Where a diagnostic about the whole model (an option, a budget) points:
/// the first function defined in `module`, else the module. An imported
/// module's own line holds its whole `zest.module_classes` dictionary,
/// which the diagnostic would print in full.
Location getModelDiagnosticLoc(ModuleOp module);

/// Whether `op` is one of Zest's compute ops (fused linear layers,
/// attention, losses, grouped products): destination-style ops on tensors,
/// then memrefs, that zest-matmul-to-blas lowers to runtime calls.
inline bool isComputeOp(Operation *op) {
  return isa<LinearOp, LinearBackwardOp, AttentionOp, AttentionBackwardOp,
             CrossEntropyOp, CrossEntropyBackwardOp, LinearCrossEntropyOp,
             GroupedMatmulOp, GroupedMatmulWeightGradOp>(op);
}
} // namespace mlir::zest

#endif // ZEST_DIALECT_ZEST_IR_ZESTOPS_H
