//===- GraphsTest.cpp - Stream capture, CUDA graphs and zest_call_entry ---===//
//
// Built for a GPU (zest-cuda-graphs-test) and for the emulated device
// (-emulated). Subcommands:
//
//   replay   a capture over two streams (a fork and a join) of copies from
//            page-locked memory, a device-to-device copy and a memset,
//            launched three times with new inputs: each launch reads the
//            inputs of its time, in stream order.
//   entries  zest_call_entry over ZEST_BACKEND=nccl: an entry point with an
//            all-reduce and a copy, run eagerly, captured, then replayed,
//            against the same entry without graphs; the counters of a
//            replayed call equal an eager one's; an entry that waits on the
//            host is never captured.
//   alloc    an entry point whose second call allocates: refused by name.
//
// and mistakes inside a capture, each ending the job with CUDA's error:
//
//   sync, malloc, pageable, captured-event, isolation, unjoined
//
//===----------------------------------------------------------------------===//

#include "zest_runtime.h"
#include "zest_runtime_cuda.h"

#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

void check(cudaError_t status, const char *what) {
  if (status != cudaSuccess)
    zest_fatal(1, "%s: %s", what, cudaGetErrorString(status));
}

cudaStream_t newStream() {
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
        "cudaStreamCreate");
  return stream;
}

cudaEvent_t newEvent() {
  cudaEvent_t event;
  check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
        "cudaEventCreate");
  return event;
}

/// Fork into `side`, copy there, join back: out = in (via side), then
/// out[0] = 0 on the origin.
void replay() {
  const size_t n = 64, bytes = n * sizeof(float);
  float *in, *out, *device, *copy;
  check(cudaMallocHost(&in, bytes), "cudaMallocHost");
  check(cudaMallocHost(&out, bytes), "cudaMallocHost");
  check(cudaMalloc(&device, bytes), "cudaMalloc");
  check(cudaMalloc(&copy, bytes), "cudaMalloc");
  cudaStream_t origin = newStream(), side = newStream();
  cudaEvent_t fork = newEvent(), join = newEvent();
  check(cudaStreamBeginCapture(origin, cudaStreamCaptureModeThreadLocal),
        "cudaStreamBeginCapture");
  check(cudaMemcpyAsync(device, in, bytes, cudaMemcpyHostToDevice, origin),
        "cudaMemcpyAsync");
  check(cudaEventRecord(fork, origin), "cudaEventRecord");
  check(cudaStreamWaitEvent(side, fork, 0), "cudaStreamWaitEvent");
  check(cudaMemcpyAsync(copy, device, bytes, cudaMemcpyDeviceToDevice, side),
        "cudaMemcpyAsync");
  check(cudaEventRecord(join, side), "cudaEventRecord");
  check(cudaStreamWaitEvent(origin, join, 0), "cudaStreamWaitEvent");
  check(cudaMemsetAsync(copy, 0, sizeof(float), origin), "cudaMemsetAsync");
  check(cudaMemcpyAsync(out, copy, bytes, cudaMemcpyDeviceToHost, origin),
        "cudaMemcpyAsync");
  cudaGraph_t graph;
  check(cudaStreamEndCapture(origin, &graph), "cudaStreamEndCapture");
  cudaGraphExec_t exec;
  check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  for (int launch = 1; launch <= 3; ++launch) {
    for (size_t i = 0; i < n; ++i)
      in[i] = float(launch * 100 + i);
    std::memset(out, 0xff, bytes);
    check(cudaGraphLaunch(exec, origin), "cudaGraphLaunch");
    check(cudaStreamSynchronize(origin), "cudaStreamSynchronize");
    bool ok = out[0] == 0;
    for (size_t i = 1; i < n; ++i)
      ok = ok && out[i] == float(launch * 100 + i);
    std::printf("launch %d: %s\n", launch, ok ? "ok" : "wrong");
  }
  check(cudaGraphExecDestroy(exec), "cudaGraphExecDestroy");
  check(cudaGraphDestroy(graph), "cudaGraphDestroy");
}

/// The arguments of the test entries: a device value, its all-reduce, and
/// a page-locked host copy of the result.
float *deviceValue, *deviceSum, *hostSum;

/// Sums deviceValue over the ranks into deviceSum, then copies it to the
/// page-locked hostSum, without a host wait.
void sumEntry(void **) {
  zest_wait(zest_all_reduce_start(deviceValue, deviceSum, 1, ZEST_F32, ZEST_SUM,
                                  ZEST_GROUP_WORLD, "sum"));
  check(cudaMemcpyAsync(hostSum, deviceSum, sizeof(float),
                        cudaMemcpyDeviceToHost,
                        static_cast<cudaStream_t>(zest_cuda_compute_stream())),
        "cudaMemcpyAsync");
}

/// The same, then a host read of the result (a host wait).
void waitingEntry(void **args) {
  sumEntry(args);
  float sum = 0;
  zest_copy_to_host(&sum, deviceSum, sizeof(float));
}

/// Calls `entry` as key `key` with the value `rank + call` on every rank;
/// prints the sum each call saw and the collectives it counted.
void callSeveral(int64_t key, const char *name, zest_entry_fn_t entry) {
  int rank = zest_rank(), world = zest_world_size();
  for (int call = 1; call <= 4; ++call) {
    float value = float(rank + call);
    zest_copy_to_device(deviceValue, &value, sizeof(float));
    zest_counters_t before, after;
    zest_get_counters(&before);
    zest_call_entry(key, name, entry, nullptr);
    float sum = 0;
    zest_copy_to_host(&sum, deviceSum, sizeof(float)); // waits for the work
    zest_get_counters(&after);
    float expected = float(world * (world - 1) / 2 + world * call);
    if (rank == 0)
      std::printf(
          "%s call %d: sum %s, page-locked copy %s, %lld "
          "collectives, %lld bytes sent\n",
          name, call, sum == expected ? "ok" : "wrong",
          *hostSum == expected ? "ok" : "wrong",
          static_cast<long long>(after.collectives - before.collectives),
          static_cast<long long>(after.bytes_sent - before.bytes_sent));
  }
}

void entries() {
  deviceValue = static_cast<float *>(zest_buffer_alloc(sizeof(float)));
  deviceSum = static_cast<float *>(zest_buffer_alloc(sizeof(float)));
  hostSum = static_cast<float *>(zest_pinned_alloc(sizeof(float)));
  zest_set_cuda_graphs(1);
  callSeveral(0, "sum", sumEntry);
  callSeveral(1, "waiting", waitingEntry);
  zest_set_cuda_graphs(0);
  callSeveral(2, "eager", sumEntry);
}

/// An entry whose host code allocates a new size at each call: its second
/// call, captured, is refused.
void allocatingEntry(void **) {
  static int64_t bytes = 256;
  zest_pool_free(zest_pool_alloc(bytes));
  bytes *= 2;
}

void allocating() {
  zest_set_cuda_graphs(1);
  for (int call = 0; call < 3; ++call)
    zest_call_entry(0, "allocating", allocatingEntry, nullptr);
}

/// Begins a capture on a new stream and returns it.
cudaStream_t capturing() {
  cudaStream_t stream = newStream();
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
        "cudaStreamBeginCapture");
  return stream;
}

/// One mistake inside a capture; the job ends with CUDA's error for it.
void mistake(const std::string &what) {
  float *device;
  check(cudaMalloc(&device, 256), "cudaMalloc");
  cudaEvent_t event = newEvent();
  if (what == "isolation")
    check(cudaEventRecord(event, newStream()), "cudaEventRecord");
  cudaStream_t stream = capturing();
  if (what == "sync") {
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  } else if (what == "malloc") {
    check(cudaMalloc(&device, 256), "cudaMalloc");
  } else if (what == "pageable") {
    static float pageable[64];
    check(cudaMemcpyAsync(device, pageable, sizeof(pageable),
                          cudaMemcpyHostToDevice, stream),
          "cudaMemcpyAsync");
  } else if (what == "captured-event") {
    check(cudaMemsetAsync(device, 0, 256, stream), "cudaMemsetAsync");
    check(cudaEventRecord(event, stream), "cudaEventRecord");
    check(cudaEventQuery(event), "cudaEventQuery");
  } else if (what == "isolation") {
    check(cudaStreamWaitEvent(stream, event, 0), "cudaStreamWaitEvent");
  } else if (what == "unjoined") {
    cudaStream_t side = newStream();
    check(cudaEventRecord(event, stream), "cudaEventRecord");
    check(cudaStreamWaitEvent(side, event, 0), "cudaStreamWaitEvent");
    check(cudaMemsetAsync(device, 0, 256, side), "cudaMemsetAsync");
  } else {
    zest_fatal(2, "unknown check '%s'", what.c_str());
  }
  cudaGraph_t graph;
  check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
}

} // namespace

int main(int argc, char **argv) {
  zest_init(&argc, &argv);
  check(cudaSetDevice(zest_cuda_device()), "cudaSetDevice");
  std::string what = argc > 1 ? argv[1] : "";
  if (what == "replay")
    replay();
  else if (what == "entries")
    entries();
  else if (what == "alloc")
    allocating();
  else
    mistake(what);
  std::printf("done: %s\n", what.c_str());
  zest_finalize();
  return 0;
}
