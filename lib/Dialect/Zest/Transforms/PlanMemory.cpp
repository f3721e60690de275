//===- PlanMemory.cpp - Static peak memory of each entry point ------------===//
//
// Replays the allocations and frees of each step in program order, as the
// runtime's pool counts them. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "zest/Conversion/RuntimeProducts.h"
#include "zest/Dialect/Zest/Transforms/CostModel.h"
#include "zest/Dialect/Zest/Transforms/MemoryPlan.h"
#include "zest/Dialect/Zest/Transforms/Passes.h"

#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/ToolOutputFile.h"

#include <limits>
#include <map>

#include "zest_runtime.h"
#include "zest_runtime_cuda.h"

namespace mlir::zest {
#define GEN_PASS_DEF_PLANMEMORYPASS
#include "zest/Dialect/Zest/Transforms/Passes.h.inc"
} // namespace mlir::zest

using namespace mlir;
using namespace mlir::zest;

memref::AllocOp mlir::zest::getAllocation(Value value) {
  while (Operation *def = value.getDefiningOp()) {
    if (auto alloc = dyn_cast<memref::AllocOp>(def))
      return alloc;
    if (auto view = dyn_cast<ViewLikeOpInterface>(def))
      value = view.getViewSource();
    else if (auto pointer =
                 dyn_cast<memref::ExtractAlignedPointerAsIndexOp>(def))
      value = pointer.getSource();
    else if (isa<LLVM::IntToPtrOp, arith::IndexCastOp, arith::AddIOp>(def))
      value = def->getOperand(0); // the address, not the offset
    else
      return {};
  }
  return {};
}

bool mlir::zest::isHostBuffer(Value buffer) {
  while (Operation *def = buffer.getDefiningOp()) {
    auto view = dyn_cast<ViewLikeOpInterface>(def);
    if (!view)
      return false;
    buffer = view.getViewSource();
  }
  auto arg = cast<BlockArgument>(buffer);
  auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
  return func && arg.getOwner()->isEntryBlock() &&
         func.getArgAttr(arg.getArgNumber(), ZestDialect::kHostArgAttrName);
}

std::optional<bool> mlir::zest::buffersOnHost(ValueRange values) {
  bool host = false, device = false;
  for (Value value : values)
    if (isa<MemRefType>(value.getType()))
      (isHostBuffer(value) ? host : device) = true;
  if (host && device)
    return std::nullopt;
  return host;
}

int64_t mlir::zest::getArgumentBytes(func::FuncOp func,
                                     std::optional<bool> onHost) {
  int64_t bytes = 0;
  for (auto [i, type] : llvm::enumerate(func.getArgumentTypes()))
    if (!onHost ||
        bool(func.getArgAttr(i, ZestDialect::kHostArgAttrName)) == *onHost)
      bytes += getStaticBufferBytes(type).value_or(0);
  return bytes;
}

int64_t mlir::zest::getBudgetedBytes(func::FuncOp func, int64_t poolBytes,
                                     bool deviceArguments) {
  return poolBytes +
         (deviceArguments ? getArgumentBytes(func, /*onHost=*/false) : 0);
}

namespace {

/// The pool hands out 64-byte buckets (runtime/common/Runtime.cpp).
constexpr int64_t kPoolBucket = 64;

/// `bytes` as the pool counts a request for them.
int64_t roundToBuckets(int64_t bytes) {
  return (std::max<int64_t>(1, bytes) + kPoolBucket - 1) / kPoolBucket *
         kPoolBucket;
}

/// Bytes the pool hands out for `alloc`: finalize-memref-to-llvm asks for
/// the buffer plus its alignment (to align it by hand), and the pool rounds
/// requests up to whole buckets.
std::optional<int64_t> getPoolBytes(memref::AllocOp alloc) {
  std::optional<int64_t> bytes = getStaticBufferBytes(alloc.getType());
  if (!bytes)
    return std::nullopt;
  return roundToBuckets(*bytes + alloc.getAlignment().value_or(0));
}

/// Whether `callee` is a product of the CUDA runtime (cuBLASLt), which
/// takes its workspace from the pool at the first call and keeps it
/// (attention's and the cross-entropy's kernels take none).
bool usesCudaWorkspace(StringRef callee) {
  bool cuda = false;
  const RuntimeProduct *product = lookupRuntimeProduct(callee, &cuda);
  return product && cuda && isCublasLtProduct(product->kind);
}

/// Bytes the CUDA runtime's cross-entropy (alone or fused with the head)
/// takes from the pool for the duration of `call`
/// (zest_cuda_cross_entropy_scratch, zest_cuda_linear_cross_entropy_scratch).
int64_t getCrossEntropyScratch(func::CallOp call,
                               const RuntimeProduct &product) {
  std::optional<int64_t> rows =
      getConstantIntValue(call.getOperand(product.getParamIndex("rows")));
  std::optional<int64_t> reduction =
      getConstantIntValue(call.getOperand(product.getParamIndex("reduction")));
  if (!rows || !reduction)
    return 0;
  int64_t bytes =
      product.kind == ProductKind::linear_cross_entropy
          ? zest_cuda_linear_cross_entropy_scratch(*rows, int32_t(*reduction))
          : zest_cuda_cross_entropy_scratch(
                product.kind == ProductKind::cross_entropy_backward, *rows,
                int32_t(*reduction));
  return bytes ? roundToBuckets(bytes) : 0;
}

/// Bytes the CUDA runtime's attention backward takes from the pool for the
/// duration of `call` (zest_cuda_attention_backward_scratch).
int64_t getAttentionScratch(func::CallOp call, const RuntimeProduct &product) {
  auto size = [&](StringRef name) {
    return getConstantIntValue(call.getOperand(product.getParamIndex(name)));
  };
  std::optional<int64_t> batch = size("batch"), heads = size("heads"),
                         queries = size("q_len");
  if (!batch || !heads || !queries)
    return 0;
  int64_t bytes =
      zest_cuda_attention_backward_scratch(*batch, *heads, *queries);
  return bytes ? roundToBuckets(bytes) : 0;
}

/// Bytes the CUDA runtime's fused linear backward takes from the pool for
/// the duration of `call`: its activation gradient g (m x n), formed when
/// there is an activation; the cross-entropy's and attention's scratch; 0
/// for anything else.
int64_t getCudaCallScratch(func::CallOp call) {
  bool cuda = false;
  const RuntimeProduct *product = lookupRuntimeProduct(call.getCallee(), &cuda);
  if (!cuda || !product)
    return 0;
  if (product->kind == ProductKind::cross_entropy_forward ||
      product->kind == ProductKind::cross_entropy_backward ||
      product->kind == ProductKind::linear_cross_entropy)
    return getCrossEntropyScratch(call, *product);
  if (product->kind == ProductKind::attention_backward)
    return getAttentionScratch(call, *product);
  if (product->kind != ProductKind::linear_backward)
    return 0;
  auto operand = [&](StringRef name) {
    return getConstantIntValue(call.getOperand(product->getParamIndex(name)));
  };
  std::optional<int64_t> m = operand("m"), n = operand("n"),
                         activation = operand("activation");
  if (!m || !n || !activation || *activation == ZEST_ACTIVATION_NONE ||
      *m * *n == 0)
    return 0;
  int64_t elementBytes = product->suffix.empty() ? 4 : 2; // f32, bf16, f16
  return roundToBuckets(*m * *n * elementBytes);
}

/// Every buffer of a replayed step in the order the runtime allocates them
/// (shared by a replay and the nested replays it starts).
struct Timeline {
  std::vector<BufferLifetime> buffers;
  int64_t clock = 0;
  /// Whether some allocation is made inside a loop or a branch, where the
  /// runtime's order of allocations is not the program's.
  bool dynamicOrder = false;
};

/// The pool as a replay goes: live buffers, running sums and peaks.
struct Replay {
  int64_t pool = 0, gathered = 0;
  bool cudaWorkspace = false;
  bool inLoopOrBranch = false;
  DenseMap<Operation *, size_t> live;     // allocation -> timeline buffer
  DenseMap<Operation *, int64_t> gathers; // allocation -> gathered bytes
  Timeline *timeline = nullptr;
  MemoryPlan plan;
  SymbolTableCollection *symbols = nullptr; // finds the functions called
  /// The entry point's call being replayed into, if any.
  Operation *callSite = nullptr;
  /// The unit whose gathered parameters were read last: what is allocated
  /// now is its activations and temporaries (as FSDP's memory tracker
  /// charges a buffer to the module running when it is allocated).
  std::string running;

  void allocate(Operation *alloc, int64_t bytes) {
    live[alloc] = timeline->buffers.size();
    timeline->buffers.push_back({bytes, timeline->clock++, -1, alloc,
                                 BufferKind::Other, running, callSite});
    timeline->dynamicOrder |= inLoopOrBranch;
    pool += bytes;
    raise(alloc);
  }
  /// Makes the unit whose gathered parameters `op` computes with the one
  /// running. Views do not count: a gather's views are made when it
  /// arrives, which may be long before its unit runs (prefetch).
  void noteParameterReads(Operation *op) {
    if (gathers.empty() || isa<ViewLikeOpInterface>(op))
      return;
    for (Value operand : op->getOperands()) {
      memref::AllocOp alloc = getAllocation(operand);
      if (alloc && gathers.contains(alloc)) {
        running = timeline->buffers[live.lookup(alloc)].unit;
        return;
      }
    }
  }
  /// The unit whose collective `call` starts owns what it gathers into,
  /// and what a reduction sends and receives: a parameter gradient. False
  /// where `call` is no collective.
  bool attribute(func::CallOp call) {
    std::optional<Collective> collective = matchCollective(call, {});
    if (!collective)
      return false;
    bool gathers = collective->kind == "all_gather";
    SmallVector<Value, 2> buffers = {call.getOperand(1)};
    if (!gathers)
      buffers.push_back(call.getOperand(0));
    for (Value buffer : buffers) {
      memref::AllocOp alloc = getAllocation(buffer);
      auto it = alloc ? live.find(alloc) : live.end();
      if (it == live.end())
        continue;
      BufferLifetime &lifetime = timeline->buffers[it->second];
      lifetime.unit = collective->tag;
      if (!gathers)
        lifetime.kind = BufferKind::Gradient;
    }
    return true;
  }
  void release(Operation *alloc) {
    BufferLifetime &buffer = timeline->buffers[live.lookup(alloc)];
    buffer.end = timeline->clock++;
    pool -= buffer.bytes;
    live.erase(alloc);
  }

  void raise(Operation *at) {
    if (pool > plan.peakPool) {
      plan.peakPool = pool;
      plan.peakPoolAt = at;
      plan.peakPoolCall = callSite;
      plan.peakTick = timeline->clock - 1;
    }
    if (gathered > plan.peakGathered) {
      plan.peakGathered = gathered;
      plan.peakGatheredAt = at;
      plan.peakGatheredCall = callSite;
    }
  }
};

LogicalResult replay(Block &block, Replay &state);

/// Replays `block` (a called function's body, a loop body, a branch) on top
/// of `state`, which it must leave with the same buffers live (so that each
/// time it runs it allocates the same way); only the peaks rise.
LogicalResult replayNested(Block &block, Replay &state, bool loopOrBranch,
                           Operation *call = nullptr) {
  Replay inner = state;
  inner.inLoopOrBranch |= loopOrBranch;
  if (call)
    inner.noteParameterReads(call);
  if (!inner.callSite)
    inner.callSite = call;
  if (failed(replay(block, inner)) || inner.pool != state.pool ||
      inner.gathered != state.gathered ||
      inner.live.size() != state.live.size() ||
      !llvm::all_of(state.live, [&](auto &entry) {
        return inner.live.contains(entry.first);
      }))
    return failure();
  state.plan = inner.plan;
  state.cudaWorkspace |= inner.cudaWorkspace;
  state.running = inner.running;
  return success();
}

/// Replays `block` in program order; fails if it cannot be replayed exactly
/// (a dynamic allocation, a free of something it did not allocate, a nested
/// region that does not free what it allocates).
LogicalResult replay(Block &block, Replay &state) {
  for (Operation &op : block) {
    if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
      std::optional<int64_t> bytes = getPoolBytes(alloc);
      if (!bytes)
        return failure();
      state.allocate(alloc, *bytes);
    } else if (auto dealloc = dyn_cast<memref::DeallocOp>(op)) {
      memref::AllocOp alloc = getAllocation(dealloc.getMemref());
      if (!alloc || !state.live.contains(alloc))
        return failure();
      state.release(alloc);
      state.gathered -= state.gathers.lookup(alloc);
      state.gathers.erase(alloc);
    } else if (auto call = dyn_cast<func::CallOp>(op)) {
      state.cudaWorkspace |= usesCudaWorkspace(call.getCallee());
      // A function of the model (a region of repeated blocks): its buffers
      // come and go during the call, on top of what is live here.
      if (auto callee = state.symbols->lookupNearestSymbolFrom<func::FuncOp>(
              call, call.getCalleeAttr());
          callee && !callee.isExternal()) {
        if (!callee.getBody().hasOneBlock() ||
            failed(replayNested(callee.getBody().front(), state,
                                /*loopOrBranch=*/false, call)))
          return failure();
        continue;
      }
      if (int64_t scratch = getCudaCallScratch(call)) {
        state.allocate(call, scratch);
        state.release(call);
        continue;
      }
      if (!state.attribute(call) && !call.getCallee().starts_with("zest_pool_"))
        state.noteParameterReads(call);
      if (call.getCallee() != "zest_pool_mark_gathered")
        continue;
      memref::AllocOp alloc = getAllocation(call.getOperand(0));
      if (!alloc || state.gathers.contains(alloc) ||
          !state.live.contains(alloc))
        continue;
      state.timeline->buffers[state.live.lookup(alloc)].kind =
          BufferKind::Gathered;
      int64_t bytes = getStaticBufferBytes(alloc.getType()).value_or(0);
      state.gathers[alloc] = bytes;
      state.gathered += bytes;
      state.raise(call);
    } else {
      state.noteParameterReads(&op);
      // Branches and loop bodies that free what they allocate: the peak is
      // the highest any of them reaches from here, and the pool is back
      // where it was after them.
      for (Region &region : op.getRegions()) {
        if (region.empty())
          continue;
        if (!region.hasOneBlock() ||
            failed(replayNested(region.front(), state, /*loopOrBranch=*/true)))
          return failure();
      }
    }
  }
  return success();
}

/// What the free lists hold for `buffers` (when the order of allocations is
/// not static): per bucket size, as many buffers as are ever alive at once.
int64_t getFreeListBytes(ArrayRef<BufferLifetime> buffers) {
  std::map<int64_t, std::vector<std::pair<int64_t, int>>> events;
  for (const BufferLifetime &buffer : buffers) {
    events[buffer.bytes].push_back({buffer.start, 1});
    if (buffer.end >= 0)
      events[buffer.bytes].push_back({buffer.end, -1});
  }
  int64_t bytes = 0;
  for (auto &[size, changes] : events) {
    llvm::sort(changes);
    int live = 0, most = 0;
    for (auto [tick, change] : changes)
      most = std::max(most, live += change);
    bytes += size * most;
  }
  return bytes;
}

/// Places the step's buffers in an arena, or where their order is not
/// static counts what the free lists hold for them.
void placeStep(const Timeline &timeline, int64_t alignment, MemoryPlan &plan) {
  ArrayRef<BufferLifetime> buffers = timeline.buffers;
  bool allFreed = llvm::all_of(
      buffers, [](const BufferLifetime &buffer) { return buffer.end >= 0; });
  if (timeline.dynamicOrder || !allFreed) {
    plan.arenaBytes = getFreeListBytes(buffers);
    plan.footprintAt = plan.peakPoolAt;
    return;
  }
  SmallVector<int64_t> offsets =
      placeBuffers(buffers, alignment, plan.arenaBytes);
  for (auto [buffer, offset] : llvm::zip(buffers, offsets)) {
    plan.placement.push_back({offset, buffer.bytes});
    if (offset + buffer.bytes == plan.arenaBytes && !plan.footprintAt)
      plan.footprintAt = buffer.allocatedAt;
  }
}

} // namespace

std::optional<MemoryPlan>
mlir::zest::planFunctionMemory(func::FuncOp func, int64_t arenaAlignment) {
  SymbolTableCollection symbols;
  Timeline timeline;
  Replay state;
  state.symbols = &symbols;
  state.timeline = &timeline;
  if (!func.getBody().hasOneBlock() ||
      failed(replay(func.getBody().front(), state)))
    return std::nullopt;
  placeStep(timeline, arenaAlignment, state.plan);
  attributeBuffers(timeline.buffers, state.plan);
  if (timeline.dynamicOrder) {
    state.plan.poolAfterAllocation.clear();
    state.plan.kindsAfterAllocation.clear();
  }
  // The workspace stays in the pool, outside the arena, from the first
  // step's first product on: every later step peaks with it.
  if (state.cudaWorkspace) {
    state.plan.keptBytes = roundToBuckets(ZEST_CUDA_WORKSPACE_BYTES);
    state.plan.peakPool += state.plan.keptBytes;
  }
  return state.plan;
}

std::optional<int64_t> mlir::zest::getStaticBufferBytes(Type type) {
  auto shaped = dyn_cast<ShapedType>(type);
  if (!shaped || !shaped.hasStaticShape() ||
      !shaped.getElementType().isIntOrFloat())
    return std::nullopt;
  int64_t bits = shaped.getElementType().getIntOrFloatBitWidth();
  return shaped.getNumElements() * ((bits + 7) / 8);
}

void MemoryPlan::merge(const MemoryPlan &other) {
  if (other.arenaBytes > arenaBytes)
    arenaBytes = other.arenaBytes, footprintAt = other.footprintAt;
  keptBytes = std::max(keptBytes, other.keptBytes);
  if (other.peakPool > peakPool) {
    peakPool = other.peakPool, peakPoolAt = other.peakPoolAt;
    peakPoolCall = other.peakPoolCall;
    atPeak = other.atPeak;
  }
  if (other.peakGathered > peakGathered) {
    peakGathered = other.peakGathered, peakGatheredAt = other.peakGatheredAt;
    peakGatheredCall = other.peakGatheredCall;
  }
}

/// The entry points a plan covers: public functions with a body.
static bool isEntryPoint(func::FuncOp func) {
  return !func.isExternal() && !func.isPrivate();
}

std::optional<MemoryPlan> mlir::zest::planModuleMemory(ModuleOp module,
                                                       int64_t arenaAlignment) {
  MemoryPlan top;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (!isEntryPoint(func))
      continue;
    std::optional<MemoryPlan> plan = planFunctionMemory(func, arenaAlignment);
    if (!plan)
      return std::nullopt;
    top.merge(*plan);
  }
  return top;
}

namespace {

/// A collective of the step and where it starts.
struct StartedCollective : Collective {
  Operation *at = nullptr;
};

/// The collectives `func` starts, in program order.
SmallVector<StartedCollective> getCollectives(func::FuncOp func,
                                              const DeviceMesh &mesh) {
  SmallVector<StartedCollective> collectives;
  func.walk([&](func::CallOp call) {
    if (std::optional<Collective> collective = matchCollective(call, mesh))
      collectives.push_back({*collective, call});
  });
  return collectives;
}

std::string describe(Operation *op, Operation *call = nullptr) {
  if (!op)
    return "";
  std::string text;
  llvm::raw_string_ostream os(text);
  os << op->getName() << " at " << op->getLoc();
  // An op of a region of repeated blocks has the first block's location:
  // the call says which block.
  if (call)
    os << " in the call at " << call->getLoc();
  return text;
}

/// The report's kind column: expert-parallel units are sharded over their
/// expert group.
StringRef getKindName(UnitOp unit) {
  if (unit.getExperts())
    return "experts";
  return unit.isSharded() ? "sharded" : "replicated";
}

StringRef getDecision(UnitOp unit) {
  if (!unit.isSharded())
    return "replicated";
  if (unit.getExperts())
    return "local";
  return unit->hasAttr(ZestDialect::kKeepAttrName) ? "keep" : "re-gather";
}

/// What the unit recomputes of its forward (zest-checkpoint-activations),
/// or null.
StringAttr getCheckpoint(UnitOp unit) {
  return unit->getAttrOfType<StringAttr>(ZestDialect::kCheckpointAttrName);
}

/// What of the unit lives in pinned host memory (zest-offload-optimizer:
/// "optimizer" or "params"), or null.
StringAttr getOffload(UnitOp unit) {
  return unit->getAttrOfType<StringAttr>(ZestDialect::kOffloadAttrName);
}

/// The report's decision column: the decision, what the unit recomputes,
/// and where its optimizer runs.
std::string describeDecision(UnitOp unit) {
  std::string text = getDecision(unit).str();
  if (StringAttr checkpoint = getCheckpoint(unit))
    text += (", recompute " + checkpoint.getValue()).str();
  if (StringAttr offload = getOffload(unit))
    text += offload.getValue() == "params" ? ", params and optimizer on host"
                                           : ", optimizer on host";
  return text;
}

std::optional<int64_t> getPrefetch(UnitOp unit) {
  if (unit.getExperts())
    return std::nullopt; // never gathered
  if (auto depth =
          unit->getAttrOfType<IntegerAttr>(ZestDialect::kPrefetchAttrName))
    return depth.getInt();
  return std::nullopt;
}

int64_t getUnitBytes(UnitOp unit) {
  return getStaticBufferBytes(unit.getFlatType()).value_or(0);
}

int64_t getShardBytes(UnitOp unit) {
  return getStaticBufferBytes(unit.getShardType()).value_or(0);
}

/// Bytes of `unit`'s arguments of `kind` (optimizer_state, accumulators),
/// as zest-describe-model recorded them; 0 where it did not run.
int64_t getUnitArgumentBytes(UnitOp unit, StringRef kind) {
  auto bytes =
      unit->getAttrOfType<DictionaryAttr>(ZestDialect::kArgumentBytesAttrName);
  auto value = bytes ? bytes.getAs<IntegerAttr>(kind) : IntegerAttr();
  return value ? value.getInt() : 0;
}

/// The unit table: layout and the scheduling decisions on each unit.
llvm::json::Array describeUnits(ModuleOp module) {
  llvm::json::Array units;
  for (UnitOp unit : module.getOps<UnitOp>()) {
    llvm::json::Array params;
    for (auto param : unit.getParams().getAsRange<ParamAttr>())
      params.push_back(param.getName());
    std::string dtype;
    llvm::raw_string_ostream(dtype) << unit.getElementType();
    std::optional<int64_t> prefetch = getPrefetch(unit);
    StringAttr checkpoint = getCheckpoint(unit);
    StringAttr offload = getOffload(unit);
    units.push_back(llvm::json::Object{
        {"name", unit.getSymName()},
        {"kind", getKindName(unit)},
        {"dtype", dtype},
        {"parameters", std::move(params)},
        {"numel", unit.getNumElements()},
        {"bytes", getUnitBytes(unit)},
        {"shard_bytes", getShardBytes(unit)},
        {"optimizer_state_bytes",
         getUnitArgumentBytes(unit, "optimizer_state")},
        {"accumulator_bytes", getUnitArgumentBytes(unit, "accumulators")},
        {"prefetch", prefetch ? llvm::json::Value(*prefetch) : nullptr},
        {"decision", getDecision(unit)},
        {"checkpoint",
         checkpoint ? llvm::json::Value(checkpoint.getValue()) : nullptr},
        {"offload",
         offload ? llvm::json::Value(offload.getValue()) : nullptr}});
  }
  return units;
}

/// How zest-group-units chose the units, or null.
StringAttr getUnitPolicy(ModuleOp module) {
  return module->getAttrOfType<StringAttr>(ZestDialect::kUnitPolicyAttrName);
}

void printUnits(ModuleOp module, llvm::raw_ostream &os) {
  auto units = module.getOps<UnitOp>();
  if (units.empty())
    return;
  if (StringAttr policy = getUnitPolicy(module))
    os << "units: " << policy.getValue() << "\n";
  os << llvm::formatv("{0,-24} {1,-10} {2,6} {3,12} {4,12} {5,8}  {6}\n",
                      "unit", "kind", "params", "bytes", "shard bytes",
                      "prefetch", "decision");
  for (UnitOp unit : units) {
    std::optional<int64_t> prefetch = getPrefetch(unit);
    os << llvm::formatv(
        "{0,-24} {1,-10} {2,6} {3,12} {4,12} {5,8}  {6}\n", unit.getSymName(),
        getKindName(unit), unit.getParams().size(), getUnitBytes(unit),
        getShardBytes(unit), prefetch ? std::to_string(*prefetch) : "-",
        describeDecision(unit));
  }
  for (BucketOp bucket : module.getOps<BucketOp>()) {
    os << "bucket " << bucket.getSymName() << ":";
    llvm::interleave(
        bucket.getUnits().getAsRange<FlatSymbolRefAttr>(), os,
        [&](FlatSymbolRefAttr ref) { os << " " << ref.getValue(); }, ",");
    os << "\n";
  }
}

/// The units a collective's tag names: the unit, a bucket's members, or
/// none (the gradient norm's all-reduce).
llvm::json::Array getTaggedUnits(ModuleOp module, StringRef tag) {
  llvm::json::Array units;
  Operation *symbol = module.lookupSymbol(tag);
  if (auto bucket = dyn_cast_or_null<BucketOp>(symbol))
    for (auto ref : bucket.getUnits().getAsRange<FlatSymbolRefAttr>())
      units.push_back(ref.getValue().str());
  else if (isa_and_nonnull<UnitOp>(symbol))
    units.push_back(tag.str());
  return units;
}

llvm::json::Array describeCollectives(ModuleOp module,
                                      ArrayRef<StartedCollective> collectives) {
  llvm::json::Array list;
  for (const StartedCollective &collective : collectives)
    list.push_back(llvm::json::Object{
        {"kind", collective.kind},
        {"unit", collective.tag},
        {"units", getTaggedUnits(module, collective.tag)},
        {"group", getGroupName(collective.group)},
        {"bytes", collective.bytes},
        {"sent_bytes_per_rank", collective.sentPerRank},
        {"received_bytes_per_rank", collective.receivedPerRank},
        {"at", describe(collective.at)}});
  return list;
}

/// Expert parallelism's exchanges of a step (zest_expert_* calls) and the
/// bytes one call sends per rank: at least the rows dispatched and the row
/// counts, at most those plus every row its experts can send back (the
/// received rows' worst case), as the runtime counts them.
struct ExchangeBytes {
  int64_t calls = 0, atLeast = 0, atMost = 0;
};

ExchangeBytes getExchangeBytes(func::FuncOp func) {
  ExchangeBytes bytes;
  func.walk([&](func::CallOp call) {
    std::optional<ExpertExchange> exchange = matchExpertExchange(call);
    if (!exchange)
      return;
    ++bytes.calls;
    if (!exchange->routed)
      bytes.atLeast += exchange->bytes;
    bytes.atMost += exchange->bytes;
  });
  return bytes;
}

int64_t getSentBytes(ArrayRef<StartedCollective> collectives) {
  int64_t sent = 0;
  for (const StartedCollective &collective : collectives)
    sent += collective.sentPerRank;
  return sent;
}

llvm::json::Value describeMachine(const MachineModel &model) {
  // No replica link of its own: null (its collectives use the link).
  llvm::json::Value replicaBandwidth = nullptr, replicaLatency = nullptr;
  if (model.replicaLinkBytesPerUs > 0) {
    replicaBandwidth = model.replicaLinkBytesPerUs / 1e3;
    replicaLatency = model.replicaLinkLatencyUs;
  }
  return llvm::json::Object{
      {"name", model.name},
      {"gemm_gflops", model.gemmFlopsPerUs / 1e3},
      {"vector_gflops", model.vectorFlopsPerUs / 1e3},
      {"memory_gb_per_s", model.memoryBytesPerUs / 1e3},
      {"kernel_overhead_us", model.kernelOverheadUs},
      {"link_gb_per_s", model.linkBytesPerUs / 1e3},
      {"link_latency_us", model.linkLatencyUs},
      {"replica_link_gb_per_s", replicaBandwidth},
      {"replica_link_latency_us", replicaLatency},
      {"host_link_gb_per_s", model.hostLinkBytesPerUs / 1e3},
      {"host_memory_gb_per_s", model.hostMemoryBytesPerUs / 1e3}};
}

/// The training step a no-sync accumulate entry point serves, or null.
llvm::json::Value accumulateFor(func::FuncOp func) {
  if (auto step = func->getAttrOfType<FlatSymbolRefAttr>(
          ZestDialect::kAccumulateForAttrName))
    return step.getValue();
  return nullptr;
}

/// An entry point and its memory plan (none if not exact).
using EntryPlan = std::pair<func::FuncOp, std::optional<MemoryPlan>>;

/// The units named for the activations at the peak (the largest shares).
constexpr size_t kLargestUnits = 3;
/// The largest activations and temporaries at the peak the report names
/// (the JSON lists them all).
constexpr size_t kLargestBuffers = 3;

/// "  at the peak: ..." : what the pool holds at its peak, by kind, with
/// the units' shares (of activations and temporaries: those allocated
/// while the unit ran) and the largest other buffers.
void printPeakBreakdown(llvm::raw_ostream &os, const MemoryPlan &plan) {
  const PeakBreakdown &peak = plan.atPeak;
  // Each unit's share of a kind, the largest `most` first.
  auto units = [&](int64_t BytesByKind::*kind, size_t most) {
    SmallVector<std::pair<int64_t, StringRef>> shares;
    for (auto &[unit, bytes] : peak.units)
      if (bytes.*kind)
        shares.push_back({bytes.*kind, unit});
    if (shares.empty())
      return std::string();
    llvm::stable_sort(shares,
                      [](auto &a, auto &b) { return a.first > b.first; });
    SmallVector<std::string> named;
    for (auto [bytes, unit] : ArrayRef(shares).take_front(most))
      named.push_back((unit + " " + Twine(bytes)).str());
    if (shares.size() > most)
      named.push_back((Twine(shares.size() - most) + " more units").str());
    return " (" + llvm::join(named, ", ") + ")";
  };
  constexpr size_t kAll = std::numeric_limits<size_t>::max();
  os << "  at the peak: gathered parameters " << peak.bytes.gathered
     << units(&BytesByKind::gathered, kAll) << ", parameter gradients "
     << peak.bytes.gradients << units(&BytesByKind::gradients, kAll)
     << ", activations and temporaries " << peak.bytes.other
     << units(&BytesByKind::other, kLargestUnits) << " in " << peak.otherBuffers
     << " buffers";
  for (auto [index, buffer] :
       llvm::enumerate(ArrayRef(peak.others).take_front(kLargestBuffers)))
    os << (index ? ", " : " (largest: ") << buffer.bytes << " "
       << describe(buffer.site.op, buffer.site.call);
  if (!peak.others.empty())
    os << ")";
  if (plan.keptBytes)
    os << ", cuBLASLt workspace " << plan.keptBytes;
  os << "\n";
}

/// The JSON of `plan`'s split by kind: at the peak, and after each
/// allocation.
void addBreakdownJson(llvm::json::Object &entry, const MemoryPlan &plan) {
  auto object = [](const BytesByKind &bytes) {
    return llvm::json::Object{{"gathered_bytes", bytes.gathered},
                              {"gradient_bytes", bytes.gradients},
                              {"other_bytes", bytes.other}};
  };
  llvm::json::Object peak = object(plan.atPeak.bytes);
  peak["workspace_bytes"] = plan.keptBytes;
  peak["other_buffers"] = plan.atPeak.otherBuffers;
  llvm::json::Object units;
  for (auto &[unit, bytes] : plan.atPeak.units)
    units[unit] = object(bytes);
  peak["units"] = std::move(units);
  llvm::json::Array others;
  for (const PeakBuffer &buffer : plan.atPeak.others)
    others.push_back(
        llvm::json::Object{{"bytes", buffer.bytes},
                           {"unit", buffer.unit},
                           {"at", describe(buffer.site.op, buffer.site.call)}});
  peak["others"] = std::move(others);
  entry["peak_breakdown"] = std::move(peak);
  llvm::json::Array series;
  for (const BytesByKind &bytes : plan.kindsAfterAllocation)
    series.push_back(
        llvm::json::Array{bytes.gathered, bytes.gradients, bytes.other});
  entry["predicted_kinds_after_allocation"] = std::move(series);
}

struct PlanMemoryPass : public zest::impl::PlanMemoryPassBase<PlanMemoryPass> {
  using Base::Base;

  static void printPlan(StringRef name, const std::optional<MemoryPlan> &plan,
                        int64_t argumentBytes, int64_t hostArgumentBytes,
                        ArrayRef<StartedCollective> collectives,
                        const ExchangeBytes &exchanges) {
    llvm::raw_ostream &os = llvm::outs();
    os << "memory plan: " << name << ": ";
    if (!plan) {
      os << "not predicted (allocations the plan cannot replay exactly)\n";
    } else {
      os << "peak pool bytes per rank " << plan->peakPool;
      if (plan->peakPoolAt)
        os << " (" << describe(plan->peakPoolAt, plan->peakPoolCall) << ")";
      os << ", peak gathered parameter bytes per rank " << plan->peakGathered;
      if (plan->peakGatheredAt)
        os << " (" << describe(plan->peakGatheredAt, plan->peakGatheredCall)
           << ")";
      os << "; argument bytes per rank " << argumentBytes;
      if (hostArgumentBytes)
        os << " (" << argumentBytes - hostArgumentBytes << " on the device, "
           << hostArgumentBytes << " in pinned host memory)";
      os << "; pool footprint bytes per rank " << plan->getFootprint() << "\n";
      printPeakBreakdown(os, *plan);
    }
    llvm::StringMap<int64_t> counts;
    for (const StartedCollective &collective : collectives)
      ++counts[collective.kind];
    os << "collectives: " << name << ": " << collectives.size()
       << " per call, bytes sent per rank " << getSentBytes(collectives);
    for (StringRef kind : {"all_gather", "reduce_scatter", "all_reduce"})
      if (counts.lookup(kind))
        os << ", " << kind << " " << counts.lookup(kind);
    os << "\n";
    if (exchanges.calls)
      os << "expert exchanges: " << name << ": " << exchanges.calls
         << " per call, all-to-all bytes sent per rank " << exchanges.atLeast
         << " to " << exchanges.atMost
         << " (the rows sent back depend on the routing)\n";
  }

  /// Fails (reported where it happens) if an entry point's predicted peak
  /// pool exceeds the budget or cannot be predicted.
  LogicalResult checkBudget(ArrayRef<EntryPlan> plans) {
    if (memoryBudget <= 0)
      return success();
    int64_t budget = memoryBudget;
    bool ok = true;
    for (auto [func, plan] : plans) {
      if (!plan) {
        func.emitError() << "cannot hold @" << func.getSymName()
                         << " to a memory budget of " << budget
                         << " bytes: its allocations cannot be replayed "
                         << "exactly (dynamic sizes or frees the plan cannot "
                         << "follow)";
        ok = false;
      } else if (int64_t held = getBudgetedBytes(func, plan->getFootprint(),
                                                 deviceArguments);
                 held > budget) {
        Operation *at = plan->footprintAt ? plan->footprintAt : func;
        InFlightDiagnostic error = at->emitError();
        error << "@" << func.getSymName() << " needs a pool of "
              << plan->getFootprint() << " bytes per rank (its highest "
              << "buffer is allocated here; " << plan->peakPool
              << " bytes live at its peak)";
        if (deviceArguments)
          error << ", plus " << held - plan->getFootprint() << " bytes of "
                << "arguments on the device";
        error << ", over the memory budget of " << budget << " bytes";
        ok = false;
      }
    }
    return success(ok);
  }

  /// The machine to predict time on, if any (failure: reported).
  FailureOr<std::optional<MachineModel>> getMachine(ModuleOp module) {
    if (machine.empty())
      return std::optional<MachineModel>();
    std::string error;
    std::optional<MachineModel> model =
        getMachineModel(machine, link, replicaLink, error);
    if (!model)
      return emitError(module.getLoc()) << error;
    return model;
  }

  void runOnOperation() override {
    markAllAnalysesPreserved();
    ModuleOp module = getOperation();
    if (failed(verifyArenaAlignment(arenaAlignment, module.getLoc())))
      return signalPassFailure();
    // Each entry point is replayed once, for the budget and the report.
    std::vector<EntryPlan> plans;
    for (auto func : module.getOps<func::FuncOp>())
      if (isEntryPoint(func))
        plans.push_back({func, planFunctionMemory(func, arenaAlignment)});
    if (failed(checkBudget(plans)))
      return signalPassFailure();
    if (reportJson.empty() && !reportText)
      return;
    FailureOr<std::optional<MachineModel>> model = getMachine(module);
    if (failed(model))
      return signalPassFailure();
    DeviceMesh mesh = getModuleMesh(module);
    if (reportText)
      printUnits(module, llvm::outs());
    llvm::json::Array functions;
    // The module's peak is exact only if every entry point's is.
    std::optional<MemoryPlan> top = MemoryPlan();
    for (auto &[func, plan] : plans) {
      functions.push_back(reportEntry(func, plan, *model, mesh));
      if (plan && top)
        top->merge(*plan);
      else
        top.reset();
    }
    if (!reportJson.empty() &&
        failed(writeReport(module, std::move(functions), top, *model, mesh)))
      signalPassFailure();
  }

  /// One entry point's part of the report (printed with --report, returned
  /// for the JSON): collectives, arguments, predicted cost and memory plan.
  llvm::json::Object reportEntry(func::FuncOp func,
                                 const std::optional<MemoryPlan> &plan,
                                 const std::optional<MachineModel> &model,
                                 const DeviceMesh &mesh) {
    ModuleOp module = getOperation();
    SmallVector<StartedCollective> collectives = getCollectives(func, mesh);
    ExchangeBytes exchanges = getExchangeBytes(func);
    if (reportText)
      printPlan(func.getSymName(), plan, getArgumentBytes(func),
                getArgumentBytes(func, /*onHost=*/true), collectives,
                exchanges);
    llvm::json::Object entry{
        {"name", func.getSymName()},
        {"collectives", describeCollectives(module, collectives)},
        {"sent_bytes_per_rank", getSentBytes(collectives)},
        {"exchange_sent_bytes_per_rank",
         exchanges.calls ? llvm::json::Value(llvm::json::Object{
                               {"at_least", exchanges.atLeast},
                               {"at_most", exchanges.atMost}})
                         : llvm::json::Value(nullptr)},
        {"argument_bytes", getArgumentBytes(func)},
        {"host_argument_bytes", getArgumentBytes(func, /*onHost=*/true)},
        {"accumulate_for", accumulateFor(func)}};
    if (model)
      entry["cost"] = reportCost(func, *model, mesh);
    if (!plan) {
      entry["predicted_peak_pool_bytes"] = nullptr;
      entry["predicted_pool_footprint_bytes"] = nullptr;
      entry["predicted_peak_gathered_bytes"] = nullptr;
      return entry;
    }
    entry["predicted_peak_pool_bytes"] = plan->peakPool;
    entry["predicted_pool_footprint_bytes"] = plan->getFootprint();
    entry["predicted_pool_after_allocation"] =
        llvm::json::Array(plan->poolAfterAllocation);
    entry["predicted_peak_gathered_bytes"] = plan->peakGathered;
    addBreakdownJson(entry, *plan);
    entry["peak_pool_at"] = describe(plan->peakPoolAt, plan->peakPoolCall);
    entry["peak_gathered_at"] =
        describe(plan->peakGatheredAt, plan->peakGatheredCall);
    return entry;
  }

  /// The predicted step time of `func` on `model`, printed with --report.
  llvm::json::Object reportCost(func::FuncOp func, const MachineModel &model,
                                const DeviceMesh &mesh) {
    StepCost cost = estimateStepCost(func, model, mesh);
    if (reportText)
      llvm::outs() << llvm::formatv(
          "predicted time on {0}: {1}: {2:f3} ms per call (compute "
          "{3:f3} ms, communication {4:f3} ms, exposed {5:f3} ms; "
          "products {6:f3} ms of the compute)\n",
          model.name, func.getSymName(), cost.stepUs / 1e3,
          cost.computeUs / 1e3, cost.communicationUs / 1e3,
          cost.exposedUs / 1e3, cost.productUs / 1e3);
    return llvm::json::Object{{"compute_us", cost.computeUs},
                              {"product_us", cost.productUs},
                              {"communication_us", cost.communicationUs},
                              {"exposed_communication_us", cost.exposedUs},
                              {"step_us", cost.stepUs}};
  }

  /// Writes the JSON report (--report-json) of the entry points
  /// `functions`; `top` is the module's plan where every entry's is exact.
  LogicalResult writeReport(ModuleOp module, llvm::json::Array functions,
                            const std::optional<MemoryPlan> &top,
                            const std::optional<MachineModel> &model,
                            const DeviceMesh &mesh) {
    StringAttr policy = getUnitPolicy(module);
    llvm::json::Object report{
        {"schema", "zest-report/1"},
        {"world_size", mesh.getWorldSize()},
        {"mesh", llvm::json::Object{{"replicas", mesh.replicas},
                                    {"shards", mesh.shards}}},
        {"memory_budget_bytes",
         memoryBudget > 0 ? llvm::json::Value(int64_t(memoryBudget)) : nullptr},
        {"budget_holds_device_arguments", bool(deviceArguments)},
        {"units", describeUnits(module)},
        {"unit_policy",
         policy ? llvm::json::Value(policy.str()) : llvm::json::Value(nullptr)},
        {"machine", model ? describeMachine(*model) : nullptr},
        {"functions", std::move(functions)}};
    auto bytes = [&](auto get) -> llvm::json::Value {
      return top ? llvm::json::Value(get(*top)) : llvm::json::Value(nullptr);
    };
    report["predicted_peak_pool_bytes"] =
        bytes([](const MemoryPlan &plan) { return plan.peakPool; });
    report["predicted_pool_footprint_bytes"] =
        bytes([](const MemoryPlan &plan) { return plan.getFootprint(); });
    report["predicted_peak_gathered_bytes"] =
        bytes([](const MemoryPlan &plan) { return plan.peakGathered; });
    std::string error;
    std::unique_ptr<llvm::ToolOutputFile> file =
        openOutputFile(reportJson, &error);
    if (!file)
      return emitError(module.getLoc())
             << "cannot write report '" << reportJson << "': " << error;
    file->os() << llvm::formatv("{0:2}", llvm::json::Value(std::move(report)))
               << "\n";
    file->keep();
    return success();
  }
};
} // namespace
