//===- CostModel.cpp - Predicted step time of a lowered step --------------===//
//
// Kernels cost the larger of their arithmetic and their memory traffic
// (a roofline) plus a call overhead; products cost 2 m n k at the machine's
// GEMM rate; transfers cost latency + bytes / bandwidth on one link per
// rank, in the order they start. The replay mirrors the runtime's modeled
// link, so on a machine described by the same numbers the two agree.
//
//===----------------------------------------------------------------------===//

#include "zest/Dialect/Zest/Transforms/CostModel.h"
#include "zest/Conversion/RuntimeProducts.h"
#include "zest/Dialect/Zest/IR/ZestOps.h"
#include "zest/Dialect/Zest/Transforms/MemoryPlan.h"
#include "zest_runtime.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace mlir::zest;

int64_t DeviceMesh::getGroupSize(int64_t group) const {
  switch (group) {
  case ZEST_GROUP_WORLD:
    return getWorldSize();
  case ZEST_GROUP_SHARD:
    return shards;
  case ZEST_GROUP_REPLICA:
    return replicas;
  case ZEST_GROUP_EXPERT:
    return expertGroup;
  case ZEST_GROUP_EXPERT_REPLICA:
    return getWorldSize() / expertGroup;
  }
  return 0;
}

DeviceMesh mlir::zest::getModuleMesh(ModuleOp module) {
  DeviceMesh mesh;
  bool found = false;
  for (UnitOp unit : module.getOps<UnitOp>()) {
    // Expert-parallel units are laid out for their expert groups.
    if (unit.getExperts()) {
      mesh.expertGroup = unit.getWorldSize();
    } else if (!found) {
      mesh.replicas = unit.getNumReplicas();
      mesh.shards = unit.getWorldSize();
      found = true;
    }
  }
  if (!found && mesh.expertGroup > 1)
    mesh.shards = mesh.expertGroup; // experts alone: the groups' world
  return mesh;
}

int64_t mlir::zest::getModuleWorldSize(ModuleOp module) {
  return getModuleMesh(module).getWorldSize();
}

StringRef mlir::zest::getGroupName(zest_group_t group) {
  switch (group) {
  case ZEST_GROUP_SHARD:
    return "shard";
  case ZEST_GROUP_REPLICA:
    return "replica";
  case ZEST_GROUP_EXPERT:
    return "expert";
  case ZEST_GROUP_EXPERT_REPLICA:
    return "expert replica";
  default:
    return "world";
  }
}

std::optional<Collective> mlir::zest::matchCollective(func::CallOp call,
                                                      const DeviceMesh &mesh) {
  // zest_*_start(send, recv, count, dtype, [reduction,] group, tag).
  StringRef kind = call.getCallee();
  unsigned numOperands = call.getNumOperands();
  if (!kind.consume_front("zest_") || !kind.consume_back("_start") ||
      numOperands < 6)
    return std::nullopt;
  std::optional<int64_t> count = getConstantIntValue(call.getOperand(2));
  std::optional<int64_t> dtype = getConstantIntValue(call.getOperand(3));
  std::optional<int64_t> group =
      getConstantIntValue(call.getOperand(numOperands - 2));
  int64_t ranks = group ? mesh.getGroupSize(*group) : 0;
  if (!count || !dtype || ranks < 1)
    return std::nullopt;
  Collective collective;
  collective.kind = kind.str();
  collective.group = zest_group_t(*group);
  collective.bytes = *count * zest_dtype_bytes(zest_dtype_t(*dtype));
  if (auto tag = call.getOperands().back().getDefiningOp<LLVM::AddressOfOp>()) {
    StringRef name = tag.getGlobalName();
    name.consume_front("zest.tag.");
    collective.tag = name.str();
  }
  collective.sentPerRank = kind == "all_reduce"
                               ? 2 * collective.bytes * (ranks - 1) / ranks
                               : collective.bytes * (ranks - 1);
  collective.receivedPerRank = collective.sentPerRank;
  return collective;
}

std::optional<MachineModel> mlir::zest::lookupMachine(StringRef name) {
  // Rates per microsecond: 1 GFLOP/s = 1e3 flop/us, 1 GB/s = 1e3 bytes/us.
  if (name == "cpu") {
    // Measured here (bench/overlap): OpenBLAS sgemm on one core at the
    // step's sizes, AVX2 kernels streaming from caches. No link of its own
    // (--link adds ZEST_LINK's); Open MPI over shared memory copies ~0.6 GB
    // per second and rank, inside waits only, with both ranks computing on
    // the two cores.
    // The emulated device's copies and host kernels are this machine's
    // memory.
    return MachineModel{"cpu", 90e3,  8e3, 12e3, 0.3,  0,
                        0,     0.6e3, 0,   0,    12e3, 12e3};
  }
  if (name == "h100-nvlink") {
    // One H100 SXM of an 8-GPU NVLink node: f32 products at 47 TFLOP/s,
    // 70% of the CUDA cores' 67 (measured on an H200, the same SMs: the
    // runtime's cuBLASLt products accumulate in f32 without TF32, as
    // PyTorch's do by default), ~80% of HBM3's 3.35 TB/s for
    // elementwise kernels, CUDA-core f32 for their arithmetic, a 5 us
    // launch; NCCL ring bus bandwidth ~370 GB/s with ~15 us latency. Between
    // nodes (a hybrid mesh's replica groups), one 400 Gb/s InfiniBand NIC
    // per GPU: ~45 GB/s with ~20 us latency. Offload: PCIe 5.0 x16 with
    // pinned memory, ~25 GB/s each way in practice; the host update, one
    // thread streaming ~10 GB/s. 16-bit products: ~60% of the 989 TFLOP/s
    // dense bf16 peak.
    // Peaks: HBM3 3.35 TB/s, 67 TFLOP/s f32 on CUDA cores (elementwise
    // arithmetic and the f32 products) and 989 TFLOP/s bf16 dense on
    // tensor cores.
    return MachineModel{
        "h100-nvlink", 47e6, 50e6,  2.7e6,  5,    370e3, 15,     0, 45e3, 20,
        25e3,          10e3, 600e6, 3.35e6, 67e6, 67e6,  989.4e6};
  }
  return std::nullopt;
}

/// Parses "<GB/s>,<latency us>" into bytes per us and us.
static bool parseLink(StringRef text, double &bytesPerUs, double &latencyUs) {
  double gbPerS = 0;
  latencyUs = -1;
  auto [bandwidth, latency] = text.split(',');
  if (bandwidth.trim().getAsDouble(gbPerS) ||
      latency.trim().getAsDouble(latencyUs) || !(gbPerS > 0) ||
      !(latencyUs >= 0))
    return false;
  bytesPerUs = gbPerS * 1e3;
  return true;
}

std::optional<MachineModel> mlir::zest::getMachineModel(StringRef name,
                                                        StringRef link,
                                                        StringRef replicaLink,
                                                        std::string &error) {
  std::optional<MachineModel> model = lookupMachine(name);
  if (!model) {
    error = ("unknown machine '" + name + "': use cpu or h100-nvlink").str();
    return std::nullopt;
  }
  for (auto [text, what, bytesPerUs, latencyUs] :
       {std::make_tuple(link, "link", &model->linkBytesPerUs,
                        &model->linkLatencyUs),
        std::make_tuple(replicaLink, "replica link",
                        &model->replicaLinkBytesPerUs,
                        &model->replicaLinkLatencyUs)}) {
    if (text.empty())
      continue;
    if (!parseLink(text, *bytesPerUs, *latencyUs)) {
      error = (Twine(what) + " '" + text +
               "' is not <GB/s>,<latency us> (e.g. 2,10)")
                  .str();
      return std::nullopt;
    }
    model->name += (" with " + Twine(what) + " " + text).str();
  }
  return model;
}

namespace {

int64_t getBufferBytes(Value value) {
  return getStaticBufferBytes(value.getType()).value_or(0);
}
} // namespace

std::optional<KernelWork> mlir::zest::getLinalgWork(linalg::LinalgOp op) {
  int64_t iterations = 1;
  for (int64_t range : op.getStaticLoopRanges()) {
    if (ShapedType::isDynamic(range))
      return std::nullopt;
    iterations *= range;
  }
  int64_t bodyOps = 0;
  if (Block *body = op.getBlock())
    bodyOps = std::max<int64_t>(1, body->getOperations().size() - 1);
  KernelWork work;
  work.flops = iterations * bodyOps;
  for (OpOperand *input : op.getDpsInputOperands())
    work.bytesRead += getBufferBytes(input->get());
  for (OpOperand &init : op.getDpsInitsMutable()) {
    int64_t bytes = getBufferBytes(init.get());
    work.bytesWritten += bytes;
    if (op.payloadUsesValueFromOperand(&init))
      work.bytesRead += bytes;
  }
  return work;
}

double mlir::zest::getKernelUs(const KernelWork &work,
                               const MachineModel &machine) {
  return machine.kernelOverheadUs +
         std::max(work.flops / machine.vectorFlopsPerUs,
                  (work.bytesRead + work.bytesWritten) /
                      machine.memoryBytesPerUs);
}

namespace {

/// Roofline time of a linalg op on buffers: its iterations times the ops of
/// its body, or the bytes it reads and writes, whichever takes longer.
double getLinalgUs(linalg::LinalgOp op, const MachineModel &machine) {
  std::optional<KernelWork> work = getLinalgWork(op);
  return work ? getKernelUs(*work, machine) : machine.kernelOverheadUs;
}

double getConstant(func::CallOp call, unsigned index) {
  if (index >= call.getNumOperands())
    return 0;
  return static_cast<double>(
      getConstantIntValue(call.getOperand(index)).value_or(0));
}

bool isNull(Value pointer) { return pointer.getDefiningOp<LLVM::ZeroOp>(); }

} // namespace

std::optional<ExpertExchange>
mlir::zest::matchExpertExchange(func::CallOp call) {
  StringRef callee = call.getCallee();
  if (callee == "zest_expert_routing") // (ends, bits, experts, ...)
    return ExpertExchange{int64_t(getConstant(call, 2)) * 8, false};
  if (callee != "zest_expert_dispatch" && callee != "zest_expert_combine")
    return std::nullopt;
  // (rows, in rows, cols, dtype, ...): a dispatch sends all its rows, a
  // combine what its experts received.
  int64_t rows = int64_t(getConstant(call, 1)) * int64_t(getConstant(call, 2)) *
                 zest_dtype_bytes(zest_dtype_t(getConstant(call, 3)));
  return ExpertExchange{rows, callee == "zest_expert_combine"};
}

namespace {

/// Time of an attention call: its products at the GEMM rate, two per tile
/// forward (scores, probabilities times values) and five backward (the
/// scores recomputed, the value, score, query and key gradients), half the
/// tiles under a causal mask.
template <typename Operand, typename Gemm>
double getAttentionCallUs(const RuntimeProduct &product, Operand operand,
                          Gemm gemm) {
  double heads = operand("batch") * operand("heads"), rows = operand("q_len"),
         keys = operand("kv_len"),
         features = (operand("head_dim") + operand("value_dim")) / 2;
  double products = product.kind == ProductKind::attention_forward ? 2.0 : 5.0;
  if (operand("causal") != 0)
    products /= 2;
  return gemm(rows, keys, features, heads * products);
}

/// Time of a product or fused linear call (CPU or CUDA runtime: the
/// machine model says at what rate); nothing for other callees.
std::optional<double> getKernelCallUs(func::CallOp call,
                                      const MachineModel &machine) {
  const RuntimeProduct *product = lookupRuntimeProduct(call.getCallee());
  if (!product)
    return std::nullopt;
  auto operand = [&](StringRef name) {
    return getConstant(call, product->getParamIndex(name));
  };
  double flopsPerUs = !product->suffix.empty() && machine.halfGemmFlopsPerUs > 0
                          ? machine.halfGemmFlopsPerUs
                          : machine.gemmFlopsPerUs;
  auto gemm = [&](double m, double n, double k, double products) {
    return machine.kernelOverheadUs + products * 2 * m * n * k / flopsPerUs;
  };
  // The epilogue of a fused linear layer streams its [m, n] output (and the
  // pre-activation or gradient next to it) once.
  auto epilogue = [&](double m, double n) {
    return 2 * m * n * 4 / machine.memoryBytesPerUs;
  };
  // The products' sizes (m, n, k): read only for the kinds that have them.
  auto sized = [&](double products) {
    return gemm(operand("m"), operand("n"), operand("k"), products);
  };
  // The gradient products a backward computes: dx and dw are optional (null
  // pointers).
  auto gradientProducts = [&] {
    double products = 0;
    for (StringRef name : {"dx", "dw"})
      if (!isNull(call.getOperand(product->getParamIndex(name))))
        ++products;
    return products;
  };
  switch (product->kind) {
  case ProductKind::sgemm:
  case ProductKind::widening_gemm:
    return sized(1);
  case ProductKind::sgemm_batched:
  case ProductKind::widening_gemm_batched:
    return sized(operand("batch"));
  case ProductKind::linear_forward:
    return sized(1) + epilogue(operand("m"), operand("n"));
  case ProductKind::linear_backward:
    return sized(gradientProducts()) + epilogue(operand("m"), operand("n"));
  case ProductKind::attention_forward:
  case ProductKind::attention_backward:
    return getAttentionCallUs(*product, operand, gemm);
  case ProductKind::cross_entropy_forward:
  case ProductKind::cross_entropy_backward: {
    // Memory-bound: the forward streams the logits once, the backward reads
    // them and writes their gradient.
    double bytes =
        operand("rows") * operand("classes") *
        (product->suffix.empty() ? 4 : 2) *
        (product->kind == ProductKind::cross_entropy_forward ? 1 : 2);
    return machine.kernelOverheadUs + bytes / machine.memoryBytesPerUs;
  }
  case ProductKind::linear_cross_entropy: {
    // Per chunk of rows: the logits' product, the gradients' (dx, dw
    // optional), and the loss's three passes over the chunk's logits.
    double rows = operand("rows"), classes = operand("classes"),
           chunks = std::ceil(rows / std::max(1.0, operand("chunk_rows")));
    return gemm(rows, classes, operand("k"), 1 + gradientProducts()) +
           (chunks * 4 - 1) * machine.kernelOverheadUs +
           3 * rows * classes * 4 / machine.memoryBytesPerUs;
  }
  case ProductKind::grouped_matmul:
  case ProductKind::grouped_matmul_weight_grad:
    // Each row is in one group at most: one product's work over all rows
    // (the weights' gradient reduces over them), whatever the routing.
    return gemm(operand("rows"), operand("n"), operand("k"), 1);
  }
  return std::nullopt;
}

/// Whether `op` computes on pinned host memory only (an offloaded update).
bool isHostKernel(linalg::LinalgOp op) {
  return buffersOnHost(op->getOperands()).value_or(false);
}

/// An offloaded update's loop on the host: the bytes it streams.
double getHostUs(linalg::LinalgOp op, const MachineModel &machine) {
  double bytes = 0;
  for (Value operand : op->getOperands())
    bytes += getBufferBytes(operand);
  return machine.hostMemoryBytesPerUs > 0 ? bytes / machine.hostMemoryBytesPerUs
                                          : 0;
}

/// The replay's clocks.
struct Replay {
  Replay(const MachineModel *machine, DeviceMesh mesh,
         SymbolTableCollection *symbols)
      : machine(machine), mesh(std::move(mesh)), symbols(symbols) {}

  const MachineModel *machine;
  DeviceMesh mesh;
  /// The module's functions by name, looked up once per callee.
  SymbolTableCollection *symbols;
  double now = 0, linkFreeAt = 0, replicaLinkFreeAt = 0;
  /// A request's transfer: when the link is done with it, and the bytes a
  /// wait still copies where transfers need the CPU.
  struct InFlight {
    double doneAt = 0;
    int64_t bytes = 0;
  };
  DenseMap<Value, InFlight> inFlight;
  StepCost cost;

  void run(Block &block) {
    for (Operation &op : block)
      step(op);
  }

  void compute(double us) {
    now += us;
    cost.computeUs += us;
  }

  /// Time the compute stream spends in order on a copy to or from pinned
  /// host memory, or the host on an offloaded update (after every device
  /// op was issued: counted in full, not overlapped).
  void serial(double us) {
    now += us;
    cost.communicationUs += us;
    cost.exposedUs += us;
  }

  /// An expert exchange: blocking, on the link after what is queued
  /// there. Under balanced routing a rank receives as many rows as it
  /// dispatches (a combine's buffer holds the group's worst case), and 1/N
  /// of them stay on the rank.
  void exchangeRows(const ExpertExchange &exchange) {
    double group = double(std::max<int64_t>(1, mesh.expertGroup));
    double bytes = exchange.routed ? exchange.bytes / group : exchange.bytes;
    double sent = bytes * (group - 1) / group;
    if (sent <= 0 || machine->linkBytesPerUs <= 0)
      return;
    double transfer = machine->linkLatencyUs + sent / machine->linkBytesPerUs;
    linkFreeAt = std::max(now, linkFreeAt) + transfer;
    cost.communicationUs += transfer;
    cost.exposedUs += linkFreeAt - now;
    now = linkFreeAt;
  }

  void step(Operation &op) {
    if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op)) {
      if (isHostKernel(linalgOp))
        return serial(getHostUs(linalgOp, *machine));
      return compute(getLinalgUs(linalgOp, *machine));
    }
    if (auto copy = dyn_cast<memref::CopyOp>(op))
      return compute(2.0 * getBufferBytes(copy.getSource()) /
                     machine->memoryBytesPerUs);
    if (auto call = dyn_cast<func::CallOp>(op)) {
      if (std::optional<double> us = getKernelCallUs(call, *machine)) {
        cost.productUs += *us;
        return compute(*us);
      }
      // A region function (zest-outline-regions: a block's forward or
      // backward) costs what its body does, at every call.
      auto callee = symbols->lookupNearestSymbolFrom<func::FuncOp>(
          call, call.getCalleeAttr());
      if (callee && !callee.isExternal())
        return run(callee.getBody().front());
      if (std::optional<Collective> collective = matchCollective(call, mesh)) {
        // Between replica groups on the replica link if there is one, as
        // the runtime's ZEST_REPLICA_LINK.
        bool replica =
            zest_group_spans_replicas(collective->group, mesh.replicas) &&
            machine->replicaLinkBytesPerUs > 0;
        double bytesPerUs =
            replica ? machine->replicaLinkBytesPerUs : machine->linkBytesPerUs;
        double latencyUs =
            replica ? machine->replicaLinkLatencyUs : machine->linkLatencyUs;
        double &freeAt = replica ? replicaLinkFreeAt : linkFreeAt;
        double transfer =
            collective->sentPerRank == 0 || bytesPerUs == 0
                ? 0
                : latencyUs + collective->sentPerRank / bytesPerUs;
        double begin = std::max(now, freeAt);
        freeAt = begin + transfer;
        cost.communicationUs += transfer;
        inFlight[call.getResult(0)] = {freeAt, collective->sentPerRank};
        return;
      }
      if (std::optional<ExpertExchange> exchange = matchExpertExchange(call))
        return exchangeRows(*exchange);
      if (call.getCallee() == "zest_copy_to_device_async" ||
          call.getCallee() == "zest_copy_to_host_start")
        return serial(machine->hostLinkBytesPerUs > 0
                          ? getConstant(call, 2) / machine->hostLinkBytesPerUs
                          : 0);
      if (call.getCallee() == "zest_wait" && call.getNumOperands() == 1) {
        InFlight request = inFlight.lookup(call.getOperand(0));
        double done = request.doneAt;
        if (machine->waitCopyBytesPerUs > 0) {
          double copy = request.bytes / machine->waitCopyBytesPerUs;
          cost.communicationUs += copy;
          done = std::max(done, now + copy);
        }
        if (done > now) {
          cost.exposedUs += done - now;
          now = done;
        }
      }
      return;
    }
    // Branches (gradient clipping): the costlier one.
    if (op.getNumRegions() == 0)
      return;
    Replay longest = *this;
    for (Region &region : op.getRegions()) {
      if (region.empty())
        continue;
      Replay branch = *this;
      branch.run(region.front());
      if (branch.now > longest.now)
        longest = branch;
    }
    now = longest.now;
    linkFreeAt = longest.linkFreeAt;
    replicaLinkFreeAt = longest.replicaLinkFreeAt;
    inFlight = longest.inFlight;
    cost = longest.cost;
  }
};

} // namespace

StepCost mlir::zest::estimateStepCost(func::FuncOp func,
                                      const MachineModel &machine,
                                      const DeviceMesh &mesh) {
  SymbolTableCollection symbols;
  Replay replay(&machine, mesh, &symbols);
  for (Block &block : func.getBody())
    replay.run(block);
  replay.cost.stepUs = replay.now;
  return replay.cost;
}
