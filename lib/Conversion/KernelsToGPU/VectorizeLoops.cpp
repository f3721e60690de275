//===- VectorizeLoops.cpp - Elementwise loops in 16-byte accesses ---------===//
//
// See VectorizeLoops.h.
//
//===----------------------------------------------------------------------===//

#include "VectorizeLoops.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;

namespace {

/// How a load or a store indexes along the innermost loop.
enum class Indexing { Uniform, Last, Other };

/// A load or a store: its buffer and indices.
struct Access {
  Value buffer;
  ValueRange indices;
};

std::optional<Access> getAccess(Operation *op) {
  if (auto load = dyn_cast<memref::LoadOp>(op))
    return Access{load.getMemRef(), load.getIndices()};
  if (auto store = dyn_cast<memref::StoreOp>(op))
    return Access{store.getMemRef(), store.getIndices()};
  return std::nullopt;
}

/// Whether `indices` use `iv` nowhere (uniform), as the last index only
/// (last), or otherwise.
Indexing classify(ValueRange indices, Value iv) {
  for (auto [i, index] : llvm::enumerate(indices))
    if (index == iv)
      return i + 1 == indices.size() ? Indexing::Last : Indexing::Other;
  return Indexing::Uniform;
}

/// The size in bytes of `buffer`'s elements if a vector access along its
/// last dimension can read them (unit stride there, static strides
/// elsewhere, whole bytes); 0 otherwise.
int64_t getVectorElementBytes(Value buffer) {
  auto type = cast<MemRefType>(buffer.getType());
  Type element = type.getElementType();
  if (!element.isIntOrFloat() || element.getIntOrFloatBitWidth() % 8 != 0)
    return 0;
  SmallVector<int64_t> strides;
  int64_t offset;
  if (type.getRank() == 0 ||
      failed(type.getStridesAndOffset(strides, offset)) ||
      strides.back() != 1 || llvm::any_of(strides, ShapedType::isDynamic))
    return 0;
  return element.getIntOrFloatBitWidth() / 8;
}

/// What a loop body does along its innermost induction variable.
struct Analysis {
  /// Loads and stores indexed by it in their last dimension.
  llvm::SetVector<Operation *> vectorAccesses;
  /// Values that vary along it.
  DenseSet<Value> varying;
  int64_t widestBytes = 0;
};

/// `body` analyzed along `iv`; failure if it is not a body of loads,
/// elementwise arithmetic and stores that the vector form can take.
FailureOr<Analysis> analyze(Block *body, Value iv) {
  Analysis analysis;
  for (Operation &op : body->without_terminator()) {
    if (std::optional<Access> access = getAccess(&op)) {
      Indexing indexing = classify(access->indices, iv);
      if (indexing == Indexing::Other ||
          (isa<memref::StoreOp>(op) && indexing != Indexing::Last))
        return failure();
      if (indexing == Indexing::Uniform)
        continue;
      // The alignment check reads the buffer before the body runs.
      int64_t bytes = getVectorElementBytes(access->buffer);
      if (bytes == 0 || access->buffer.getParentBlock() == body)
        return failure();
      analysis.widestBytes = std::max(analysis.widestBytes, bytes);
      analysis.vectorAccesses.insert(&op);
      if (auto load = dyn_cast<memref::LoadOp>(op))
        analysis.varying.insert(load.getResult());
      continue;
    }
    if (llvm::is_contained(op.getOperands(), iv) || op.getNumRegions() != 0)
      return failure();
    bool varies = llvm::any_of(op.getOperands(), [&](Value operand) {
      return analysis.varying.contains(operand);
    });
    if (!varies) {
      if (!isPure(&op))
        return failure();
      continue;
    }
    if (!op.hasTrait<OpTrait::Elementwise>() ||
        !op.hasTrait<OpTrait::Vectorizable>() ||
        llvm::any_of(op.getResultTypes(),
                     [](Type type) { return !type.isIntOrFloat(); }))
      return failure();
    for (Value result : op.getResults())
      analysis.varying.insert(result);
  }
  if (analysis.vectorAccesses.empty())
    return failure();
  return analysis;
}

/// Whether the strides of every vector access's buffer but the last are
/// multiples of `width`, so that a start aligned to `width` elements keeps
/// every row aligned.
bool keepsRowsAligned(const Analysis &analysis, int64_t width) {
  for (Operation *op : analysis.vectorAccesses) {
    auto type = cast<MemRefType>(getAccess(op)->buffer.getType());
    SmallVector<int64_t> strides;
    int64_t offset;
    (void)type.getStridesAndOffset(strides, offset);
    if (llvm::any_of(ArrayRef(strides).drop_back(),
                     [&](int64_t stride) { return stride % width != 0; }))
      return false;
  }
  return true;
}

/// Whether every buffer of `accesses` (mapped) starts at a multiple of
/// `width` elements in bytes, at run time.
Value emitAlignmentCheck(RewriterBase &rewriter, Location loc,
                         ArrayRef<Operation *> accesses,
                         const IRMapping &mapping, int64_t width) {
  llvm::SetVector<Value> buffers;
  for (Operation *op : accesses)
    buffers.insert(mapping.lookupOrDefault(getAccess(op)->buffer));
  auto index = [&](int64_t value) -> Value {
    return arith::ConstantIndexOp::create(rewriter, loc, value);
  };
  Value aligned = arith::ConstantIntOp::create(rewriter, loc, 1, 1);
  for (Value buffer : buffers) {
    int64_t bytes = getVectorElementBytes(buffer);
    auto metadata =
        memref::ExtractStridedMetadataOp::create(rewriter, loc, buffer);
    Value pointer =
        memref::ExtractAlignedPointerAsIndexOp::create(rewriter, loc, buffer);
    Value start = arith::AddIOp::create(
        rewriter, loc, pointer,
        arith::MulIOp::create(rewriter, loc, metadata.getOffset(),
                              index(bytes)));
    Value rest =
        arith::RemUIOp::create(rewriter, loc, start, index(width * bytes));
    Value isAligned = arith::CmpIOp::create(
        rewriter, loc, arith::CmpIPredicate::eq, rest, index(0));
    aligned = arith::AndIOp::create(rewriter, loc, aligned, isAligned);
  }
  return aligned;
}

/// `values` (mapped) as vectors of `width`: varying ones are, uniform ones
/// are broadcast.
SmallVector<Value> getVectorOperands(RewriterBase &rewriter, Location loc,
                                     ValueRange values,
                                     const IRMapping &mapping, int64_t width) {
  SmallVector<Value> operands;
  for (Value value : values) {
    Value mapped = mapping.lookupOrDefault(value);
    if (!isa<VectorType>(mapped.getType()))
      mapped = vector::BroadcastOp::create(
          rewriter, loc, VectorType::get({width}, mapped.getType()), mapped);
    operands.push_back(mapped);
  }
  return operands;
}

/// `body`'s ops for elements `first` to `first + width - 1` of the innermost
/// loop, at the rewriter's insertion point: vector loads, stores and
/// arithmetic where they vary along it, scalars elsewhere. `mapping` holds
/// the outer induction variables.
void emitVectorBody(RewriterBase &rewriter, Block *body,
                    const Analysis &analysis, IRMapping &mapping, Value first,
                    int64_t width) {
  for (Operation &op : body->without_terminator()) {
    Location loc = op.getLoc();
    if (analysis.vectorAccesses.contains(&op)) {
      Access access = *getAccess(&op);
      Value buffer = mapping.lookupOrDefault(access.buffer);
      SmallVector<Value> indices;
      for (Value index : access.indices.drop_back())
        indices.push_back(mapping.lookupOrDefault(index));
      indices.push_back(first);
      llvm::MaybeAlign alignment(width * getVectorElementBytes(buffer));
      Type element = cast<MemRefType>(buffer.getType()).getElementType();
      if (auto load = dyn_cast<memref::LoadOp>(&op)) {
        auto vectorLoad = vector::LoadOp::create(
            rewriter, loc, VectorType::get({width}, element), buffer, indices,
            /*nontemporal=*/false, alignment);
        mapping.map(load.getResult(), vectorLoad.getResult());
        continue;
      }
      Value value = getVectorOperands(
          rewriter, loc, cast<memref::StoreOp>(op).getValueToStore(), mapping,
          width)[0];
      vector::StoreOp::create(rewriter, loc, value, buffer, indices,
                              /*nontemporal=*/false, alignment);
      continue;
    }
    bool varies = llvm::any_of(op.getResults(), [&](Value result) {
      return analysis.varying.contains(result);
    });
    if (!varies) {
      rewriter.clone(op, mapping);
      continue;
    }
    SmallVector<Type> types;
    for (Type type : op.getResultTypes())
      types.push_back(VectorType::get({width}, type));
    OperationState state(
        loc, op.getName(),
        getVectorOperands(rewriter, loc, op.getOperands(), mapping, width),
        types, op.getAttrs());
    Operation *vectorOp = rewriter.create(state);
    mapping.map(op.getResults(), vectorOp->getResults());
  }
}

} // namespace

scf::ParallelOp mlir::zest::vectorizeInnermostLoop(RewriterBase &rewriter,
                                                   scf::ParallelOp loop,
                                                   int64_t vectorBytes) {
  if (loop.getNumResults() != 0 ||
      !llvm::all_of(loop.getLowerBound(), isZeroInteger) ||
      !llvm::all_of(loop.getStep(), isOneInteger))
    return nullptr;
  // The loop lowering indexes through identity affine.applies: the indices
  // are the induction variables themselves (no change in meaning).
  for (auto apply : llvm::make_early_inc_range(
           loop.getBody()->getOps<affine::AffineApplyOp>()))
    if (apply.getAffineMap().isIdentity() && apply.getNumOperands() == 1)
      rewriter.replaceOp(apply, apply.getOperand(0));
  std::optional<int64_t> range =
      getConstantIntValue(loop.getUpperBound().back());
  Value iv = loop.getInductionVars().back();
  FailureOr<Analysis> analysis = analyze(loop.getBody(), iv);
  if (!range || failed(analysis))
    return nullptr;
  int64_t width = vectorBytes / analysis->widestBytes;
  if (width < 2 || *range % width != 0 || !keepsRowsAligned(*analysis, width))
    return nullptr;

  Location loc = loop.getLoc();
  rewriter.setInsertionPoint(loop);
  SmallVector<Value> upper(loop.getUpperBound());
  upper.back() = arith::ConstantIndexOp::create(rewriter, loc, *range / width);
  auto wide = scf::ParallelOp::create(rewriter, loc, loop.getLowerBound(),
                                      upper, loop.getStep());
  rewriter.setInsertionPointToStart(wide.getBody());
  IRMapping outer;
  outer.map(ValueRange(loop.getInductionVars()).drop_back(),
            ValueRange(wide.getInductionVars()).drop_back());
  Value widthValue = arith::ConstantIndexOp::create(rewriter, loc, width);
  Value first = arith::MulIOp::create(
      rewriter, loc, wide.getInductionVars().back(), widthValue);
  Value aligned = emitAlignmentCheck(
      rewriter, loc, analysis->vectorAccesses.getArrayRef(), outer, width);
  auto branch = scf::IfOp::create(rewriter, loc, aligned, /*withElse=*/true);
  // Aligned: vectors of `width` elements.
  rewriter.setInsertionPointToStart(branch.thenBlock());
  IRMapping vectorMapping = outer;
  emitVectorBody(rewriter, loop.getBody(), *analysis, vectorMapping, first,
                 width);
  // Not aligned: the same elements one by one.
  rewriter.setInsertionPointToStart(branch.elseBlock());
  auto each = scf::ForOp::create(
      rewriter, loc, arith::ConstantIndexOp::create(rewriter, loc, 0),
      widthValue, arith::ConstantIndexOp::create(rewriter, loc, 1));
  rewriter.setInsertionPointToStart(each.getBody());
  IRMapping scalarMapping = outer;
  scalarMapping.map(
      iv, arith::AddIOp::create(rewriter, loc, first, each.getInductionVar()));
  for (Operation &op : loop.getBody()->without_terminator())
    rewriter.clone(op, scalarMapping);
  rewriter.eraseOp(loop);
  return wide;
}
