//===- StreamObjects.h - Streams, events and graphs of the emulated GPU -*-===//
//
// What CudaRuntime.cpp's streams and events and Graphs.cpp's stream capture
// share. A stream is a queue of operations; while it is captured, what is
// enqueued on it becomes a node of the capture's graph instead, depending on
// the stream's previous node (its `tail`) and on the nodes of the events it
// waited for. Internal to runtime/cuda-emulated.
//
//===----------------------------------------------------------------------===//

#ifndef ZEST_RUNTIME_CUDA_EMULATED_STREAMOBJECTS_H
#define ZEST_RUNTIME_CUDA_EMULATED_STREAMOBJECTS_H

#include "Streams.h"

#include <chrono>
#include <deque>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace zest::emulated {

/// One operation of a graph: made anew at every launch, after `deps`.
struct GraphNode {
  OpFactory make;
  std::vector<size_t> deps; // indices of earlier nodes
};

/// A stream capture in progress (cudaStreamBeginCapture to EndCapture).
struct CaptureSequence {
  cudaStream_t origin;
  std::vector<GraphNode> nodes;
  /// The streams it holds: the origin and those that joined it by waiting
  /// on an event recorded in it.
  std::set<cudaStream_t> streams;
  /// The first error that invalidated it (cudaSuccess: none).
  cudaError_t failed = cudaSuccess;
};

/// Whether any stream is being captured now.
bool capturing();
/// Records that `what` is not permitted while a stream is captured: the
/// captures are invalidated and `code` is returned, with `what` as its
/// message (cudaGetErrorString).
cudaError_t captureViolation(cudaError_t code, const std::string &what);
/// The message of the last capture violation, for `code`; null if none.
const char *captureViolationMessage(cudaError_t code);

} // namespace zest::emulated

struct CUstream_st {
  std::deque<std::shared_ptr<zest::emulated::StreamOp>> queue;
  /// While captured: its capture, and the nodes its next one depends on.
  zest::emulated::CaptureSequence *capture = nullptr;
  std::vector<size_t> tail;
};

struct CUevent_st {
  std::shared_ptr<zest::emulated::StreamOp> last; // null: complete
  /// When it was recorded on an idle stream (or never: created complete).
  std::chrono::steady_clock::time_point recordedAt =
      std::chrono::steady_clock::now();
  /// Recorded in a capture: its capture and the nodes it stands for.
  zest::emulated::CaptureSequence *capture = nullptr;
  std::vector<size_t> nodes;
};

struct CUgraph_st {
  std::vector<zest::emulated::GraphNode> nodes;
};

struct CUgraphExec_st {
  std::shared_ptr<const std::vector<zest::emulated::GraphNode>> nodes;
};

namespace zest::emulated {

/// The stream `stream` names for `what` (the legacy default stream for
/// null): one created and not destroyed, else the job ends.
CUstream_st &getStream(cudaStream_t stream, const std::string &what);
/// Likewise for an event.
CUevent_st &getEvent(cudaEvent_t event, const std::string &what);
/// cudaStreamWaitEvent where the event was recorded in a capture or the
/// stream is captured: a dependency between the capture's nodes, the
/// stream joining the event's capture, or a capture error.
cudaError_t joinCapture(cudaStream_t stream, const CUevent_st &event);

} // namespace zest::emulated

#endif // ZEST_RUNTIME_CUDA_EMULATED_STREAMOBJECTS_H
