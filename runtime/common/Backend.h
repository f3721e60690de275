//===- Backend.h - Interface of a Zest communication backend ----*- C++ -*-===//
//
// A backend moves flat buffers between ranks (cpu-mpi: Open MPI; cuda-nccl:
// NCCL). The runtime core (Runtime.cpp) owns requests, timeouts, counters and
// traces and talks to exactly one backend through this interface.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_COMMON_BACKEND_H
#define ZEST_RUNTIME_COMMON_BACKEND_H

#include "zest_runtime.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace zest::rt {

/// An in-flight operation of a backend; tested until complete, then deleted.
class PendingOp {
public:
  virtual ~PendingOp() = default;
  /// Returns true once the operation has completed (including any
  /// post-processing such as averaging).
  virtual bool test() = 0;
};

/// Reports a fatal error on this rank and aborts the job with `code`.
[[noreturn]] void fatal(const std::string &message, int code = 1);

class Backend {
public:
  virtual ~Backend() = default;
  virtual const char *name() const = 0;
  virtual int rank() const = 0;
  virtual int worldSize() const = 0;

  /// Arranges the ranks as a `replicas x shards` mesh (see zest_set_mesh);
  /// collective: every rank calls it with the same values.
  virtual void setMesh(int replicas, int shards) = 0;
  /// Arranges the ranks in expert groups of `size` (zest_set_expert_groups);
  /// collective. Backends without row exchanges refuse.
  virtual void setExpertGroups(int size) {
    fatal(std::string("the ") + name() +
          " backend has no expert groups (expert parallelism)");
  }
  virtual int groupRank(zest_group_t group) const = 0;
  virtual int groupSize(zest_group_t group) const = 0;

  /// Collectives over `group`; ZEST_AVG divides by its size.
  virtual std::unique_ptr<PendingOp> allGather(const void *send, void *recv,
                                               int64_t count,
                                               zest_dtype_t dtype,
                                               zest_group_t group) = 0;
  virtual std::unique_ptr<PendingOp>
  reduceScatter(const void *send, void *recv, int64_t count, zest_dtype_t dtype,
                zest_reduction_t op, zest_group_t group) = 0;
  virtual std::unique_ptr<PendingOp>
  allReduce(const void *send, void *recv, int64_t count, zest_dtype_t dtype,
            zest_reduction_t op, zest_group_t group) = 0;
  virtual std::unique_ptr<PendingOp>
  broadcast(void *buffer, int64_t count, zest_dtype_t dtype, int root) = 0;
  virtual std::unique_ptr<PendingOp> barrier() = 0;

  /// One block of an exchange: `bytes` at `data`, to or from group rank
  /// `peer`.
  struct Transfer {
    int peer;
    void *data;
    int64_t bytes;
  };
  /// Point-to-point sends and receives within `group`, all in flight at
  /// once (an all-to-all with run-time sizes: expert parallelism). Blocks
  /// between two ranks match in the order each side lists them; both sides
  /// list the same sizes. Backends without point-to-point transfers refuse.
  virtual std::unique_ptr<PendingOp>
  exchange(const std::vector<Transfer> &sends,
           const std::vector<Transfer> &recvs, zest_group_t group) {
    fatal(std::string("the ") + name() +
          " backend cannot exchange rows between ranks (expert "
          "parallelism); compile without --expert-parallel");
  }

  /// Records that this rank has started `started` collectives (for the
  /// diagnosis below); a no-op where the backend cannot share it.
  virtual void arrive(int64_t started) {}
  /// The ranks that have started fewer than `started` collectives, asked
  /// without their help; nothing where that cannot be known.
  virtual std::optional<std::vector<int>> ranksBehind(int64_t started) {
    return std::nullopt;
  }

  /// The backend for collectives on host memory: this one, or the MPI
  /// backend a CUDA backend starts from (whose collectives take device
  /// memory).
  virtual Backend &host() { return *this; }

  /// Memory for the runtime's pool (zest_pool_alloc), where this backend's
  /// collectives and the compiled code read it: host memory here, device
  /// memory for the CUDA backends. The pool reuses it, and returns it with
  /// freeMemory at zest_finalize.
  virtual void *allocateMemory(size_t bytes, size_t alignment) {
    return std::aligned_alloc(alignment, bytes);
  }
  virtual void freeMemory(void *ptr) { std::free(ptr); }

  /// Whether memory from allocateMemory is device memory the host cannot
  /// read (the CUDA backends): the driver then stages its host buffers.
  virtual bool buffersOnDevice() const { return false; }
  /// Copies between host memory and memory from allocateMemory, ordered
  /// with the compiled code's work; copyToHost returns once the bytes are
  /// on the host, copyToDevice once `host` may be reused.
  virtual void copyToDevice(void *device, const void *host, size_t bytes) {
    std::memcpy(device, host, bytes);
  }
  virtual void copyToHost(void *host, const void *device, size_t bytes) {
    std::memcpy(host, device, bytes);
  }
  /// Zeroes `bytes` of memory from allocateMemory, in order with the
  /// compiled code's work.
  virtual void zeroMemory(void *device, size_t bytes) {
    std::memset(device, 0, bytes);
  }

  /// Offload: host memory that the asynchronous copies below read and
  /// write (page-locked on a GPU), 64-byte aligned.
  virtual void *allocatePinned(size_t bytes) {
    return std::aligned_alloc(64, bytes);
  }
  virtual void freePinned(void *ptr) { std::free(ptr); }
  /// Asynchronous copies between pinned host memory and memory from
  /// allocateMemory, in order with the compiled code's work. To the device,
  /// `host` is read when the work before it is done; to the host, the bytes
  /// are there once copyWait(host) returns. Memory from allocateMemory may
  /// be reused by work issued after either copy (it runs after it).
  virtual void copyToDeviceAsync(void *device, const void *host, size_t bytes) {
    std::memcpy(device, host, bytes);
  }
  virtual void copyToHostStart(void *host, const void *device, size_t bytes) {
    std::memcpy(host, device, bytes);
  }
  virtual void copyWait(const void *host) {}

  /// An entry point's device work, captured once and launched again at
  /// every later call (a CUDA graph).
  class CapturedWork {
  public:
    virtual ~CapturedWork() = default;
    virtual void launch() = 0;
  };
  /// Why this backend cannot capture entry points (EntryGraphs.cpp); none
  /// where it can.
  virtual std::optional<std::string> whyNoCapture() const {
    return std::string("the ") + name() + " backend computes on the host";
  }
  /// Captures the work enqueued from beginCapture to endCapture instead of
  /// running it; endCapture returns it, ready to launch.
  virtual void beginCapture() { fatal("this backend cannot capture work"); }
  virtual std::unique_ptr<CapturedWork> endCapture() {
    fatal("this backend cannot capture work");
  }
  /// What the host first waited for on the device since the last call (the
  /// wait's description), or none: work with a host wait cannot be
  /// captured, as the wait would not happen on replay.
  virtual std::optional<std::string> takeHostWait() { return std::nullopt; }

  /// True if backend calls may come from a second thread (serialized by the
  /// runtime), as a progress thread needs.
  virtual bool supportsProgressThread() const = 0;

  /// Makes every rank exit with `code`; never returns.
  /// A training step ended (zest_step_end).
  virtual void endStep() {}
  [[noreturn]] virtual void abort(int code) = 0;
  virtual void finalize() = 0;
};

/// Creates the Open MPI backend (calls MPI_Init_thread, asking for
/// MPI_THREAD_SERIALIZED when `progressThread`).
std::unique_ptr<Backend> createMpiBackend(int *argc, char ***argv,
                                          bool progressThread);

/// Creates a CUDA backend (`kind`: "nccl" or "staged", runtime/cuda-nccl/)
/// over the MPI backend. Weak: defined only where the CUDA runtime library
/// (zest_runtime_cuda) is linked in.
[[gnu::weak]] std::unique_ptr<Backend>
createCudaBackend(const std::string &kind, int *argc, char ***argv);

/// Seconds a wait may block before the job is aborted (ZEST_TIMEOUT_S,
/// --timeout).
double timeoutSeconds();

} // namespace zest::rt

#endif // ZEST_RUNTIME_COMMON_BACKEND_H
