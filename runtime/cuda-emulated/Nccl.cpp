//===- Nccl.cpp - NCCL's collectives on the emulated GPU, over MPI --------===//
//
// The NCCL calls Zest's device runtime makes, on MPI communicators. A
// collective checks that its buffers are device memory, waits for what its
// stream waits for, copies its input to host staging (16-bit floats widened
// to f32 when reduced) and starts MPI's nonblocking collective; it completes
// when a query or a wait on its stream's events finds the MPI request done,
// and only then is its result copied into the device buffer. So a
// collective's result is visible exactly where a GPU's stream order makes
// it visible, and a rank that never arrives leaves its peers' queries
// "not ready", as NCCL's kernels would spin. ncclSend and ncclRecv (expert
// parallelism's row exchanges) are MPI's nonblocking point-to-point
// transfers, those of one ncclGroupStart/End started together.
//
//===----------------------------------------------------------------------===//

#include "../common/HalfFloat.h"
#include "DeviceMemory.h"
#include "Streams.h"

// The C bindings only.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <nccl.h>

#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <unistd.h>
#include <vector>

using namespace zest::emulated;

struct ncclComm {
  MPI_Comm mpi = MPI_COMM_NULL;
  int rank = 0, size = 1;
};

namespace {

std::string lastError;

ncclResult_t failWith(ncclResult_t result, const std::string &message) {
  lastError = message;
  return result;
}

size_t typeBytes(ncclDataType_t type) {
  switch (type) {
  case ncclInt8:
  case ncclUint8:
    return 1;
  case ncclFloat16:
  case ncclBfloat16:
    return 2;
  case ncclInt32:
  case ncclUint32:
  case ncclFloat32:
    return 4;
  default:
    return 8;
  }
}

bool isHalf(ncclDataType_t type) {
  return type == ncclFloat16 || type == ncclBfloat16;
}

/// MPI's type for reducing `type` (16-bit floats are reduced as f32).
MPI_Datatype reductionType(ncclDataType_t type) {
  switch (type) {
  case ncclInt8:
    return MPI_INT8_T;
  case ncclUint8:
    return MPI_UINT8_T;
  case ncclInt32:
    return MPI_INT32_T;
  case ncclUint32:
    return MPI_UINT32_T;
  case ncclInt64:
    return MPI_INT64_T;
  case ncclUint64:
    return MPI_UINT64_T;
  case ncclFloat64:
    return MPI_DOUBLE;
  default:
    return MPI_FLOAT;
  }
}

/// `count` elements of device memory at `device`, on the host (widened).
std::vector<char> stageIn(const void *device, size_t count, ncclDataType_t type,
                          bool widen) {
  AccessScope scope;
  if (!widen || !isHalf(type)) {
    auto bytes = static_cast<const char *>(device);
    return std::vector<char>(bytes, bytes + count * typeBytes(type));
  }
  std::vector<char> staged(count * sizeof(float));
  auto *out = reinterpret_cast<float *>(staged.data());
  auto *in = static_cast<const uint16_t *>(device);
  for (size_t i = 0; i < count; ++i)
    out[i] = type == ncclBfloat16 ? zest::rt::bf16ToFloat(in[i])
                                  : zest::rt::f16ToFloat(in[i]);
  return staged;
}

/// Writes staged `count` elements to `device`, divided by `divisor` (an
/// average) and narrowed back to `type`.
void stageOut(const std::vector<char> &staged, void *device, size_t count,
              ncclDataType_t type, bool widened, int divisor) {
  AccessScope scope;
  bool isFloat = widened || type == ncclFloat32 || type == ncclFloat64;
  if (!widened && (divisor == 1 || !isFloat)) {
    std::memcpy(device, staged.data(), count * typeBytes(type));
    return;
  }
  if (type == ncclFloat64) {
    auto *in = reinterpret_cast<const double *>(staged.data());
    auto *out = static_cast<double *>(device);
    for (size_t i = 0; i < count; ++i)
      out[i] = in[i] / divisor;
    return;
  }
  auto *in = reinterpret_cast<const float *>(staged.data());
  for (size_t i = 0; i < count; ++i) {
    float value = in[i] / float(divisor);
    if (type == ncclFloat32)
      static_cast<float *>(device)[i] = value;
    else
      static_cast<uint16_t *>(device)[i] = type == ncclBfloat16
                                               ? zest::rt::floatToBf16(value)
                                               : zest::rt::floatToF16(value);
  }
}

/// One collective of a stream: started (its input staged, MPI's
/// nonblocking collective begun) when the stream reaches it, complete (its
/// result copied to device memory) when MPI's request is.
class Collective : public StreamOp {
public:
  MPI_Request request = MPI_REQUEST_NULL;
  std::vector<char> send, recv;
  std::function<void(Collective &)> start, finish;

  bool advance() override {
    if (!started) {
      started = true;
      start(*this);
    }
    int flag = 0;
    MPI_Test(&request, &flag, MPI_STATUS_IGNORE);
    if (flag)
      finish(*this);
    return flag != 0;
  }

private:
  bool started = false;
};

/// Checks a collective's arguments and queues it on `stream`.
ncclResult_t enqueueCollective(const char *what, ncclComm_t comm,
                               cudaStream_t stream, const void *send,
                               size_t sendBytes, void *recv, size_t recvBytes,
                               std::function<void(Collective &)> start,
                               std::function<void(Collective &)> finish) {
  if (sendBytes > size_t(INT32_MAX) || recvBytes > size_t(INT32_MAX))
    return failWith(ncclInvalidUsage, std::string(what) +
                                          ": the emulated NCCL moves at most "
                                          "2 GiB per collective");
  requireDevice(send, sendBytes, std::string(what) + "'s send buffer");
  requireDevice(recv, recvBytes, std::string(what) + "'s receive buffer");
  // Made anew at every launch of a graph that captured it.
  enqueue(
      stream,
      [start = std::move(start), finish = std::move(finish)] {
        auto collective = std::make_shared<Collective>();
        collective->start = start;
        collective->finish = finish;
        return collective;
      },
      what);
  return ncclSuccess;
}

/// A sum or an average of `comm`'s ranks: MPI sums (16-bit floats widened
/// to f32), and the result written to `recv` is divided by the ranks for
/// an average and narrowed back.
struct Reduction {
  MPI_Op op = MPI_SUM;
  std::function<void(Collective &)> finish;
};

Reduction getReduction(ncclRedOp_t op, ncclComm_t comm, void *recv,
                       size_t count, ncclDataType_t type, const char *what) {
  if (op != ncclSum && op != ncclAvg)
    deviceError(std::string(what) +
                ": the emulated NCCL reduces with sum and avg only");
  int divisor = op == ncclAvg ? comm->size : 1;
  return {MPI_SUM, [=](Collective &c) {
            stageOut(c.recv, recv, count, type, isHalf(type), divisor);
          }};
}

/// Point-to-point transfers (ncclSend, ncclRecv) fused by ncclGroupStart
/// and ncclGroupEnd: one operation of their stream that starts every
/// transfer at once (two ranks that both receive before they send must not
/// wait on each other, as NCCL's fused kernel does not) and completes when
/// all have; what is received reaches device memory then. Transfers between
/// two ranks match in the order each lists them (one MPI tag).
class PointToPoint : public StreamOp {
public:
  struct Transfer {
    bool send;
    void *device;
    size_t bytes;
    int peer;
    MPI_Comm comm;
  };
  explicit PointToPoint(std::vector<Transfer> transfers)
      : transfers(std::move(transfers)) {}

  bool advance() override {
    if (requests.empty())
      start();
    int done = 0;
    MPI_Testall(int(requests.size()), requests.data(), &done,
                MPI_STATUSES_IGNORE);
    if (!done)
      return false;
    AccessScope scope;
    for (size_t i = 0; i < transfers.size(); ++i)
      if (!transfers[i].send)
        std::memcpy(transfers[i].device, staged[i].data(), transfers[i].bytes);
    return true;
  }

private:
  static constexpr int kTag = 7;
  void start() {
    staged.resize(transfers.size());
    for (size_t i = 0; i < transfers.size(); ++i) {
      const Transfer &t = transfers[i];
      requests.push_back(MPI_REQUEST_NULL);
      if (t.send) {
        staged[i] = stageIn(t.device, t.bytes, ncclUint8, false);
        MPI_Isend(staged[i].data(), int(t.bytes), MPI_BYTE, t.peer, kTag,
                  t.comm, &requests.back());
      } else {
        staged[i].resize(t.bytes);
        MPI_Irecv(staged[i].data(), int(t.bytes), MPI_BYTE, t.peer, kTag,
                  t.comm, &requests.back());
      }
    }
  }

  std::vector<Transfer> transfers;
  std::vector<std::vector<char>> staged;
  std::vector<MPI_Request> requests;
};

/// The point-to-point transfers of the open ncclGroupStart, and the stream
/// they go to.
struct Group {
  int depth = 0;
  cudaStream_t stream = nullptr;
  std::vector<PointToPoint::Transfer> transfers;
} group;

void enqueuePointToPoint(cudaStream_t stream,
                         std::vector<PointToPoint::Transfer> transfers) {
  enqueue(
      stream, [transfers] { return std::make_shared<PointToPoint>(transfers); },
      "ncclSend/ncclRecv");
}

/// Checks one transfer and queues it, or adds it to the open group.
ncclResult_t pointToPoint(const char *what, bool send, const void *buffer,
                          size_t count, ncclDataType_t type, int peer,
                          ncclComm_t comm, cudaStream_t stream) {
  if (!comm)
    return failWith(ncclInvalidArgument, std::string(what) + ": no comm");
  if (peer < 0 || peer >= comm->size)
    return failWith(ncclInvalidArgument,
                    std::string(what) + ": peer " + std::to_string(peer) +
                        " is not a rank of the communicator");
  size_t bytes = count * typeBytes(type);
  if (bytes > size_t(INT32_MAX))
    return failWith(ncclInvalidUsage, std::string(what) +
                                          ": the emulated NCCL moves at most "
                                          "2 GiB per transfer");
  requireDevice(buffer, bytes, std::string(what) + "'s buffer");
  PointToPoint::Transfer transfer{send, const_cast<void *>(buffer), bytes, peer,
                                  comm->mpi};
  if (group.depth == 0) {
    enqueuePointToPoint(stream, {transfer});
    return ncclSuccess;
  }
  if (!group.transfers.empty() && group.stream != stream)
    return failWith(ncclInvalidUsage, std::string(what) +
                                          ": the transfers of one group go to "
                                          "different streams");
  group.stream = stream;
  group.transfers.push_back(transfer);
  return ncclSuccess;
}

} // namespace

extern "C" {

ncclResult_t ncclGroupStart() {
  ++group.depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (group.depth == 0)
    return failWith(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--group.depth == 0 && !group.transfers.empty()) {
    enqueuePointToPoint(group.stream, std::move(group.transfers));
    group.transfers.clear();
  }
  return ncclSuccess;
}

ncclResult_t ncclSend(const void *send, size_t count, ncclDataType_t type,
                      int peer, ncclComm_t comm, cudaStream_t stream) {
  return pointToPoint("ncclSend", true, send, count, type, peer, comm, stream);
}

ncclResult_t ncclRecv(void *recv, size_t count, ncclDataType_t type, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return pointToPoint("ncclRecv", false, recv, count, type, peer, comm, stream);
}

const char *ncclGetErrorString(ncclResult_t result) {
  return result == ncclSuccess ? "no error (emulated NCCL)"
                               : "error (emulated NCCL)";
}

const char *ncclGetLastError(ncclComm_t) { return lastError.c_str(); }

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  std::memset(id, 0, sizeof(*id));
  std::snprintf(id->internal, sizeof(id->internal), "zest-emulated-nccl:%d",
                int(getpid()));
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id,
                              int rank) {
  int worldSize = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &worldSize);
  if (nranks != worldSize)
    return failWith(ncclInvalidUsage,
                    "the emulated NCCL bootstraps communicators of all ranks "
                    "only (split them for groups)");
  // Every rank must hold the id rank 0 made: compare them.
  std::vector<char> ids(size_t(nranks) * sizeof(id));
  MPI_Allgather(&id, sizeof(id), MPI_BYTE, ids.data(), sizeof(id), MPI_BYTE,
                MPI_COMM_WORLD);
  for (int r = 0; r < nranks; ++r)
    if (std::memcmp(ids.data() + r * sizeof(id), ids.data(), sizeof(id)) ||
        std::strncmp(id.internal, "zest-emulated-nccl:", 19))
      return failWith(ncclInvalidArgument,
                      "ranks initialize a communicator with different unique "
                      "ids (was ncclGetUniqueId's id broadcast?)");
  *comm = new ncclComm;
  MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &(*comm)->mpi);
  (*comm)->rank = rank, (*comm)->size = nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key,
                           ncclComm_t *newcomm, ncclConfig_t *) {
  MPI_Comm split;
  MPI_Comm_split(comm->mpi, color < 0 ? MPI_UNDEFINED : color, key, &split);
  if (split == MPI_COMM_NULL) {
    *newcomm = nullptr;
    return ncclSuccess;
  }
  *newcomm = new ncclComm;
  (*newcomm)->mpi = split;
  MPI_Comm_rank(split, &(*newcomm)->rank);
  MPI_Comm_size(split, &(*newcomm)->size);
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm) {
    MPI_Comm_free(&comm->mpi);
    delete comm;
  }
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  delete comm; // the job is ending: MPI's communicators go with it
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count) {
  *count = comm->size;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank) {
  *rank = comm->rank;
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t *asyncError) {
  *asyncError = ncclSuccess;
  return ncclSuccess;
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t count,
                           ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t stream) {
  if (!comm)
    return failWith(ncclInvalidArgument, "ncclAllGather: no comm");
  size_t bytes = count * typeBytes(type);
  return enqueueCollective(
      "ncclAllGather", comm, stream, send, bytes, recv, bytes * comm->size,
      [=](Collective &c) {
        c.send = stageIn(send, count, type, false);
        c.recv.resize(bytes * comm->size);
        MPI_Iallgather(c.send.data(), int(bytes), MPI_BYTE, c.recv.data(),
                       int(bytes), MPI_BYTE, comm->mpi, &c.request);
      },
      [=](Collective &c) {
        stageOut(c.recv, recv, count * comm->size, type, false, 1);
      });
}

ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t count,
                               ncclDataType_t type, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t stream) {
  size_t bytes = count * typeBytes(type);
  if (!comm)
    return failWith(ncclInvalidArgument, "ncclReduceScatter: no comm");
  Reduction reduction =
      getReduction(op, comm, recv, count, type, "ncclReduceScatter");
  MPI_Op mpiOp = reduction.op;
  return enqueueCollective(
      "ncclReduceScatter", comm, stream, send, bytes * comm->size, recv, bytes,
      [=](Collective &c) {
        c.send = stageIn(send, count * comm->size, type, true);
        c.recv.resize(c.send.size() / comm->size);
        MPI_Ireduce_scatter_block(c.send.data(), c.recv.data(), int(count),
                                  reductionType(type), mpiOp, comm->mpi,
                                  &c.request);
      },
      reduction.finish);
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count,
                           ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  size_t bytes = count * typeBytes(type);
  if (!comm)
    return failWith(ncclInvalidArgument, "ncclAllReduce: no comm");
  Reduction reduction =
      getReduction(op, comm, recv, count, type, "ncclAllReduce");
  MPI_Op mpiOp = reduction.op;
  return enqueueCollective(
      "ncclAllReduce", comm, stream, send, bytes, recv, bytes,
      [=](Collective &c) {
        c.send = stageIn(send, count, type, true);
        c.recv.resize(c.send.size());
        MPI_Iallreduce(c.send.data(), c.recv.data(), int(count),
                       reductionType(type), mpiOp, comm->mpi, &c.request);
      },
      reduction.finish);
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count,
                           ncclDataType_t type, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  if (!comm)
    return failWith(ncclInvalidArgument, "ncclBroadcast: no comm");
  size_t bytes = count * typeBytes(type);
  bool isRoot = comm->rank == root;
  return enqueueCollective(
      "ncclBroadcast", comm, stream, isRoot ? send : recv, bytes, recv, bytes,
      [=](Collective &c) {
        c.recv = isRoot ? stageIn(send, count, type, false)
                        : std::vector<char>(bytes);
        MPI_Ibcast(c.recv.data(), int(bytes), MPI_BYTE, root, comm->mpi,
                   &c.request);
      },
      [=](Collective &c) { stageOut(c.recv, recv, count, type, false, 1); });
}

} // extern "C"
