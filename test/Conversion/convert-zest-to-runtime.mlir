// RUN: zest-opt %s -split-input-file -convert-zest-to-runtime -verify-diagnostics | FileCheck %s
// The result bufferizes (the unsupported case aside).
// RUN: zest-opt %s -split-input-file -convert-zest-to-runtime -one-shot-bufferize="bufferize-function-boundaries" -verify-diagnostics -o /dev/null

zest.unit @u sharded : f32, world_size = 2, padded_size = 8, shard_size = 4 [
  "u.w" : tensor<2x3xf32> at 0,
  "u.b" : tensor<f32> at 6
]

// Unit names reach the runtime as constant strings (for traces).
// CHECK: llvm.mlir.global internal constant @zest.tag.u("u\00")

// A synchronous gather: the shard's buffer and a fresh result buffer go to
// the runtime as raw pointers. The result buffer is marked in the pool as
// gathered when it is allocated (a prefetched gather holds it while in
// flight) and comes back as a restrict tensor. Views become slices +
// reshapes.
// CHECK-LABEL: func.func @gather(
// CHECK-SAME:    %[[S:.*]]: tensor<4xf32>
// CHECK-DAG:   %[[TAG:.*]] = llvm.mlir.addressof @zest.tag.u : !llvm.ptr
// CHECK-DAG:   %[[SEND:.*]] = bufferization.to_buffer %[[S]] read_only : tensor<4xf32> to memref<4xf32>
// CHECK-DAG:   %[[RECV:.*]] = memref.alloc() : memref<8xf32>
// CHECK:       call @zest_pool_mark_gathered(%{{.*}}) : (!llvm.ptr) -> ()
// CHECK:       %[[REQ:.*]] = call @zest_all_gather_start(%{{.*}}, %{{.*}}, %c4_i64, %c0_i32, %c1_i32, %[[TAG]]) : (!llvm.ptr, !llvm.ptr, i64, i32, i32, !llvm.ptr) -> i64
// CHECK:       call @zest_wait(%[[REQ]]) : (i64) -> ()
// CHECK:       %[[FULL:.*]] = bufferization.to_tensor %[[RECV]] restrict writable : memref<8xf32> to tensor<8xf32>
// CHECK:       %[[WS:.*]] = tensor.extract_slice %[[FULL]][0] [6] [1] : tensor<8xf32> to tensor<6xf32>
// CHECK:       %[[W:.*]] = tensor.expand_shape %[[WS]] {{\[}}[0, 1]] output_shape [2, 3] : tensor<6xf32> into tensor<2x3xf32>
// CHECK:       %[[BS:.*]] = tensor.extract_slice %[[FULL]][6] [1] [1] : tensor<8xf32> to tensor<1xf32>
// CHECK:       %[[B:.*]] = tensor.collapse_shape %[[BS]] [] : tensor<1xf32> into tensor<f32>
// CHECK:       %[[W2:.*]] = linalg.add ins(%[[W]], %[[W]]
// CHECK:       %[[B2:.*]] = linalg.add ins(%[[B]], %[[B]]
// The release goes: deallocation frees the buffer after its last use.
// CHECK-NOT:   zest.
// CHECK:       return %[[W2]], %[[B2]]
func.func @gather(%s: tensor<4xf32>) -> (tensor<2x3xf32>, tensor<f32>) {
  %full = zest.all_gather %s for @u : tensor<4xf32> -> tensor<8xf32>
  %w = zest.unflatten %full, @u, "u.w" : tensor<8xf32> -> tensor<2x3xf32>
  %b = zest.unflatten %full, @u, "u.b" : tensor<8xf32> -> tensor<f32>
  %ew = tensor.empty() : tensor<2x3xf32>
  %w2 = linalg.add ins(%w, %w : tensor<2x3xf32>, tensor<2x3xf32>) outs(%ew : tensor<2x3xf32>) -> tensor<2x3xf32>
  %eb = tensor.empty() : tensor<f32>
  %b2 = linalg.add ins(%b, %b : tensor<f32>, tensor<f32>) outs(%eb : tensor<f32>) -> tensor<f32>
  zest.release %full : tensor<8xf32>
  return %w2, %b2 : tensor<2x3xf32>, tensor<f32>
}

// Flatten: zeros only where no gradient lands (here the frozen u.b and the
// padding, elements 6 and 7), then each gradient at its offset;
// reduce-scatter with the reduction code (avg = 1) and the per-rank count.
// CHECK-LABEL: func.func @scatter(
// CHECK:       %[[E:.*]] = tensor.empty() : tensor<8xf32>
// CHECK:       %[[G:.*]] = tensor.empty() : tensor<2xf32>
// CHECK:       %[[GZ:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[G]] : tensor<2xf32>) -> tensor<2xf32>
// CHECK:       %[[Z:.*]] = tensor.insert_slice %[[GZ]] into %[[E]][6] [2] [1] : tensor<2xf32> into tensor<8xf32>
// CHECK-NOT:   linalg.fill
// CHECK:       %[[F:.*]] = tensor.collapse_shape %{{.*}} {{\[}}[0, 1]] : tensor<2x3xf32> into tensor<6xf32>
// CHECK:       %[[I:.*]] = tensor.insert_slice %[[F]] into %[[Z]][0] [6] [1] : tensor<6xf32> into tensor<8xf32>
// CHECK:       bufferization.to_buffer %[[I]] read_only
// CHECK:       memref.alloc() : memref<4xf32>
// CHECK:       call @zest_reduce_scatter_start(%{{.*}}, %{{.*}}, %c4_i64, %c0_i32, %c1_i32, %c1_i32, %{{.*}}) : (!llvm.ptr, !llvm.ptr, i64, i32, i32, i32, !llvm.ptr) -> i64
// CHECK:       call @zest_wait
// CHECK-NOT:   zest_pool_mark_gathered
// CHECK:       return
func.func @scatter(%g: tensor<2x3xf32>) -> tensor<4xf32> {
  %flat = zest.flatten @u ["u.w"] (%g) : tensor<2x3xf32> -> tensor<8xf32>
  %r = zest.reduce_scatter avg %flat for @u : tensor<8xf32> -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// A weight gradient computed into an empty tensor of its own is computed in
// its slice of the flat buffer (taken as the buffer is at that point) and
// inserted right after its producer; a bias gradient produced later follows
// in production order. Bufferization then writes each gradient once, in place.
// CHECK-LABEL: func.func @in_place(
// CHECK:       %[[E:.*]] = tensor.empty() : tensor<8xf32>
// CHECK:       %[[GAP:.*]] = tensor.insert_slice %{{.*}} into %[[E]][7] [1] [1]
// CHECK:       %[[S:.*]] = tensor.extract_slice %[[GAP]][0] [6] [1] : tensor<8xf32> to tensor<6xf32>
// CHECK:       %[[WE:.*]] = tensor.expand_shape %[[S]] {{\[}}[0, 1]] output_shape [2, 3] : tensor<6xf32> into tensor<2x3xf32>
// CHECK:       %[[WZ:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[WE]] : tensor<2x3xf32>)
// CHECK:       %[[W:.*]] = linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<2x4xf32>, tensor<4x3xf32>) outs(%[[WZ]] : tensor<2x3xf32>)
// CHECK-NEXT:  %[[WF:.*]] = tensor.collapse_shape %[[W]]
// CHECK-NEXT:  %[[I1:.*]] = tensor.insert_slice %[[WF]] into %[[GAP]][0] [6] [1]
// CHECK:       %[[B:.*]] = linalg.generic
// CHECK:       %[[BF:.*]] = tensor.expand_shape %[[B]] [] output_shape [1] : tensor<f32> into tensor<1xf32>
// CHECK-NEXT:  %[[I2:.*]] = tensor.insert_slice %[[BF]] into %[[I1]][6] [1] [1]
// CHECK-NOT:   tensor.insert_slice
// CHECK:       call @zest_reduce_scatter_start
func.func @in_place(%x: tensor<2x4xf32>, %y: tensor<4x3xf32>, %v: tensor<2xf32>) -> tensor<4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x3xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x3xf32>) -> tensor<2x3xf32>
  %gw = linalg.matmul ins(%x, %y : tensor<2x4xf32>, tensor<4x3xf32>) outs(%z : tensor<2x3xf32>) -> tensor<2x3xf32>
  %eb = tensor.empty() : tensor<f32>
  %gb = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> ()>], iterator_types = ["reduction"]}
      ins(%v : tensor<2xf32>) outs(%eb : tensor<f32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %in, %acc : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  %flat = zest.flatten @u ["u.w", "u.b"] (%gw, %gb) : tensor<2x3xf32>, tensor<f32> -> tensor<8xf32>
  %r = zest.reduce_scatter avg %flat for @u : tensor<8xf32> -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// Asynchronous pairs: the start call where the start op was, the wait where
// zest.wait was, with work in between.
// CHECK-LABEL: func.func @async(
// CHECK:       %[[REQ:.*]] = call @zest_all_gather_start
// CHECK-NEXT:  arith.addf
// CHECK-NEXT:  call @zest_wait(%[[REQ]])
func.func @async(%s: tensor<4xf32>, %x: f32) -> (tensor<8xf32>, f32) {
  %f = zest.all_gather_start %s for @u : tensor<4xf32> -> !zest.future<tensor<8xf32>>
  %y = arith.addf %x, %x : f32
  %full = zest.wait %f : !zest.future<tensor<8xf32>>
  return %full, %y : tensor<8xf32>, f32
}

// The runtime functions are declared once.
// CHECK-DAG: func.func private @zest_all_gather_start(!llvm.ptr, !llvm.ptr, i64, i32, i32, !llvm.ptr) -> i64
// CHECK-DAG: func.func private @zest_wait(i64)
// CHECK-DAG: func.func private @zest_pool_mark_gathered(!llvm.ptr)

// -----

zest.unit @v sharded : f32, world_size = 2, padded_size = 20, shard_size = 10 [
  "v.a" : tensor<2x3xf32> at 0,
  "v.b" : tensor<2x3xf32> at 6,
  "v.e" : tensor<4x2xf32> at 12
]

// Imported graphs share one zero fill among the products of one shape, and
// an embedding gradient is a loop that scatter-adds rows into a zero
// constant: each gradient still gets a fill of its own, in its own slice of
// the flat buffer, so none is computed in a copy.
// CHECK-LABEL: func.func @private_destinations(
// CHECK:       %[[E:.*]] = tensor.empty() : tensor<20xf32>
// CHECK:       %[[SB:.*]] = tensor.extract_slice %[[E]][6] [6] [1]
// CHECK:       %[[EB:.*]] = tensor.expand_shape %[[SB]]
// CHECK:       %[[FB:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[EB]] : tensor<2x3xf32>)
// CHECK:       %[[SA:.*]] = tensor.extract_slice %[[E]][0] [6] [1]
// CHECK:       %[[EA:.*]] = tensor.expand_shape %[[SA]]
// CHECK:       %[[FA:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[EA]] : tensor<2x3xf32>)
// CHECK:       linalg.matmul {{.*}} outs(%[[FA]] : tensor<2x3xf32>)
// CHECK:       %[[IA:.*]] = tensor.insert_slice %{{.*}} into %[[E]][0] [6] [1]
// CHECK:       linalg.matmul {{.*}} outs(%[[FB]] : tensor<2x3xf32>)
// CHECK:       %[[IB:.*]] = tensor.insert_slice %{{.*}} into %[[IA]][6] [6] [1]
// CHECK:       %[[SE:.*]] = tensor.extract_slice %[[IB]][12] [8] [1]
// CHECK:       %[[EE:.*]] = tensor.expand_shape %[[SE]]
// CHECK:       %[[FE:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[EE]] : tensor<4x2xf32>)
// CHECK:       %[[L:.*]] = scf.for {{.*}} iter_args(%{{.*}} = %[[FE]]) -> (tensor<4x2xf32>)
// CHECK:       %[[LF:.*]] = tensor.collapse_shape %[[L]]
// CHECK:       tensor.insert_slice %[[LF]] into %[[IB]][12] [8] [1]
// CHECK-NOT:   linalg.fill
// CHECK-NOT:   arith.constant dense
// CHECK:       call @zest_reduce_scatter_start
func.func @private_destinations(%x: tensor<2x4xf32>, %y: tensor<4x3xf32>, %rows: tensor<3x2xf32>, %ids: tensor<3xindex>) -> tensor<10xf32> {
  %zero = arith.constant 0.0 : f32
  %zeros = arith.constant dense<0.0> : tensor<4x2xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %e = tensor.empty() : tensor<2x3xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x3xf32>) -> tensor<2x3xf32>
  %ga = linalg.matmul ins(%x, %y : tensor<2x4xf32>, tensor<4x3xf32>) outs(%z : tensor<2x3xf32>) -> tensor<2x3xf32>
  %gb = linalg.matmul ins(%x, %y : tensor<2x4xf32>, tensor<4x3xf32>) outs(%z : tensor<2x3xf32>) -> tensor<2x3xf32>
  %ge = scf.for %i = %c0 to %c3 step %c1 iter_args(%acc = %zeros) -> (tensor<4x2xf32>) {
    %id = tensor.extract %ids[%i] : tensor<3xindex>
    %row = tensor.extract_slice %rows[%i, 0] [1, 2] [1, 1] : tensor<3x2xf32> to tensor<2xf32>
    %old = tensor.extract_slice %acc[%id, 0] [1, 2] [1, 1] : tensor<4x2xf32> to tensor<2xf32>
    %new = linalg.add ins(%old, %row : tensor<2xf32>, tensor<2xf32>) outs(%old : tensor<2xf32>) -> tensor<2xf32>
    %next = tensor.insert_slice %new into %acc[%id, 0] [1, 2] [1, 1] : tensor<2xf32> into tensor<4x2xf32>
    scf.yield %next : tensor<4x2xf32>
  }
  %flat = zest.flatten @v ["v.a", "v.b", "v.e"] (%ga, %gb, %ge) : tensor<2x3xf32>, tensor<2x3xf32>, tensor<4x2xf32> -> tensor<20xf32>
  %r = zest.reduce_scatter avg %flat for @v : tensor<20xf32> -> tensor<10xf32>
  return %r : tensor<10xf32>
}

// -----

// Replicated units all-reduce the full buffer over every rank (group 0,
// ZEST_GROUP_WORLD); integers use their dtype code (I64 = 5) and the sum
// reduction (0).
zest.unit @r replicated : i64, world_size = 2, padded_size = 3, shard_size = 3 [
  "r.count" : tensor<3xi64> at 0
]
// CHECK-LABEL: func.func @reduce(
// CHECK: call @zest_all_reduce_start(%{{.*}}, %{{.*}}, %c3_i64, %c5_i32, %c0_i32, %c0_i32, %{{.*}})
func.func @reduce(%x: tensor<3xi64>) -> tensor<3xi64> {
  %r = zest.all_reduce sum %x for @r : tensor<3xi64>
  return %r : tensor<3xi64>
}

// -----

// Element types the runtime cannot move are reported at the op.
zest.unit @c sharded : i16, world_size = 2, padded_size = 2, shard_size = 1 [
  "c.w" : tensor<2xi16> at 0
]
func.func @unsupported(%s: tensor<1xi16>) -> tensor<2xi16> {
  // expected-error@+1 {{'zest.all_gather' op cannot be lowered to the runtime: element types must be f32, f64, f16, bf16, i8, i32 or i64}}
  %f = zest.all_gather %s for @c : tensor<1xi16> -> tensor<2xi16>
  return %f : tensor<2xi16>
}

// -----

// At world size 1 every collective is the identity: no runtime call, no
// copy; the shard is the full buffer. (Any element type: nothing moves.)
zest.unit @one sharded : f32, world_size = 1, padded_size = 4, shard_size = 4 [
  "one.w" : tensor<4xf32> at 0
]
zest.unit @rep replicated : i16, world_size = 1, padded_size = 2, shard_size = 2 [
  "rep.w" : tensor<2xi16> at 0
]
// CHECK-LABEL: func.func @single_rank(
// CHECK-SAME:    %[[S:[^:]*]]: tensor<4xf32>, %[[G:[^:]*]]: tensor<4xf32>, %[[R:[^:]*]]: tensor<2xi16>
// CHECK-NOT:   call
// CHECK:       return %[[S]], %[[G]], %[[S]], %[[R]]
func.func @single_rank(%s: tensor<4xf32>, %g: tensor<4xf32>, %r: tensor<2xi16>)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2xi16>) {
  %full = zest.all_gather %s for @one : tensor<4xf32> -> tensor<4xf32>
  %gs = zest.reduce_scatter avg %g for @one : tensor<4xf32> -> tensor<4xf32>
  %fut = zest.all_gather_start %s for @one : tensor<4xf32> -> !zest.future<tensor<4xf32>>
  %again = zest.wait %fut : !zest.future<tensor<4xf32>>
  %rr = zest.all_reduce sum %r for @rep : tensor<2xi16>
  return %full, %gs, %again, %rr : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2xi16>
}

// -----

// zest.rank asks the runtime for the rank in the shard group (1), which is
// the world rank unless the mesh is hybrid.
// CHECK-LABEL: func.func @rank(
// CHECK:       %[[R:.*]] = call @zest_group_rank(%c1_i32) : (i32) -> i32
// CHECK:       arith.index_cast %[[R]] : i32 to index
func.func @rank() -> index {
  %r = zest.rank : index
  return %r : index
}

// -----

// The global gradient norm: per unit a sum of squares of the scaled
// gradient, with the accumulator only on the accumulate branch, both
// branches summing into one zero-filled 0-d tensor (in place after
// bufferization: the branch is computation on buffers only); the
// replicated unit's share divided by the world size (every rank holds it
// whole); one all-reduce (1 f32 element, sum) over ranks; the square root.
zest.unit @s sharded : f32, world_size = 2, padded_size = 8, shard_size = 4 [
  "s.w" : tensor<8xf32> at 0
]
zest.unit @r replicated : f32, world_size = 2, padded_size = 2, shard_size = 2 [
  "r.w" : tensor<2xf32> at 0
]
// CHECK-LABEL: func.func @grad_norm(
// CHECK-SAME:    %[[G:[^:]*]]: tensor<4xf32>, %[[A:[^:]*]]: tensor<4xf32>, %[[RG:[^:]*]]: tensor<2xf32>, %[[RA:[^:]*]]: tensor<2xf32>, %[[H:[^:]*]]: tensor<10xf32>)
// CHECK:         %[[ACCUMULATE:.*]] = arith.cmpf une
// CHECK:         %[[ZERO:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<f32>) -> tensor<f32>
// CHECK:         %[[SUM:.*]] = scf.if %[[ACCUMULATE]] -> (tensor<f32>) {
// CHECK:           linalg.generic {{.*}} ins(%[[G]], %[[A]] : tensor<4xf32>, tensor<4xf32>) outs(%[[ZERO]] : tensor<f32>)
// CHECK:         } else {
// CHECK:           linalg.generic {{.*}} ins(%[[G]] : tensor<4xf32>) outs(%[[ZERO]] : tensor<f32>)
// CHECK:         tensor.extract %[[SUM]][] : tensor<f32>
// CHECK:         scf.if %[[ACCUMULATE]] -> (tensor<f32>) {
// CHECK:           linalg.generic {{.*}} ins(%[[RG]], %[[RA]] : tensor<2xf32>, tensor<2xf32>)
// CHECK:         arith.divf %{{.*}}, %{{.*}} : f32
// CHECK:         tensor.from_elements %{{.*}} : tensor<1xf32>
// CHECK:         call @zest_all_reduce_start(%{{.*}}, %{{.*}}, %c1_i64, %c0_i32, %c0_i32, %c0_i32, %{{.*}})
// CHECK:         call @zest_wait
// CHECK:         %[[T:.*]] = tensor.extract
// CHECK:         %[[N:.*]] = math.sqrt %[[T]] : f32
// CHECK:         tensor.from_elements %[[N]] : tensor<f32>
func.func @grad_norm(%g: tensor<4xf32>, %a: tensor<4xf32>, %rg: tensor<2xf32>, %ra: tensor<2xf32>, %h: tensor<10xf32>) -> tensor<f32> {
  %n = zest.global_grad_norm(%g, %rg) accum(%a, %ra) hyper(%h) units [@s, @r] : (tensor<4xf32>, tensor<2xf32>, tensor<4xf32>, tensor<2xf32>, tensor<10xf32>) -> tensor<f32>
  return %n : tensor<f32>
}

// -----

// Hybrid sharding (2 replicas of 2 shards): gathers and reduce-scatters run
// in the shard group (1), the gradient shard's all-reduce across replicas in
// the replica group (2), a replicated unit's all-reduce over every rank (0).
zest.unit @h sharded : f32, world_size = 2, replicas = 2, padded_size = 8, shard_size = 4 [
  "h.w" : tensor<8xf32> at 0
]
zest.unit @hr replicated : f32, world_size = 2, replicas = 2, padded_size = 2, shard_size = 2 [
  "hr.b" : tensor<2xf32> at 0
]
// CHECK-LABEL: func.func @hybrid(
// CHECK:       call @zest_all_gather_start(%{{.*}}, %{{.*}}, %c4_i64, %c0_i32, %c1_i32, %{{.*}})
// CHECK:       call @zest_reduce_scatter_start(%{{.*}}, %{{.*}}, %c4_i64, %c0_i32, %c1_i32, %c1_i32, %{{.*}})
// CHECK:       call @zest_all_reduce_start(%{{.*}}, %{{.*}}, %c4_i64, %c0_i32, %c1_i32, %c2_i32, %{{.*}})
// CHECK:       call @zest_all_reduce_start(%{{.*}}, %{{.*}}, %c2_i64, %c0_i32, %c1_i32, %c0_i32, %{{.*}})
func.func @hybrid(%s: tensor<4xf32>, %g: tensor<8xf32>, %r: tensor<2xf32>)
    -> (tensor<8xf32>, tensor<4xf32>, tensor<2xf32>) {
  %full = zest.all_gather %s for @h : tensor<4xf32> -> tensor<8xf32>
  %gs = zest.reduce_scatter avg %g for @h : tensor<8xf32> -> tensor<4xf32>
  %f = zest.all_reduce_start avg %gs for @h across_replicas : tensor<4xf32> -> !zest.future<tensor<4xf32>>
  %ga = zest.wait %f : !zest.future<tensor<4xf32>>
  %gr = zest.all_reduce avg %r for @hr : tensor<2xf32>
  return %full, %ga, %gr : tensor<8xf32>, tensor<4xf32>, tensor<2xf32>
}

// -----

// One shard per replica (a 2 x 1 mesh, DDP through hybrid sharding): the
// gather and reduce-scatter are identities, the all-reduce across the two
// replicas is not. The global norm counts each shard once: its sum of
// squares is divided by the replicas holding it.
zest.unit @d sharded : f32, world_size = 1, replicas = 2, padded_size = 4, shard_size = 4 [
  "d.w" : tensor<4xf32> at 0
]
// CHECK-LABEL: func.func @one_shard_per_replica(
// CHECK:       %[[TWO:.*]] = arith.constant 2.000000e+00 : f32
// CHECK-NOT:   zest_all_gather_start
// CHECK-NOT:   zest_reduce_scatter_start
// CHECK:       call @zest_all_reduce_start(%{{.*}}, %{{.*}}, %c4_i64, %c0_i32, %c1_i32, %c2_i32, %{{.*}})
// CHECK:       arith.divf %{{.*}}, %[[TWO]] : f32
// CHECK:       call @zest_all_reduce_start(%{{.*}}, %{{.*}}, %c1_i64, %c0_i32, %c0_i32, %c0_i32, %{{.*}})
func.func @one_shard_per_replica(%s: tensor<4xf32>, %g: tensor<4xf32>, %a: tensor<4xf32>, %h: tensor<10xf32>)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<f32>) {
  %full = zest.all_gather %s for @d : tensor<4xf32> -> tensor<4xf32>
  %gs = zest.reduce_scatter avg %g for @d : tensor<4xf32> -> tensor<4xf32>
  %ga = zest.all_reduce avg %gs for @d across_replicas : tensor<4xf32>
  %n = zest.global_grad_norm(%ga) accum(%a) hyper(%h) units [@d] : (tensor<4xf32>, tensor<4xf32>, tensor<10xf32>) -> tensor<f32>
  return %full, %ga, %n : tensor<4xf32>, tensor<4xf32>, tensor<f32>
}

// -----

// Buckets: the packed shards are insertions into [pieces x n] rows; the
// gathered bucket is copied out member by member into buffers marked
// gathered (each a strided column block of the rows); a reduced bucket's
// shards (one piece) are views of its result.
zest.unit @n sharded : f32, world_size = 2, padded_size = 4, shard_size = 2 [
  "n.w" : tensor<4xf32> at 0
]
zest.unit @m sharded : f32, world_size = 2, padded_size = 8, shard_size = 4 [
  "m.w" : tensor<8xf32> at 0
]
zest.bucket @nm [@n, @m]
// CHECK-LABEL: func.func @bucket(
// CHECK-SAME:      %[[SN:[^:]*]]: tensor<2xf32>, %[[SM:[^:]*]]: tensor<4xf32>
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<1x6xf32>
// CHECK:         %[[IN:.*]] = tensor.insert_slice %{{.*}} into %[[E]][0, 0] [1, 2] [1, 1] : tensor<1x2xf32> into tensor<1x6xf32>
// CHECK:         tensor.insert_slice %{{.*}} into %[[IN]][0, 2] [1, 4] [1, 1] : tensor<1x4xf32> into tensor<1x6xf32>
// CHECK:         call @zest_all_gather_start(
// CHECK:         %[[ROWS:.*]] = memref.expand_shape %{{.*}} {{\[\[}}0, 1]] output_shape [2, 6] : memref<12xf32> into memref<2x6xf32>
// CHECK:         %[[FN:.*]] = memref.alloc() : memref<4xf32>
// CHECK:         call @zest_pool_mark_gathered(
// CHECK:         %[[COLN:.*]] = memref.subview %[[ROWS]][0, 0] [2, 2] [1, 1]
// CHECK:         %[[DN:.*]] = memref.expand_shape %[[FN]]
// CHECK:         memref.copy %[[COLN]], %[[DN]]
// CHECK:         %[[FM:.*]] = memref.alloc() : memref<8xf32>
// CHECK:         call @zest_pool_mark_gathered(
// CHECK:         memref.subview %[[ROWS]][0, 2] [2, 4] [1, 1]
// CHECK:         memref.copy
// CHECK:         call @zest_reduce_scatter_start(
// CHECK:         %[[R:.*]] = bufferization.to_tensor %{{.*}} restrict writable : memref<6xf32>
// CHECK:         %[[RROWS:.*]] = tensor.expand_shape %[[R]] {{\[\[}}0, 1]] output_shape [1, 6]
// CHECK:         tensor.extract_slice %[[RROWS]][0, 0] [1, 2] [1, 1]
// CHECK:         tensor.extract_slice %[[RROWS]][0, 2] [1, 4] [1, 1]
func.func @bucket(%sn: tensor<2xf32>, %sm: tensor<4xf32>, %gn: tensor<4xf32>, %gm: tensor<8xf32>) -> (tensor<4xf32>, tensor<8xf32>, tensor<2xf32>, tensor<4xf32>) {
  %p = zest.pack %sn, %sm pieces 1 : tensor<2xf32>, tensor<4xf32> -> tensor<6xf32>
  %g = zest.all_gather %p for @nm : tensor<6xf32> -> tensor<12xf32>
  %fn, %fm = zest.unpack %g pieces 2 : tensor<12xf32> -> tensor<4xf32>, tensor<8xf32>
  %q = zest.pack %gn, %gm pieces 2 : tensor<4xf32>, tensor<8xf32> -> tensor<12xf32>
  %r = zest.reduce_scatter avg %q for @nm : tensor<12xf32> -> tensor<6xf32>
  %rn, %rm = zest.unpack %r pieces 1 : tensor<6xf32> -> tensor<2xf32>, tensor<4xf32>
  return %fn, %fm, %rn, %rm : tensor<4xf32>, tensor<8xf32>, tensor<2xf32>, tensor<4xf32>
}

// -----

// Mixed precision: a unit's gathers travel as its gather_type and its
// gradient reductions as its reduce_type (3 = bf16, 2 = f16): the step rounds
// what it sends (an elementwise truncf; a gather's shard straight into this
// rank's slot of the gathered buffer, gathered in place), the collective
// moves the wire type, and what arrives is widened (extf). Over one rank nothing moves, but the
// values are still rounded, so every world size computes with the same ones.
zest.unit @m sharded : f32, world_size = 2, padded_size = 8, shard_size = 4 [
  "m.w" : tensor<8xf32> at 0
] {gather_type = bf16, reduce_type = f16}
zest.unit @one sharded : f32, world_size = 1, padded_size = 8, shard_size = 8 [
  "one.w" : tensor<8xf32> at 0
] {gather_type = bf16}

// CHECK-LABEL: func.func @mixed(
// CHECK-SAME:    %[[S:[^:]*]]: tensor<4xf32>, %[[G:[^:]*]]: tensor<8xf32>, %[[T:[^:]*]]: tensor<8xf32>)
// CHECK:       %[[RECV:.*]] = memref.alloc() : memref<8xbf16>
// CHECK:       call @zest_pool_mark_gathered
// CHECK:       %[[RANK:.*]] = call @zest_group_rank(%c1_i32)
// CHECK:       %[[R:.*]] = arith.index_cast %[[RANK]] : i32 to index
// CHECK:       %[[AT:.*]] = arith.muli %[[R]], %c4 : index
// CHECK:       %[[SLOT:.*]] = memref.subview %[[RECV]][%[[AT]]] [4] [1]
// CHECK:       %[[SENT:.*]] = linalg.generic {{.*}} ins(%[[S]] : tensor<4xf32>) outs(%{{.*}} : tensor<4xbf16>)
// CHECK:         arith.truncf %{{.*}} : f32 to bf16
// CHECK:       bufferization.materialize_in_destination %[[SENT]] in restrict writable %[[SLOT]]
// CHECK:       call @zest_all_gather_start(%{{.*}}, %{{.*}}, %c4_i64, %c3_i32, %c1_i32, %{{.*}})
// CHECK:       call @zest_wait
// CHECK:       %[[GOT:.*]] = bufferization.to_tensor %{{.*}} : memref<8xbf16> to tensor<8xbf16>
// CHECK:       %[[FULL:.*]] = linalg.generic {{.*}} ins(%[[GOT]] : tensor<8xbf16>) outs(%{{.*}} : tensor<8xf32>)
// CHECK:         arith.extf %{{.*}} : bf16 to f32
// CHECK:       linalg.generic {{.*}} ins(%[[G]] : tensor<8xf32>) outs(%{{.*}} : tensor<8xf16>)
// CHECK:         arith.truncf %{{.*}} : f32 to f16
// CHECK:       memref.alloc() : memref<4xf16>
// CHECK:       call @zest_reduce_scatter_start(%{{.*}}, %{{.*}}, %c4_i64, %c2_i32, %c1_i32, %c1_i32, %{{.*}})
// CHECK:       %[[RS:.*]] = linalg.generic {{.*}} ins(%{{.*}} : tensor<4xf16>) outs(%{{.*}} : tensor<4xf32>)
// CHECK:         arith.extf %{{.*}} : f16 to f32
// CHECK:       %[[ROUNDED:.*]] = linalg.generic {{.*}} ins(%[[T]] : tensor<8xf32>) outs(%{{.*}} : tensor<8xbf16>)
// CHECK:       %[[ONE:.*]] = linalg.generic {{.*}} ins(%[[ROUNDED]] : tensor<8xbf16>) outs(%{{.*}} : tensor<8xf32>)
// CHECK-NOT:   call @zest_all_gather_start
// CHECK:       return %[[FULL]], %[[RS]], %[[ONE]]
func.func @mixed(%s: tensor<4xf32>, %g: tensor<8xf32>, %t: tensor<8xf32>) -> (tensor<8xf32>, tensor<4xf32>, tensor<8xf32>) {
  %full = zest.all_gather %s for @m : tensor<4xf32> -> tensor<8xf32>
  %r = zest.reduce_scatter avg %g for @m : tensor<8xf32> -> tensor<4xf32>
  %one = zest.all_gather %t for @one : tensor<8xf32> -> tensor<8xf32>
  return %full, %r, %one : tensor<8xf32>, tensor<4xf32>, tensor<8xf32>
}

// -----

// Each parameter of a bf16 gather is widened where it is used: an
// elementwise consumer reads the received bf16 values (the extf fused into
// it), an autocast model's cast to bf16 reads them as they are (no copy at
// all), a matrix product reads an f32 copy of its parameter only.
#id1 = affine_map<(i) -> (i)>
#id2 = affine_map<(i, j) -> (i, j)>
zest.unit @p sharded : f32, world_size = 2, padded_size = 24, shard_size = 12 [
  "p.a" : tensor<2x4xf32> at 0,
  "p.b" : tensor<8xf32> at 8,
  "p.c" : tensor<2x4xf32> at 16
] {gather_type = bf16}

// CHECK-LABEL: func.func @mixed_consumers(
// CHECK:       %[[GOT:.*]] = bufferization.to_tensor %{{.*}} : memref<24xbf16> to tensor<24xbf16>
// CHECK-DAG:   %[[A:.*]] = tensor.extract_slice %[[GOT]][0] [8] [1] : tensor<24xbf16> to tensor<8xbf16>
// CHECK-DAG:   %[[AB:.*]] = tensor.expand_shape %[[A]] {{\[\[}}0, 1]] output_shape [2, 4] : tensor<8xbf16> into tensor<2x4xbf16>
// CHECK-DAG:   %[[B:.*]] = tensor.extract_slice %[[GOT]][8] [8] [1] : tensor<24xbf16> to tensor<8xbf16>
// CHECK-DAG:   %[[C:.*]] = tensor.expand_shape %{{.*}} : tensor<8xbf16> into tensor<2x4xbf16>
// CHECK-DAG:   %[[CW:.*]] = linalg.generic {{.*}} ins(%[[C]] : tensor<2x4xbf16>) outs(%{{.*}} : tensor<2x4xf32>)
// CHECK:       %[[Y:.*]] = linalg.generic {{.*}} ins(%[[B]], %{{.*}} : tensor<8xbf16>, tensor<8xf32>)
// CHECK-NEXT:  ^bb0(%[[IN:.*]]: bf16, %[[X:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:    %[[W:.*]] = arith.extf %[[IN]] : bf16 to f32
// CHECK-NEXT:    arith.mulf %[[W]], %[[X]] : f32
// CHECK:       linalg.matmul ins(%{{.*}}, %[[CW]] : tensor<4x2xf32>, tensor<2x4xf32>)
// CHECK:       return %[[AB]], %[[Y]],
func.func @mixed_consumers(%s: tensor<12xf32>, %x: tensor<8xf32>, %l: tensor<4x2xf32>) -> (tensor<2x4xbf16>, tensor<8xf32>, tensor<4x4xf32>) {
  %full = zest.all_gather %s for @p : tensor<12xf32> -> tensor<24xf32>
  %a = zest.unflatten %full, @p, "p.a" : tensor<24xf32> -> tensor<2x4xf32>
  %b = zest.unflatten %full, @p, "p.b" : tensor<24xf32> -> tensor<8xf32>
  %c = zest.unflatten %full, @p, "p.c" : tensor<24xf32> -> tensor<2x4xf32>
  %ea = tensor.empty() : tensor<2x4xbf16>
  %ab = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<2x4xf32>) outs(%ea : tensor<2x4xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<2x4xbf16>
  %ey = tensor.empty() : tensor<8xf32>
  %y = linalg.generic {indexing_maps = [#id1, #id1, #id1], iterator_types = ["parallel"]}
      ins(%b, %x : tensor<8xf32>, tensor<8xf32>) outs(%ey : tensor<8xf32>) {
  ^bb0(%in: f32, %in2: f32, %out: f32):
    %p = arith.mulf %in, %in2 : f32
    linalg.yield %p : f32
  } -> tensor<8xf32>
  %zero = arith.constant 0.0 : f32
  %ez = tensor.empty() : tensor<4x4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%ez : tensor<4x4xf32>) -> tensor<4x4xf32>
  %mm = linalg.matmul ins(%l, %c : tensor<4x2xf32>, tensor<2x4xf32>) outs(%z : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %ab, %y, %mm : tensor<2x4xbf16>, tensor<8xf32>, tensor<4x4xf32>
}

// -----

// A widening that also transposes (attention's [B, S, H, D] gradient
// widened into [B, H, S, D] for a rotary embedding's backward) is widened
// where it is read, as a gathered parameter's is: the elementwise reader
// reads the bf16 gradient, a slice's reader the same slice of it (offsets
// and sizes taken through the permutation), and a rounding back into the
// gradient's own layout is the gradient itself.
#rows = affine_map<(b, h, s, d) -> (b, s, h, d)>
#id4 = affine_map<(b, h, s, d) -> (b, h, s, d)>
// CHECK-LABEL: func.func @permuted_widening(
// CHECK-SAME:      %[[G:[^:]*]]: tensor<1x4x2x8xbf16>
// CHECK-NOT:     outs(%{{.*}} : tensor<1x2x4x8xf32>) {
// CHECK:         %[[M:.*]] = linalg.generic {{.*}} ins(%[[G]], %{{.*}} : tensor<1x4x2x8xbf16>, tensor<1x2x4x8xf32>) outs(%{{.*}} : tensor<1x2x4x8xf32>)
// CHECK:         %[[GS:.*]] = tensor.extract_slice %[[G]][0, 0, 0, 4] [1, 4, 2, 4] [1, 1, 1, 1] : tensor<1x4x2x8xbf16> to tensor<1x4x2x4xbf16>
// CHECK:         %[[N:.*]] = linalg.generic {{.*}} ins(%[[GS]] : tensor<1x4x2x4xbf16>) outs(%{{.*}} : tensor<1x2x4x4xf32>)
// CHECK-NEXT:    ^bb0(%[[IN:.*]]: bf16, %{{.*}}: f32):
// CHECK-NEXT:      %[[W:.*]] = arith.extf %[[IN]] : bf16 to f32
// CHECK-NEXT:      arith.negf %[[W]] : f32
// CHECK:         return %[[M]], %[[N]], %[[G]] :
func.func @permuted_widening(%g: tensor<1x4x2x8xbf16>, %c: tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>, tensor<1x4x2x8xbf16>) {
  %e = tensor.empty() : tensor<1x2x4x8xf32>
  %w = linalg.generic {indexing_maps = [#rows, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g : tensor<1x4x2x8xbf16>) outs(%e : tensor<1x2x4x8xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %x = arith.extf %in : bf16 to f32
    linalg.yield %x : f32
  } -> tensor<1x2x4x8xf32>
  %m = linalg.generic {indexing_maps = [#id4, #id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%w, %c : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) outs(%e : tensor<1x2x4x8xf32>) {
  ^bb0(%in: f32, %in2: f32, %out: f32):
    %p = arith.mulf %in, %in2 : f32
    linalg.yield %p : f32
  } -> tensor<1x2x4x8xf32>
  %half = tensor.extract_slice %w[0, 0, 0, 4] [1, 2, 4, 4] [1, 1, 1, 1] : tensor<1x2x4x8xf32> to tensor<1x2x4x4xf32>
  %eh = tensor.empty() : tensor<1x2x4x4xf32>
  %n = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%half : tensor<1x2x4x4xf32>) outs(%eh : tensor<1x2x4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %x = arith.negf %in : f32
    linalg.yield %x : f32
  } -> tensor<1x2x4x4xf32>
  %w2 = linalg.generic {indexing_maps = [#rows, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g : tensor<1x4x2x8xbf16>) outs(%e : tensor<1x2x4x8xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %x = arith.extf %in : bf16 to f32
    linalg.yield %x : f32
  } -> tensor<1x2x4x8xf32>
  %eb = tensor.empty() : tensor<1x4x2x8xbf16>
  %r = linalg.generic {indexing_maps = [#id4, #rows], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%w2 : tensor<1x2x4x8xf32>) outs(%eb : tensor<1x4x2x8xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<1x4x2x8xbf16>
  return %m, %n, %r : tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>, tensor<1x4x2x8xbf16>
}
