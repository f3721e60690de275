//===- MpiBackend.cpp - Zest communication backend on Open MPI ------------===//
//
// Non-blocking MPI collectives (MPI_Iallgather, MPI_Iallreduce, MPI_Ibcast,
// MPI_Ibarrier; reduce-scatter by pairwise exchange over MPI_Isend/Irecv)
// so the runtime can bound every wait with a timeout. Errors are returned
// (MPI_ERRORS_RETURN) and turned into a message naming the rank, the operation
// and the sizes, then the job is aborted. Averages are sums divided by the
// group's size on completion. Hybrid sharding's groups are MPI_Comm_split
// sub-communicators. 16-bit floats are reduced with user-defined operations
// (sum in float).
//
//===----------------------------------------------------------------------===//

#include "../common/Backend.h"
#include "../common/HalfFloat.h"

// The C API only: no Open MPI / MPICH C++ bindings (and their libraries).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

using namespace zest::rt;

namespace {

// 16-bit floats are summed in float (common/HalfFloat.h).
template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void sum16(void *in, void *inout, int *len, MPI_Datatype *) {
  auto *a = static_cast<uint16_t *>(in);
  auto *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = FromFloat(ToFloat(a[i]) + ToFloat(b[i]));
}

void divideInPlace(void *data, int64_t count, zest_dtype_t dtype, int divisor);

//===----------------------------------------------------------------------===//
// Pending operations
//===----------------------------------------------------------------------===//

class MpiBackend;

/// One non-blocking MPI request, optionally followed by an in-place division
/// of the result by the group's size (ZEST_AVG).
class MpiOp : public PendingOp {
public:
  MpiOp(MpiBackend &backend, MPI_Request request, std::string what,
        void *average = nullptr, int64_t count = 0,
        zest_dtype_t dtype = ZEST_F32, int divisor = 1)
      : backend(backend), request(request), what(std::move(what)),
        average(average), count(count), dtype(dtype), divisor(divisor) {}

  bool test() override;

private:
  void divide();

  MpiBackend &backend;
  MPI_Request request;
  std::string what;
  void *average;
  int64_t count;
  zest_dtype_t dtype;
  int divisor;
  bool done = false;
};

/// Several point-to-point requests completing together.
class MpiRequests : public PendingOp {
public:
  MpiRequests(MpiBackend &backend, std::string what)
      : what(std::move(what)), backend(backend) {}
  MPI_Request &add() { return requests.emplace_back(MPI_REQUEST_NULL); }
  bool test() override;

  std::string what;

private:
  MpiBackend &backend;
  std::vector<MPI_Request> requests;
};

/// The tag of exchange() messages: collectives have their own matching,
/// and nothing else sends point to point on the groups.
constexpr int kExchangeTag = 7;

/// Staging buffers kept for reuse: a buffer is touched once, when first
/// allocated, so a collective that reuses it faults no page.
class ScratchBuffers {
public:
  ~ScratchBuffers() {
    for (Scratch &buffer : buffers)
      std::free(buffer.data);
  }

  /// The smallest free buffer of at least `bytes`, or a new one.
  void *acquire(size_t bytes) {
    Scratch *best = nullptr;
    for (Scratch &buffer : buffers)
      if (!buffer.used && buffer.bytes >= bytes &&
          (!best || buffer.bytes < best->bytes))
        best = &buffer;
    if (!best)
      best = &buffers.emplace_back(Scratch{bytes, allocateTouched(bytes)});
    best->used = true;
    return best->data;
  }

  void release(void *data) {
    for (Scratch &buffer : buffers)
      if (buffer.data == data)
        buffer.used = false;
  }

private:
  struct Scratch {
    size_t bytes;
    void *data;
    bool used = false;
  };

  static void *allocateTouched(size_t bytes) {
    void *data = std::malloc(std::max<size_t>(bytes, 1));
    if (!data)
      fatal("out of memory for a " + std::to_string(bytes) +
            "-byte staging buffer");
    // Written page by page through a volatile pointer: a memset of zeros
    // after malloc may become calloc, which leaves fresh pages unmapped.
    auto *touch = static_cast<volatile char *>(data);
    for (size_t offset = 0; offset < bytes; offset += 4096)
      touch[offset] = 0;
    return data;
  }

  std::vector<Scratch> buffers;
};

/// Reduce-scatter by pairwise exchange: each rank sends every peer that
/// peer's block of its buffer and receives its own block from every peer
/// into staging buffers, then sums the blocks in rank order (the same
/// order on every rank: the result does not depend on who computes it).
/// libnbc's MPI_Ireduce_scatter_block reduces the whole buffer on one rank
/// and scatters it back: twice the traffic at 2 ranks, all the arithmetic on
/// one rank, and a temporary of twice the buffer per call which, carved
/// from a different place of the heap each step, faulted pages in late in
/// a run (Llama 160M at W=2: 827 pages in the 10th step of one run in
/// three, in its 375 MB temporary for the embeddings' gradients).
class PairwiseReduceScatter : public PendingOp {
public:
  PairwiseReduceScatter(MpiBackend &backend, const void *send, void *recv,
                        int64_t count, zest_dtype_t dtype, bool average,
                        MPI_Comm comm, std::string what);
  ~PairwiseReduceScatter() override;

  bool test() override;

private:
  /// Block `rank` of the sum's terms: this rank's own, or a peer's staged.
  const void *term(int rank) const;

  MpiBackend &backend;
  const char *send;
  void *recv;
  int64_t count;
  zest_dtype_t dtype;
  bool average;
  int rank = 0, size = 1;
  size_t blockBytes;
  std::string what;
  std::vector<MPI_Request> requests;
  /// Per rank: its block as received (null for this rank).
  std::vector<void *> staged;
  /// This rank's own block, copied where `recv` overlaps the buffer.
  void *ownCopy = nullptr;
  bool done = false;
};

class MpiBackend : public Backend {
public:
  MpiBackend(int *argc, char ***argv, bool progressThread) {
    int initialized = 0, provided = MPI_THREAD_SINGLE;
    MPI_Initialized(&initialized);
    if (!initialized)
      MPI_Init_thread(argc, argv,
                      progressThread ? MPI_THREAD_SERIALIZED
                                     : MPI_THREAD_FUNNELED,
                      &provided);
    else
      MPI_Query_thread(&provided);
    serialized = provided >= MPI_THREAD_SERIALIZED;
    comm = MPI_COMM_WORLD;
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm, &rankId);
    MPI_Comm_size(comm, &size);
    groups[ZEST_GROUP_WORLD] = comm;
    // Until a mesh is set (1 x world) each rank is its own replica group.
    groups[ZEST_GROUP_SHARD] = comm;
    MPI_Comm_dup(MPI_COMM_SELF, &groups[ZEST_GROUP_REPLICA]);
    MPI_Comm_set_errhandler(groups[ZEST_GROUP_REPLICA], MPI_ERRORS_RETURN);
    // Until expert groups are set: one group of the world, each rank its
    // experts' only holder.
    groups[ZEST_GROUP_EXPERT] = comm;
    MPI_Comm_dup(MPI_COMM_SELF, &groups[ZEST_GROUP_EXPERT_REPLICA]);
    MPI_Comm_set_errhandler(groups[ZEST_GROUP_EXPERT_REPLICA],
                            MPI_ERRORS_RETURN);
    MPI_Op_create(&sum16<bf16ToFloat, floatToBf16>, /*commute=*/1, &bf16Sum);
    MPI_Op_create(&sum16<f16ToFloat, floatToF16>, /*commute=*/1, &f16Sum);
    openArrivalBoard();
  }

  void arrive(int64_t started) override {
    if (board == MPI_WIN_NULL)
      return;
    *boardSlot = started;
    MPI_Win_sync(board);
  }

  std::optional<std::vector<int>> ranksBehind(int64_t started) override {
    if (board == MPI_WIN_NULL)
      return std::nullopt;
    std::vector<int64_t> counts(size, 0);
    std::vector<MPI_Request> reads(size, MPI_REQUEST_NULL);
    for (int rank = 0; rank < size; ++rank)
      MPI_Rget(&counts[rank], 1, MPI_INT64_T, rank, 0, 1, MPI_INT64_T, board,
               &reads[rank]);
    // A rank stuck outside MPI may be needed to answer (without shared
    // memory or RDMA): give up after a while rather than hang here too.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    int done = 0;
    while (!done && std::chrono::steady_clock::now() < deadline)
      MPI_Testall(size, reads.data(), &done, MPI_STATUSES_IGNORE);
    if (!done)
      return std::nullopt;
    std::vector<int> behind;
    for (int rank = 0; rank < size; ++rank)
      if (counts[rank] < started)
        behind.push_back(rank);
    return behind;
  }

  const char *name() const override { return "cpu-mpi"; }
  bool supportsProgressThread() const override { return serialized; }
  int rank() const override { return rankId; }
  int worldSize() const override { return size; }

  void setMesh(int replicas, int shards) override {
    if (replicas < 1 || shards < 1 || replicas * shards != size)
      fatal("mesh " + std::to_string(replicas) + "x" + std::to_string(shards) +
            " does not cover the world of " + std::to_string(size) + " ranks");
    freeGroups();
    splitConsecutive(shards, ZEST_GROUP_SHARD, ZEST_GROUP_REPLICA, "shard");
  }

  void setExpertGroups(int groupSize) override {
    if (groupSize < 1 || size % groupSize != 0)
      fatal("expert groups of " + std::to_string(groupSize) +
            " ranks do not divide the world of " + std::to_string(size) +
            " ranks");
    freeExpertGroups();
    splitConsecutive(groupSize, ZEST_GROUP_EXPERT, ZEST_GROUP_EXPERT_REPLICA,
                     "expert");
  }

  /// Splits the world into groups of `groupSize` consecutive ranks (`inner`:
  /// on a multi-GPU node they share the fast link) and the strided groups
  /// of the ranks at the same place in each (`across`).
  void splitConsecutive(int groupSize, zest_group_t inner, zest_group_t across,
                        const std::string &what) {
    check(MPI_Comm_split(comm, rankId / groupSize, rankId, &groups[inner]),
          "creating the " + what + " groups");
    check(MPI_Comm_split(comm, rankId % groupSize, rankId, &groups[across]),
          "creating the " + what + " replica groups");
    for (zest_group_t group : {inner, across})
      MPI_Comm_set_errhandler(groups[group], MPI_ERRORS_RETURN);
  }

  int groupRank(zest_group_t group) const override {
    int value = 0;
    MPI_Comm_rank(communicator(group), &value);
    return value;
  }

  int groupSize(zest_group_t group) const override {
    int value = 1;
    MPI_Comm_size(communicator(group), &value);
    return value;
  }

  std::unique_ptr<PendingOp> allGather(const void *send, void *recv,
                                       int64_t count, zest_dtype_t dtype,
                                       zest_group_t group) override {
    std::string what = describe("all_gather", count, dtype);
    // In place when `send` is this rank's slot of `recv` (MPI forbids
    // aliased buffers and spells it MPI_IN_PLACE).
    bool inPlace =
        send == static_cast<const char *>(recv) +
                    groupRank(group) * count * zest_dtype_bytes(dtype);
    MPI_Request request;
    check(MPI_Iallgather(inPlace ? MPI_IN_PLACE : send, toInt(count, what),
                         datatype(dtype), recv, toInt(count, what),
                         datatype(dtype), communicator(group), &request),
          what);
    return std::make_unique<MpiOp>(*this, request, what);
  }

  std::unique_ptr<PendingOp> reduceScatter(const void *send, void *recv,
                                           int64_t count, zest_dtype_t dtype,
                                           zest_reduction_t op,
                                           zest_group_t group) override {
    std::string what = describe("reduce_scatter", count, dtype);
    toInt(count, what);
    return std::make_unique<PairwiseReduceScatter>(*this, send, recv, count,
                                                   dtype, op == ZEST_AVG,
                                                   communicator(group), what);
  }

  std::unique_ptr<PendingOp> allReduce(const void *send, void *recv,
                                       int64_t count, zest_dtype_t dtype,
                                       zest_reduction_t op,
                                       zest_group_t group) override {
    std::string what = describe("all_reduce", count, dtype);
    MPI_Request request;
    check(MPI_Iallreduce(send == recv ? MPI_IN_PLACE : send, recv,
                         toInt(count, what), datatype(dtype), sumOp(dtype),
                         communicator(group), &request),
          what);
    return std::make_unique<MpiOp>(*this, request, what,
                                   op == ZEST_AVG ? recv : nullptr, count,
                                   dtype, groupSize(group));
  }

  std::unique_ptr<PendingOp> broadcast(void *buffer, int64_t count,
                                       zest_dtype_t dtype, int root) override {
    std::string what = describe("broadcast", count, dtype);
    MPI_Request request;
    check(MPI_Ibcast(buffer, toInt(count, what), datatype(dtype), root, comm,
                     &request),
          what);
    return std::make_unique<MpiOp>(*this, request, what);
  }

  std::unique_ptr<PendingOp> exchange(const std::vector<Transfer> &sends,
                                      const std::vector<Transfer> &recvs,
                                      zest_group_t group) override {
    auto op = std::make_unique<MpiRequests>(*this, "row exchange");
    MPI_Comm within = communicator(group);
    // Empty blocks are skipped on both sides, which list the same sizes.
    for (const Transfer &recv : recvs)
      if (recv.bytes > 0)
        check(MPI_Irecv(recv.data, toInt(recv.bytes, op->what), MPI_BYTE,
                        recv.peer, kExchangeTag, within, &op->add()),
              op->what);
    for (const Transfer &send : sends)
      if (send.bytes > 0)
        check(MPI_Isend(send.data, toInt(send.bytes, op->what), MPI_BYTE,
                        send.peer, kExchangeTag, within, &op->add()),
              op->what);
    return op;
  }

  std::unique_ptr<PendingOp> barrier() override {
    MPI_Request request;
    check(MPI_Ibarrier(comm, &request), "barrier");
    return std::make_unique<MpiOp>(*this, request, "barrier");
  }

  [[noreturn]] void abort(int code) override {
    MPI_Abort(comm, code);
    std::_Exit(code);
  }

  void finalize() override {
    if (board != MPI_WIN_NULL) {
      MPI_Win_unlock_all(board);
      MPI_Win_free(&board);
    }
    freeGroups();
    freeExpertGroups();
    MPI_Op_free(&bf16Sum);
    MPI_Op_free(&f16Sum);
    MPI_Finalize();
  }

  /// Aborts with a located message if an MPI call failed.
  void check(int rc, const std::string &what) {
    if (rc == MPI_SUCCESS)
      return;
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(rc, text, &length);
    fatal("MPI error in " + what + ": " + std::string(text, length));
  }

  static MPI_Datatype datatype(zest_dtype_t dtype) {
    switch (dtype) {
    case ZEST_F32:
      return MPI_FLOAT;
    case ZEST_F64:
      return MPI_DOUBLE;
    case ZEST_F16:
    case ZEST_BF16:
      return MPI_UINT16_T;
    case ZEST_I32:
      return MPI_INT32_T;
    case ZEST_I64:
      return MPI_INT64_T;
    case ZEST_I8:
      return MPI_INT8_T;
    case ZEST_U8:
      return MPI_UINT8_T;
    }
    fatal("unknown dtype " + std::to_string(int(dtype)));
  }

  MPI_Op sumOp(zest_dtype_t dtype) const {
    if (dtype == ZEST_BF16)
      return bf16Sum;
    if (dtype == ZEST_F16)
      return f16Sum;
    return MPI_SUM;
  }

  ScratchBuffers scratch;

private:
  static std::string describe(const char *op, int64_t count,
                              zest_dtype_t dtype) {
    return std::string(op) + " of " + std::to_string(count) + " elements x " +
           std::to_string(zest_dtype_size(dtype)) + " bytes";
  }

  static int toInt(int64_t count, const std::string &what) {
    if (count < 0 || count > INT32_MAX)
      fatal(what + ": count exceeds the MPI limit of 2^31-1 elements");
    return int(count);
  }

  /// The arrival board: one int64 per rank, the collectives it started,
  /// which any rank reads without the owner's help (passive target, kept
  /// open for the whole run). Without one-sided support, none.
  void openArrivalBoard() {
    if (MPI_Win_allocate(sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL, comm,
                         &boardSlot, &board) != MPI_SUCCESS) {
      board = MPI_WIN_NULL;
      return;
    }
    *boardSlot = 0;
    MPI_Win_lock_all(MPI_MODE_NOCHECK, board);
  }

  MPI_Comm communicator(zest_group_t group) const {
    if (group < ZEST_GROUP_WORLD || group > ZEST_GROUP_EXPERT_REPLICA)
      fatal("unknown communication group " + std::to_string(int(group)));
    return groups[group];
  }

  /// Frees the mesh's sub-communicators; the shard group falls back to the
  /// world until a mesh or the default replica group is set again.
  void freeGroups() {
    if (groups[ZEST_GROUP_SHARD] != comm)
      MPI_Comm_free(&groups[ZEST_GROUP_SHARD]);
    groups[ZEST_GROUP_SHARD] = comm;
    if (groups[ZEST_GROUP_REPLICA] != MPI_COMM_NULL)
      MPI_Comm_free(&groups[ZEST_GROUP_REPLICA]);
  }

  /// Frees the expert groups' sub-communicators.
  void freeExpertGroups() {
    if (groups[ZEST_GROUP_EXPERT] != comm)
      MPI_Comm_free(&groups[ZEST_GROUP_EXPERT]);
    groups[ZEST_GROUP_EXPERT] = comm;
    if (groups[ZEST_GROUP_EXPERT_REPLICA] != MPI_COMM_NULL)
      MPI_Comm_free(&groups[ZEST_GROUP_EXPERT_REPLICA]);
  }

  MPI_Comm comm;
  MPI_Comm groups[5] = {MPI_COMM_NULL, MPI_COMM_NULL, MPI_COMM_NULL,
                        MPI_COMM_NULL, MPI_COMM_NULL};
  int rankId = 0, size = 1;
  bool serialized = false;
  MPI_Win board = MPI_WIN_NULL;
  int64_t *boardSlot = nullptr;
  MPI_Op bf16Sum, f16Sum;
};

bool MpiOp::test() {
  if (done)
    return true;
  int flag = 0;
  backend.check(MPI_Test(&request, &flag, MPI_STATUS_IGNORE), what);
  if (!flag)
    return false;
  if (average)
    divide();
  done = true;
  return true;
}

bool MpiRequests::test() {
  int flag = 0;
  backend.check(MPI_Testall(int(requests.size()), requests.data(), &flag,
                            MPI_STATUSES_IGNORE),
                what);
  return flag != 0;
}

template <typename T> void divideAll(void *data, int64_t count, T divisor) {
  T *values = static_cast<T *>(data);
  for (int64_t i = 0; i < count; ++i)
    values[i] /= divisor;
}

void MpiOp::divide() { divideInPlace(average, count, dtype, divisor); }

/// `data[i] /= divisor` for `count` elements of `dtype`.
void divideInPlace(void *data, int64_t count, zest_dtype_t dtype, int divisor) {
  auto *half = static_cast<uint16_t *>(data);
  void *average = data;
  switch (dtype) {
  case ZEST_F32:
    return divideAll<float>(average, count, float(divisor));
  case ZEST_F64:
    return divideAll<double>(average, count, double(divisor));
  case ZEST_I32:
    return divideAll<int32_t>(average, count, divisor);
  case ZEST_I64:
    return divideAll<int64_t>(average, count, divisor);
  case ZEST_I8:
    return divideAll<int8_t>(average, count, int8_t(divisor));
  case ZEST_U8:
    return divideAll<uint8_t>(average, count, uint8_t(divisor));
  case ZEST_BF16:
    for (int64_t i = 0; i < count; ++i)
      half[i] = floatToBf16(bf16ToFloat(half[i]) / divisor);
    return;
  case ZEST_F16:
    for (int64_t i = 0; i < count; ++i)
      half[i] = floatToF16(f16ToFloat(half[i]) / divisor);
    return;
  }
}

/// A tag of its own: the exchanges of concurrent reduce-scatters between
/// two ranks match in the order both post them (MPI does not overtake).
constexpr int kReduceScatterTag = 0x2e57;

PairwiseReduceScatter::PairwiseReduceScatter(MpiBackend &backend,
                                             const void *send, void *recv,
                                             int64_t count, zest_dtype_t dtype,
                                             bool average, MPI_Comm comm,
                                             std::string what)
    : backend(backend), send(static_cast<const char *>(send)), recv(recv),
      count(count), dtype(dtype), average(average),
      blockBytes(size_t(count) * zest_dtype_bytes(dtype)),
      what(std::move(what)) {
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  staged.assign(size, nullptr);
  // Where the result overwrites part of the buffer (in place), this rank's
  // term is copied first: the sum writes its first term before adding it.
  auto *out = static_cast<char *>(recv);
  if (out < this->send + size * blockBytes && this->send < out + blockBytes) {
    ownCopy = backend.scratch.acquire(blockBytes);
    std::memcpy(ownCopy, this->send + rank * blockBytes, blockBytes);
  }
  MPI_Datatype type = MpiBackend::datatype(dtype);
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank)
      continue;
    staged[peer] = backend.scratch.acquire(blockBytes);
    requests.emplace_back();
    backend.check(MPI_Irecv(staged[peer], int(count), type, peer,
                            kReduceScatterTag, comm, &requests.back()),
                  this->what);
  }
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank)
      continue;
    requests.emplace_back();
    backend.check(MPI_Isend(this->send + peer * blockBytes, int(count), type,
                            peer, kReduceScatterTag, comm, &requests.back()),
                  this->what);
  }
}

PairwiseReduceScatter::~PairwiseReduceScatter() {
  for (void *block : staged)
    if (block)
      backend.scratch.release(block);
  if (ownCopy)
    backend.scratch.release(ownCopy);
}

const void *PairwiseReduceScatter::term(int from) const {
  if (from != rank)
    return staged[from];
  return ownCopy ? ownCopy : send + rank * blockBytes;
}

bool PairwiseReduceScatter::test() {
  if (done)
    return true;
  int flag = 0;
  backend.check(MPI_Testall(int(requests.size()), requests.data(), &flag,
                            MPI_STATUSES_IGNORE),
                what);
  if (!flag)
    return false;
  // ((b0 + b1) + b2) + ...: MPI_Reduce_local(in, inout) is in + inout.
  if (term(0) != recv)
    std::memmove(recv, term(0), blockBytes);
  for (int from = 1; from < size; ++from)
    backend.check(MPI_Reduce_local(term(from), recv, int(count),
                                   MpiBackend::datatype(dtype),
                                   backend.sumOp(dtype)),
                  what);
  if (average)
    divideInPlace(recv, count, dtype, size);
  done = true;
  return true;
}

} // namespace

std::unique_ptr<Backend> zest::rt::createMpiBackend(int *argc, char ***argv,
                                                    bool progressThread) {
  return std::make_unique<MpiBackend>(argc, argv, progressThread);
}
