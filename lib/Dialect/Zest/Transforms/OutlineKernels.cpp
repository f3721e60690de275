//===- OutlineKernels.cpp - Deduplicated kernel functions for linalg ops --===//
//
// Each linalg op on buffers becomes a call to a private kernel function;
// kernels that print identically are emitted once. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "zest/Dialect/Zest/Transforms/BufferExtents.h"
#include "zest/Dialect/Zest/Transforms/CostModel.h"
#include "zest/Dialect/Zest/Transforms/MemoryPlan.h"
#include "zest/Dialect/Zest/Transforms/Passes.h"
#include "zest/Dialect/Zest/Transforms/ScalarSlices.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/Utils/MemRefUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"

#include <optional>

namespace mlir::zest {
#define GEN_PASS_DEF_OUTLINEKERNELSPASS
#include "zest/Dialect/Zest/Transforms/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;
using zest::DistinctArgFunctions;
using zest::Extent;
using zest::getDistinctArgFunctions;
using zest::getExtent;

/// `type` with a dynamic offset, so views at different offsets of the same
/// shape and strides share a kernel signature.
static Type getKernelArgType(Type type) {
  auto memref = dyn_cast<MemRefType>(type);
  if (!memref)
    return type;
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(memref.getStridesAndOffset(strides, offset)))
    return type;
  auto layout =
      StridedLayoutAttr::get(type.getContext(), ShapedType::kDynamic, strides);
  return MemRefType::get(memref.getShape(), memref.getElementType(), layout,
                         memref.getMemorySpace());
}

/// Reshapes of a kernel's arguments get their result types from the
/// arguments' generalized layouts (a dynamic offset); a reshape of a
/// reshape follows, in order.
static void refreshReshapeTypes(func::FuncOp kernel) {
  kernel.walk([](Operation *op) {
    Type type;
    if (auto expand = dyn_cast<memref::ExpandShapeOp>(op)) {
      FailureOr<MemRefType> expanded =
          memref::ExpandShapeOp::computeExpandedType(
              expand.getSrcType(), expand.getResultType().getShape(),
              expand.getReassociationIndices());
      if (succeeded(expanded))
        type = *expanded;
    } else if (auto collapse = dyn_cast<memref::CollapseShapeOp>(op)) {
      type = memref::CollapseShapeOp::computeCollapsedType(
          collapse.getSrcType(), collapse.getReassociationIndices());
    }
    if (type)
      op->getResult(0).setType(type);
  });
}

/// Whether no buffer `op` writes overlaps another of its buffer operands.
/// Distinct allocations never overlap, and entry-point arguments are
/// distinct buffers (docs/Runtime.md); views of one root overlap unless
/// their static ranges are disjoint.
static bool writesDisjointBuffers(linalg::LinalgOp op, ArrayRef<Value> args,
                                  const DistinctArgFunctions &distinctArgs) {
  // A buffer the body reaches from above might be written by the body.
  for (Value arg : args)
    if (isa<MemRefType>(arg.getType()) &&
        !llvm::is_contained(op->getOperands(), arg))
      return false;
  for (OpOperand &init : op.getDpsInitsMutable()) {
    Value written = init.get();
    std::optional<Extent> w = getExtent(written, distinctArgs);
    for (Value other : args) {
      if (other == written || !isa<MemRefType>(other.getType()))
        continue;
      std::optional<Extent> o = getExtent(other, distinctArgs);
      if (!w || !o)
        return false;
      if (w->overlaps(*o))
        return false;
    }
  }
  return true;
}

/// A buffer operand of an op in a loop: a loop-invariant buffer, or a row of
/// one (a subview whose offsets may vary only in dimensions it drops, taking
/// every other dimension whole), and the dimensions of the buffer it keeps.
struct RowOperand {
  Value buffer;
  SmallVector<int64_t> keptDims;
};

static std::optional<RowOperand> getRowOperand(Value operand, scf::ForOp loop) {
  auto type = cast<MemRefType>(operand.getType());
  if (operand.getParentBlock() != loop.getBody())
    return RowOperand{operand,
                      llvm::to_vector(llvm::seq<int64_t>(0, type.getRank()))};
  auto row = operand.getDefiningOp<memref::SubViewOp>();
  if (!row || row.getSource().getParentBlock() == loop.getBody())
    return std::nullopt;
  MemRefType source = row.getSourceType();
  llvm::SmallBitVector dropped = row.getDroppedDims();
  RowOperand result{row.getSource(), {}};
  for (int64_t d = 0, e = source.getRank(); d < e; ++d) {
    if (dropped.test(d))
      continue;
    std::optional<int64_t> offset =
        getConstantIntValue(row.getMixedOffsets()[d]);
    std::optional<int64_t> size = getConstantIntValue(row.getMixedSizes()[d]);
    std::optional<int64_t> stride =
        getConstantIntValue(row.getMixedStrides()[d]);
    if (offset != 0 || size != source.getDimSize(d) || stride != 1)
      return std::nullopt;
    result.keptDims.push_back(d);
  }
  return result;
}

/// Whether `loop` (no results) holds one elementwise op on buffers (every
/// operand read and written at the same position) whose operands are rows
/// of loop-invariant buffers, placed by scalars loaded in the loop (an
/// embedding's backward: each position's gradient row added where its
/// token id says), and whose iterations therefore touch each position of a
/// row in one thread only: distinct buffers never overlap (docs/Runtime.md),
/// rows of one buffer keeping the same dimensions meet only at the same
/// position, and no buffer loaded from is written.
static bool isPerPositionLoop(scf::ForOp loop,
                              const DistinctArgFunctions &distinctArgs) {
  if (loop.getNumResults() != 0)
    return false;
  linalg::LinalgOp op;
  SmallVector<Value> loaded;
  for (Operation &nested : loop.getBody()->without_terminator()) {
    if (auto linalgOp = dyn_cast<linalg::LinalgOp>(nested)) {
      if (op || !linalgOp.hasPureBufferSemantics())
        return false;
      op = linalgOp;
    } else if (auto load = dyn_cast<memref::LoadOp>(nested)) {
      loaded.push_back(load.getMemRef());
    } else if (!isPure(&nested) || nested.getNumRegions() != 0) {
      return false;
    }
  }
  if (!op || loaded.empty() || op.hasDynamicShape() ||
      op.getNumParallelLoops() != op.getNumLoops() ||
      !llvm::all_of(op.getIndexingMapsArray(),
                    [](AffineMap map) { return map.isIdentity(); }))
    return false;
  SmallVector<std::pair<RowOperand, Extent>> rows;
  SmallVector<Value> writtenRoots;
  for (OpOperand &operand : op->getOpOperands()) {
    if (!isa<MemRefType>(operand.get().getType()))
      continue;
    std::optional<RowOperand> row = getRowOperand(operand.get(), loop);
    std::optional<Extent> extent =
        row ? getExtent(row->buffer, distinctArgs) : std::nullopt;
    if (!extent)
      return false;
    rows.push_back({*row, *extent});
    if (op.isDpsInit(&operand))
      writtenRoots.push_back(extent->root);
  }
  for (auto [row, extent] : rows)
    for (auto [other, otherExtent] : rows)
      if (extent.root == otherExtent.root &&
          (row.buffer != other.buffer || row.keptDims != other.keptDims))
        return false;
  // The loaded buffers are not written by the op.
  return llvm::all_of(loaded, [&](Value buffer) {
    std::optional<Extent> extent = getExtent(buffer, distinctArgs);
    return extent && !llvm::is_contained(writtenRoots, extent->root);
  });
}

/// Whether the kernel of `target`, given `args`, runs on the host: when
/// every buffer it takes is in pinned host memory (an offloaded update); a
/// mix is an error.
static FailureOr<bool> runsOnHost(Operation *target, ArrayRef<Value> args) {
  std::optional<bool> onHost = zest::buffersOnHost(args);
  if (!onHost)
    return target->emitError()
           << "reads or writes both pinned host memory (an offloaded "
           << "optimizer's buffers) and device memory, which no kernel can: "
           << "copy one side first";
  return *onHost;
}

/// The short name of a body op for a kernel's name ("add" for arith.addf,
/// "max" for arith.maximumf); empty for what computes nothing.
static std::string getBodyOpName(Operation &op) {
  if (isa<linalg::YieldOp, linalg::IndexOp, arith::ConstantOp,
          arith::IndexCastOp>(op))
    return "";
  StringRef name = op.getName().stripDialect();
  static const llvm::StringMap<StringRef> shortNames = {
      {"addf", "add"},    {"addi", "add"},     {"subf", "sub"},
      {"subi", "sub"},    {"mulf", "mul"},     {"muli", "mul"},
      {"divf", "div"},    {"divsi", "div"},    {"maximumf", "max"},
      {"maxnumf", "max"}, {"minimumf", "min"}, {"minnumf", "min"},
      {"cmpf", "cmp"},    {"cmpi", "cmp"},     {"negf", "neg"},
      {"extf", "ext"},    {"truncf", "trunc"}, {"sitofp", "cvt"},
      {"uitofp", "cvt"},  {"fptosi", "cvt"},   {"absf", "abs"},
      {"powf", "pow"},    {"remf", "rem"},     {"extui", "ext"},
      {"extsi", "ext"},   {"trunci", "trunc"}, {"bitcast", "cast"}};
  auto it = shortNames.find(name);
  return (it != shortNames.end() ? it->second : name).str();
}

/// What a kernel computes, for its name (a GPU profile lists kernels by
/// it): the op's kind, its body's arithmetic in order (three at most) and
/// the element type it writes, e.g. `reduce_max_f32`, `map_sub_exp_f32`,
/// `fill_bf16`; `guarded_` or `rows_` before what a branch or a per-position
/// loop runs, `rowwise_` before the first reduction of a row group.
static std::string describeKernel(Operation *op) {
  if (isa<scf::IfOp, scf::ForOp, scf::ExecuteRegionOp>(op)) {
    // A row group is named after its first reduction (what it normalizes).
    bool rowGroup = isa<scf::ExecuteRegionOp>(op);
    std::string inner = "ops";
    op->walk([&](linalg::LinalgOp nested) {
      if (rowGroup && nested.getNumReductionLoops() == 0)
        return WalkResult::advance();
      inner = describeKernel(nested);
      return WalkResult::interrupt();
    });
    if (rowGroup)
      return "rowwise_" + inner;
    return (isa<scf::IfOp>(op) ? "guarded_" : "rows_") + inner;
  }
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  if (!linalgOp)
    return op->getName().stripDialect().str();
  // A named op's name says what its body does (linalg.add: "add"), except
  // for map and reduce, whose bodies are the user's.
  SmallVector<std::string> ops;
  Block *body = isa<linalg::GenericOp, linalg::MapOp, linalg::ReduceOp>(op)
                    ? linalgOp.getBlock()
                    : nullptr;
  if (body)
    for (Operation &nested : body->without_terminator()) {
      std::string name = getBodyOpName(nested);
      if (!name.empty() && !llvm::is_contained(ops, name))
        ops.push_back(name);
    }
  std::string kind = op->getName().stripDialect().str();
  if (isa<linalg::GenericOp>(op))
    kind = linalgOp.getNumReductionLoops() > 0 ? "reduce"
           : !ops.empty()                      ? "map"
                                               : "move";
  std::string name = kind;
  for (const std::string &body : ArrayRef(ops).take_front(3))
    name += "_" + body;
  if (ops.size() > 3)
    name += "_more";
  if (linalgOp.getNumDpsInits() > 0) {
    std::string type;
    llvm::raw_string_ostream os(type);
    os << getElementTypeOrSelf(linalgOp.getDpsInits().front().getType());
    name += "_" + type;
  }
  // A symbol a profile can print as is.
  for (char &c : name)
    if (!llvm::isAlnum(c))
      c = '_';
  return name;
}

static zest::KernelWork getWorkOf(Operation *op);

/// The work of `region`'s ops, one after another.
static zest::KernelWork getWorkOf(Region &region) {
  zest::KernelWork work;
  for (Block &block : region)
    for (Operation &op : block)
      work += getWorkOf(&op);
  return work;
}

/// What one run of `op` moves and computes: a linalg op's work, a branch's
/// costlier alternative (one of them runs), a loop's body times its static
/// trips (once if they are unknown), other ops' regions in turn.
static zest::KernelWork getWorkOf(Operation *op) {
  if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op))
    return zest::getLinalgWork(linalgOp).value_or(zest::KernelWork());
  if (auto branch = dyn_cast<scf::IfOp>(op)) {
    zest::KernelWork then = getWorkOf(branch.getThenRegion()),
                     otherwise = getWorkOf(branch.getElseRegion());
    auto total = [](const zest::KernelWork &w) {
      return w.bytesRead + w.bytesWritten;
    };
    return total(then) >= total(otherwise) ? then : otherwise;
  }
  zest::KernelWork work;
  for (Region &region : op->getRegions())
    work += getWorkOf(region);
  if (auto loop = dyn_cast<scf::ForOp>(op))
    if (std::optional<APInt> trips = loop.getStaticTripCount()) {
      int64_t n = trips->getSExtValue();
      work.bytesRead *= n;
      work.bytesWritten *= n;
      work.flops *= n;
    }
  return work;
}

namespace {
class KernelOutliner {
public:
  KernelOutliner(ModuleOp module, bool deviceBuffers)
      : module(module), symbols(module), deviceBuffers(deviceBuffers),
        distinctArgs(getDistinctArgFunctions(module)) {}

  /// Replaces `op` by a call to its kernel; fails (reported) for an op that
  /// mixes host and device buffers.
  LogicalResult outline(Operation *target) {
    auto op = dyn_cast<linalg::LinalgOp>(target);
    // Arguments: the op's operands, then the values its body uses from
    // above; constants among them are cloned in instead (a fill of zeros
    // stays a fill of zeros LLVM can turn into memset), and so are scalars
    // and views computed from buffer elements when the buffers live on a
    // device (an embedding's backward adds each row where its token id
    // says): their slices are cloned in, and the slices' inputs (the
    // buffers, a loop's index) become arguments.
    llvm::SetVector<Value> inputs(target->getOperands().begin(),
                                  target->getOperands().end());
    getUsedValuesDefinedAbove(target->getRegions(), inputs);
    llvm::SetVector<Value> argSet;
    llvm::SetVector<Operation *> clones;
    for (Value value : inputs) {
      Operation *producer = value.getDefiningOp();
      if (producer && producer->hasTrait<OpTrait::ConstantLike>()) {
        clones.insert(producer);
        continue;
      }
      zest::LoadedSlice slice;
      if (deviceBuffers)
        slice = zest::getLoadedSlice(value);
      if (slice.ops.empty()) {
        argSet.insert(value);
        continue;
      }
      clones.insert(slice.ops.begin(), slice.ops.end());
      argSet.insert(slice.inputs.begin(), slice.inputs.end());
    }
    SmallVector<Value> args = argSet.takeVector();
    FailureOr<bool> onHost = runsOnHost(target, args);
    if (failed(onHost))
      return failure();
    SmallVector<Type> argTypes;
    for (Value arg : args)
      argTypes.push_back(getKernelArgType(arg.getType()));

    OpBuilder builder(module.getContext());
    auto kernel =
        func::FuncOp::create(builder, target->getLoc(), "zest_kernel",
                             builder.getFunctionType(argTypes, /*results=*/{}));
    kernel.setPrivate();
    kernel->setAttr(*onHost ? zest::ZestDialect::kHostKernelAttrName
                            : zest::ZestDialect::kKernelAttrName,
                    builder.getUnitAttr());
    // Attributes the LLVM lowering carries over: internal linkage and LLVM's
    // noinline (the inliner would otherwise paste every call site back).
    kernel->setAttr("llvm.linkage",
                    LLVM::LinkageAttr::get(builder.getContext(),
                                           LLVM::linkage::Linkage::Internal));
    kernel->setAttr("passthrough",
                    builder.getArrayAttr({builder.getStringAttr("noinline")}));
    // Disjoint buffers at this call site let LLVM vectorize without runtime
    // alias checks (and reuse a broadcast value across stores). It is part of
    // the kernel's identity: a call site with aliasing buffers gets its own.
    // convert-func-to-llvm drops `llvm.noalias` on memref arguments, so the
    // positions of their aligned pointers among the expanded descriptor
    // fields are recorded for zestc to mark after the lowering.
    if (op && writesDisjointBuffers(op, args, distinctArgs)) {
      SmallVector<int64_t> alignedPointers;
      int64_t position = 0;
      for (Type type : argTypes) {
        auto memref = dyn_cast<MemRefType>(type);
        if (!memref) {
          ++position;
          continue;
        }
        alignedPointers.push_back(position + 1);
        position += 3 + 2 * memref.getRank();
      }
      kernel->setAttr(zest::ZestDialect::kNoAliasPointersAttrName,
                      builder.getDenseI64ArrayAttr(alignedPointers));
    }
    Block *body = kernel.addEntryBlock();
    builder.setInsertionPointToStart(body);
    IRMapping mapping;
    for (auto [arg, blockArg] : llvm::zip(args, body->getArguments()))
      mapping.map(arg, blockArg);
    for (Operation *clone : clones)
      builder.clone(*clone, mapping);
    builder.clone(*target, mapping);
    func::ReturnOp::create(builder, target->getLoc());
    refreshReshapeTypes(kernel);

    func::FuncOp unique =
        deduplicate(kernel, describeKernel(target), getWorkOf(target));
    OpBuilder callBuilder(target);
    SmallVector<Value> callArgs;
    for (auto [arg, type] : llvm::zip(args, argTypes))
      callArgs.push_back(
          arg.getType() == type
              ? arg
              : memref::CastOp::create(callBuilder, target->getLoc(), type, arg)
                    .getResult());
    func::CallOp::create(callBuilder, target->getLoc(), unique, callArgs);
    target->erase();
    return success();
  }

  const DistinctArgFunctions &getDistinctArgs() const { return distinctArgs; }

private:
  /// The kernel already emitted with `kernel`'s body, or `kernel` itself,
  /// now named after its number and `description` and in the module.
  func::FuncOp deduplicate(func::FuncOp kernel, StringRef description,
                           const zest::KernelWork &work) {
    std::string key;
    llvm::raw_string_ostream os(key);
    kernel->print(os, OpPrintingFlags().assumeVerified());
    auto [it, inserted] = kernels.try_emplace(key, kernel);
    if (!inserted) {
      kernel.erase();
      return it->second;
    }
    kernel.setSymName(
        ("zest_kernel_" + Twine(kernels.size() - 1) + "_" + description).str());
    symbols.insert(kernel);
    works.push_back(
        NamedAttribute(kernel.getSymNameAttr(),
                       DenseI64ArrayAttr::get(
                           kernel.getContext(),
                           {work.bytesRead, work.bytesWritten, work.flops})));
    return kernel;
  }

public:
  /// Each kernel's work, by name (the module's zest.kernel_work).
  DictionaryAttr getWork() {
    return DictionaryAttr::get(module.getContext(), works);
  }

private:
  ModuleOp module;
  SymbolTable symbols;
  bool deviceBuffers;
  DistinctArgFunctions distinctArgs;
  llvm::StringMap<func::FuncOp> kernels;
  SmallVector<NamedAttribute> works;
};

/// Whether `op` is a result-less `scf.if` (the optimizer's apply and
/// accumulate branches after bufferization) holding nothing but computation
/// on buffers: outlined whole, it leaves no branch in the entry point, whose
/// one large block the lowering to control flow would otherwise split at
/// every such `if` (quadratic in the size of the step).
static bool isComputeOnlyIf(Operation *op) {
  auto branch = dyn_cast<scf::IfOp>(op);
  if (!branch || branch.getNumResults() != 0)
    return false;
  WalkResult result = branch->walk<WalkOrder::PreOrder>([&](Operation *nested) {
    if (nested == op)
      return WalkResult::advance();
    if (isa<linalg::LinalgOp>(nested) &&
        cast<linalg::LinalgOp>(nested).hasPureBufferSemantics())
      return WalkResult::skip();
    if (isa<scf::YieldOp, scf::IfOp, memref::SubViewOp, memref::CastOp,
            memref::ExpandShapeOp, memref::CollapseShapeOp>(nested) ||
        nested->hasTrait<OpTrait::ConstantLike>() ||
        isa<arith::ArithDialect>(nested->getDialect()))
      return WalkResult::advance();
    return WalkResult::interrupt();
  });
  return !result.wasInterrupted();
}

struct OutlineKernelsPass
    : public zest::impl::OutlineKernelsPassBase<OutlineKernelsPass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // A copy between views that are not both contiguous is no memcpy: it
    // would lower to the runtime's element-by-element `memrefCopy`. As a
    // linalg.copy it is a loop nest like any other (outlined, vectorized).
    module.walk([&](memref::CopyOp copy) {
      auto source = dyn_cast<MemRefType>(copy.getSource().getType());
      auto target = dyn_cast<MemRefType>(copy.getTarget().getType());
      if (!source || !target ||
          (!deviceBuffers &&
           (!source.hasStaticShape() ||
            (memref::isStaticShapeAndContiguousRowMajor(source) &&
             memref::isStaticShapeAndContiguousRowMajor(target)))))
        return;
      OpBuilder builder(copy);
      linalg::CopyOp::create(builder, copy.getLoc(), copy.getSource(),
                             copy.getTarget());
      copy.erase();
    });
    KernelOutliner outliner(module, deviceBuffers);
    SmallVector<Operation *> targets;
    for (auto func : module.getOps<func::FuncOp>())
      func.walk<WalkOrder::PreOrder>([&](Operation *op) {
        // A row group (zest-fuse-rows) is one kernel: one launch on a GPU.
        if (isComputeOnlyIf(op) ||
            (isa<scf::ExecuteRegionOp>(op) &&
             op->hasAttr(zest::ZestDialect::kRowKernelAttrName))) {
          targets.push_back(op);
          return WalkResult::skip();
        }
        // A loop of rows placed by loaded scalars: one kernel, which a GPU
        // runs as one launch (a thread per position) rather than one per
        // iteration.
        auto loop = dyn_cast<scf::ForOp>(op);
        if (deviceBuffers && loop &&
            isPerPositionLoop(loop, outliner.getDistinctArgs())) {
          loop->setAttr(zest::ZestDialect::kPerPositionLoopAttrName,
                        UnitAttr::get(op->getContext()));
          targets.push_back(op);
          return WalkResult::skip();
        }
        if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op)) {
          if (linalgOp.hasPureBufferSemantics())
            targets.push_back(op);
          return WalkResult::skip();
        }
        // A scalar the glue stores into a device buffer (a clipping scale)
        // is stored by a kernel.
        if (deviceBuffers && isa<memref::StoreOp>(op))
          targets.push_back(op);
        return WalkResult::advance();
      });
    for (Operation *target : targets)
      if (failed(outliner.outline(target)))
        return signalPassFailure();
    if (!deviceBuffers)
      return;
    module->setAttr(zest::ZestDialect::kKernelWorkAttrName, outliner.getWork());
    // The glue's loads of scalars the kernels now compute themselves.
    SmallVector<Operation *> glue;
    for (auto func : module.getOps<func::FuncOp>())
      if (!func->hasAttr(zest::ZestDialect::kKernelAttrName))
        func.walk([&](Operation *op) { glue.push_back(op); });
    for (Operation *op : llvm::reverse(glue))
      if (isOpTriviallyDead(op))
        op->erase();
  }
};
} // namespace
