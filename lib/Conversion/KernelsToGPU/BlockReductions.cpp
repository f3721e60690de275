//===- BlockReductions.cpp - Reductions a block of threads shares ---------===//
//
// See BlockReductions.h.
//
//===----------------------------------------------------------------------===//

#include "BlockReductions.h"

#include "zest/Dialect/Zest/IR/ZestDialect.h"
#include "zest/Dialect/Zest/Transforms/BufferExtents.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/Utils/Utils.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using zest::Combiner;

/// How `op`'s body combines, if a block of threads can share it: it yields
/// `combine(acc, x)` (or `combine(x, acc)`) on f32 or f64 with `combine`
/// an addf or a maximumf, the accumulator used nowhere else and no
/// iteration index read. f64 because torch-mlir computes a variance (a
/// LayerNorm's) in f64, and a thread per row of it reached 5% of an H200's
/// bandwidth (gpu.all_reduce's 64-bit shuffles are split in two; NVVM has
/// no 16-bit ones).
static std::optional<Combiner> getCombiner(linalg::GenericOp op) {
  if (op.getNumDpsInits() != 1 || op.getNumResults() != 0)
    return std::nullopt;
  Block *body = op.getBody();
  BlockArgument acc = body->getArguments().back();
  auto type = dyn_cast<FloatType>(acc.getType());
  if (!type || !(type.isF32() || type.isF64()) || !acc.hasOneUse() ||
      !body->getOps<linalg::IndexOp>().empty())
    return std::nullopt;
  Operation *combine = body->getTerminator()->getOperand(0).getDefiningOp();
  if (!combine || combine->getBlock() != body ||
      !isa<arith::AddFOp, arith::MaximumFOp>(combine))
    return std::nullopt;
  Value lhs = combine->getOperand(0), rhs = combine->getOperand(1);
  if (lhs != acc && rhs != acc)
    return std::nullopt;
  const llvm::fltSemantics &semantics = type.getFloatSemantics();
  if (isa<arith::AddFOp>(combine))
    return Combiner{combine, lhs == acc ? rhs : lhs,
                    gpu::AllReduceOperation::ADD,
                    FloatAttr::get(type, APFloat::getZero(semantics))};
  return Combiner{
      combine, lhs == acc ? rhs : lhs, gpu::AllReduceOperation::MAXIMUMF,
      FloatAttr::get(type, APFloat::getInf(semantics, /*Negative=*/true))};
}

std::optional<zest::BlockReduction>
mlir::zest::getRegisterReduction(linalg::GenericOp op) {
  std::optional<Combiner> combiner = getCombiner(op);
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  if (!combiner || op.getNumReductionLoops() == 0 ||
      llvm::any_of(ranges, ShapedType::isDynamic))
    return std::nullopt;
  BlockReduction reduction{*combiner};
  for (auto [range, iterator] : llvm::zip(ranges, op.getIteratorTypesArray()))
    (linalg::isParallelIterator(iterator) ? reduction.outputs
                                          : reduction.total) *= range;
  if (reduction.outputs == 0 || reduction.total == 0)
    return std::nullopt;
  return reduction;
}

std::optional<zest::BlockReduction>
mlir::zest::getBlockReduction(linalg::GenericOp op) {
  std::optional<BlockReduction> block = getRegisterReduction(op);
  if (!block)
    return std::nullopt;
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  if (op.getNumParallelLoops() > 0) {
    if (block->total < 32 || op.getNumDpsInputs() == 0)
      return std::nullopt;
    AffineMap first = op.getMatchingIndexingMap(op.getDpsInputOperand(0));
    auto innermost = first.getNumResults()
                         ? dyn_cast<AffineDimExpr>(first.getResults().back())
                         : nullptr;
    if (!innermost ||
        linalg::isParallelIterator(iterators[innermost.getPosition()]))
      return std::nullopt;
  }
  return block;
}

Value mlir::zest::getFilledBuffer(linalg::FillOp fill, Attribute value) {
  Attribute filled;
  if (!matchPattern(fill.getInputs()[0], m_Constant(&filled)) ||
      filled != value)
    return nullptr;
  return fill.getOutputs()[0];
}

std::optional<zest::RowSplit> mlir::zest::getRowSplit(linalg::LinalgOp op,
                                                      int64_t rows) {
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  if (rows < 1 || ranges.empty() || llvm::any_of(ranges, ShapedType::isDynamic))
    return std::nullopt;
  unsigned parallel = op.getNumParallelLoops();
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  if (!llvm::all_of(ArrayRef(iterators).take_front(parallel),
                    linalg::isParallelIterator))
    return std::nullopt;
  RowSplit split;
  if (parallel < ranges.size()) {
    auto generic = dyn_cast<linalg::GenericOp>(op.getOperation());
    std::optional<BlockReduction> block =
        generic && parallel > 0 ? getBlockReduction(generic) : std::nullopt;
    if (!block || block->outputs != rows)
      return std::nullopt;
    return RowSplit{parallel, block->total, /*reduction=*/true};
  }
  int64_t product = 1;
  while (split.rowLoops < ranges.size() && product < rows)
    product *= ranges[split.rowLoops++];
  if (product != rows)
    return std::nullopt;
  for (int64_t range : ArrayRef(ranges).drop_front(split.rowLoops))
    split.columns *= range;
  return split;
}

namespace {

/// The one op of kernel `kernel` (constants aside) if it is an OpTy.
template <typename OpTy> OpTy getOnlyOp(func::FuncOp kernel) {
  if (!kernel || kernel.isExternal() ||
      !kernel->hasAttr(zest::ZestDialect::kKernelAttrName))
    return nullptr;
  OpTy found;
  for (Operation &op : kernel.getBody().front()) {
    if (isa<func::ReturnOp>(op) || op.hasTrait<OpTrait::ConstantLike>())
      continue;
    if (found || !isa<OpTy>(op))
      return nullptr;
    found = cast<OpTy>(op);
  }
  return found;
}

/// `value` past casts and reshapes: views of the same elements.
Value stripReshapes(Value value) {
  while (Operation *producer = value.getDefiningOp()) {
    if (!isa<memref::CastOp, memref::CollapseShapeOp, memref::ExpandShapeOp>(
            producer))
      break;
    value = producer->getOperand(0);
  }
  return value;
}

/// The argument of `kernel`'s call `call` that the kernel's single `fill`
/// of `identity` writes; null if it is no such fill.
Value getFilledOperand(func::CallOp call, func::FuncOp kernel,
                       Attribute identity) {
  auto fill = getOnlyOp<linalg::FillOp>(kernel);
  auto arg = fill ? dyn_cast_or_null<BlockArgument>(
                        zest::getFilledBuffer(fill, identity))
                  : nullptr;
  return arg ? call.getOperand(arg.getArgNumber()) : nullptr;
}

/// At most this many calls stand between a fill and the reduction it folds
/// into.
constexpr int kMaxSkippedCalls = 8;

/// The call before `call` of a kernel that fills `buffer` with `identity`,
/// past pure ops (casts, constants, views) and calls, allocations and frees
/// whose buffers are all known to be apart from `buffer`; null if none.
func::CallOp findIdentityFill(func::CallOp call, Value buffer,
                              Attribute identity, SymbolTable &symbols,
                              const zest::DistinctArgFunctions &distinct) {
  std::optional<zest::Extent> extent = zest::getExtent(buffer, distinct);
  auto isApart = [&](Value value) {
    if (!isa<MemRefType>(value.getType()))
      return true;
    std::optional<zest::Extent> other = zest::getExtent(value, distinct);
    return extent && other && !extent->overlaps(*other);
  };
  int skipped = 0;
  for (Operation *op = call->getPrevNode(); op; op = op->getPrevNode()) {
    if (isPure(op))
      continue;
    auto previous = dyn_cast<func::CallOp>(op);
    if (previous) {
      Value filled = getFilledOperand(
          previous, symbols.lookup<func::FuncOp>(previous.getCallee()),
          identity);
      if (filled && stripReshapes(filled) == stripReshapes(buffer))
        return previous;
    }
    bool skippable = previous ? ++skipped <= kMaxSkippedCalls
                              : isa<memref::AllocOp, memref::DeallocOp>(op);
    if (!skippable || !llvm::all_of(op->getOperands(), isApart))
      return nullptr;
  }
  return nullptr;
}

} // namespace

void mlir::zest::foldReductionFills(ModuleOp module) {
  SymbolTable symbols(module);
  DistinctArgFunctions distinct = getDistinctArgFunctions(module);
  SmallVector<std::pair<func::CallOp, func::CallOp>> folds; // (fill, reduce)
  module.walk([&](func::CallOp call) {
    auto reduce = getOnlyOp<linalg::GenericOp>(
        symbols.lookup<func::FuncOp>(call.getCallee()));
    std::optional<BlockReduction> reduction =
        reduce ? getRegisterReduction(reduce) : std::nullopt;
    auto init =
        reduction ? dyn_cast<BlockArgument>(reduce.getDpsInits()[0]) : nullptr;
    if (!init)
      return;
    // The reduction must not read the filled values as an input.
    Value buffer = call.getOperand(init.getArgNumber());
    for (auto [i, operand] : llvm::enumerate(call.getOperands()))
      if (i != init.getArgNumber() &&
          stripReshapes(operand) == stripReshapes(buffer))
        return;
    if (func::CallOp fillCall = findIdentityFill(
            call, buffer, reduction->combiner.identity, symbols, distinct))
      folds.push_back({fillCall, call});
  });
  auto work =
      module->getAttrOfType<DictionaryAttr>(ZestDialect::kKernelWorkAttrName);
  NamedAttrList works(work ? work : DictionaryAttr::get(module.getContext()));
  llvm::SetVector<StringAttr> replaced; // kernels some calls no longer make
  for (auto [fillCall, call] : folds) {
    replaced.insert(fillCall.getCalleeAttr().getAttr());
    replaced.insert(call.getCalleeAttr().getAttr());
    std::string name = (call.getCallee() + "_from_identity").str();
    auto copy = symbols.lookup<func::FuncOp>(name);
    if (!copy) {
      auto kernel = symbols.lookup<func::FuncOp>(call.getCallee());
      copy = kernel.clone();
      copy.setSymName(name);
      symbols.insert(copy, std::next(kernel->getIterator()));
      getOnlyOp<linalg::GenericOp>(copy)->setAttr(
          kInitIsIdentityAttrName, UnitAttr::get(module.getContext()));
      if (Attribute entry = works.get(call.getCallee()))
        works.set(name, entry);
    }
    call.setCallee(name);
    fillCall.erase();
  }
  // Kernels no call makes any more are not compiled.
  for (StringAttr name : replaced) {
    auto kernel = symbols.lookup<func::FuncOp>(name);
    if (kernel && SymbolTable::symbolKnownUseEmpty(kernel, module)) {
      symbols.erase(kernel);
      works.erase(name);
    }
  }
  if (work)
    module->setAttr(ZestDialect::kKernelWorkAttrName,
                    works.getDictionary(module.getContext()));
}
