// RUN: zest-opt %s -cse -canonicalize | FileCheck %s

// Collectives are not Pure: CSE must keep the forward gather and the backward
// re-gather of the same shard apart (upstream shard.all_gather is Pure and
// CSE merges them), and canonicalization must not drop an unused one.
// Views are Pure: identical views of one buffer merge.

zest.unit @u sharded : f32, world_size = 2, padded_size = 8, shard_size = 4 [
  "a" : tensor<8xf32> at 0
]

// CHECK-LABEL: func.func @regather
func.func @regather(%s: tensor<4xf32>, %g: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  // CHECK: %[[F1:.*]] = zest.all_gather
  // CHECK: %[[A1:.*]] = zest.unflatten %[[F1]]
  // CHECK-NOT: zest.unflatten %[[F1]]
  // CHECK: %[[F2:.*]] = zest.all_gather
  // CHECK: %[[A2:.*]] = zest.unflatten %[[F2]]
  // CHECK: zest.all_gather
  // CHECK: zest.reduce_scatter
  // CHECK: zest.reduce_scatter
  // CHECK: return %[[A1]], %[[A2]]
  %f1 = zest.all_gather %s for @u : tensor<4xf32> -> tensor<8xf32>
  %a1 = zest.unflatten %f1, @u, "a" : tensor<8xf32> -> tensor<8xf32>
  %a1b = zest.unflatten %f1, @u, "a" : tensor<8xf32> -> tensor<8xf32>
  %sum = arith.addf %a1, %a1b : tensor<8xf32>
  %f2 = zest.all_gather %s for @u : tensor<4xf32> -> tensor<8xf32>
  %a2 = zest.unflatten %f2, @u, "a" : tensor<8xf32> -> tensor<8xf32>
  %unused = zest.all_gather %s for @u : tensor<4xf32> -> tensor<8xf32>
  %r1 = zest.reduce_scatter avg %g for @u : tensor<8xf32> -> tensor<4xf32>
  %r2 = zest.reduce_scatter avg %g for @u : tensor<8xf32> -> tensor<4xf32>
  return %a1, %a2 : tensor<8xf32>, tensor<8xf32>
}

// Optimization barriers are never merged or folded away: a recomputation
// that reads one is not the computation reading its operand
// (zest-checkpoint-activations).
// CHECK-LABEL: func.func @barrier
// CHECK: %[[B1:.*]] = zest.optimization_barrier %[[X:[^ ]*]]
// CHECK: %[[B2:.*]] = zest.optimization_barrier %[[X]]
// CHECK: zest.optimization_barrier %[[X]]
// CHECK: return %[[B1]], %[[B2]], %[[X]]
func.func @barrier(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %b1 = zest.optimization_barrier %x : tensor<4xf32>
  %b2 = zest.optimization_barrier %x : tensor<4xf32>
  %unused = zest.optimization_barrier %x : tensor<4xf32>
  return %b1, %b2, %x : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// Offload's copies are ordered and never dropped: an unused copy to the
// device still happens, two copies of one shard stay two.
// CHECK-LABEL: func.func @offload_copies
// CHECK-COUNT-3: zest.copy_to_device %{{.*}} : tensor<4xf32>
func.func @offload_copies(%shard: tensor<4xf32> {zest.host}) -> (tensor<4xf32>, tensor<4xf32>) {
  %d1 = zest.copy_to_device %shard : tensor<4xf32>
  %d2 = zest.copy_to_device %shard : tensor<4xf32>
  %unused = zest.copy_to_device %shard : tensor<4xf32>
  return %d1, %d2 : tensor<4xf32>, tensor<4xf32>
}
