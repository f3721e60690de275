//===- CudaBackendTest.cpp - The C API on device buffers ------------------===//
//
// Run under ZEST_BACKEND=nccl (one GPU per rank) or ZEST_BACKEND=staged (any
// number of ranks on one GPU): every collective on device buffers of F32,
// BF16 and I64, sum and average, out of place and in place, two requests in
// flight, a 2 x (W/2) mesh when W is even, broadcast, the program's
// constants uploaded in stream order, expert parallelism's row exchange
// (one expert group of all ranks, then groups of 2 when W is 4 or more);
// results are copied back
// and checked against values computed on the host. Prints "N passed, M
// failed" on rank 0 (test/Runtime/cuda-backend.test).
//
//===----------------------------------------------------------------------===//

#include "Bf16.h"
#include "DeviceBuffers.h"
#include "zest_runtime.h"
#include "zest_runtime_cuda.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

int passed = 0, failed = 0;

void expect(bool ok, const char *what, int rank) {
  if (ok) {
    ++passed;
    return;
  }
  ++failed;
  std::fprintf(stderr, "rank %d: FAILED: %s\n", rank, what);
}

/// Element i of rank r's contribution: exact in every tested type.
double value(int rank, int64_t i) { return double(rank + 1) * (i % 7 + 1); }

void testAllGather(int rank, int world, zest_group_t group) {
  const int64_t n = 1000;
  int size = zest_group_size(group), me = zest_group_rank(group);
  std::vector<float> mine(n);
  for (int64_t i = 0; i < n; ++i)
    mine[i] = float(me * n + i);
  float *send = toDevice(mine), *recv = nullptr;
  cudaMalloc(&recv, sizeof(float) * n * size);
  zest_wait(zest_all_gather_start(send, recv, n, ZEST_F32, group, "ag"));
  std::vector<float> all = toHost(recv, size_t(n * size));
  bool ok = true;
  for (int64_t i = 0; i < n * size; ++i)
    ok = ok && all[i] == float(i);
  expect(ok, "all_gather f32", rank);
  cudaFree(send);
  cudaFree(recv);
}

void testReduceScatter(int rank, int world, zest_reduction_t op) {
  const int64_t n = 513; // per rank, odd
  std::vector<float> mine(size_t(n * world));
  for (int64_t i = 0; i < n * world; ++i)
    mine[i] = float(value(rank, i));
  float *send = toDevice(mine), *recv = nullptr;
  cudaMalloc(&recv, sizeof(float) * n);
  zest_wait(zest_reduce_scatter_start(send, recv, n, ZEST_F32, op,
                                      ZEST_GROUP_WORLD, "rs"));
  std::vector<float> got = toHost(recv, size_t(n));
  bool ok = true;
  for (int64_t i = 0; i < n; ++i) {
    double want = 0;
    for (int r = 0; r < world; ++r)
      want += value(r, rank * n + i);
    if (op == ZEST_AVG)
      want /= world;
    ok = ok && std::fabs(got[i] - want) <= 1e-5 * std::fabs(want);
  }
  expect(ok, op == ZEST_AVG ? "reduce_scatter avg" : "reduce_scatter sum",
         rank);
  cudaFree(send);
  cudaFree(recv);
}

void testAllReduceInPlaceTwoInFlight(int rank, int world) {
  const int64_t n = 4096;
  std::vector<int64_t> a(n);
  std::vector<uint16_t> b(n);
  for (int64_t i = 0; i < n; ++i) {
    a[i] = int64_t(value(rank, i));
    b[i] = toBf16(float(value(rank, i)));
  }
  int64_t *da = toDevice(a);
  uint16_t *db = toDevice(b);
  zest_request_t first = zest_all_reduce_start(da, da, n, ZEST_I64, ZEST_SUM,
                                               ZEST_GROUP_WORLD, "ar-i64");
  zest_request_t second = zest_all_reduce_start(db, db, n, ZEST_BF16, ZEST_SUM,
                                                ZEST_GROUP_WORLD, "ar-bf16");
  zest_wait(second);
  zest_wait(first);
  std::vector<int64_t> ga = toHost(da, size_t(n));
  std::vector<uint16_t> gb = toHost(db, size_t(n));
  bool okA = true, okB = true;
  for (int64_t i = 0; i < n; ++i) {
    double want = 0;
    for (int r = 0; r < world; ++r)
      want += value(r, i);
    okA = okA && ga[i] == int64_t(want);
    okB = okB && std::fabs(fromBf16(gb[i]) - want) <= 0.01 * want;
  }
  expect(okA, "all_reduce i64 in place", rank);
  expect(okB, "all_reduce bf16 in place, two in flight", rank);
  cudaFree(da);
  cudaFree(db);
}

void testBroadcast(int rank) {
  const int64_t n = 100;
  std::vector<float> mine(n, float(rank == 0 ? 3.5 : -1));
  float *buffer = toDevice(mine);
  zest_broadcast(buffer, n, ZEST_F32, 0);
  std::vector<float> got = toHost(buffer, size_t(n));
  bool ok = true;
  for (float v : got)
    ok = ok && v == 3.5f;
  expect(ok, "broadcast", rank);
  cudaFree(buffer);
}

/// The pool hands out device memory with exact accounting, and reuses it.
void testDevicePool(int rank) {
  zest_reset_counters();
  void *a = zest_pool_alloc(1000);
  cudaPointerAttributes attributes;
  bool device = cudaPointerGetAttributes(&attributes, a) == cudaSuccess &&
                attributes.type == cudaMemoryTypeDevice;
  expect(device, "pool memory is device memory", rank);
  cudaMemsetAsync(a, 0x3c, 1000, stream());
  std::vector<unsigned char> back =
      toHost(static_cast<unsigned char *>(a), 1000);
  bool ok = true;
  for (unsigned char byte : back)
    ok = ok && byte == 0x3c;
  expect(ok, "pool memory holds what the stream wrote", rank);
  zest_counters_t counters;
  zest_get_counters(&counters);
  expect(counters.pool_bytes == 1024, "pool bytes (1000 rounded to 1024)",
         rank);
  zest_pool_free(a);
  void *b = zest_pool_alloc(1000);
  expect(a == b, "a freed buffer is reused", rank);
  zest_pool_free(b);
}

/// A constant uploaded twice (the second from the runtime's page-locked
/// copy) lands whole in both device buffers, after the stream's earlier
/// work and before its later work.
void testUploadConstant(int rank) {
  static const float table[6] = {0.5f, -1.0f, 2.25f, 3.0f, -4.5f, 8.0f};
  float *first = toDevice(std::vector<float>(6, 0.0f)),
        *second = toDevice(std::vector<float>(6, 0.0f));
  cudaMemsetAsync(first, 0xff, sizeof table, stream());
  zest_upload_constant(first, table, sizeof table);
  zest_upload_constant(second, table, sizeof table);
  cudaMemsetAsync(second, 0, sizeof(float), stream());
  std::vector<float> a = toHost(first, 6), b = toHost(second, 6);
  expect(std::equal(a.begin(), a.end(), table), "a constant is uploaded", rank);
  expect(b[0] == 0.0f && std::equal(b.begin() + 1, b.end(), table + 1),
         "a constant is uploaded again, in stream order", rank);
  cudaFree(first);
  cudaFree(second);
}

} // namespace

/// Row i, column c of what world rank `sender` sends expert `e`.
float expertRow(int sender, int64_t e, int64_t i, int64_t c) {
  return float(sender * 1000 + e * 10 + i) + 0.25f * float(c);
}

/// Expert parallelism's exchange in expert groups of `groupSize` ranks,
/// two experts per rank: rank r sends (r + e) % 3 rows to expert e (some
/// blocks empty); the rows must land grouped by this rank's experts, then
/// rank by rank, the rest of the buffer zero, and come back unchanged.
void testExpertExchange(int rank, int groupSize) {
  zest_set_expert_groups(groupSize);
  const int64_t experts = 2 * groupSize, local = 2, cols = 3;
  int me = zest_group_rank(ZEST_GROUP_EXPERT), base = rank - me;
  auto count = [](int sender, int64_t e) { return (sender + e) % 3; };
  std::vector<int64_t> ends;
  std::vector<float> rows;
  for (int64_t e = 0; e < experts; ++e) {
    for (int64_t i = 0; i < count(rank, e); ++i)
      for (int64_t c = 0; c < cols; ++c)
        rows.push_back(expertRow(rank, e, i, c));
    ends.push_back(int64_t(rows.size()) / cols);
  }
  int64_t inRows = std::max<int64_t>(ends.back(), 1);
  int64_t outRows = groupSize * 2 * experts; // every row of the group
  rows.resize(size_t(inRows * cols), 0.0f);
  int64_t *deviceEnds = toDevice(ends), *routing = nullptr;
  int64_t *localEnds = nullptr;
  float *deviceRows = toDevice(rows), *out = nullptr, *back = nullptr;
  cudaMalloc(&routing, sizeof(int64_t) * experts);
  cudaMalloc(&localEnds, sizeof(int64_t) * local);
  cudaMalloc(&out, sizeof(float) * outRows * cols);
  cudaMalloc(&back, sizeof(float) * inRows * cols);
  zest_expert_routing(deviceEnds, 64, experts, routing, localEnds);
  zest_expert_dispatch(deviceRows, inRows, cols, ZEST_F32, deviceEnds, 64,
                       experts, routing, out, outRows);
  // Expected: for each local expert, each group rank's rows in turn.
  std::vector<float> want;
  std::vector<int64_t> wantEnds;
  for (int64_t l = 0; l < local; ++l) {
    int64_t e = me * local + l;
    for (int q = 0; q < groupSize; ++q)
      for (int64_t i = 0; i < count(base + q, e); ++i)
        for (int64_t c = 0; c < cols; ++c)
          want.push_back(expertRow(base + q, e, i, c));
    wantEnds.push_back(int64_t(want.size()) / cols);
  }
  want.resize(size_t(outRows * cols), 0.0f);
  expect(toHost(out, want.size()) == want, "expert dispatch", rank);
  expect(toHost(localEnds, size_t(local)) == wantEnds, "expert local ends",
         rank);
  zest_expert_combine(out, outRows, cols, ZEST_F32, deviceEnds, 64, experts,
                      routing, back, inRows);
  expect(toHost(back, rows.size()) == rows, "expert combine", rank);
  for (void *buffer : {(void *)deviceEnds, (void *)routing, (void *)localEnds,
                       (void *)deviceRows, (void *)out, (void *)back})
    cudaFree(buffer);
}

int main(int argc, char **argv) {
  zest_init(&argc, &argv);
  int rank = zest_rank(), world = zest_world_size();
  testAllGather(rank, world, ZEST_GROUP_WORLD);
  testReduceScatter(rank, world, ZEST_SUM);
  testReduceScatter(rank, world, ZEST_AVG);
  testAllReduceInPlaceTwoInFlight(rank, world);
  testBroadcast(rank);
  testDevicePool(rank);
  testUploadConstant(rank);
  // Before a mesh is set, each rank is its own replica group.
  testAllGather(rank, world, ZEST_GROUP_REPLICA);
  // Each rank drives its node-local rank's device (modulo the devices).
  std::vector<int32_t> devices(size_t(world), -1);
  int32_t device = zest_cuda_device();
  zest_host_all_gather(&device, devices.data(), 1, ZEST_I32);
  if (rank == 0) {
    std::printf("devices:");
    for (int32_t d : devices)
      std::printf(" %d", d);
    std::printf("\n");
  }
  testExpertExchange(rank, world);
  if (world >= 4 && world % 2 == 0)
    testExpertExchange(rank, 2);
  if (world % 2 == 0) {
    zest_set_mesh(2, world / 2);
    testAllGather(rank, world, ZEST_GROUP_SHARD);
    testAllGather(rank, world, ZEST_GROUP_REPLICA);
  }
  // Collectives take device buffers under these backends.
  int32_t *counts = toDevice(std::vector<int32_t>{passed, failed});
  zest_wait(zest_all_reduce_start(counts, counts, 2, ZEST_I32, ZEST_SUM,
                                  ZEST_GROUP_WORLD, "totals"));
  std::vector<int32_t> totals = toHost(counts, 2);
  cudaFree(counts);
  if (rank == 0)
    std::printf("%d passed, %d failed\n", totals[0], totals[1]);
  zest_finalize();
  return totals[1] == 0 ? 0 : 1;
}
