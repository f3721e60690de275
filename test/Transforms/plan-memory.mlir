// RUN: zest-opt %s -split-input-file -zest-plan-memory="report-json=-" -o /dev/null | FileCheck %s
// An arena alignment the pool cannot give is refused.
// RUN: not zest-opt %s -split-input-file -zest-plan-memory="arena-alignment=96" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ALIGN
// ALIGN: error: arena-alignment must be a positive multiple of 64 (the pool's buckets), got 96

// The pool's view of a step: an allocation with `alignment` asks for its
// bytes plus the alignment, rounded up to 64-byte buckets (a 4 x f32 buffer
// aligned to 64: 16 + 64 -> 128 bytes); a buffer marked gathered counts its
// own bytes (16) until freed. Branches that free what they allocate raise
// the peak from where they start: 128 + 64 (b) + 128 (the branch's 100
// bytes) = 320, reached inside the branch. With an allocation in a branch
// the order of allocations is not static, so the pool's free lists serve
// the step: they hold, per bucket size, as many buffers as are ever alive
// at once (two of 128 bytes, one of 64): 320 bytes. At the peak the pool
// holds the gathered buffer (its 128 pool bytes) and two others (b and the
// branch's), 192 bytes.
// CHECK:      "name": "step",
// CHECK-NEXT: "peak_breakdown": {
// CHECK-NEXT:   "gathered_bytes": 128,
// CHECK-NEXT:   "gradient_bytes": 0,
// CHECK-NEXT:   "other_buffers": 2,
// CHECK-NEXT:   "other_bytes": 192,
// CHECK-NEXT:   "others": [
// CHECK-NEXT:     {
// CHECK-NEXT:       "at": "memref.alloc at {{.*}}plan-memory.mlir{{.}}":[[@LINE+38]]:10)",
// CHECK-NEXT:       "bytes": 128,
// CHECK-NEXT:       "unit": ""
// CHECK-NEXT:     },
// CHECK-NEXT:     {
// CHECK-NEXT:       "at": "memref.alloc at {{.*}}plan-memory.mlir{{.}}":[[@LINE+31]]:8)",
// CHECK-NEXT:       "bytes": 64,
// CHECK-NEXT:       "unit": ""
// CHECK-NEXT:     }
// CHECK-NEXT:   ],
// CHECK-NEXT:   "units": {},
// CHECK-NEXT:   "workspace_bytes": 0
// CHECK-NEXT: },
// CHECK-NEXT: "peak_gathered_at": "func.call at
// CHECK-NEXT: "peak_pool_at": "memref.alloc at {{.*}}plan-memory.mlir{{.}}":[[@LINE+24]]:10)",
// CHECK-NEXT: "predicted_kinds_after_allocation": [],
// CHECK-NEXT: "predicted_peak_gathered_bytes": 16,
// CHECK-NEXT: "predicted_peak_pool_bytes": 320,
// CHECK-NEXT: "predicted_pool_after_allocation": [],
// CHECK-NEXT: "predicted_pool_footprint_bytes": 320
// A function with a dynamic allocation cannot be replayed: no prediction,
// and none for the module either.
// CHECK:      "name": "dynamic",
// CHECK-NEXT: "predicted_peak_gathered_bytes": null,
// CHECK-NEXT: "predicted_peak_pool_bytes": null,
// CHECK-NEXT: "predicted_pool_footprint_bytes": null
// CHECK:      "predicted_peak_gathered_bytes": null,
// CHECK-NEXT: "predicted_peak_pool_bytes": null,
// CHECK-NEXT: "predicted_pool_footprint_bytes": null
func.func private @zest_pool_mark_gathered(!llvm.ptr)
func.func @step(%c: i1) {
  %a = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
  %i = memref.extract_aligned_pointer_as_index %a : memref<4xf32> -> index
  %i64 = arith.index_cast %i : index to i64
  %p = llvm.inttoptr %i64 : i64 to !llvm.ptr
  call @zest_pool_mark_gathered(%p) : (!llvm.ptr) -> ()
  %b = memref.alloc() : memref<2xf32>
  scf.if %c {
    %t = memref.alloc() : memref<25xf32>
    memref.dealloc %t : memref<25xf32>
  }
  memref.dealloc %a : memref<4xf32>
  memref.dealloc %b : memref<2xf32>
  return
}
func.func @dynamic(%n: index) {
  %a = memref.alloc(%n) : memref<?xf32>
  memref.dealloc %a : memref<?xf32>
  return
}

// -----

// The unit table carries the schedule's decisions; the collectives are the
// runtime calls in program order, with what a ring moves per rank at W=4:
// 3 shards for the gather and the reduce-scatter (3 x 8 f32 = 96 bytes),
// 2 x 3/4 of the buffer for the all-reduce (2 x 3/4 x 8 bytes = 12).
// CHECK:      "name": "step",
// CHECK:      "sent_bytes_per_rank": 204
// CHECK:      "schema": "zest-report/1",
// CHECK:      "units": [
// CHECK-NEXT:   {
// CHECK-NEXT:     "accumulator_bytes": 0,
// CHECK-NEXT:     "bytes": 128,
// CHECK-NEXT:     "checkpoint": null,
// CHECK-NEXT:     "decision": "keep",
// CHECK-NEXT:     "dtype": "f32",
// CHECK-NEXT:     "kind": "sharded",
// CHECK-NEXT:     "name": "a",
// CHECK-NEXT:     "numel": 30,
// CHECK-NEXT:     "offload": null,
// CHECK-NEXT:     "optimizer_state_bytes": 0,
// CHECK-NEXT:     "parameters": [
// CHECK-NEXT:       "a.w",
// CHECK-NEXT:       "a.b"
// CHECK-NEXT:     ],
// CHECK-NEXT:     "prefetch": 1,
// CHECK-NEXT:     "shard_bytes": 32
// CHECK:          "decision": "replicated",
// CHECK:          "prefetch": null,
// CHECK:      "world_size": 4
// RUN: zest-opt %s -split-input-file -zest-plan-memory="report-json=-" -o /dev/null | FileCheck %s --check-prefix=COLL
// COLL:      "collectives": [{{$}}
// COLL-NEXT:   {
// COLL-NEXT:     "at": "func.call at
// COLL-NEXT:     "bytes": 32,
// COLL-NEXT:     "group": "shard",
// COLL-NEXT:     "kind": "all_gather",
// COLL-NEXT:     "received_bytes_per_rank": 96,
// COLL-NEXT:     "sent_bytes_per_rank": 96,
// COLL-NEXT:     "unit": "a"
// COLL:          "kind": "reduce_scatter",
// COLL:          "sent_bytes_per_rank": 96,
// COLL:          "bytes": 8,
// COLL-NEXT:     "group": "world",
// COLL-NEXT:     "kind": "all_reduce",
// COLL-NEXT:     "received_bytes_per_rank": 12,
// COLL-NEXT:     "sent_bytes_per_rank": 12,
// COLL-NEXT:     "unit": "grad-norm"
zest.unit @a sharded : f32, world_size = 4, padded_size = 32, shard_size = 8 ["a.w" : tensor<5x5xf32> at 0, "a.b" : tensor<5xf32> at 25] {zest.keep, zest.prefetch = 1 : i64}
zest.unit @r replicated : f32, world_size = 4, padded_size = 2, shard_size = 2 ["r.w" : tensor<2xf32> at 0]
llvm.mlir.global internal constant @zest.tag.a("a\00") {addr_space = 0 : i32}
llvm.mlir.global internal constant @"zest.tag.grad-norm"("grad-norm\00") {addr_space = 0 : i32}
func.func private @zest_all_gather_start(!llvm.ptr, !llvm.ptr, i64, i32, i32, !llvm.ptr) -> i64
func.func private @zest_reduce_scatter_start(!llvm.ptr, !llvm.ptr, i64, i32, i32, i32, !llvm.ptr) -> i64
func.func private @zest_all_reduce_start(!llvm.ptr, !llvm.ptr, i64, i32, i32, i32, !llvm.ptr) -> i64
func.func @step(%p: !llvm.ptr) {
  %tag = llvm.mlir.addressof @zest.tag.a : !llvm.ptr
  %norm = llvm.mlir.addressof @"zest.tag.grad-norm" : !llvm.ptr
  %c8 = arith.constant 8 : i64
  %c2 = arith.constant 2 : i64
  %f32 = arith.constant 0 : i32
  %avg = arith.constant 1 : i32
  %world = arith.constant 0 : i32
  %shards = arith.constant 1 : i32
  %0 = call @zest_all_gather_start(%p, %p, %c8, %f32, %shards, %tag) : (!llvm.ptr, !llvm.ptr, i64, i32, i32, !llvm.ptr) -> i64
  %1 = call @zest_reduce_scatter_start(%p, %p, %c8, %f32, %avg, %shards, %tag) : (!llvm.ptr, !llvm.ptr, i64, i32, i32, i32, !llvm.ptr) -> i64
  %2 = call @zest_all_reduce_start(%p, %p, %c2, %f32, %avg, %world, %norm) : (!llvm.ptr, !llvm.ptr, i64, i32, i32, i32, !llvm.ptr) -> i64
  return
}

// -----

// A hybrid mesh of 2 replicas x 2 shards: the gather and the reduce-scatter
// run over the 2 ranks of a replica (1 shard of 32 bytes each), the
// gradient shard's all-reduce over the 2 replicas (2 x 1/2 x 32 bytes), the
// norm's over all 4 ranks (2 x 3/4 x 8 bytes): 108 bytes in all.
// RUN: zest-opt %s -split-input-file -zest-plan-memory="report-json=-" -o /dev/null | FileCheck %s --check-prefix=MESH
// The report before this one is the flat mesh of 4 shards.
// MESH:        "shards": 4
// MESH:      "collectives": [{{$}}
// MESH:          "group": "shard",
// MESH-NEXT:     "kind": "all_gather",
// MESH-NEXT:     "received_bytes_per_rank": 32,
// MESH:          "group": "shard",
// MESH-NEXT:     "kind": "reduce_scatter",
// MESH-NEXT:     "received_bytes_per_rank": 32,
// MESH:          "group": "replica",
// MESH-NEXT:     "kind": "all_reduce",
// MESH-NEXT:     "received_bytes_per_rank": 32,
// MESH:          "group": "world",
// MESH-NEXT:     "kind": "all_reduce",
// MESH-NEXT:     "received_bytes_per_rank": 12,
// MESH:      "sent_bytes_per_rank": 108
// MESH:      "mesh": {
// MESH-NEXT:   "replicas": 2,
// MESH-NEXT:   "shards": 2
// MESH-NEXT: },
// MESH:      "world_size": 4
zest.unit @a sharded : f32, world_size = 2, replicas = 2, padded_size = 16, shard_size = 8 ["a.w" : tensor<16xf32> at 0]
llvm.mlir.global internal constant @zest.tag.a("a\00") {addr_space = 0 : i32}
llvm.mlir.global internal constant @"zest.tag.grad-norm"("grad-norm\00") {addr_space = 0 : i32}
func.func private @zest_all_gather_start(!llvm.ptr, !llvm.ptr, i64, i32, i32, !llvm.ptr) -> i64
func.func private @zest_reduce_scatter_start(!llvm.ptr, !llvm.ptr, i64, i32, i32, i32, !llvm.ptr) -> i64
func.func private @zest_all_reduce_start(!llvm.ptr, !llvm.ptr, i64, i32, i32, i32, !llvm.ptr) -> i64
func.func @step(%p: !llvm.ptr) {
  %tag = llvm.mlir.addressof @zest.tag.a : !llvm.ptr
  %norm = llvm.mlir.addressof @"zest.tag.grad-norm" : !llvm.ptr
  %c8 = arith.constant 8 : i64
  %c2 = arith.constant 2 : i64
  %f32 = arith.constant 0 : i32
  %avg = arith.constant 1 : i32
  %world = arith.constant 0 : i32
  %shards = arith.constant 1 : i32
  %replicas = arith.constant 2 : i32
  %0 = call @zest_all_gather_start(%p, %p, %c8, %f32, %shards, %tag) : (!llvm.ptr, !llvm.ptr, i64, i32, i32, !llvm.ptr) -> i64
  %1 = call @zest_reduce_scatter_start(%p, %p, %c8, %f32, %avg, %shards, %tag) : (!llvm.ptr, !llvm.ptr, i64, i32, i32, i32, !llvm.ptr) -> i64
  %2 = call @zest_all_reduce_start(%p, %p, %c8, %f32, %avg, %replicas, %tag) : (!llvm.ptr, !llvm.ptr, i64, i32, i32, i32, !llvm.ptr) -> i64
  %3 = call @zest_all_reduce_start(%p, %p, %c2, %f32, %avg, %world, %norm) : (!llvm.ptr, !llvm.ptr, i64, i32, i32, i32, !llvm.ptr) -> i64
  return
}

// -----

// Over the budget: an error at the buffer that ends highest in the pool
// (where the peak is reached, for free lists), naming the footprint and the
// live peak.
// RUN: not zest-opt %s -split-input-file -zest-plan-memory="memory-budget=100" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BUDGET
// BUDGET: plan-memory.mlir:63:10: error: @step needs a pool of 320 bytes per rank (its highest buffer is allocated here; 320 bytes live at its peak), over the memory budget of 100 bytes
// BUDGET: plan-memory.mlir:70:1: error: cannot hold @dynamic to a memory budget of 100 bytes: its allocations cannot be replayed exactly
// BUDGET: plan-memory.mlir:[[@LINE+2]]:{{[0-9]+}}: error: @also_over needs a pool of 192 bytes per rank (its highest buffer is allocated here; 192 bytes live at its peak), over the memory budget of 100 bytes
func.func @also_over() {
  %a = memref.alloc() : memref<40xf32>
  memref.dealloc %a : memref<40xf32>
  return
}

// -----

// The cost model (machine=h100-nvlink: 47 TFLOP/s for f32 products, 5 us
// per kernel, a 370 GB/s link with 15 us latency). A 1000 x 1000 x 200
// product takes 5 + 4e8 / 4.7e7 = 13.51 us; the gather started before it
// moves 4 MB (1M f32 shard, W=2): 15 + 4e6 / 3.7e5 = 25.81 us, of which the
// wait after the product still blocks 12.30 us.
// RUN: zest-opt %s -split-input-file -zest-plan-memory="report-json=- machine=h100-nvlink" -o /dev/null | FileCheck %s --check-prefix=COST
// RUN: zest-opt %s -split-input-file -zest-plan-memory="report machine=h100-nvlink" -o /dev/null | FileCheck %s --check-prefix=COSTTEXT
// COST:        "communication_us": 25.81
// COST-NEXT:   "compute_us": 13.51
// COST-NEXT:   "exposed_communication_us": 12.30
// COST-NEXT:   "product_us": 13.51
// COST-NEXT:   "step_us": 25.81
// COST:      "machine": {
// COST-NEXT:   "gemm_gflops": 47000,
// COST:        "name": "h100-nvlink",
// COSTTEXT: predicted time on h100-nvlink: overlap: 0.026 ms per call (compute 0.014 ms, communication 0.026 ms, exposed 0.012 ms; products 0.014 ms of the compute)
zest.unit @a sharded : f32, world_size = 2, padded_size = 2000000, shard_size = 1000000 ["a.w" : tensor<2000000xf32> at 0]
llvm.mlir.global internal constant @zest.tag.a("a\00") {addr_space = 0 : i32}
func.func private @zest_all_gather_start(!llvm.ptr, !llvm.ptr, i64, i32, i32, !llvm.ptr) -> i64
func.func private @zest_wait(i64)
func.func private @zest_sgemm(i32, i32, i64, i64, i64, !llvm.ptr, i64, !llvm.ptr, i64, !llvm.ptr, i64, i32)
func.func @overlap(%p: !llvm.ptr) {
  %tag = llvm.mlir.addressof @zest.tag.a : !llvm.ptr
  %shard = arith.constant 1000000 : i64
  %c1000 = arith.constant 1000 : i64
  %f32 = arith.constant 0 : i32
  %no = arith.constant 0 : i32
  %shards = arith.constant 1 : i32
  %0 = call @zest_all_gather_start(%p, %p, %shard, %f32, %shards, %tag) : (!llvm.ptr, !llvm.ptr, i64, i32, i32, !llvm.ptr) -> i64
  %c200 = arith.constant 200 : i64
  call @zest_sgemm(%no, %no, %c1000, %c1000, %c200, %p, %c200, %p, %c1000, %p, %c1000, %no) : (i32, i32, i64, i64, i64, !llvm.ptr, i64, !llvm.ptr, i64, !llvm.ptr, i64, i32) -> ()
  call @zest_wait(%0) : (i64) -> ()
  return
}

// -----

// Expert parallelism's exchanges block on the link (h100-nvlink: 370 GB/s,
// 15 us latency), and half of each stays on the rank in expert groups of 2:
// the counts of 4 experts, 15 + 16 / 3.7e5 us; the dispatch of 1000 rows of
// 256 f32, 15 + 512000 / 3.7e5 = 16.38 us; the combine, whose buffer holds
// the group's worst case (2000 rows), as many rows as dispatched under
// balanced routing, 16.38 us again: 47.77 us, all of it exposed.
// RUN: zest-opt %s -split-input-file -zest-plan-memory="report machine=h100-nvlink" -o /dev/null | FileCheck %s --check-prefix=EXCHANGE
// EXCHANGE: expert exchanges: exchanges: 3 per call, all-to-all bytes sent per rank 1024032 to 3072032 (the rows sent back depend on the routing)
// EXCHANGE: predicted time on h100-nvlink: exchanges: 0.048 ms per call (compute 0.000 ms, communication 0.048 ms, exposed 0.048 ms; products 0.000 ms of the compute)
zest.unit @e sharded : f32, world_size = 2, padded_size = 8, shard_size = 4 ["e.w" : tensor<4x2xf32> at 0] {experts}
func.func private @zest_expert_routing(!llvm.ptr, i64, i64, !llvm.ptr, !llvm.ptr)
func.func private @zest_expert_dispatch(!llvm.ptr, i64, i64, i32, !llvm.ptr, i64, i64, !llvm.ptr, !llvm.ptr, i64)
func.func private @zest_expert_combine(!llvm.ptr, i64, i64, i32, !llvm.ptr, i64, i64, !llvm.ptr, !llvm.ptr, i64)
func.func @exchanges(%p: !llvm.ptr) {
  %bits = arith.constant 64 : i64
  %experts = arith.constant 4 : i64
  %rows = arith.constant 1000 : i64
  %worst = arith.constant 2000 : i64
  %cols = arith.constant 256 : i64
  %f32 = arith.constant 0 : i32
  call @zest_expert_routing(%p, %bits, %experts, %p, %p) : (!llvm.ptr, i64, i64, !llvm.ptr, !llvm.ptr) -> ()
  call @zest_expert_dispatch(%p, %rows, %cols, %f32, %p, %bits, %experts, %p, %p, %worst) : (!llvm.ptr, i64, i64, i32, !llvm.ptr, i64, i64, !llvm.ptr, !llvm.ptr, i64) -> ()
  call @zest_expert_combine(%p, %worst, %cols, %f32, %p, %bits, %experts, %p, %p, %rows) : (!llvm.ptr, i64, i64, i32, !llvm.ptr, i64, i64, !llvm.ptr, !llvm.ptr, i64) -> ()
  return
}

// -----

// With --target=cuda the CUDA runtime takes cuBLASLt's workspace from the
// pool at the first product and keeps it (ZEST_CUDA_WORKSPACE_BYTES, 32 MiB),
// and a fused linear backward with an activation takes its gradient g
// (m x n f32 here: 8 x 32 x 4 = 1024 bytes) for the call: 128 (a) + 1024
// at the call, plus the workspace: 33555584. Without an activation (the
// second call) there is no g. The cost model times the CUDA runtime's
// products as the CPU's: two products (dx, dw) of 8 x 32 x 16 and one (dx)
// for the second call, 5 us each plus 2 m n k / 3e8 us per product.
// COSTTEXT: predicted time on h100-nvlink: gpu_step: 0.010 ms per call (compute 0.010 ms, communication 0.000 ms, exposed 0.000 ms; products 0.010 ms of the compute)
// At the peak: a and g (1152 bytes of other buffers) and the workspace.
// CHECK:      "name": "gpu_step",
// CHECK-NEXT: "peak_breakdown": {
// CHECK-NEXT:   "gathered_bytes": 0,
// CHECK-NEXT:   "gradient_bytes": 0,
// CHECK-NEXT:   "other_buffers": 2,
// CHECK-NEXT:   "other_bytes": 1152,
// CHECK-NEXT:   "others": [
// CHECK:            "bytes": 1024,
// CHECK:            "bytes": 128,
// CHECK:        ],
// CHECK-NEXT:   "units": {},
// CHECK-NEXT:   "workspace_bytes": 33554432
// CHECK-NEXT: },
// CHECK-NEXT: "peak_gathered_at": "",
// CHECK-NEXT: "peak_pool_at": "func.call at {{.*}}plan-memory.mlir{{.}}":[[@LINE+15]]:3)",
// CHECK:      "predicted_peak_gathered_bytes": 0,
// CHECK-NEXT: "predicted_peak_pool_bytes": 33555584
func.func private @zest_cuda_linear_backward(i64, i64, i64, !llvm.ptr, i64, !llvm.ptr, i64, i32, !llvm.ptr, i64, !llvm.ptr, i64, i32, !llvm.ptr, i64, !llvm.ptr, i64, i32, !llvm.ptr)
func.func @gpu_step(%p: !llvm.ptr) {
  %m = arith.constant 8 : i64
  %n = arith.constant 32 : i64
  %k = arith.constant 16 : i64
  %gelu = arith.constant 2 : i32
  %none = arith.constant 0 : i32
  %t = arith.constant 1 : i32
  %a = memref.alloc() : memref<32xf32>
  %big = memref.alloc() : memref<200xf32>
  memref.dealloc %big : memref<200xf32>
  call @zest_cuda_linear_backward(%m, %n, %k, %p, %n, %p, %n, %none, %p, %k, %p, %k, %t, %p, %k, %p, %k, %t, %p) : (i64, i64, i64, !llvm.ptr, i64, !llvm.ptr, i64, i32, !llvm.ptr, i64, !llvm.ptr, i64, i32, !llvm.ptr, i64, !llvm.ptr, i64, i32, !llvm.ptr) -> ()
  call @zest_cuda_linear_backward(%m, %n, %k, %p, %n, %p, %n, %gelu, %p, %k, %p, %k, %t, %p, %k, %p, %k, %t, %p) : (i64, i64, i64, !llvm.ptr, i64, !llvm.ptr, i64, i32, !llvm.ptr, i64, !llvm.ptr, i64, i32, !llvm.ptr, i64, !llvm.ptr, i64, i32, !llvm.ptr) -> ()
  memref.dealloc %a : memref<32xf32>
  return
}

// -----

// A region function (zest-outline-regions) allocates and frees during each
// call, on top of what its caller holds: 128 (a) + 64 (the region's t, 10
// floats in one bucket) at the first call. Its own peak is not an entry
// point's. After each allocation, in the order the runtime makes them
// (what its trace's pool counter reads; zest plot draws them): a, then
// the region's t, then b and the region's t again. The peak's op is the
// region's (its location the first block's, in an outlined stack), so the
// report names the call it runs in too.
// CHECK:      "name": "calls_region",
// CHECK-NEXT: "peak_breakdown": {
// CHECK:        "other_bytes": 192,
// CHECK:        "workspace_bytes": 0
// CHECK-NEXT: },
// CHECK-NEXT: "peak_gathered_at": "",
// CHECK-NEXT: "peak_pool_at": "memref.alloc at {{.*}}plan-memory.mlir{{.}}":[[@LINE+20]]:8) in the call at {{.*}}plan-memory.mlir{{.}}":[[@LINE+12]]:3)",
// CHECK:      "predicted_peak_gathered_bytes": 0,
// CHECK-NEXT: "predicted_peak_pool_bytes": 192,
// CHECK-NEXT: "predicted_pool_after_allocation": [
// CHECK-NEXT:   128,
// CHECK-NEXT:   192,
// CHECK-NEXT:   128,
// CHECK-NEXT:   192
// CHECK-NEXT: ],
// CHECK-NOT:  "name": "zest_region"
func.func @calls_region() {
  %a = memref.alloc() : memref<32xf32>
  call @zest_region(%a) : (memref<32xf32>) -> ()
  memref.dealloc %a : memref<32xf32>
  %b = memref.alloc() : memref<32xf32>
  call @zest_region(%b) : (memref<32xf32>) -> ()
  memref.dealloc %b : memref<32xf32>
  return
}
func.func private @zest_region(%x: memref<32xf32>) {
  %t = memref.alloc() : memref<10xf32>
  memref.dealloc %t : memref<10xf32>
  return
}
