//===- RuntimeApiTest.cpp - The runtime C API on real ranks ---------------===//
//
//   mpirun -np W zest-runtime-test            checks, prints "N passed, M
//   failed" mpirun -np W zest-runtime-test <misuse>   one fatal misuse (see
//   main)
//
// Every collective on every dtype, sum and average, in place and not,
// broadcast, barrier, pool accounting and the trace, with values each rank
// can predict.
//
//===----------------------------------------------------------------------===//

#include "Bf16.h"
#include "zest_runtime.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

int passed = 0, failed = 0;

void check(bool ok, const std::string &what) {
  if (ok) {
    ++passed;
    return;
  }
  ++failed;
  std::fprintf(stderr, "rank %d: FAILED: %s\n", zest_rank(), what.c_str());
}

// Binary16 encodings of small integers 0..10 (exact).
uint16_t toF16(int value) {
  static const uint16_t table[] = {0x0000, 0x3c00, 0x4000, 0x4200,
                                   0x4400, 0x4500, 0x4600, 0x4700,
                                   0x4800, 0x4880, 0x4900};
  return table[value];
}

template <typename T> void testTyped(zest_dtype_t dtype, const char *name) {
  int rank = zest_rank(), world = zest_world_size();
  const int64_t count = 5;
  // all-gather: element i of rank r is r * 100 + i.
  std::vector<T> shard(count), full(count * world);
  for (int64_t i = 0; i < count; ++i)
    shard[i] = T(rank * 100 + i);
  zest_wait(zest_all_gather_start(shard.data(), full.data(), count, dtype,
                                  ZEST_GROUP_WORLD, name));
  bool ok = true;
  for (int r = 0; r < world; ++r)
    for (int64_t i = 0; i < count; ++i)
      ok &= full[r * count + i] == T(r * 100 + i);
  check(ok, std::string("all_gather ") + name);

  // reduce-scatter sum: every rank contributes (rank + 1) everywhere.
  std::vector<T> contribution(count * world, T(rank + 1)), mine(count);
  zest_wait(zest_reduce_scatter_start(contribution.data(), mine.data(), count,
                                      dtype, ZEST_SUM, ZEST_GROUP_WORLD, name));
  T sum = T(world * (world + 1) / 2);
  ok = true;
  for (T v : mine)
    ok &= v == sum;
  check(ok, std::string("reduce_scatter sum ") + name);

  // all-reduce average, in place: values 2 * (rank + 1) average to W + 1.
  std::vector<T> values(count, T(2 * (rank + 1)));
  zest_wait(zest_all_reduce_start(values.data(), values.data(), count, dtype,
                                  ZEST_AVG, ZEST_GROUP_WORLD, name));
  ok = true;
  for (T v : values)
    ok &= v == T(world + 1);
  check(ok, std::string("all_reduce avg in place ") + name);
}

void testHalf(zest_dtype_t dtype, const char *name) {
  int rank = zest_rank(), world = zest_world_size();
  const int64_t count = 4;
  auto encode = [&](int v) {
    return dtype == ZEST_BF16 ? toBf16(float(v)) : toF16(v);
  };
  std::vector<uint16_t> contribution(count * world, encode(rank + 1));
  std::vector<uint16_t> mine(count);
  zest_wait(zest_reduce_scatter_start(contribution.data(), mine.data(), count,
                                      dtype, ZEST_SUM, ZEST_GROUP_WORLD, name));
  bool ok = true;
  for (uint16_t v : mine)
    ok &= v == encode(world * (world + 1) / 2);
  check(ok, std::string("reduce_scatter sum ") + name);
  std::vector<uint16_t> values(count, encode(2 * (rank + 1))), out(count);
  zest_wait(zest_all_reduce_start(values.data(), out.data(), count, dtype,
                                  ZEST_AVG, ZEST_GROUP_WORLD, name));
  ok = true;
  for (uint16_t v : out)
    ok &= v == encode(world + 1);
  check(ok, std::string("all_reduce avg ") + name);
  if (dtype == ZEST_BF16)
    check(fromBf16(out[0]) == float(world + 1), "bf16 decodes");
}

void testAsyncOverlap() {
  // Two requests in flight at once, waited in reverse order.
  int world = zest_world_size();
  std::vector<float> a(3, 1.0f), b(3, 2.0f), ra(3), rb(3);
  zest_request_t first = zest_all_reduce_start(a.data(), ra.data(), 3, ZEST_F32,
                                               ZEST_SUM, ZEST_GROUP_WORLD, "a");
  zest_request_t second = zest_all_reduce_start(
      b.data(), rb.data(), 3, ZEST_F32, ZEST_SUM, ZEST_GROUP_WORLD, "b");
  check(first != 0 && second != 0 && first != second, "request handles");
  zest_progress();
  zest_wait(second);
  zest_wait(first);
  check(ra[0] == float(world) && rb[2] == float(2 * world),
        "two requests in flight");
}

/// Reduce-scatter hands each rank the sum of its own block: rank r puts
/// (r + 1) * 1000 + 10 * b + i at element i of block b, so rank q gets
/// 1000 * W(W+1)/2 + W * (10 * q + i). Two in flight, waited in reverse
/// order, the second in place (the result over this rank's block).
void testReduceScatterBlocks() {
  int rank = zest_rank(), world = zest_world_size();
  const int64_t count = 5;
  std::vector<float> a(count * world), b(count * world), ra(count);
  for (int block = 0; block < world; ++block)
    for (int64_t i = 0; i < count; ++i)
      a[block * count + i] = b[block * count + i] =
          float((rank + 1) * 1000 + 10 * block + i);
  float *own = b.data() + rank * count;
  zest_request_t first =
      zest_reduce_scatter_start(a.data(), ra.data(), count, ZEST_F32, ZEST_SUM,
                                ZEST_GROUP_WORLD, "blocks");
  zest_request_t second = zest_reduce_scatter_start(
      b.data(), own, count, ZEST_F32, ZEST_AVG, ZEST_GROUP_WORLD, "in place");
  zest_wait(second);
  zest_wait(first);
  bool ok = true;
  for (int64_t i = 0; i < count; ++i) {
    float sum = 1000.0f * float(world * (world + 1) / 2) +
                float(world) * float(10 * rank + i);
    ok &= ra[i] == sum && own[i] == sum / float(world);
  }
  check(ok, "reduce_scatter of each rank's block, in place, two in flight");
}

/// Every `replicas x shards` mesh of the world: group ranks and sizes, a
/// gather and an averaging reduce-scatter within a replica, an averaging
/// all-reduce across replicas.
void testMeshes() {
  int rank = zest_rank(), world = zest_world_size();
  for (int replicas = 1; replicas <= world; ++replicas) {
    if (world % replicas)
      continue;
    int shards = world / replicas;
    std::string mesh = std::to_string(replicas) + "x" + std::to_string(shards);
    zest_set_mesh(replicas, shards);
    int replica = rank / shards, shard = rank % shards;
    check(zest_group_size(ZEST_GROUP_SHARD) == shards &&
              zest_group_rank(ZEST_GROUP_SHARD) == shard &&
              zest_group_size(ZEST_GROUP_REPLICA) == replicas &&
              zest_group_rank(ZEST_GROUP_REPLICA) == replica &&
              zest_group_size(ZEST_GROUP_WORLD) == world,
          "group ranks and sizes on mesh " + mesh);
    // Gather within the replica: shard s of replica q holds q * 10 + s.
    float mine = float(replica * 10 + shard);
    std::vector<float> full(shards);
    zest_wait(zest_all_gather_start(&mine, full.data(), 1, ZEST_F32,
                                    ZEST_GROUP_SHARD, "mesh"));
    bool ok = true;
    for (int s = 0; s < shards; ++s)
      ok &= full[s] == float(replica * 10 + s);
    check(ok, "all_gather over the shard group on mesh " + mesh);
    // Reduce-scatter average within the replica: rank r contributes r.
    std::vector<float> contribution(shards, float(rank));
    float reduced = 0;
    zest_wait(zest_reduce_scatter_start(contribution.data(), &reduced, 1,
                                        ZEST_F32, ZEST_AVG, ZEST_GROUP_SHARD,
                                        "mesh"));
    check(reduced == float(replica * shards) + float(shards - 1) / 2,
          "reduce_scatter avg over the shard group on mesh " + mesh);
    // All-reduce average across replicas: the ranks holding shard s.
    double value = rank, averaged = 0;
    zest_wait(zest_all_reduce_start(&value, &averaged, 1, ZEST_F64, ZEST_AVG,
                                    ZEST_GROUP_REPLICA, "mesh"));
    check(averaged == shard + double(shards) * (replicas - 1) / 2,
          "all_reduce avg over the replica group on mesh " + mesh);
  }
  zest_set_mesh(1, world);
  check(zest_group_size(ZEST_GROUP_SHARD) == world &&
            zest_group_size(ZEST_GROUP_REPLICA) == 1,
        "the flat mesh again");
}

void testBroadcastBarrier() {
  int rank = zest_rank(), world = zest_world_size();
  int root = world - 1;
  std::vector<int64_t> data(4, rank == root ? 42 : -1);
  zest_broadcast(data.data(), 4, ZEST_I64, root);
  check(data[0] == 42 && data[3] == 42, "broadcast from the last rank");
  zest_barrier();
  check(true, "barrier");
}

void testPool() {
  zest_reset_counters();
  zest_counters_t before;
  zest_get_counters(&before);
  void *a = zest_pool_alloc(1000);
  void *b = zest_pool_alloc(100);
  zest_pool_mark_gathered(a);
  zest_counters_t during;
  zest_get_counters(&during);
  check(during.gathered_bytes - before.gathered_bytes == 1000,
        "gathered bytes count the buffer, not the rounding");
  check(during.pool_bytes - before.pool_bytes == 1024 + 128,
        "pool bytes are 64-byte buckets");
  check(reinterpret_cast<uintptr_t>(a) % 64 == 0, "64-byte alignment");
  zest_pool_free(a);
  void *c = zest_pool_alloc(990); // same 1024-byte bucket
  check(c == a, "a freed buffer is reused by its bucket");
  zest_pool_free(b);
  zest_pool_free(c);
  zest_counters_t after;
  zest_get_counters(&after);
  check(after.pool_bytes == before.pool_bytes && after.gathered_bytes == 0,
        "everything returned to the pool");
  check(after.gathered_peak_bytes >= 1000 &&
            after.pool_peak_bytes >= before.pool_bytes + 1152,
        "peaks remember the high-water mark");
}

/// Buffers where the compiled code computes: host memory on the CPU
/// backend, outside the pool's accounting, copied both ways.
void testBuffers() {
  check(zest_buffers_on_device() == 0,
        "the CPU backend computes on host memory");
  zest_counters_t before, after;
  zest_get_counters(&before);
  auto *buffer = static_cast<float *>(zest_buffer_alloc(5 * sizeof(float)));
  zest_get_counters(&after);
  check(after.pool_bytes == before.pool_bytes,
        "long-lived buffers are not pool buffers");
  check(reinterpret_cast<uintptr_t>(buffer) % 64 == 0, "64-byte alignment");
  float in[5] = {1, -2, 3.5f, 0, 7}, out[5] = {};
  zest_copy_to_device(buffer, in, sizeof in);
  zest_copy_to_host(out, buffer, sizeof out);
  check(std::equal(in, in + 5, out), "copies round-trip");
  static const float table[5] = {2, 4, -8, 16, 0.5f};
  zest_upload_constant(buffer, table, sizeof table);
  zest_copy_to_host(out, buffer, sizeof out);
  check(std::equal(table, table + 5, out), "constants are plain copies");
  zest_copy_to_host(out, nullptr, 0); // nothing to copy: no access
  zest_buffer_free(buffer);
}

void testTrace(const char *dir) {
  zest_trace_enable(1);
  double start = zest_now_us();
  std::vector<float> x(2, 1.0f), y(2);
  zest_wait(zest_all_reduce_start(x.data(), y.data(), 2, ZEST_F32, ZEST_SUM,
                                  ZEST_GROUP_WORLD, "traced"));
  zest_trace_span("work", "compute", start, zest_now_us());
  std::string path =
      std::string(dir) + "/trace." + std::to_string(zest_rank()) + ".json";
  check(zest_trace_write(path.c_str()) == 0, "trace written");
  FILE *file = std::fopen(path.c_str(), "r");
  std::string text;
  char buffer[4096];
  size_t n;
  while (file && (n = std::fread(buffer, 1, sizeof(buffer), file)) > 0)
    text.append(buffer, n);
  if (file)
    std::fclose(file);
  check(text.find("\"traceEvents\"") != std::string::npos &&
            text.find("all_reduce of 'traced'") != std::string::npos &&
            text.find("\"name\":\"work\"") != std::string::npos,
        "trace has the collective and the compute span");
  zest_trace_enable(0);
}

} // namespace

int main(int argc, char **argv) {
  zest_init(&argc, &argv);
  std::string misuse = argc > 1 ? argv[1] : "";
  if (misuse == "wait-twice") {
    std::vector<float> x(1, 1.0f), y(1);
    zest_request_t r = zest_all_reduce_start(x.data(), y.data(), 1, ZEST_F32,
                                             ZEST_SUM, ZEST_GROUP_WORLD, "x");
    zest_wait(r);
    zest_wait(r); // fatal
  } else if (misuse == "never-waited") {
    std::vector<float> x(1, 1.0f), y(1);
    zest_all_reduce_start(x.data(), y.data(), 1, ZEST_F32, ZEST_SUM,
                          ZEST_GROUP_WORLD, "x");
    zest_finalize(); // fatal
  } else if (misuse == "bad-mesh") {
    zest_set_mesh(2, zest_world_size()); // fatal: covers twice the world
  } else if (misuse == "free-foreign") {
    int local = 0;
    zest_pool_free(&local); // fatal
  }
  check(zest_dtype_size(ZEST_F32) == 4 && zest_dtype_size(ZEST_BF16) == 2 &&
            zest_dtype_size(ZEST_I64) == 8 && zest_dtype_size(ZEST_U8) == 1,
        "dtype sizes");
  testTyped<float>(ZEST_F32, "f32");
  testTyped<double>(ZEST_F64, "f64");
  testTyped<int32_t>(ZEST_I32, "i32");
  testTyped<int64_t>(ZEST_I64, "i64");
  testHalf(ZEST_BF16, "bf16");
  testHalf(ZEST_F16, "f16");
  testAsyncOverlap();
  testReduceScatterBlocks();
  testMeshes();
  testBroadcastBarrier();
  testPool();
  testBuffers();
  testTrace(argc > 2 ? argv[2] : ".");
  int local[2] = {passed, failed}, total[2] = {0, 0};
  zest_wait(zest_all_reduce_start(local, total, 2, ZEST_I32, ZEST_SUM,
                                  ZEST_GROUP_WORLD, "results"));
  if (zest_rank() == 0)
    std::printf("%d passed, %d failed\n", total[0], total[1]);
  zest_finalize();
  return total[1] ? 1 : 0;
}
