//===- NcclBackend.cpp - Zest communication backend on NCCL ---------------===//
//
// Collectives on device buffers, one GPU per rank. A collective's start
// records an event on the compute stream and makes the communication stream
// wait for it (so the collective reads what the kernels before it wrote),
// enqueues the NCCL call and records a completion event; its wait makes the
// compute stream wait on that event: no host synchronization. Communicators
// are bootstrapped over MPI (rank 0 makes the unique id, MPI broadcasts it);
// the mesh's shard and replica groups and the expert groups are
// ncclCommSplit sub-communicators. Expert parallelism's row exchanges are
// ncclSend/ncclRecv fused in one ncclGroupStart/End.
//
//===----------------------------------------------------------------------===//

#include "Device.h"
#include "KernelTimes.h"

#include <nccl.h>

#include <string>
#include <vector>

using namespace zest::rt;
using namespace zest::rt::cuda;

namespace {

ncclDataType_t ncclType(zest_dtype_t dtype) {
  switch (dtype) {
  case ZEST_F32:
    return ncclFloat32;
  case ZEST_F64:
    return ncclFloat64;
  case ZEST_F16:
    return ncclFloat16;
  case ZEST_BF16:
    return ncclBfloat16;
  case ZEST_I32:
    return ncclInt32;
  case ZEST_I64:
    return ncclInt64;
  case ZEST_I8:
    return ncclInt8;
  case ZEST_U8:
    return ncclUint8;
  }
  fatal("no NCCL type for Zest dtype " + std::to_string(int(dtype)));
}

/// Completion events, reused: a collective takes one and gives it back.
class EventPool {
public:
  cudaEvent_t take(const char *what) {
    if (free.empty()) {
      cudaEvent_t event;
      checkCuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), what);
      return event;
    }
    cudaEvent_t event = free.back();
    free.pop_back();
    return event;
  }
  void give(cudaEvent_t event) { free.push_back(event); }
  ~EventPool() {
    for (cudaEvent_t event : free)
      cudaEventDestroy(event);
  }

private:
  std::vector<cudaEvent_t> free;
};

/// A collective enqueued on the communication stream; complete for the host
/// as soon as the compute stream waits on it (the host waits for the GPU
/// only where it must: cuda::synchronize, with the timeout).
class NcclOp : public PendingOp {
public:
  NcclOp(EventPool &pool, cudaEvent_t done) : pool(pool), done(done) {}
  ~NcclOp() override { pool.give(done); }
  bool test() override {
    checkCuda(cudaStreamWaitEvent(streams.compute, done, 0), "a wait");
    return true;
  }

private:
  EventPool &pool;
  cudaEvent_t done;
};

/// Complete from the start (a collective of one rank).
class DoneOp : public PendingOp {
public:
  bool test() override { return true; }
};

class NcclBackend : public DeviceBackend {
public:
  explicit NcclBackend(std::unique_ptr<Backend> bootstrap)
      : DeviceBackend(std::move(bootstrap)) {
    world = initCommunicator(mpi.get());
    groups[ZEST_GROUP_WORLD] = groups[ZEST_GROUP_SHARD] = world;
    // Until a mesh is set (1 x world) each rank is its own replica group:
    // no communicator (see local()); likewise the expert groups (one of
    // all ranks, each rank its own replica) until they are set.
    groups[ZEST_GROUP_REPLICA] = nullptr;
    groups[ZEST_GROUP_EXPERT] = world;
    groups[ZEST_GROUP_EXPERT_REPLICA] = nullptr;
    streams.checkAsyncErrors = [this] { checkAsyncErrors(); };
  }

  const char *name() const override { return "cuda-nccl"; }

  void setMesh(int replicas, int shards) override {
    mpi->setMesh(replicas, shards); // checks the shape
    splitConsecutive(shards, ZEST_GROUP_SHARD, ZEST_GROUP_REPLICA, owned);
  }

  void setExpertGroups(int size) override {
    mpi->setExpertGroups(size); // checks the size; the routing's counts
    splitConsecutive(size, ZEST_GROUP_EXPERT, ZEST_GROUP_EXPERT_REPLICA,
                     ownedExpert);
  }

  int groupRank(zest_group_t group) const override {
    int value = 0;
    if (groups[group])
      ncclCommUserRank(groups[group], &value);
    return value;
  }

  int groupSize(zest_group_t group) const override {
    int value = 1;
    if (groups[group])
      ncclCommCount(groups[group], &value);
    return value;
  }

  std::unique_ptr<PendingOp> exchange(const std::vector<Transfer> &sends,
                                      const std::vector<Transfer> &recvs,
                                      zest_group_t group) override {
    ncclComm_t comm = groups[group];
    if (!comm) // a group of one rank: its blocks to itself, in order
      return localExchange(sends, recvs);
    return enqueue("exchange", [&](cudaStream_t stream) {
      ncclResult_t status = ncclGroupStart();
      // Empty blocks are skipped on both sides, which list the same sizes.
      for (const Transfer &recv : recvs)
        if (recv.bytes > 0 && status == ncclSuccess)
          status = ncclRecv(recv.data, size_t(recv.bytes), ncclUint8, recv.peer,
                            comm, stream);
      for (const Transfer &send : sends)
        if (send.bytes > 0 && status == ncclSuccess)
          status = ncclSend(send.data, size_t(send.bytes), ncclUint8, send.peer,
                            comm, stream);
      ncclResult_t ended = ncclGroupEnd();
      return status == ncclSuccess ? ended : status;
    });
  }

  std::unique_ptr<PendingOp> allGather(const void *send, void *recv,
                                       int64_t count, zest_dtype_t dtype,
                                       zest_group_t group) override {
    if (!groups[group])
      return local(send, recv, count, dtype);
    return enqueue("all_gather", [&](cudaStream_t stream) {
      return ncclAllGather(send, recv, size_t(count), ncclType(dtype),
                           groups[group], stream);
    });
  }
  std::unique_ptr<PendingOp> reduceScatter(const void *send, void *recv,
                                           int64_t count, zest_dtype_t dtype,
                                           zest_reduction_t op,
                                           zest_group_t group) override {
    if (!groups[group])
      return local(send, recv, count, dtype);
    return enqueue("reduce_scatter", [&](cudaStream_t stream) {
      return ncclReduceScatter(send, recv, size_t(count), ncclType(dtype),
                               reduction(op), groups[group], stream);
    });
  }
  std::unique_ptr<PendingOp> allReduce(const void *send, void *recv,
                                       int64_t count, zest_dtype_t dtype,
                                       zest_reduction_t op,
                                       zest_group_t group) override {
    if (!groups[group])
      return local(send, recv, count, dtype);
    return enqueue("all_reduce", [&](cudaStream_t stream) {
      return ncclAllReduce(send, recv, size_t(count), ncclType(dtype),
                           reduction(op), groups[group], stream);
    });
  }
  std::unique_ptr<PendingOp> broadcast(void *buffer, int64_t count,
                                       zest_dtype_t dtype, int root) override {
    return enqueue("broadcast", [&](cudaStream_t stream) {
      return ncclBroadcast(buffer, buffer, size_t(count), ncclType(dtype), root,
                           world, stream);
    });
  }
  [[noreturn]] void abort(int code) override {
    for (std::vector<ncclComm_t> *split : {&owned, &ownedExpert}) {
      for (ncclComm_t comm : *split)
        ncclCommAbort(comm);
      split->clear();
    }
    DeviceBackend::abort(code);
  }
  void finalize() override {
    synchronize(streams.communication, "the end");
    freeGroups(owned);
    freeGroups(ownedExpert);
    ncclCommDestroy(world);
    DeviceBackend::finalize();
  }

private:
  static ncclRedOp_t reduction(zest_reduction_t op) {
    return op == ZEST_AVG ? ncclAvg : ncclSum;
  }

  /// NCCL reports a failed peer or network asynchronously, per
  /// communicator: every rank that sees one aborts the job.
  void checkAsyncErrors() {
    for (ncclComm_t comm : groups) {
      ncclResult_t status = ncclSuccess;
      if (comm && ncclCommGetAsyncError(comm, &status) == ncclSuccess &&
          status != ncclSuccess && status != ncclInProgress)
        checkNccl(status, "a collective (asynchronous error)");
    }
  }

  void checkNccl(ncclResult_t status, const std::string &what) {
    if (status != ncclSuccess)
      fatal("NCCL error in " + what + " on rank " + std::to_string(rank()) +
            ": " + ncclGetErrorString(status) + " (" + ncclGetLastError(world) +
            ")");
  }

  /// Rank 0 makes the id, MPI (host memory) broadcasts it.
  ncclComm_t initCommunicator(Backend *bootstrap) {
    ncclUniqueId id;
    if (bootstrap->rank() == 0)
      checkNccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    std::unique_ptr<PendingOp> sent =
        bootstrap->broadcast(&id, sizeof(id), ZEST_U8, 0);
    while (!sent->test()) {
    }
    ncclComm_t comm;
    checkNccl(
        ncclCommInitRank(&comm, bootstrap->worldSize(), id, bootstrap->rank()),
        "ncclCommInitRank");
    return comm;
  }

  /// Groups of `size` consecutive ranks (`inner`) and the strided groups of
  /// the ranks at the same place in each (`across`), replacing those in
  /// `into`. A group of one rank needs no communicator, one of all ranks is
  /// the world's.
  void splitConsecutive(int size, zest_group_t inner, zest_group_t across,
                        std::vector<ncclComm_t> &into) {
    freeGroups(into);
    int r = rank();
    groups[inner] = size == worldSize() ? world
                    : size > 1          ? split(r / size, r, into)
                                        : nullptr;
    groups[across] = worldSize() > size ? split(r % size, r, into) : nullptr;
  }

  /// A sub-communicator of the world, kept in `into` to be freed.
  ncclComm_t split(int color, int key, std::vector<ncclComm_t> &into) {
    ncclComm_t comm;
    checkNccl(ncclCommSplit(world, color, key, &comm, nullptr),
              "ncclCommSplit");
    into.push_back(comm);
    return comm;
  }

  static void freeGroups(std::vector<ncclComm_t> &split) {
    for (ncclComm_t comm : split)
      ncclCommDestroy(comm);
    split.clear();
  }

  /// A collective over one rank: its result is its input (a sum or an
  /// average of one), copied in stream order unless in place.
  std::unique_ptr<PendingOp> local(const void *send, void *recv, int64_t count,
                                   zest_dtype_t dtype) {
    if (send != recv)
      checkCuda(cudaMemcpyAsync(recv, send,
                                size_t(count) * zest_dtype_bytes(dtype),
                                cudaMemcpyDeviceToDevice, streams.compute),
                "a collective of one rank");
    return std::make_unique<DoneOp>();
  }

  /// An exchange within a group of one rank: each non-empty send block is
  /// copied to the next non-empty receive block, as the blocks match.
  std::unique_ptr<PendingOp> localExchange(const std::vector<Transfer> &sends,
                                           const std::vector<Transfer> &recvs) {
    size_t next = 0;
    for (const Transfer &send : sends) {
      if (send.bytes <= 0)
        continue;
      while (next < recvs.size() && recvs[next].bytes <= 0)
        ++next;
      if (next == recvs.size() || recvs[next].bytes != send.bytes)
        fatal("a row exchange within one rank lists different blocks to "
              "send and to receive");
      checkCuda(cudaMemcpyAsync(recvs[next++].data, send.data,
                                size_t(send.bytes), cudaMemcpyDeviceToDevice,
                                streams.compute),
                "a row exchange within one rank");
    }
    return std::make_unique<DoneOp>();
  }

  template <typename Call>
  std::unique_ptr<PendingOp> enqueue(const char *what, Call call) {
    streamWaits(streams.communication, streams.compute, what);
    {
      TimedScope timed([&] { return std::string("nccl ") + what; },
                       streams.communication);
      checkNccl(call(streams.communication), what);
    }
    cudaEvent_t done = events.take(what);
    checkCuda(cudaEventRecord(done, streams.communication), what);
    return std::make_unique<NcclOp>(events, done);
  }

  EventPool events;
  ncclComm_t world = nullptr;
  ncclComm_t groups[ZEST_GROUP_EXPERT_REPLICA + 1] = {};
  /// The split groups: the mesh's, the expert groups'.
  std::vector<ncclComm_t> owned, ownedExpert;
};

} // namespace

std::unique_ptr<Backend> cuda::createNcclBackend(std::unique_ptr<Backend> mpi) {
  return std::make_unique<NcclBackend>(std::move(mpi));
}
