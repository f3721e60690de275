//===- EmulateGPUKernels.cpp - GPU kernels compiled for the host ----------===//
//
// Each gpu.func kernel becomes a host function running one block: its
// threads as loops, split where they synchronize. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "zest/Conversion/Passes.h"

#include "mlir/Dialect/GPU/Utils/GPUUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

#include "zest_runtime_emulated.h"

namespace mlir::zest {
#define GEN_PASS_DEF_EMULATEGPUKERNELSPASS
#include "zest/Conversion/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;

namespace {

/// Where a block's threads synchronize: a barrier, a block reduction, or a
/// branch holding either.
bool isSync(Operation *op) {
  if (isa<gpu::BarrierOp, gpu::AllReduceOp>(op))
    return true;
  bool holds = false;
  op->walk([&](Operation *nested) {
    if (nested != op && isa<gpu::BarrierOp, gpu::AllReduceOp>(nested))
      holds = true;
  });
  return holds;
}

/// One of a block's steps: ops every thread runs in turn (a run), or one
/// synchronizing op the block runs once.
struct Step {
  SmallVector<Operation *> run;
  Operation *sync = nullptr;
};

constexpr int kBlockLevel = -1;

/// A thread's or block's index or size: recomputed where used, never kept.
bool isIndexOp(Operation *op) {
  return isa_and_nonnull<gpu::ThreadIdOp, gpu::BlockIdOp, gpu::BlockDimOp,
                         gpu::GridDimOp>(op);
}

/// Builds the host function of one kernel.
class KernelEmulator {
public:
  KernelEmulator(gpu::GPUFuncOp kernel, func::FuncOp host)
      : kernel(kernel), host(host), builder(host.getContext()) {}

  LogicalResult emulate();

private:
  LogicalResult partition(Block &block);
  LogicalResult allocateSlots();
  LogicalResult emitBlock(Block &block);
  void emitRun(ArrayRef<Operation *> run, int id);
  LogicalResult emitAllReduce(gpu::AllReduceOp reduce);
  LogicalResult emitUniformIf(scf::IfOp branch);
  Value readAtBlockLevel(Value value, bool checkUniform);
  void replaceIndexOps();

  /// The top-level op of a partitioned block holding `op`.
  Operation *getStepOp(Operation *op) const {
    for (; op; op = op->getParentOp())
      if (runOf.count(op))
        return op;
    return nullptr;
  }
  Value constant(int64_t value) {
    return arith::ConstantIndexOp::create(builder, host.getLoc(), value);
  }

  gpu::GPUFuncOp kernel;
  func::FuncOp host;
  OpBuilder builder;
  Value threads; // threads per block
  IRMapping blockLevel;
  llvm::MapVector<Value, Value> slots; // per-thread arrays
  DenseMap<Operation *, int> runOf;    // step ops -> run (or kBlockLevel)
  DenseMap<Block *, SmallVector<Step>> steps;
  int runs = 0;
};

/// Splits `block` into steps, recursively into branches that synchronize.
LogicalResult KernelEmulator::partition(Block &block) {
  SmallVector<Step> &list = steps[&block];
  for (Operation &op : block.without_terminator()) {
    if (op.hasTrait<OpTrait::ConstantLike>())
      continue; // hoisted
    if (!isSync(&op)) {
      if (list.empty() || list.back().sync)
        list.push_back(Step{{}, nullptr}), ++runs;
      list.back().run.push_back(&op);
      runOf[&op] = runs;
      continue;
    }
    runOf[&op] = kBlockLevel;
    list.push_back(Step{{}, &op});
    if (isa<gpu::BarrierOp, gpu::AllReduceOp>(op)) {
      auto reduce = dyn_cast<gpu::AllReduceOp>(op);
      if (reduce && (!reduce.getOp() || !reduce.getBody().empty()))
        return reduce.emitError("zest-emulate-gpu-kernels: a gpu.all_reduce "
                                "with a region is not emulated");
      continue;
    }
    auto branch = dyn_cast<scf::IfOp>(op);
    if (!branch || branch.getNumResults() != 0)
      return op.emitError("zest-emulate-gpu-kernels: threads synchronize "
                          "inside this op, which is not emulated (only at a "
                          "kernel's top level or in a branch without "
                          "results)");
    for (Region *region : {&branch.getThenRegion(), &branch.getElseRegion()})
      if (!region->empty() && failed(partition(region->front())))
        return failure();
  }
  return success();
}

/// A stack array per value computed in one run and used in another (or by
/// the block).
LogicalResult KernelEmulator::allocateSlots() {
  for (auto [op, run] : runOf) {
    if (run == kBlockLevel)
      continue;
    if (isIndexOp(op))
      continue;
    for (Value result : op->getResults()) {
      bool crosses = llvm::any_of(result.getUsers(), [&](Operation *user) {
        return runOf.lookup(getStepOp(user)) != run;
      });
      if (!crosses)
        continue;
      Type type = result.getType();
      if (!type.isIntOrIndexOrFloat())
        return op->emitError("zest-emulate-gpu-kernels: a value of type ")
               << type << " is used across a barrier, which is not emulated";
      slots[result] = memref::AllocaOp::create(
          builder, op->getLoc(), MemRefType::get({ShapedType::kDynamic}, type),
          ValueRange{threads});
    }
  }
  return success();
}

/// The threads of the block, one after another, run `run`.
void KernelEmulator::emitRun(ArrayRef<Operation *> run, int id) {
  Location loc = run.front()->getLoc();
  auto loop =
      scf::ForOp::create(builder, loc, constant(0), threads, constant(1));
  loop->setAttr("zest.emulated_threads", builder.getUnitAttr());
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToStart(loop.getBody());
  Value thread = loop.getInductionVar();
  IRMapping mapping = blockLevel;
  // What other runs computed, as this thread left it; indices anew.
  llvm::SetVector<Value> loaded;
  for (Operation *op : run)
    op->walk([&](Operation *nested) {
      for (Value operand : nested->getOperands()) {
        Operation *def = operand.getDefiningOp();
        if (def && runOf.count(def) && runOf.lookup(def) != id &&
            (slots.count(operand) || isIndexOp(def)))
          loaded.insert(operand);
      }
    });
  for (Value value : loaded) {
    if (isIndexOp(value.getDefiningOp()))
      builder.clone(*value.getDefiningOp(), mapping);
    else
      mapping.map(value, memref::LoadOp::create(builder, loc, slots[value],
                                                ValueRange{thread}));
  }
  for (Operation *op : run) {
    Operation *clone = builder.clone(*op, mapping);
    for (auto [result, cloned] :
         llvm::zip(op->getResults(), clone->getResults()))
      if (Value slot = slots.lookup(result))
        memref::StoreOp::create(builder, loc, cloned, slot, ValueRange{thread});
  }
}

/// `value` at the block's level: thread 0's, checked to be every thread's
/// when `checkUniform`.
Value KernelEmulator::readAtBlockLevel(Value value, bool checkUniform) {
  if (Value mapped = blockLevel.lookupOrNull(value))
    return mapped;
  Location loc = value.getLoc();
  Value slot = slots.lookup(value);
  Value first = memref::LoadOp::create(builder, loc, slot, constant(0));
  if (!checkUniform)
    return first;
  auto loop =
      scf::ForOp::create(builder, loc, constant(1), threads, constant(1));
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToStart(loop.getBody());
  Value other = memref::LoadOp::create(builder, loc, slot,
                                       ValueRange{loop.getInductionVar()});
  Value differs = arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::ne,
                                        first, other);
  auto report = scf::IfOp::create(builder, loc, differs);
  builder.setInsertionPointToStart(&report.getThenRegion().front());
  func::CallOp::create(builder, loc, "zest_emulated_divergent_barrier",
                       TypeRange{}, ValueRange{});
  return first;
}

/// The block combines its threads' values, in thread order.
LogicalResult KernelEmulator::emitAllReduce(gpu::AllReduceOp reduce) {
  Location loc = reduce.getLoc();
  Value value = reduce.getValue();
  vector::CombiningKind kind = gpu::convertReductionKind(*reduce.getOp());
  Value slot = slots.lookup(value);
  Value total = readAtBlockLevel(value, /*checkUniform=*/false);
  auto loop = scf::ForOp::create(builder, loc, constant(1), threads,
                                 constant(1), ValueRange{total});
  {
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointToStart(loop.getBody());
    // A value the block already has is every thread's.
    Value next =
        slot ? memref::LoadOp::create(builder, loc, slot,
                                      ValueRange{loop.getInductionVar()})
                   .getResult()
             : total;
    scf::YieldOp::create(builder, loc,
                         vector::makeArithReduction(builder, loc, kind,
                                                    loop.getRegionIterArgs()[0],
                                                    next));
  }
  blockLevel.map(reduce.getResult(), loop.getResult(0));
  return success();
}

/// A branch the block takes as one: its condition is the same for all.
LogicalResult KernelEmulator::emitUniformIf(scf::IfOp branch) {
  Value condition = readAtBlockLevel(branch.getCondition(), true);
  bool hasElse = !branch.getElseRegion().empty();
  auto uniform =
      scf::IfOp::create(builder, branch.getLoc(), condition, hasElse);
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToStart(uniform.thenBlock());
  if (failed(emitBlock(branch.getThenRegion().front())))
    return failure();
  if (hasElse) {
    builder.setInsertionPointToStart(uniform.elseBlock());
    return emitBlock(branch.getElseRegion().front());
  }
  return success();
}

LogicalResult KernelEmulator::emitBlock(Block &block) {
  for (const Step &step : steps[&block]) {
    if (!step.sync) {
      emitRun(step.run, runOf.lookup(step.run.front()));
      continue;
    }
    if (auto reduce = dyn_cast<gpu::AllReduceOp>(step.sync)) {
      if (failed(emitAllReduce(reduce)))
        return failure();
    } else if (auto branch = dyn_cast<scf::IfOp>(step.sync)) {
      if (failed(emitUniformIf(branch)))
        return failure();
    } // a barrier: the end of a run is one
  }
  return success();
}

/// Thread indices from the enclosing loop over threads; the block's and
/// grid's from the function's arguments.
void KernelEmulator::replaceIndexOps() {
  unsigned numArgs = host.getNumArguments();
  auto launch = [&](unsigned group, gpu::Dimension dim) -> Value {
    return host.getArgument(numArgs - 9 + group * 3 + unsigned(dim));
  };
  DenseMap<Operation *, std::array<Value, 3>> threadIds;
  auto threadId = [&](gpu::ThreadIdOp id) -> Value {
    auto loop = id->getParentOfType<scf::ForOp>();
    while (!loop->hasAttr("zest.emulated_threads"))
      loop = loop->getParentOfType<scf::ForOp>();
    auto [it, inserted] = threadIds.try_emplace(loop);
    if (inserted) {
      OpBuilder::InsertionGuard guard(builder);
      builder.setInsertionPointToStart(loop.getBody());
      Location loc = loop.getLoc();
      Value t = loop.getInductionVar();
      Value x = launch(1, gpu::Dimension::x), y = launch(1, gpu::Dimension::y);
      Value row = arith::DivUIOp::create(builder, loc, t, x);
      Value plane = arith::MulIOp::create(builder, loc, x, y);
      it->second = {arith::RemUIOp::create(builder, loc, t, x),
                    arith::RemUIOp::create(builder, loc, row, y),
                    arith::DivUIOp::create(builder, loc, t, plane)};
    }
    return it->second[unsigned(id.getDimension())];
  };
  SmallVector<Operation *> indexOps;
  host.walk([&](Operation *op) {
    if (isa<gpu::BlockIdOp, gpu::BlockDimOp, gpu::GridDimOp, gpu::ThreadIdOp>(
            op))
      indexOps.push_back(op);
  });
  for (Operation *op : indexOps) {
    Value replacement;
    if (auto id = dyn_cast<gpu::BlockIdOp>(op))
      replacement = launch(0, id.getDimension());
    else if (auto dim = dyn_cast<gpu::BlockDimOp>(op))
      replacement = launch(1, dim.getDimension());
    else if (auto grid = dyn_cast<gpu::GridDimOp>(op))
      replacement = launch(2, grid.getDimension());
    else
      replacement = threadId(cast<gpu::ThreadIdOp>(op));
    op->getResult(0).replaceAllUsesWith(replacement);
    op->erase();
  }
}

LogicalResult KernelEmulator::emulate() {
  Block *entry = host.addEntryBlock();
  builder.setInsertionPointToStart(entry);
  for (auto [from, to] :
       llvm::zip(kernel.getArguments(), entry->getArguments()))
    blockLevel.map(from, to);
  unsigned numArgs = host.getNumArguments();
  Location loc = kernel.getLoc();
  threads = arith::MulIOp::create(
      builder, loc,
      arith::MulIOp::create(builder, loc, host.getArgument(numArgs - 6),
                            host.getArgument(numArgs - 5)),
      host.getArgument(numArgs - 4));
  // Constants have no operands: the block's, usable by every run.
  kernel.walk([&](Operation *op) {
    if (op->hasTrait<OpTrait::ConstantLike>())
      builder.clone(*op, blockLevel);
  });
  if (failed(partition(kernel.getBody().front())) || failed(allocateSlots()) ||
      failed(emitBlock(kernel.getBody().front())))
    return failure();
  func::ReturnOp::create(builder, loc);
  replaceIndexOps();
  WalkResult unknown = host.walk([](Operation *op) {
    if (!isa<gpu::GPUDialect>(op->getDialect()))
      return WalkResult::advance();
    op->emitError("zest-emulate-gpu-kernels: '")
        << op->getName() << "' is not emulated";
    return WalkResult::interrupt();
  });
  return failure(unknown.wasInterrupted());
}

/// The positions of the buffers' aligned pointers among the LLVM
/// parameters `types` expand to (a memref of rank r is 3 + 2r values).
SmallVector<int32_t> getBufferParams(TypeRange types) {
  SmallVector<int32_t> buffers;
  int32_t position = 0;
  for (Type type : types) {
    if (auto memref = dyn_cast<MemRefType>(type)) {
      buffers.push_back(position + 1);
      position += 3 + 2 * memref.getRank();
    } else {
      ++position;
    }
  }
  return buffers;
}

/// The host function of `kernel` of `module`, before `module`.
FailureOr<func::FuncOp> emulateKernel(gpu::GPUModuleOp module,
                                      gpu::GPUFuncOp kernel) {
  if (!kernel.getBody().hasOneBlock())
    return kernel.emitError("zest-emulate-gpu-kernels: a kernel of more than "
                            "one block is not emulated");
  if (kernel.getNumWorkgroupAttributions() ||
      kernel.getNumPrivateAttributions())
    return kernel.emitError("zest-emulate-gpu-kernels: memory attributions "
                            "are not emulated");
  OpBuilder builder(module);
  SmallVector<Type> types(kernel.getArgumentTypes());
  types.append(9, builder.getIndexType());
  std::string name =
      ("__zest_emulated_" + module.getName() + "_" + kernel.getName()).str();
  auto host = func::FuncOp::create(builder, kernel.getLoc(), name,
                                   builder.getFunctionType(types, {}));
  host.setPrivate();
  host->setAttr("zest.emulated_kernel",
                builder.getDictionaryAttr({
                    builder.getNamedAttr("module", module.getNameAttr()),
                    builder.getNamedAttr("name", kernel.getNameAttr()),
                    builder.getNamedAttr(
                        "buffers", builder.getDenseI32ArrayAttr(getBufferParams(
                                       kernel.getArgumentTypes()))),
                }));
  if (failed(KernelEmulator(kernel, host).emulate()))
    return failure();
  return host;
}

/// `module`, its kernels now host functions, as the binary the emulated
/// device loads: an image naming it.
void replaceByBinary(gpu::GPUModuleOp module) {
  OpBuilder builder(module);
  MLIRContext *ctx = module.getContext();
  std::string image =
      (ZEST_EMULATED_IMAGE_PREFIX + module.getName()).str() + '\0';
  auto object = gpu::ObjectAttr::get(
      ctx, NVVM::NVVMTargetAttr::get(ctx), gpu::CompilationTarget::Binary,
      builder.getStringAttr(image), nullptr, nullptr);
  gpu::BinaryOp::create(builder, module.getLoc(), module.getName(),
                        /*offloadingHandler=*/nullptr,
                        builder.getArrayAttr({object}));
  module.erase();
}

struct EmulateGPUKernelsPass
    : public zest::impl::EmulateGPUKernelsPassBase<EmulateGPUKernelsPass> {
  void runOnOperation() override {
    ModuleOp moduleOp = getOperation();
    SmallVector<gpu::GPUModuleOp> modules(moduleOp.getOps<gpu::GPUModuleOp>());
    bool needsDivergenceCheck = false;
    for (gpu::GPUModuleOp module : modules) {
      for (Operation &op : module.getBody()->getOperations()) {
        auto kernel = dyn_cast<gpu::GPUFuncOp>(op);
        if (!kernel || !kernel.isKernel()) {
          op.emitError("zest-emulate-gpu-kernels: only kernels are emulated "
                       "in a gpu.module");
          return signalPassFailure();
        }
        FailureOr<func::FuncOp> host = emulateKernel(module, kernel);
        if (failed(host))
          return signalPassFailure();
        host->walk([&](func::CallOp) { needsDivergenceCheck = true; });
      }
      replaceByBinary(module);
    }
    if (needsDivergenceCheck) {
      OpBuilder builder(moduleOp.getBodyRegion());
      auto check = func::FuncOp::create(builder, moduleOp.getLoc(),
                                        "zest_emulated_divergent_barrier",
                                        builder.getFunctionType({}, {}));
      check.setPrivate();
    }
  }
};

} // namespace
