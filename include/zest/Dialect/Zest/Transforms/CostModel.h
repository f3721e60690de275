//===- CostModel.h - Predicted step time of a lowered step ------*- C++ -*-===//
//
// A step after bufferization is a straight line of kernels (linalg ops on
// buffers, BLAS calls) and collective starts and waits: replayed on a
// machine description, it gives the step's compute time, its communication
// time and how much of that the schedule leaves exposed.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_DIALECT_ZEST_TRANSFORMS_COSTMODEL_H
#define ZEST_DIALECT_ZEST_TRANSFORMS_COSTMODEL_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/BuiltinOps.h"
#include "zest_runtime.h"

#include <optional>
#include <string>

namespace mlir::zest {

/// The ranks of a job: `replicas x shards` (hybrid sharding's mesh; one
/// replica otherwise), as the runtime's zest_set_mesh arranges them.
struct DeviceMesh {
  int64_t replicas = 1, shards = 1;
  /// Expert parallelism: the ranks of an expert group (1 without).
  int64_t expertGroup = 1;
  int64_t getWorldSize() const { return replicas * shards; }
  /// The ranks of a runtime group (`zest_group_t`); 0 for an unknown one.
  int64_t getGroupSize(int64_t group) const;
};

/// The mesh the module's units are laid out for (1 x 1 without units).
DeviceMesh getModuleMesh(ModuleOp module);

/// One collective a lowered step starts (a `zest_*_start` runtime call), as
/// the runtime counts it: each rank sends and receives what a ring over the
/// collective's G ranks moves, G - 1 shards for gathers and reduce-scatters,
/// 2 (G - 1) / G of the buffer for all-reduces.
struct Collective {
  std::string kind; // all_gather, reduce_scatter, all_reduce
  std::string tag;  // the unit (or what else the runtime names it)
  zest_group_t group = ZEST_GROUP_WORLD;
  int64_t bytes = 0; // the shard for gathers and reduce-scatters
  int64_t sentPerRank = 0, receivedPerRank = 0;
};

/// The report's name of a runtime group: world, shard or replica.
llvm::StringRef getGroupName(zest_group_t group);

/// The collective `call` starts, if it starts one.
std::optional<Collective> matchCollective(func::CallOp call,
                                          const DeviceMesh &mesh);

/// The ranks the module's units are laid out for (1 without units).
int64_t getModuleWorldSize(ModuleOp module);

/// What a machine does per microsecond. Presets: `cpu` (one core of this
/// project's 2-core AMD EPYC VM with OpenBLAS; its link is shared memory)
/// and `h100-nvlink` (one GPU of an 8 x H100 SXM node, NCCL over NVLink).
struct MachineModel {
  std::string name;
  double gemmFlopsPerUs = 0;   // dense products (BLAS, tensor cores)
  double vectorFlopsPerUs = 0; // elementwise and reductions
  double memoryBytesPerUs = 0; // what an elementwise kernel streams
  double kernelOverheadUs = 0; // per kernel call or launch
  double linkBytesPerUs = 0;   // per rank, like ZEST_LINK (0: none)
  double linkLatencyUs = 0;
  /// Transfers that only progress inside waits (MPI without a progress
  /// thread, through shared memory): bytes the CPU copies per us once a
  /// wait is entered. 0: transfers progress on their own (NCCL's stream).
  double waitCopyBytesPerUs = 0;
  /// Between the replica groups of a hybrid mesh (across nodes), like
  /// ZEST_REPLICA_LINK: a link of its own, with its own queue. 0: those
  /// collectives use the link above.
  double replicaLinkBytesPerUs = 0;
  double replicaLinkLatencyUs = 0;
  /// Offload: copies between device and pinned host memory (PCIe), and
  /// what the host's optimizer update streams.
  double hostLinkBytesPerUs = 0;
  double hostMemoryBytesPerUs = 0;
  /// Products of 16-bit (bf16, f16) operands: tensor cores run them at
  /// about twice the f32 (TF32) rate. 0: gemmFlopsPerUs (the CPU widens
  /// them and runs sgemm).
  double halfGemmFlopsPerUs = 0;
  /// The hardware's peaks, against which a GPU profile says how close each
  /// kernel came (the rates above are what kernels reach in practice). 0:
  /// the rate above.
  double peakMemoryBytesPerUs = 0;
  double peakVectorFlopsPerUs = 0;
  double peakGemmFlopsPerUs = 0;
  double peakHalfGemmFlopsPerUs = 0;
};

/// One of expert parallelism's exchanges (a zest_expert_* call) and the
/// bytes it hands the link per rank: the row counts or the rows dispatched
/// (known), or for a combine at most the rows its experts received (their
/// number depends on the routing: `routed`).
struct ExpertExchange {
  int64_t bytes = 0;
  bool routed = false;
};
/// `call` as an expert exchange; nothing for other calls.
std::optional<ExpertExchange> matchExpertExchange(func::CallOp call);

/// What one run of a kernel moves and computes.
struct KernelWork {
  int64_t bytesRead = 0, bytesWritten = 0, flops = 0;
  KernelWork &operator+=(const KernelWork &other) {
    bytesRead += other.bytesRead;
    bytesWritten += other.bytesWritten;
    flops += other.flops;
    return *this;
  }
};

/// The work of a linalg op on buffers: the bytes of its operands (an init
/// its body reads counts as read and written), its iterations times the ops
/// of its body; nothing for dynamic shapes.
std::optional<KernelWork> getLinalgWork(linalg::LinalgOp op);
/// The roofline time of `work` on `machine`'s elementwise rates, launch
/// included: what the cost model predicts for a kernel.
double getKernelUs(const KernelWork &work, const MachineModel &machine);

/// The preset `name`, nothing if there is none.
std::optional<MachineModel> lookupMachine(llvm::StringRef name);
/// The preset `name` with its link replaced by `link` ("<GB/s>,<latency
/// us>", as ZEST_LINK) and its link between replica groups by
/// `replicaLink` (as ZEST_REPLICA_LINK), each unless empty; nothing, with
/// `error` set, if one is not understood.
std::optional<MachineModel> getMachineModel(llvm::StringRef name,
                                            llvm::StringRef link,
                                            llvm::StringRef replicaLink,
                                            std::string &error);

/// One call of a step on a machine: compute on one stream, collectives
/// serialized on one link from their start, each wait blocking until its
/// transfer is done (the runtime's modeled link, ZEST_LINK) and, where
/// transfers need the CPU, until the wait has copied it.
struct StepCost {
  double computeUs = 0;       // kernels
  double productUs = 0;       // of which products and fused linear layers
  double communicationUs = 0; // transfers, overlapped or not
  double exposedUs = 0;       // time blocked in waits
  double stepUs = 0;          // compute + exposed
};

/// Replays `func` (bufferized, collectives lowered to runtime calls) on
/// `machine`.
StepCost estimateStepCost(func::FuncOp func, const MachineModel &machine,
                          const DeviceMesh &mesh);

} // namespace mlir::zest

#endif // ZEST_DIALECT_ZEST_TRANSFORMS_COSTMODEL_H
