//===- OutlineRegions.cpp - Per-unit regions on tensors, compiled once ----===//
//
// Cuts each entry point into regions of computation on tensors (a unit's
// forward, its backward and optimizer step) and calls one function per
// distinct region. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "zest/Dialect/Zest/IR/ZestDialect.h"
#include "zest/Dialect/Zest/IR/ZestOps.h"
#include "zest/Dialect/Zest/Transforms/ElementwiseFusion.h"
#include "zest/Dialect/Zest/Transforms/MemoryPlan.h"
#include "zest/Dialect/Zest/Transforms/Passes.h"
#include "zest/Dialect/Zest/Transforms/Transforms.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::zest {
#define GEN_PASS_DEF_OUTLINEREGIONSPASS
#include "zest/Dialect/Zest/Transforms/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;
using namespace mlir::zest;

SetVector<Value> mlir::zest::getReadValues(Operation *op) {
  SetVector<Value> values(op->operand_begin(), op->operand_end());
  if (op->getNumRegions() > 0)
    getUsedValuesDefinedAbove(op->getRegions(), values);
  return values;
}

bool mlir::zest::isTensorView(Operation *op) {
  return isa<tensor::ExtractSliceOp, tensor::ExpandShapeOp,
             tensor::CollapseShapeOp>(op);
}

Value mlir::zest::getViewedTensor(Value value) {
  while (Operation *op = value.getDefiningOp()) {
    if (!isTensorView(op))
      break;
    value = op->getOperand(0);
  }
  return value;
}

namespace {

/// Types a region computes on: tensors and scalars, never buffers or
/// pointers.
bool isValueType(Type type) {
  return isa<TensorType, FloatType, IntegerType, IndexType>(type);
}

/// Whether `op` and everything nested in it compute on tensors and scalars
/// only: no buffers, pointers, calls or other effects a region could not
/// take along.
bool isTensorComputeUncached(Operation *op) {
  WalkResult result = op->walk([](Operation *nested) {
    Dialect *dialect = nested->getDialect();
    // Of Zest's ops only the compute ops (and the barriers of a
    // recomputation) compute on tensors alone.
    if (!dialect ||
        !(isa<linalg::LinalgDialect, tensor::TensorDialect, arith::ArithDialect,
              math::MathDialect, scf::SCFDialect>(dialect) ||
          zest::isComputeOp(nested) ||
          isa<zest::OptimizationBarrierOp>(nested)))
      return WalkResult::interrupt();
    if (!llvm::all_of(nested->getOperandTypes(), isValueType) ||
        !llvm::all_of(nested->getResultTypes(), isValueType))
      return WalkResult::interrupt();
    for (Region &region : nested->getRegions())
      for (Block &block : region)
        if (!llvm::all_of(block.getArgumentTypes(), isValueType))
          return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return !result.wasInterrupted();
}

/// One entry point's cut into regions.
class RegionCutter {
public:
  RegionCutter(func::FuncOp func) : block(func.getBody().front()) {
    // Units of the entry arguments (their shards) and of the buffers their
    // collectives gather into (tagged with the unit's name).
    for (BlockArgument arg : block.getArguments())
      if (auto unit = func.getArgAttrOfType<FlatSymbolRefAttr>(
              arg.getArgNumber(), zest::ZestDialect::kUnitArgAttrName))
        rootUnits[arg] = unit.getAttr();
    DenseMap<Operation *, StringAttr> allocUnits;
    func.walk([&](func::CallOp call) {
      StringAttr unit;
      for (Value operand : call.getOperands())
        if (auto tag = operand.getDefiningOp<LLVM::AddressOfOp>())
          if (tag.getGlobalName().starts_with("zest.tag."))
            unit = StringAttr::get(
                call.getContext(),
                tag.getGlobalName().drop_front(StringRef("zest.tag.").size()));
      if (!unit)
        return;
      for (Value operand : call.getOperands())
        if (memref::AllocOp alloc = zest::getAllocation(operand))
          allocUnits.try_emplace(alloc, unit);
    });
    func.walk([&](bufferization::ToTensorOp toTensor) {
      if (memref::AllocOp alloc = zest::getAllocation(toTensor.getBuffer()))
        if (StringAttr unit = allocUnits.lookup(alloc))
          rootUnits[toTensor.getResult()] = unit;
    });
  }

  /// Whether `op` is cloned into each region that reads it rather than
  /// passed in: a constant, an empty tensor, a fill of one (or of a view of
  /// one) with a constant (passed in, every op that writes it would write a
  /// copy), or a static
  /// view (or element) of a value computed outside regions. Cloned, the
  /// views of a unit's flat buffer make regions of different blocks
  /// identical.
  bool isCloneable(Operation *op) {
    auto [it, inserted] = cloneable.try_emplace(op, false);
    if (!inserted)
      return it->second;
    bool result = false;
    if (op->getNumOperands() == 0)
      result =
          op->hasTrait<OpTrait::ConstantLike>() || isa<tensor::EmptyOp>(op);
    else if (auto fill = dyn_cast<linalg::FillOp>(op))
      result = fill.hasPureTensorSemantics() &&
               matchPattern(fill.value(), m_Constant()) &&
               llvm::all_of(fill.getDpsInits(),
                            [&](Value init) { return isEmptyView(init); });
    else if ((isTensorView(op) || isa<tensor::ExtractOp>(op)) &&
             isTensorCompute(op))
      result = llvm::all_of(op->getOperands(), [&](Value operand) {
        Operation *producer = operand.getDefiningOp();
        return isRoot(operand) ||
               (producer->hasTrait<OpTrait::ConstantLike>() &&
                producer->getNumOperands() == 0) ||
               isCloneable(producer);
      });
    else if (isScalarArith(op))
      result = llvm::all_of(op->getOperands(), [&](Value operand) {
        Operation *producer = operand.getDefiningOp();
        return !producer || isCloneable(producer);
      });
    cloneable[op] = result;
    return result;
  }

  /// Whether `op` is pure scalar arithmetic (a flag compared from a
  /// hyperparameter): cloned where its operands are, it is computed again
  /// in each region and the caller rather than returned by a region, which
  /// on a GPU would leave a scalar read from device memory on the host.
  bool isScalarArith(Operation *op) {
    return isa<arith::ArithDialect>(op->getDialect()) && isPure(op) &&
           op->getNumRegions() == 0 &&
           llvm::none_of(op->getResultTypes(),
                         [](Type type) { return isa<ShapedType>(type); }) &&
           isTensorCompute(op);
  }

  /// Whether `value` is an empty tensor or a static view of one (a
  /// gradient's slice of its unit's flat buffer, before anything is written
  /// there): a fill of it is cloned with the view, so the region writes the
  /// gradient in its flat buffer instead of into a copy of a shared fill.
  bool isEmptyView(Value value) {
    Operation *producer = value.getDefiningOp();
    if (!producer)
      return false;
    if (isa<tensor::EmptyOp>(producer))
      return true;
    return isTensorView(producer) && isCloneable(producer) &&
           isEmptyView(producer->getOperand(0));
  }

  /// A value computed outside any region: an argument, or the result of an
  /// op a region cannot hold (a gathered buffer's tensor).
  bool isRoot(Value value) {
    Operation *producer = value.getDefiningOp();
    return !producer || !isTensorCompute(producer);
  }

  /// isTensorComputeUncached, once per op.
  bool isTensorCompute(Operation *op) {
    auto [it, inserted] = tensorCompute.try_emplace(op, false);
    if (inserted)
      it->second = isTensorComputeUncached(op);
    return it->second;
  }

  /// Whether `op` derives a tensor from its first operand alone, without
  /// computing: a static view, or a pointwise cast (autocast's rounded
  /// weights, which zest-group-parameter-casts makes views of one rounded
  /// unit buffer).
  static bool isDerivation(Operation *op) {
    return isTensorView(op) || zest::getElementConversion(op);
  }

  /// The unit whose parameters `op` reads (through views and casts), if it
  /// reads those of exactly one: a layer that reads its rounded weights
  /// works for their unit.
  StringAttr getUnit(Operation *op) {
    StringAttr unit;
    for (Value value : zest::getReadValues(op)) {
      while (Operation *producer = value.getDefiningOp()) {
        if (!isTensorCompute(producer) ||
            !(isCloneable(producer) || isDerivation(producer)) ||
            producer->getNumOperands() == 0)
          break;
        value = producer->getOperand(0);
      }
      StringAttr valueUnit = rootUnits.lookup(value);
      if (!valueUnit)
        continue;
      if (unit && unit != valueUnit)
        return {};
      unit = valueUnit;
    }
    return unit;
  }

  /// The unit each tensor op of the block works for: the unit whose
  /// parameters it reads, or else that of its first user that has one. A
  /// layer norm's statistics go with the block whose parameters scale them,
  /// a weight gradient (which reads activations only) with the unit whose
  /// gradient buffer it fills and whose optimizer step reads it.
  DenseMap<Operation *, StringAttr> getAffinities() {
    DenseMap<Operation *, unsigned> position;
    for (Operation &op : block)
      position[&op] = position.size();
    DenseMap<Operation *, StringAttr> units;
    for (Operation &op : llvm::reverse(block.without_terminator())) {
      if (!isTensorCompute(&op) || isCloneable(&op))
        continue;
      StringAttr unit = getUnit(&op);
      // Users come later in the block: their units are known. The first
      // that has one gives it.
      unsigned first = ~0u;
      for (Operation *user : op.getUsers()) {
        if (first == ~0u && unit)
          break; // reads parameters itself
        Operation *ancestor = block.findAncestorOpInBlock(*user);
        if (!ancestor || position.lookup(ancestor) >= first)
          continue;
        if (StringAttr userUnit = units.lookup(ancestor)) {
          first = position.lookup(ancestor);
          unit = userUnit;
        }
      }
      if (unit)
        units[&op] = unit;
    }
    return units;
  }

  /// The regions of the block, in order: maximal runs of tensor computation
  /// (cloneable ops aside) working for one unit.
  SmallVector<SmallVector<Operation *>> cut() {
    DenseMap<Operation *, StringAttr> units = getAffinities();
    SmallVector<SmallVector<Operation *>> regions(1);
    StringAttr current;
    auto close = [&] {
      if (!regions.back().empty())
        regions.emplace_back();
      current = {};
    };
    for (Operation &op : block.without_terminator()) {
      if (!isTensorCompute(&op)) {
        close();
        continue;
      }
      if (isCloneable(&op))
        continue;
      StringAttr unit = units.lookup(&op);
      if (unit && current && unit != current)
        close();
      if (unit)
        current = unit;
      regions.back().push_back(&op);
    }
    if (regions.back().empty())
      regions.pop_back();
    return regions;
  }

  Block &block;

private:
  DenseMap<Value, StringAttr> rootUnits;
  DenseMap<Operation *, bool> cloneable, tensorCompute;
};

/// A region taken out of its block: the function that computes it (not yet
/// in the module) and what it reads and defines for the rest of the block.
struct OutlinedRegion {
  SmallVector<Operation *> ops;
  SmallVector<Value> inputs, outputs;
  /// Values read after the region that are static views of an output: the
  /// views from the output to the value, which the caller takes again.
  SmallVector<std::pair<Value, SmallVector<Operation *>>, 4> viewOutputs;
  func::FuncOp body;
};

/// Moves each of `cloned` (ops cloned into the start of `entry`: empty
/// tensors, their fills, views) right before its first user. At the start,
/// each empty tensor would be a buffer allocated when the region starts
/// and live until its last use, all of a block's destinations at once (a
/// blocked attention's probabilities and score gradients, block by block);
/// before its first user it is allocated where it is first written, as in
/// the caller. Constants stay at the start.
void sinkToFirstUse(Block &entry, ArrayRef<Operation *> cloned) {
  // Users first: a fill moves before its user, then its empty before it.
  for (Operation *op : llvm::reverse(cloned)) {
    if (op->hasTrait<OpTrait::ConstantLike>())
      continue;
    Operation *first = nullptr;
    for (Operation *user : op->getUsers()) {
      Operation *ancestor = entry.findAncestorOpInBlock(*user);
      if (ancestor && (!first || ancestor->isBeforeInBlock(first)))
        first = ancestor;
    }
    if (first)
      op->moveBefore(first);
  }
}

/// How ops outside region `index` read a value it computes: itself, or
/// only through static views taken inside the region (which).
struct LaterReads {
  bool whole = false;
  SetVector<Value> views;
};

void findLaterReads(Value value, bool isView, Block &block, unsigned index,
                    const DenseMap<Operation *, unsigned> &regionOf,
                    LaterReads &reads) {
  for (Operation *user : value.getUsers()) {
    Operation *ancestor = block.findAncestorOpInBlock(*user);
    auto region = regionOf.find(ancestor);
    if (region == regionOf.end() || region->second != index) {
      if (isView)
        reads.views.insert(value);
      else
        reads.whole = true;
    } else if (ancestor == user && isTensorView(user) &&
               user->getNumOperands() == 1) {
      findLaterReads(user->getResult(0), /*isView=*/true, block, index,
                     regionOf, reads);
    }
  }
}

/// Regions pass a buffer whole to later regions that read views of it
/// (zest-outline-regions takes the views again there), so the buffer lives
/// until the last of them. Where those views cover less than half of the
/// buffer and nothing after the region reads it otherwise (Pythia's v, a
/// third of its fused projection whose q and k parts the rotary embedding
/// consumed, read until the backward), each view is copied at the end of
/// the region instead, and the rest of the buffer dies with the region.
void copyOutNarrowViews(Block &block,
                        MutableArrayRef<SmallVector<Operation *>> regions) {
  DenseMap<Operation *, unsigned> regionOf;
  for (auto [index, ops] : llvm::enumerate(regions))
    for (Operation *op : ops)
      regionOf[op] = index;
  OpBuilder builder(block.getParentOp()->getContext());
  for (auto [index, ops] : llvm::enumerate(regions)) {
    SetVector<Value> copied;
    for (Operation *op : ops)
      for (Value result : op->getResults()) {
        LaterReads reads;
        findLaterReads(result, /*isView=*/false, block, index, regionOf, reads);
        std::optional<int64_t> whole = getStaticBufferBytes(result.getType());
        if (reads.whole || reads.views.empty() || !whole)
          continue;
        int64_t viewed = 0;
        for (Value view : reads.views)
          viewed += getStaticBufferBytes(view.getType()).value_or(*whole);
        if (2 * viewed < *whole)
          copied.insert(reads.views.begin(), reads.views.end());
      }
    for (Value view : copied) {
      builder.setInsertionPointAfter(ops.back());
      auto copy = bufferization::AllocTensorOp::create(
          builder, view.getLoc(), cast<RankedTensorType>(view.getType()),
          ValueRange(), view);
      view.replaceUsesWithIf(copy, [&](OpOperand &use) {
        auto region =
            regionOf.find(block.findAncestorOpInBlock(*use.getOwner()));
        return use.getOwner() != copy &&
               (region == regionOf.end() || region->second != index);
      });
      regionOf[copy] = index;
      ops.push_back(copy);
    }
  }
}

OutlinedRegion buildRegion(RegionCutter &cutter, ArrayRef<Operation *> ops) {
  OutlinedRegion region;
  region.ops.assign(ops.begin(), ops.end());
  llvm::SmallPtrSet<Operation *, 32> inRegion(ops.begin(), ops.end());
  SetVector<Value> inputs;
  SetVector<Operation *> clones;
  // Post-order, so clones come after what they read.
  std::function<void(Operation *)> addClone = [&](Operation *op) {
    if (clones.contains(op))
      return;
    for (Value operand : op->getOperands()) {
      Operation *producer = operand.getDefiningOp();
      if (producer && !cutter.isRoot(operand))
        addClone(producer);
      else
        inputs.insert(operand);
    }
    clones.insert(op);
  };
  // A static view (slices and reshapes) of a value computed outside the
  // region is taken again inside, from that value, which is passed in:
  // passed itself, a strided view (q, k and v cut from a fused projection)
  // would be copied into a buffer of its own at the function boundary.
  auto addViews = [&](Value value) {
    SmallVector<Operation *> chain;
    Value base = value;
    while (Operation *view = base.getDefiningOp()) {
      if (!isTensorView(view) || view->getNumOperands() != 1 ||
          view->getBlock() != &cutter.block || inRegion.contains(view))
        break;
      chain.push_back(view);
      base = view->getOperand(0);
    }
    Operation *producer = base.getDefiningOp();
    if (chain.empty() || (producer && inRegion.contains(producer)))
      return false;
    inputs.insert(base);
    for (Operation *view : llvm::reverse(chain))
      clones.insert(view);
    return true;
  };
  for (Operation *op : ops)
    for (Value value : zest::getReadValues(op)) {
      Operation *producer = value.getDefiningOp();
      if (producer && producer->getBlock() == &cutter.block &&
          inRegion.contains(producer))
        continue;
      if (producer && producer->getBlock() == &cutter.block &&
          cutter.isCloneable(producer))
        addClone(producer);
      else if (!addViews(value))
        inputs.insert(value);
    }
  // What the rest of the block reads. A static view of a buffer the region
  // computes is taken again by the caller, from that buffer: returned, the
  // view would be copied into a buffer of its own.
  SetVector<Value> outputs;
  for (Operation *op : ops)
    for (Value result : op->getResults()) {
      if (llvm::none_of(result.getUsers(), [&](Operation *user) {
            return !inRegion.contains(
                cutter.block.findAncestorOpInBlock(*user));
          }))
        continue;
      SmallVector<Operation *> chain;
      Value base = result;
      while (Operation *view = base.getDefiningOp()) {
        if (!isTensorView(view) || view->getNumOperands() != 1 ||
            !inRegion.contains(view->getOperand(0).getDefiningOp()))
          break;
        chain.push_back(view);
        base = view->getOperand(0);
      }
      outputs.insert(base);
      if (!chain.empty())
        region.viewOutputs.push_back(
            {result, SmallVector<Operation *>(llvm::reverse(chain))});
    }
  region.outputs = outputs.takeVector();
  region.inputs = inputs.takeVector();

  OpBuilder builder(ops.front()->getContext());
  Location loc = ops.front()->getLoc();
  region.body = func::FuncOp::create(
      builder, loc, "zest_region",
      builder.getFunctionType(ValueRange(region.inputs).getTypes(),
                              ValueRange(region.outputs).getTypes()));
  region.body.setPrivate();
  Block *entry = region.body.addEntryBlock();
  builder.setInsertionPointToStart(entry);
  IRMapping mapping;
  mapping.map(region.inputs, entry->getArguments());
  SmallVector<Operation *> cloned;
  for (Operation *op : clones)
    cloned.push_back(builder.clone(*op, mapping));
  for (Operation *op : ops)
    builder.clone(*op, mapping);
  sinkToFirstUse(*entry, cloned);
  SmallVector<Value> results;
  for (Value output : region.outputs)
    results.push_back(mapping.lookup(output));
  func::ReturnOp::create(builder, loc, results);
  // Views only the caller takes again.
  for (Operation &op :
       llvm::make_early_inc_range(llvm::reverse(entry->getOperations())))
    if (isOpTriviallyDead(&op))
      op.erase();
  return region;
}

struct OutlineRegionsPass
    : public zest::impl::OutlineRegionsPassBase<OutlineRegionsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    SmallVector<func::FuncOp> entries;
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal() && func.isPublic() && func.getBody().hasOneBlock())
        entries.push_back(func);
    // Regions of every entry point, grouped by what their functions print:
    // one group per distinct region.
    llvm::StringMap<std::vector<OutlinedRegion>> byKey;
    SmallVector<std::string> order;
    for (func::FuncOp func : entries) {
      RegionCutter cutter(func);
      SmallVector<SmallVector<Operation *>> cut = cutter.cut();
      copyOutNarrowViews(cutter.block, cut);
      for (SmallVector<Operation *> &ops : cut) {
        if (static_cast<int64_t>(ops.size()) < minOps)
          continue;
        OutlinedRegion region = buildRegion(cutter, ops);
        std::string key;
        llvm::raw_string_ostream os(key);
        region.body->print(os, OpPrintingFlags().assumeVerified());
        auto [it, inserted] = byKey.try_emplace(key);
        if (inserted)
          order.push_back(key);
        it->second.push_back(std::move(region));
      }
    }
    // A region that occurs once saves nothing: it stays where it is.
    for (const std::string &key : order) {
      std::vector<OutlinedRegion> &regions = byKey[key];
      if (regions.size() < 2) {
        for (OutlinedRegion &region : regions)
          region.body->destroy();
        continue;
      }
      func::FuncOp function = regions.front().body;
      function.setSymName("zest_region");
      symbols.insert(function);
      for (OutlinedRegion &region : llvm::drop_begin(regions))
        region.body->destroy();
      for (OutlinedRegion &region : regions)
        replaceByCall(region, function);
    }
    // Views and constants only the regions read are left dead.
    for (func::FuncOp func : entries) {
      for (Operation &op : llvm::make_early_inc_range(
               llvm::reverse(func.getBody().front().getOperations())))
        if (isOpTriviallyDead(&op))
          op.erase();
      for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
        func.removeArgAttr(i, zest::ZestDialect::kUnitArgAttrName);
    }
  }

  /// Calls `function` in place of `region`'s ops. An input another region
  /// defined is now that region's call result.
  void replaceByCall(OutlinedRegion &region, func::FuncOp function) {
    Operation *last = region.ops.back();
    OpBuilder builder(last->getContext());
    builder.setInsertionPointAfter(last);
    SmallVector<Value> inputs;
    for (Value input : region.inputs)
      inputs.push_back(replaced.lookup_or(input, input));
    auto call = func::CallOp::create(builder, last->getLoc(), function, inputs);
    llvm::SmallPtrSet<Operation *, 32> inRegion(region.ops.begin(),
                                                region.ops.end());
    IRMapping views;
    for (auto [output, result] : llvm::zip(region.outputs, call.getResults()))
      views.map(output, result);
    for (auto &[value, chain] : region.viewOutputs) {
      for (Operation *view : chain)
        if (!views.contains(view->getResult(0)))
          builder.clone(*view, views);
      // Its uses in the region go with the region.
      value.replaceUsesWithIf(views.lookup(value), [&](OpOperand &use) {
        return !inRegion.contains(
            last->getBlock()->findAncestorOpInBlock(*use.getOwner()));
      });
      replaced[value] = views.lookup(value);
    }
    for (auto [output, result] : llvm::zip(region.outputs, call.getResults())) {
      output.replaceAllUsesWith(result);
      replaced[output] = result;
    }
    for (Operation *op : llvm::reverse(region.ops))
      op->erase();
  }

  DenseMap<Value, Value> replaced;
};

} // namespace
