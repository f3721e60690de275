//===- Streams.h - Streams and events of the emulated GPU -------*- C++ -*-===//
//
// Kernels, copies and products run on the calling thread when they are
// enqueued; collectives run asynchronously (MPI's nonblocking collectives
// on host staging copies). A stream's pending work is what an operation on
// it must wait for first: its own collectives in flight and what it was
// made to wait for (cudaStreamWaitEvent). An event holds the pending work
// of its stream when recorded, so a query of it tests MPI requests and a
// wait on it completes them: the same ordering a GPU's streams give, with a
// missing wait showing up as a stale or torn buffer.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_CUDA_EMULATED_STREAMS_H
#define ZEST_RUNTIME_CUDA_EMULATED_STREAMS_H

#include <cuda_runtime.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace zest::emulated {

/// Work in flight: a test of its completion and what completes it (copying
/// a collective's result into device memory).
class Work {
public:
  virtual ~Work() = default;
  /// True once complete (finishing it the first time).
  virtual bool test() = 0;
  virtual void wait() = 0;
};
using WorkList = std::vector<std::shared_ptr<Work>>;

/// Completes every item of `work` (finishing each once).
void waitAll(const WorkList &work);
/// Whether every item of `work` is complete.
bool testAll(const WorkList &work);

/// Checks that `stream` is the legacy default stream or one created and not
/// destroyed, for `what`; then completes what it must wait for, so that
/// what `what` does next sees the results.
void beforeWorkOn(cudaStream_t stream, const std::string &what);
/// Adds `work`, started on `stream`, to its pending work.
void addWork(cudaStream_t stream, std::shared_ptr<Work> work);

} // namespace zest::emulated

#endif // ZEST_RUNTIME_CUDA_EMULATED_STREAMS_H
