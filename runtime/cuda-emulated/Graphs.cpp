//===- Graphs.cpp - Stream capture and CUDA graphs on the emulated GPU ----===//
//
// cudaStreamBeginCapture turns a stream's launches, copies, products and
// collectives into nodes of a graph instead of running them; a stream that
// waits on an event recorded in the capture joins it (a fork), and the
// capture ends only once every such stream has been joined back into the
// origin. A launch of the instantiated graph is one operation of the stream
// it is launched on, complete when every node is: each node's operation is
// made anew from what was captured (a kernel's argument values, a copy's
// pointers, a collective's buffers) and run once the nodes it depends on
// have completed, so a replay reads the memory's contents at its time, as a
// GPU's graph does.
//
// Strict as a GPU is: inside a capture, allocations and frees, synchronizing
// calls, copies of pageable host memory, queries of captured work and waits
// on work outside the capture are errors (cudaErrorStreamCapture* codes,
// with a message naming the call), and they invalidate the capture.
//
//===----------------------------------------------------------------------===//

#include "DeviceMemory.h"
#include "StreamObjects.h"

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

using namespace zest::emulated;

namespace {

/// The captures in progress, by origin stream.
std::map<cudaStream_t, std::unique_ptr<CaptureSequence>> &captures() {
  static auto *active =
      new std::map<cudaStream_t, std::unique_ptr<CaptureSequence>>;
  return *active;
}

/// The last violation's message, by its code.
std::map<cudaError_t, std::string> &violations() {
  static auto *messages = new std::map<cudaError_t, std::string>;
  return *messages;
}

/// Whether every stream forked into `capture` has been joined back: its
/// last nodes are the origin's last ones or their ancestors.
bool joined(const CaptureSequence &capture) {
  const std::vector<GraphNode> &nodes = capture.nodes;
  std::vector<char> seen(nodes.size(), 0);
  std::vector<size_t> work = capture.origin->tail;
  while (!work.empty()) {
    size_t node = work.back();
    work.pop_back();
    if (seen[node])
      continue;
    seen[node] = 1;
    work.insert(work.end(), nodes[node].deps.begin(), nodes[node].deps.end());
  }
  for (cudaStream_t stream : capture.streams)
    for (size_t node : stream->tail)
      if (!seen[node])
        return false;
  return true;
}

/// Ends `capture`: its streams run their work again.
void release(CaptureSequence &capture) {
  for (cudaStream_t stream : capture.streams) {
    CUstream_st &s = getStream(stream, "cudaStreamEndCapture");
    s.capture = nullptr;
    s.tail.clear();
  }
}

/// One launch of a graph: its nodes' operations, made and run in
/// dependency order.
class GraphLaunch : public StreamOp {
public:
  explicit GraphLaunch(std::shared_ptr<const std::vector<GraphNode>> nodes)
      : nodes(std::move(nodes)), ops(this->nodes->size()),
        complete(this->nodes->size(), 0) {}

  bool advance() override {
    // Nodes are in capture order, so each depends on earlier ones only.
    for (size_t i = firstIncomplete; i < nodes->size(); ++i) {
      if (complete[i])
        continue;
      const GraphNode &node = (*nodes)[i];
      if (!std::all_of(node.deps.begin(), node.deps.end(),
                       [&](size_t dep) { return complete[dep] != 0; }))
        continue;
      if (!ops[i])
        ops[i] = node.make();
      if (!ops[i]->advance())
        continue;
      complete[i] = 1;
      ops[i].reset();
    }
    while (firstIncomplete < nodes->size() && complete[firstIncomplete])
      ++firstIncomplete;
    return firstIncomplete == nodes->size();
  }

private:
  std::shared_ptr<const std::vector<GraphNode>> nodes;
  std::vector<std::shared_ptr<StreamOp>> ops;
  std::vector<char> complete;
  size_t firstIncomplete = 0;
};

} // namespace

bool zest::emulated::capturing() { return !captures().empty(); }

cudaError_t zest::emulated::captureViolation(cudaError_t code,
                                             const std::string &what) {
  for (auto &[origin, capture] : captures())
    if (capture->failed == cudaSuccess)
      capture->failed = code;
  violations()[code] = what + " (emulated device)";
  return code;
}

const char *zest::emulated::captureViolationMessage(cudaError_t code) {
  auto it = violations().find(code);
  return it == violations().end() ? nullptr : it->second.c_str();
}

cudaError_t zest::emulated::joinCapture(cudaStream_t stream,
                                        const CUevent_st &event) {
  CUstream_st &s = getStream(stream, "cudaStreamWaitEvent");
  if (!event.capture)
    return captureViolation(cudaErrorStreamCaptureIsolation,
                            "cudaStreamWaitEvent makes a stream that is being "
                            "captured wait on an event recorded outside the "
                            "capture");
  if (s.capture && s.capture != event.capture)
    return captureViolation(cudaErrorStreamCaptureMerge,
                            "cudaStreamWaitEvent joins two stream captures");
  if (!s.capture) {
    // The stream's work queued before is not part of the graph (CUDA lets
    // in-stream order cross the capture's boundary; a launch of the graph
    // does not wait for it).
    s.capture = event.capture;
    s.tail.clear();
    event.capture->streams.insert(stream);
  }
  for (size_t node : event.nodes)
    if (std::find(s.tail.begin(), s.tail.end(), node) == s.tail.end())
      s.tail.push_back(node);
  return cudaSuccess;
}

extern "C" {

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode) {
  if (!stream)
    return captureViolation(cudaErrorStreamCaptureUnsupported,
                            "cudaStreamBeginCapture on the legacy default "
                            "stream");
  CUstream_st &s = getStream(stream, "cudaStreamBeginCapture");
  if (s.capture)
    return captureViolation(cudaErrorIllegalState,
                            "cudaStreamBeginCapture on a stream that is "
                            "already being captured");
  auto capture = std::make_unique<CaptureSequence>();
  capture->origin = stream;
  capture->streams.insert(stream);
  s.capture = capture.get();
  s.tail.clear();
  captures()[stream] = std::move(capture);
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream,
                                  cudaStreamCaptureStatus *status) {
  CUstream_st &s = getStream(stream, "cudaStreamIsCapturing");
  *status = !s.capture ? cudaStreamCaptureStatusNone
            : s.capture->failed == cudaSuccess
                ? cudaStreamCaptureStatusActive
                : cudaStreamCaptureStatusInvalidated;
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph) {
  *graph = nullptr;
  auto it = captures().find(stream);
  if (it == captures().end())
    return captureViolation(cudaErrorStreamCaptureUnmatched,
                            "cudaStreamEndCapture on a stream that did not "
                            "begin a capture");
  std::unique_ptr<CaptureSequence> capture = std::move(it->second);
  captures().erase(it);
  cudaError_t status = capture->failed == cudaSuccess
                           ? cudaSuccess
                           : cudaErrorStreamCaptureInvalidated;
  if (status == cudaSuccess && !joined(*capture))
    status = captureViolation(cudaErrorStreamCaptureUnjoined,
                              "cudaStreamEndCapture: a stream forked into the "
                              "capture was not joined back into the origin "
                              "(make the origin wait on an event recorded "
                              "after the stream's last work)");
  release(*capture);
  if (status != cudaSuccess)
    return status;
  *graph = new CUgraph_st{std::move(capture->nodes)};
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph,
                                 unsigned long long) {
  if (!graph)
    return cudaErrorInvalidValue;
  *exec = new CUgraphExec_st{
      std::make_shared<const std::vector<GraphNode>>(graph->nodes)};
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (!exec)
    return cudaErrorInvalidValue;
  if (getStream(stream, "cudaGraphLaunch").capture)
    return captureViolation(cudaErrorStreamCaptureUnsupported,
                            "cudaGraphLaunch on a stream that is being "
                            "captured (the emulated device does not nest "
                            "graphs)");
  auto nodes = exec->nodes;
  enqueue(
      stream, [nodes] { return std::make_shared<GraphLaunch>(nodes); },
      "cudaGraphLaunch");
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  // Launches in flight hold the nodes.
  delete exec;
  return cudaSuccess;
}

} // extern "C"
