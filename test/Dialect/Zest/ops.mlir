// RUN: zest-opt %s -split-input-file | FileCheck %s
// Round trip: printed IR parses back to the same text, in custom and generic form.
// RUN: zest-opt %s -split-input-file | zest-opt -split-input-file | FileCheck %s
// RUN: zest-opt %s -split-input-file -mlir-print-op-generic | zest-opt -split-input-file | FileCheck %s

// CHECK-LABEL: zest.unit @layers.0 sharded : f32, world_size = 4, padded_size = 548, shard_size = 137 [
// CHECK-NEXT:    "layers.0.fc.weight" : tensor<16x32xf32> at 0,
// CHECK-NEXT:    "layers.0.fc.bias" : tensor<16xf32> at 512,
// CHECK-NEXT:    "layers.0.norm.weight" : tensor<16xf32> at 528
// CHECK-NEXT:  ]
zest.unit @layers.0 sharded : f32, world_size = 4, padded_size = 548, shard_size = 137 [
  "layers.0.fc.weight" : tensor<16x32xf32> at 0,
  "layers.0.fc.bias" : tensor<16xf32> at 512,
  "layers.0.norm.weight" : tensor<16xf32> at 528
]
// CHECK: zest.unit @ignored replicated : f32, world_size = 4, padded_size = 8, shard_size = 8 [
zest.unit @ignored replicated : f32, world_size = 4, padded_size = 8, shard_size = 8 [
  "embed.scale" : tensor<8xf32> at 0
]

// CHECK-LABEL: func.func @sync
func.func @sync(%shard: tensor<137xf32> {zest.unit = @layers.0},
                %rep: tensor<8xf32> {zest.unit = @ignored},
                %dw: tensor<16x32xf32>, %db: tensor<16xf32>)
    -> (tensor<137xf32>, tensor<8xf32>) {
  // CHECK: %[[FULL:.*]] = zest.all_gather %{{.*}} for @layers.0 : tensor<137xf32> -> tensor<548xf32>
  %full = zest.all_gather %shard for @layers.0 : tensor<137xf32> -> tensor<548xf32>
  // CHECK: zest.unflatten %[[FULL]], @layers.0, "layers.0.fc.weight" : tensor<548xf32> -> tensor<16x32xf32>
  %w = zest.unflatten %full, @layers.0, "layers.0.fc.weight" : tensor<548xf32> -> tensor<16x32xf32>
  // CHECK: zest.release %[[FULL]] : tensor<548xf32>
  zest.release %full : tensor<548xf32>
  // CHECK: %[[G:.*]] = zest.flatten @layers.0 ["layers.0.fc.bias", "layers.0.fc.weight"] (%{{.*}}, %{{.*}}) : tensor<16xf32>, tensor<16x32xf32> -> tensor<548xf32>
  %g = zest.flatten @layers.0 ["layers.0.fc.bias", "layers.0.fc.weight"] (%db, %dw) : tensor<16xf32>, tensor<16x32xf32> -> tensor<548xf32>
  // CHECK: zest.reduce_scatter avg %[[G]] for @layers.0 : tensor<548xf32> -> tensor<137xf32>
  %gs = zest.reduce_scatter avg %g for @layers.0 : tensor<548xf32> -> tensor<137xf32>
  // CHECK: zest.all_reduce sum %{{.*}} for @ignored : tensor<8xf32>
  %r = zest.all_reduce sum %rep for @ignored : tensor<8xf32>
  return %gs, %r : tensor<137xf32>, tensor<8xf32>
}

// CHECK-LABEL: func.func @async
func.func @async(%shard: tensor<137xf32>, %g: tensor<548xf32>, %r: tensor<8xf32>)
    -> (tensor<16xf32>, tensor<137xf32>, tensor<8xf32>) {
  // CHECK: %[[F:.*]] = zest.all_gather_start %{{.*}} for @layers.0 : tensor<137xf32> -> !zest.future<tensor<548xf32>>
  %f = zest.all_gather_start %shard for @layers.0 : tensor<137xf32> -> !zest.future<tensor<548xf32>>
  // CHECK: %[[RS:.*]] = zest.reduce_scatter_start avg %{{.*}} for @layers.0 : tensor<548xf32> -> !zest.future<tensor<137xf32>>
  %rs = zest.reduce_scatter_start avg %g for @layers.0 : tensor<548xf32> -> !zest.future<tensor<137xf32>>
  // CHECK: %[[AR:.*]] = zest.all_reduce_start sum %{{.*}} for @ignored : tensor<8xf32> -> !zest.future<tensor<8xf32>>
  %ar = zest.all_reduce_start sum %r for @ignored : tensor<8xf32> -> !zest.future<tensor<8xf32>>
  // CHECK: %[[FULL:.*]] = zest.wait %[[F]] : !zest.future<tensor<548xf32>>
  %full = zest.wait %f : !zest.future<tensor<548xf32>>
  %b = zest.unflatten %full, @layers.0, "layers.0.fc.bias" : tensor<548xf32> -> tensor<16xf32>
  %b2 = arith.addf %b, %b : tensor<16xf32>
  // CHECK: zest.release %[[FULL]]
  zest.release %full : tensor<548xf32>
  // CHECK: zest.wait %[[RS]] : !zest.future<tensor<137xf32>>
  %gs = zest.wait %rs : !zest.future<tensor<137xf32>>
  // CHECK: zest.wait %[[AR]] : !zest.future<tensor<8xf32>>
  %rr = zest.wait %ar : !zest.future<tensor<8xf32>>
  return %b2, %gs, %rr : tensor<16xf32>, tensor<137xf32>, tensor<8xf32>
}

// -----

// A unit of integers with padding, and an empty unit list entry order check.
// CHECK-LABEL: zest.unit @"0" sharded : i64, world_size = 3, padded_size = 6, shard_size = 2 [
// CHECK-NEXT:    "0.ids" : tensor<5xi64> at 0
zest.unit @"0" sharded : i64, world_size = 3, padded_size = 6, shard_size = 2 [
  "0.ids" : tensor<5xi64> at 0
]
// CHECK: #zest.param<"a" : tensor<2xf32> at 4>
func.func private @attr() attributes {p = #zest.param<"a" : tensor<2xf32> at 4>}

// -----

// Optimizer updates and the rank.
zest.unit @o sharded : f32, world_size = 2, padded_size = 8, shard_size = 4 [
  "o.w" : tensor<6xf32> at 0
]
// CHECK-LABEL: func.func @update(
// CHECK: %{{.*}}, %{{.*}} = zest.update sgd @o %{{.*}}, %{{.*}} accum(%{{.*}}) hyper(%{{.*}}) : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<10xf32>) -> (tensor<4xf32>, tensor<4xf32>)
// CHECK: %{{.*}}, %{{.*}}:2 = zest.update sgd @o %{{.*}}, %{{.*}} state(%{{.*}}) accum(%{{.*}}) hyper(%{{.*}}) {frozen = ["o.w"], nesterov}
// CHECK: %{{.*}}, %{{.*}}:3 = zest.update adamw @o %{{.*}}, %{{.*}} state(%{{.*}}, %{{.*}}) accum(%{{.*}}) hyper(%{{.*}})
// Without an accumulator (no-sync): no accumulator result either.
// CHECK: %{{.*}}:2 = zest.update adamw @o %{{.*}}, %{{.*}} state(%{{.*}}, %{{.*}}) hyper(%{{.*}}) : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<10xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
// CHECK: zest.rank : index
// CHECK: zest.global_grad_norm(%{{.*}}) accum(%{{.*}}) hyper(%{{.*}}) units [@o] : (tensor<4xf32>, tensor<4xf32>, tensor<10xf32>) -> tensor<f32>
// CHECK: zest.global_grad_norm(%{{.*}}) accum() hyper(%{{.*}}) units [@o] : (tensor<4xf32>, tensor<10xf32>) -> tensor<f32>
func.func @update(%p: tensor<4xf32>, %g: tensor<4xf32>, %s: tensor<4xf32>, %a: tensor<4xf32>, %h: tensor<10xf32>) -> index {
  %p1, %a1 = zest.update sgd @o %p, %g accum(%a) hyper(%h) : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<10xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  %p2, %s2, %a2 = zest.update sgd @o %p, %g state(%s) accum(%a) hyper(%h) {frozen = ["o.w"], nesterov} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<10xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  %p3, %s3:2, %a3 = zest.update adamw @o %p, %g state(%s, %s) accum(%a) hyper(%h) : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<10xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  %p4, %s4:2 = zest.update adamw @o %p, %g state(%s, %s) hyper(%h) : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<10xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  %r = zest.rank : index
  %n = zest.global_grad_norm(%g) accum(%a) hyper(%h) units [@o] : (tensor<4xf32>, tensor<4xf32>, tensor<10xf32>) -> tensor<f32>
  %n2 = zest.global_grad_norm(%g) accum() hyper(%h) units [@o] : (tensor<4xf32>, tensor<10xf32>) -> tensor<f32>
  return %r : index
}

// -----

// Fused linear ops, on tensors (they return their destinations) and on
// memrefs (they write them).
// CHECK-LABEL: func.func @linear(
// CHECK: %{{.*}}:2 = zest.linear gelu_tanh transpose_weight ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<6x8xf32>, tensor<6xf32>) outs(%{{.*}}, %{{.*}} : tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>, tensor<4x6xf32>
// CHECK: zest.linear none ins(%{{.*}}, %{{.*}} : memref<4x8xf32>, memref<8x6xf32>) outs(%{{.*}} : memref<4x6xf32>)
// CHECK: %{{.*}}:3 = zest.linear_backward silu transpose_weight transpose_grad_weight grad_output(%{{.*}} : tensor<4x6xf32>) preactivation(%{{.*}} : tensor<4x6xf32>) input(%{{.*}} : tensor<4x8xf32>) weight(%{{.*}} : tensor<6x8xf32>) outs(grad_input %{{.*}} : tensor<4x8xf32> grad_weight %{{.*}} : tensor<6x8xf32> grad_bias %{{.*}} : tensor<6xf32>)
// CHECK: zest.linear_backward none grad_output(%{{.*}} : memref<4x6xf32>) outs( grad_bias %{{.*}} : memref<6xf32>)
func.func @linear(%x: tensor<4x8xf32>, %w: tensor<6x8xf32>, %b: tensor<6xf32>, %y: tensor<4x6xf32>, %dx: tensor<4x8xf32>, %xm: memref<4x8xf32>, %wm: memref<8x6xf32>, %ym: memref<4x6xf32>, %dbm: memref<6xf32>) {
  %r:2 = zest.linear gelu_tanh transpose_weight ins(%x, %w, %b : tensor<4x8xf32>, tensor<6x8xf32>, tensor<6xf32>) outs(%y, %y : tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>, tensor<4x6xf32>
  zest.linear none ins(%xm, %wm : memref<4x8xf32>, memref<8x6xf32>) outs(%ym : memref<4x6xf32>)
  %g:3 = zest.linear_backward silu transpose_weight transpose_grad_weight grad_output(%y : tensor<4x6xf32>) preactivation(%r#1 : tensor<4x6xf32>) input(%x : tensor<4x8xf32>) weight(%w : tensor<6x8xf32>) outs(grad_input %dx : tensor<4x8xf32> grad_weight %w : tensor<6x8xf32> grad_bias %b : tensor<6xf32>) -> tensor<4x8xf32>, tensor<6x8xf32>, tensor<6xf32>
  zest.linear_backward none grad_output(%ym : memref<4x6xf32>) outs(grad_bias %dbm : memref<6xf32>)
  return
}

// -----

// Hybrid sharding: a unit laid out for 2 shards in each of 3 replicas, and
// the all-reduce of its gradient shard across the replicas.
// CHECK-LABEL: zest.unit @h sharded : f32, world_size = 2, replicas = 3, padded_size = 8, shard_size = 4 [
zest.unit @h sharded : f32, world_size = 2, replicas = 3, padded_size = 8, shard_size = 4 [
  "h.w" : tensor<8xf32> at 0
]
// CHECK-LABEL: func.func @across_replicas
func.func @across_replicas(%g: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  // CHECK: zest.all_reduce avg %{{.*}} for @h across_replicas : tensor<4xf32>
  %a = zest.all_reduce avg %g for @h across_replicas : tensor<4xf32>
  // CHECK: zest.all_reduce_start avg %{{.*}} for @h across_replicas : tensor<4xf32> -> !zest.future<tensor<4xf32>>
  %f = zest.all_reduce_start avg %g for @h across_replicas : tensor<4xf32> -> !zest.future<tensor<4xf32>>
  %b = zest.wait %f : !zest.future<tensor<4xf32>>
  return %a, %b : tensor<4xf32>, tensor<4xf32>
}

// -----

// A bucket of two units, gathered and reduce-scattered as one: packed
// shards, one collective each, unpacked per member.
zest.unit @n sharded : f32, world_size = 2, padded_size = 4, shard_size = 2 [
  "n.w" : tensor<4xf32> at 0
]
zest.unit @m sharded : f32, world_size = 2, padded_size = 8, shard_size = 4 [
  "m.w" : tensor<8xf32> at 0
]
// CHECK: zest.bucket @nm [@n, @m]
zest.bucket @nm [@n, @m]
// CHECK-LABEL: func.func @bucket
func.func @bucket(%sn: tensor<2xf32>, %sm: tensor<4xf32>, %gn: tensor<4xf32>, %gm: tensor<8xf32>) -> (tensor<4xf32>, tensor<8xf32>, tensor<2xf32>, tensor<4xf32>) {
  // CHECK: %[[P:.*]] = zest.pack %{{.*}}, %{{.*}} pieces 1 : tensor<2xf32>, tensor<4xf32> -> tensor<6xf32>
  // CHECK: %[[G:.*]] = zest.all_gather %[[P]] for @nm : tensor<6xf32> -> tensor<12xf32>
  // CHECK: zest.unpack %[[G]] pieces 2 : tensor<12xf32> -> tensor<4xf32>, tensor<8xf32>
  %p = zest.pack %sn, %sm pieces 1 : tensor<2xf32>, tensor<4xf32> -> tensor<6xf32>
  %g = zest.all_gather %p for @nm : tensor<6xf32> -> tensor<12xf32>
  %fn, %fm = zest.unpack %g pieces 2 : tensor<12xf32> -> tensor<4xf32>, tensor<8xf32>
  // CHECK: zest.pack %{{.*}}, %{{.*}} pieces 2 : tensor<4xf32>, tensor<8xf32> -> tensor<12xf32>
  // CHECK: zest.reduce_scatter_start avg %{{.*}} for @nm : tensor<12xf32> -> !zest.future<tensor<6xf32>>
  %q = zest.pack %gn, %gm pieces 2 : tensor<4xf32>, tensor<8xf32> -> tensor<12xf32>
  %f = zest.reduce_scatter_start avg %q for @nm : tensor<12xf32> -> !zest.future<tensor<6xf32>>
  %r = zest.wait %f : !zest.future<tensor<6xf32>>
  %rn, %rm = zest.unpack %r pieces 1 : tensor<6xf32> -> tensor<2xf32>, tensor<4xf32>
  return %fn, %fm, %rn, %rm : tensor<4xf32>, tensor<8xf32>, tensor<2xf32>, tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @optimization_barrier
// CHECK: %[[B:.*]] = zest.optimization_barrier %{{.*}} : tensor<4x8xf32>
// CHECK: return %[[B]]
func.func @optimization_barrier(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %b = zest.optimization_barrier %x : tensor<4x8xf32>
  return %b : tensor<4x8xf32>
}

// -----

// Offload's copies: a gradient staged to pinned host memory, waited for, and
// a host shard copied to the device.
// CHECK-LABEL: func.func @offload_copies
// CHECK: %[[F:.*]] = zest.copy_to_host_start %{{.*}} into %{{.*}} : tensor<4xf32> -> !zest.future<tensor<4xf32>>
// CHECK: zest.copy_wait %[[F]] : !zest.future<tensor<4xf32>>
// CHECK: zest.copy_to_device %{{.*}} : tensor<4xf32>
func.func @offload_copies(%g: tensor<4xf32>, %stage: tensor<4xf32> {zest.host}, %shard: tensor<4xf32> {zest.host}) -> (tensor<4xf32>, tensor<4xf32>) {
  %f = zest.copy_to_host_start %g into %stage : tensor<4xf32> -> !zest.future<tensor<4xf32>>
  %h = zest.copy_wait %f : !zest.future<tensor<4xf32>>
  %d = zest.copy_to_device %shard : tensor<4xf32>
  return %h, %d : tensor<4xf32>, tensor<4xf32>
}
