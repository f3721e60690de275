//===- Vectorize.cpp - Tile and vectorize linalg kernels on buffers -------===//
//
// Each outlined kernel holds one linalg op on buffers. Lowered to scalar
// loops, its vectorization would be left to LLVM's loop vectorizer, which
// gives up on anything it cannot prove (aliasing, reductions, calls). This
// pass vectorizes in MLIR instead, as IREE's CPU codegen does: tile so that
// the innermost loop steps by a few registers' worth of elements, vectorize
// each tile with upstream's linalg vectorizer, then keep accumulators in
// registers across the reduction loop. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "zest/Dialect/Zest/Transforms/Passes.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Hoisting.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Transforms/Transforms.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/Vector/Transforms/LoweringPatterns.h"
#include "mlir/Dialect/Vector/Transforms/VectorRewritePatterns.h"
#include "mlir/Interfaces/TilingInterface.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/LoopInvariantCodeMotionUtils.h"

namespace mlir::zest {
#define GEN_PASS_DEF_VECTORIZEPASS
#include "zest/Dialect/Zest/Transforms/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;

namespace {

/// How one linalg op is cut into vectorizable tiles.
struct VectorPlan {
  /// Per loop: 0 (not tiled: the whole range is one tile) or the tile size.
  SmallVector<int64_t> tileSizes;
  /// Loop order of the tile loops: parallel loops outside, reductions
  /// inside (an accumulator stays in registers across them), the vector
  /// loop last.
  SmallVector<unsigned> interchange;
  /// Where the vector loop is split so that the first part is a whole
  /// number of tiles (0: no split). The rest is one smaller tile.
  int64_t splitPoint = 0;
};

/// True if a reduction by `combiner` may change order: integer and min/max
/// combiners always, float sums and products when marked `reassoc`
/// (zest-reassociate-reductions marks sums).
bool isReassociable(Operation *combiner) {
  std::optional<vector::CombiningKind> kind =
      linalg::getCombinerOpKind(combiner);
  if (!kind)
    return false;
  if (*kind != vector::CombiningKind::ADD &&
      *kind != vector::CombiningKind::MUL)
    return true;
  auto fastmath = dyn_cast<arith::ArithFastMathInterface>(combiner);
  return !fastmath ||
         bitEnumContainsAll(fastmath.getFastMathFlagsAttr().getValue(),
                            arith::FastMathFlags::reassoc);
}

/// True if every output of `op` is a reduction whose order may change.
bool hasReassociableReductions(linalg::LinalgOp op) {
  SmallVector<BlockArgument> outs;
  for (OpOperand &init : op.getDpsInitsMutable())
    outs.push_back(op.getMatchingBlockArgument(&init));
  for (unsigned i = 0, e = outs.size(); i < e; ++i) {
    SmallVector<Operation *> combiners;
    if (!matchReduction(outs, i, combiners) || combiners.size() != 1 ||
        !isReassociable(combiners.front()))
      return false;
  }
  return true;
}

/// Plans the vectorization of `op` along its innermost loop, or returns
/// nothing when the op is left to scalar loops: dynamic or empty ranges,
/// non-numeric or sub-byte (i1) operands, an innermost reduction whose
/// order is fixed, or a
/// body the vectorizer does not handle (memref loads, calls).
std::optional<VectorPlan>
planVectorization(linalg::LinalgOp op, unsigned vectorBits, unsigned unroll) {
  if (!op.hasPureBufferSemantics() || op.getNumLoops() == 0)
    return std::nullopt;
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  if (llvm::any_of(ranges, [](int64_t r) { return r <= 0; }))
    return std::nullopt; // dynamic (kDynamic < 0) or empty
  // Lanes per register: of the widest type the op reads, writes or
  // computes in (bf16 data computed in f32 takes f32 registers).
  unsigned bitWidth = 0;
  for (Value operand : op->getOperands()) {
    Type type = getElementTypeOrSelf(operand.getType());
    // Sub-byte elements (i1 masks) take a byte each in memory but a bit
    // each in a vector register: a vector transfer would read them packed.
    if (!type.isIntOrFloat() || type.getIntOrFloatBitWidth() % 8 != 0)
      return std::nullopt;
    bitWidth = std::max(bitWidth, type.getIntOrFloatBitWidth());
  }
  for (Operation &bodyOp : *op.getBlock())
    for (Type type : bodyOp.getResultTypes())
      if (type.isIntOrFloat())
        bitWidth = std::max(bitWidth, type.getIntOrFloatBitWidth());
  unsigned last = op.getNumLoops() - 1;
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  if (iterators[last] == utils::IteratorType::reduction &&
      !hasReassociableReductions(op))
    return std::nullopt;
  if (failed(linalg::vectorizeOpPrecondition(op)))
    return std::nullopt;

  VectorPlan plan;
  int64_t lanes = std::max<int64_t>(1, vectorBits / std::max(bitWidth, 1u));
  int64_t tile = lanes * unroll;
  for (unsigned i = 0; i < last; ++i)
    plan.tileSizes.push_back(ranges[i] > 1 ? 1 : 0);
  int64_t extent = ranges[last];
  if (extent <= tile) {
    plan.tileSizes.push_back(0);
  } else {
    plan.tileSizes.push_back(tile);
    if (extent % tile != 0)
      plan.splitPoint = extent - extent % tile;
  }
  // Parallel loops, then reductions, the vector loop last of its kind: an
  // accumulator tile is then invariant in every loop inside its own.
  for (utils::IteratorType kind :
       {utils::IteratorType::parallel, utils::IteratorType::reduction}) {
    for (unsigned i = 0; i < last; ++i)
      if (iterators[i] == kind)
        plan.interchange.push_back(i);
    if (iterators[last] == kind)
      plan.interchange.push_back(last);
  }
  return plan;
}

/// Tiles `op` as planned and vectorizes the tile. Returns failure, leaving
/// the (tiled) op to scalar loops, if tiling or the vectorizer fails.
LogicalResult tileAndVectorize(RewriterBase &rewriter, linalg::LinalgOp op,
                               const VectorPlan &plan) {
  rewriter.setInsertionPoint(op);
  linalg::LinalgOp tileOp = op;
  if (llvm::any_of(plan.tileSizes, [](int64_t size) { return size != 0; })) {
    auto options = linalg::LinalgTilingOptions()
                       .setTileSizes(plan.tileSizes)
                       .setInterchange(plan.interchange)
                       .setLoopType(linalg::LinalgTilingLoopType::Loops);
    FailureOr<linalg::TiledLinalgOp> tiled =
        linalg::tileLinalgOp(rewriter, op, options);
    if (failed(tiled))
      return failure();
    tileOp = tiled->op;
    rewriter.eraseOp(op); // the tile loops compute it now
  }
  rewriter.setInsertionPoint(tileOp);
  if (failed(linalg::vectorize(rewriter, tileOp)))
    return failure(); // the tile stays, lowered to scalar loops
  rewriter.eraseOp(tileOp);
  return success();
}

/// The `arith` kind whose identity starts a vector accumulator of `kind`.
std::optional<arith::AtomicRMWKind> getAtomicKind(vector::CombiningKind kind,
                                                  Type elementType) {
  bool isFloat = isa<FloatType>(elementType);
  switch (kind) {
  case vector::CombiningKind::ADD:
    return isFloat ? arith::AtomicRMWKind::addf : arith::AtomicRMWKind::addi;
  case vector::CombiningKind::MUL:
    return isFloat ? arith::AtomicRMWKind::mulf : arith::AtomicRMWKind::muli;
  case vector::CombiningKind::MAXIMUMF:
    return arith::AtomicRMWKind::maximumf;
  case vector::CombiningKind::MINIMUMF:
    return arith::AtomicRMWKind::minimumf;
  case vector::CombiningKind::MAXNUMF:
    return arith::AtomicRMWKind::maxnumf;
  case vector::CombiningKind::MINNUMF:
    return arith::AtomicRMWKind::minnumf;
  case vector::CombiningKind::MAXSI:
    return arith::AtomicRMWKind::maxs;
  case vector::CombiningKind::MINSI:
    return arith::AtomicRMWKind::mins;
  case vector::CombiningKind::MAXUI:
    return arith::AtomicRMWKind::maxu;
  case vector::CombiningKind::MINUI:
    return arith::AtomicRMWKind::minu;
  case vector::CombiningKind::AND:
    return arith::AtomicRMWKind::andi;
  case vector::CombiningKind::OR:
    return arith::AtomicRMWKind::ori;
  default: // XOR has no identity kind: its lanes combine per tile
    return std::nullopt;
  }
}

/// A reduction of one vector per iteration into a loop-carried scalar
/// (`iter_args(%acc)`, `vector.reduction <k>, %v, %acc`, yielded) reduces
/// across the vector's lanes every iteration. Carry the whole vector
/// instead: lane-wise combine in the loop, one `vector.reduction` of the
/// lanes into the scalar after it. The scalar may travel as a
/// `vector<1xT>` (extracted before, broadcast after the reduction), as the
/// hoisted accumulator of a 1-D output does. Only reductions this pass
/// created are rewritten, and it vectorizes only reassociable ones.
LogicalResult carryVectorAccumulator(RewriterBase &rewriter,
                                     vector::ReductionOp reduction) {
  auto loop = dyn_cast<scf::ForOp>(reduction->getParentOp());
  Value acc = reduction.getAcc();
  if (!loop || !acc || reduction.isMasked() || !reduction->hasOneUse())
    return failure();
  // Where the accumulator enters...
  auto extract = acc.getDefiningOp<vector::ExtractOp>();
  if (extract && (!extract->hasOneUse() ||
                  extract.getSourceVectorType().getNumElements() != 1))
    return failure();
  auto iterArg = dyn_cast<BlockArgument>(extract ? extract.getSource() : acc);
  if (!iterArg || iterArg.getOwner() != loop.getBody() ||
      iterArg.getArgNumber() == 0 || !iterArg.hasOneUse())
    return failure();
  unsigned position = iterArg.getArgNumber() - 1;
  // ... and where it leaves.
  Operation *user = *reduction->getUsers().begin();
  auto broadcast = dyn_cast<vector::BroadcastOp>(user);
  if (broadcast) {
    if (!extract || !broadcast->hasOneUse() ||
        broadcast.getType() != extract.getSourceVectorType())
      return failure();
    user = *broadcast->getUsers().begin();
  }
  OpOperand &yielded = loop.getBody()->getTerminator()->getOpOperand(position);
  if (yielded.getOwner() != user ||
      yielded.get() !=
          (broadcast ? broadcast.getResult() : reduction.getResult()))
    return failure();
  VectorType vectorType = reduction.getSourceVectorType();
  std::optional<arith::AtomicRMWKind> atomicKind =
      getAtomicKind(reduction.getKind(), vectorType.getElementType());
  if (!atomicKind)
    return failure();

  Location loc = reduction.getLoc();
  SmallVector<OpFoldResult> position0 =
      extract ? extract.getMixedPosition() : SmallVector<OpFoldResult>{};
  rewriter.setInsertionPoint(loop);
  TypedAttr identity = arith::getIdentityValueAttr(
      *atomicKind, vectorType.getElementType(), rewriter, loc);
  Value init = arith::ConstantOp::create(
      rewriter, loc, DenseElementsAttr::get(vectorType, identity));
  Value vector = reduction.getVector();
  vector::CombiningKind kind = reduction.getKind();
  arith::FastMathFlagsAttr fastmath = reduction.getFastmathAttr();
  // The scalar accumulator now passes through the loop unchanged.
  rewriter.modifyOpInPlace(yielded.getOwner(), [&] { yielded.set(iterArg); });
  FailureOr<LoopLikeOpInterface> newLoop = loop.replaceWithAdditionalYields(
      rewriter, init, /*replaceInitOperandUsesInLoop=*/false,
      [&](OpBuilder &b, Location loc, ArrayRef<BlockArgument> lanes) {
        return SmallVector<Value>{vector::makeArithReduction(
            b, loc, kind, vector, lanes.front(), fastmath)};
      });
  if (failed(newLoop))
    return failure();
  if (broadcast)
    rewriter.eraseOp(broadcast);
  rewriter.eraseOp(reduction);
  if (extract)
    rewriter.eraseOp(extract);

  Operation *forOp = newLoop->getOperation();
  rewriter.setInsertionPointAfter(forOp);
  Value scalar = forOp->getResult(position);
  Value lanes = forOp->getResults().back();
  Value start = scalar;
  if (extract)
    start = vector::ExtractOp::create(rewriter, loc, scalar, position0);
  Value total = vector::ReductionOp::create(rewriter, loc, kind, lanes, start,
                                            fastmath.getValue());
  if (extract)
    total = vector::BroadcastOp::create(rewriter, loc, scalar.getType(), total);
  rewriter.replaceAllUsesExcept(scalar, total, start.getDefiningOp());
  return success();
}

/// Adds the canonicalization patterns of every loaded dialect and op, as
/// the canonicalize pass does.
void addCanonicalizations(RewritePatternSet &patterns) {
  MLIRContext *ctx = patterns.getContext();
  for (Dialect *dialect : ctx->getLoadedDialects())
    dialect->getCanonicalizationPatterns(patterns);
  for (RegisteredOperationName op : ctx->getRegisteredOperations())
    op.getCanonicalizationPatterns(patterns, ctx);
}

struct VectorizePass : public zest::impl::VectorizePassBase<VectorizePass> {
  using Base::Base;

  LogicalResult initialize(MLIRContext *ctx) override {
    // Transfers on the tiles' subviews become transfers on the kernel's
    // buffers (so the hoisting below sees through them), as 1-D vectors.
    RewritePatternSet simplify(ctx);
    memref::populateFoldMemRefAliasOpPatterns(simplify);
    vector::populateCastAwayVectorLeadingOneDimPatterns(simplify);
    addCanonicalizations(simplify);
    simplifyPatterns = std::move(simplify);

    RewritePatternSet lower(ctx);
    vector::populateVectorMultiReductionLoweringPatterns(
        lower, vector::VectorMultiReductionLowering::InnerReduction);
    // Contiguous 1-D transfers become plain vector loads and stores,
    // broadcast reads a scalar load and a splat.
    vector::populateVectorTransferPermutationMapLoweringPatterns(lower);
    vector::populateVectorTransferLoweringPatterns(lower,
                                                   /*maxTransferRank=*/1);
    addCanonicalizations(lower);
    lowerPatterns = std::move(lower);
    return success();
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    SmallVector<linalg::LinalgOp> ops;
    func.walk([&](linalg::LinalgOp op) { ops.push_back(op); });
    // Entry points hold no loop nests after outlining; sparing them the
    // rewrites below keeps the pass linear in the number of kernels.
    if (ops.empty())
      return;
    IRRewriter rewriter(&getContext());
    for (linalg::LinalgOp op : ops) {
      std::optional<VectorPlan> plan =
          planVectorization(op, vectorBits, unroll);
      if (!plan)
        continue;
      SmallVector<linalg::LinalgOp> parts{op};
      if (plan->splitPoint) {
        rewriter.setInsertionPoint(op);
        auto [head, tail] = linalg::splitOp(
            rewriter, cast<TilingInterface>(op.getOperation()),
            op.getNumLoops() - 1, rewriter.getIndexAttr(plan->splitPoint));
        parts = {cast<linalg::LinalgOp>(head.getOperation()),
                 cast<linalg::LinalgOp>(tail.getOperation())};
      }
      for (linalg::LinalgOp part : parts) {
        VectorPlan partPlan = *plan;
        // The tail is one partial tile: not tiled along the vector loop.
        if (part.getStaticLoopRanges().back() < partPlan.tileSizes.back())
          partPlan.tileSizes.back() = 0;
        (void)tileAndVectorize(rewriter, part, partPlan);
      }
    }
    if (failed(applyPatternsGreedily(func, simplifyPatterns)))
      return signalPassFailure();
    func.walk([](LoopLikeOpInterface loop) { moveLoopInvariantCode(loop); });
    linalg::hoistRedundantVectorTransfers(func);
    if (failed(applyPatternsGreedily(func, lowerPatterns)))
      return signalPassFailure();
    // Innermost loops first; the lane reduction each rewrite leaves after
    // its loop may be carried through the enclosing loop in turn.
    // (Canonicalization drops the scalar accumulators left passing through
    // each rewritten loop.)
    bool changed = true;
    while (changed) {
      changed = false;
      SmallVector<vector::ReductionOp> reductions;
      func.walk([&](vector::ReductionOp op) { reductions.push_back(op); });
      for (vector::ReductionOp reduction : reductions)
        changed |= succeeded(carryVectorAccumulator(rewriter, reduction));
      if (changed && failed(applyPatternsGreedily(func, lowerPatterns)))
        return signalPassFailure();
    }
  }

  FrozenRewritePatternSet simplifyPatterns;
  FrozenRewritePatternSet lowerPatterns;
};
} // namespace
