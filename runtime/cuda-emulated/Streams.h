//===- Streams.h - Streams and events of the emulated GPU -------*- C++ -*-===//
//
// A stream is a queue of operations, run in order as soon as what they wait
// for is complete: kernels, copies and products run on the calling thread
// (with device memory accessible), collectives start MPI's nonblocking
// collectives on host staging copies and complete when MPI says so. So the
// host never blocks where a GPU program would not: a launch after a
// collective that a stalled rank never joins is queued, and only a
// synchronizing call (cudaStreamSynchronize, a copy to pageable memory, an
// event's synchronize) waits, and waits forever, as on a GPU. Events mark a
// stream's last operation when recorded. A captured stream (Graphs.cpp)
// records its operations into a graph instead of running them.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_CUDA_EMULATED_STREAMS_H
#define ZEST_RUNTIME_CUDA_EMULATED_STREAMS_H

#include <cuda_runtime.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

namespace zest::emulated {

/// One operation of a stream.
class StreamOp {
public:
  virtual ~StreamOp() = default;
  /// Moves the operation forward; true once it is complete. Called only
  /// after everything before it on its stream has completed.
  virtual bool advance() = 0;
  bool done = false;
  /// When it completed (cudaEventElapsedTime).
  std::chrono::steady_clock::time_point doneAt;
};

/// Makes a stream's operation: once when it is enqueued, or at every launch
/// of the graph that captured it.
using OpFactory = std::function<std::shared_ptr<StreamOp>()>;

/// Checks `stream` for `what` (the legacy default stream, or one created and
/// not destroyed) and queues the operation `make` makes on it, running
/// whatever can run; returns it. On a captured stream the operation becomes
/// a node of the capture's graph instead, and null is returned.
std::shared_ptr<StreamOp> enqueue(cudaStream_t stream, OpFactory make,
                                  const std::string &what);
/// Queues host work that runs, in stream order, with device memory
/// accessible (a kernel, a copy, a product); null on a captured stream.
std::shared_ptr<StreamOp> enqueueWork(cudaStream_t stream,
                                      std::function<void()> work,
                                      const std::string &what);
/// Runs what can run on every stream.
void progress();
/// Blocks until `op` completes (a synchronizing call).
void waitFor(const std::shared_ptr<StreamOp> &op);

} // namespace zest::emulated

#endif // ZEST_RUNTIME_CUDA_EMULATED_STREAMS_H
