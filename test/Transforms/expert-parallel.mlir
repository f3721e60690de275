// RUN: zest-opt %s -split-input-file -zest-expert-parallel=group-size=2 | FileCheck %s
// Over one rank the exchanges fold away.
// RUN: zest-opt %s -split-input-file -zest-expert-parallel | FileCheck %s --check-prefix=ONE
// The experts' units: sharded over the group, never gathered; the gradient
// divided by the group's size.
// RUN: zest-opt %s -split-input-file -zest-expert-parallel=group-size=2 -zest-group-units=world-size=2 -zest-shard-params | FileCheck %s --check-prefix=UNITS

// An experts layer as zest-import writes it: 4 experts, 8 rows (4 tokens x
// top-2); one projection and a SiLU, forward and backward.
// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[W:.*]]: tensor<2x6x3xf32> {zest.expert_parallel = 2 : i64, zest.param = "experts.w"}
// CHECK-SAME: -> (f32 {zest.loss}, tensor<2x6x3xf32> {zest.grad = "experts.w"})
// CHECK: %[[R:.*]]:2 = zest.expert_routing group_size = 2 ins(%{{.*}} : tensor<4xi32>) outs(%{{.*}}, %{{.*}} : tensor<4xi64>, tensor<2xi32>)
// CHECK: %[[IN:.*]] = zest.expert_dispatch group_size = 2 {{.*}} outs(%{{.*}} : tensor<16x3xf32>) -> tensor<16x3xf32>
// CHECK: %[[Y:.*]] = zest.grouped_matmul transpose_weight ins(%[[IN]], %[[W]], %[[R]]#1 : tensor<16x3xf32>, tensor<2x6x3xf32>, tensor<2xi32>) outs(%{{.*}} : tensor<16x6xf32>)
// CHECK: %[[ONES:.*]] = arith.constant dense<1.000000e+00> : tensor<16x6xf32>
// CHECK: %[[ACT:.*]] = linalg.generic {{.*}} ins(%[[Y]], %[[ONES]] : tensor<16x6xf32>, tensor<16x6xf32>) outs(%{{.*}} : tensor<16x6xf32>)
// CHECK: %[[COLS:.*]] = tensor.extract_slice %[[ACT]][0, 0] [16, 3] [1, 1] : tensor<16x6xf32> to tensor<16x3xf32>
// CHECK: zest.expert_combine group_size = 2 ins(%[[COLS]], %{{.*}}, %[[R]]#0 : tensor<16x3xf32>, tensor<4xi32>, tensor<4xi64>) outs(%{{.*}} : tensor<8x3xf32>)
// CHECK: %[[G:.*]] = zest.expert_dispatch group_size = 2 {{.*}} -> tensor<16x3xf32>
// CHECK: %[[GW:.*]] = zest.grouped_matmul_weight_grad transpose_weight ins(%[[IN]], %{{.*}}, %[[R]]#1 : tensor<16x3xf32>, tensor<16x6xf32>, tensor<2xi32>) outs(%{{.*}} : tensor<2x6x3xf32>)
// CHECK: return %{{.*}}, %[[GW]]
// ONE-LABEL: func.func @step(
// ONE-NOT: zest.expert_
// ONE: zest.grouped_matmul transpose_weight ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<8x3xf32>, tensor<4x6x3xf32>, tensor<4xi32>)
// ONE-NOT: zest.expert_
// UNITS: zest.unit @experts.w sharded : f32, world_size = 2, padded_size = 72, shard_size = 36 [
// UNITS-NEXT: "experts.w" : tensor<4x6x3xf32> at 0
// UNITS-NEXT: ] {experts}
// UNITS-LABEL: func.func @step(
// UNITS-SAME: %[[SHARD:.*]]: tensor<36xf32> {zest.unit = @experts.w}
// UNITS-NOT: zest.all_gather
// UNITS: %[[LOCAL:.*]] = tensor.expand_shape %[[SHARD]] {{.*}} : tensor<36xf32> into tensor<2x6x3xf32>
// UNITS: zest.grouped_matmul transpose_weight ins(%{{.*}}, %[[LOCAL]], %{{.*}} : tensor<16x3xf32>, tensor<2x6x3xf32>, tensor<2xi32>)
// UNITS: %[[FLAT:.*]] = tensor.collapse_shape %{{.*}} : tensor<2x6x3xf32> into tensor<36xf32>
// UNITS: %[[HALF:.*]] = arith.constant 5.000000e-01 : f32
// UNITS: %[[MEAN:.*]] = linalg.generic {{.*}} ins(%[[FLAT]] : tensor<36xf32>)
// UNITS: arith.mulf %{{.*}}, %[[HALF]]
// UNITS-NOT: zest.all_reduce
// UNITS: return %{{.*}}, %[[MEAN]] : f32, tensor<36xf32>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @step(%w: tensor<4x6x3xf32> {zest.param = "experts.w"}, %x: tensor<8x3xf32>, %ends: tensor<4xi32>, %dy: tensor<8x3xf32>)
    -> (f32 {zest.loss}, tensor<4x6x3xf32> {zest.grad = "experts.w"}) {
  %r0 = tensor.empty() : tensor<4xi64>
  %l0 = tensor.empty() : tensor<4xi32>
  %r:2 = zest.expert_routing group_size = 1 ins(%ends : tensor<4xi32>) outs(%r0, %l0 : tensor<4xi64>, tensor<4xi32>) -> tensor<4xi64>, tensor<4xi32>
  %e0 = tensor.empty() : tensor<8x3xf32>
  %in = zest.expert_dispatch group_size = 1 ins(%x, %ends, %r#0 : tensor<8x3xf32>, tensor<4xi32>, tensor<4xi64>) outs(%e0 : tensor<8x3xf32>) -> tensor<8x3xf32>
  %e1 = tensor.empty() : tensor<8x6xf32>
  %y = zest.grouped_matmul transpose_weight ins(%in, %w, %r#1 : tensor<8x3xf32>, tensor<4x6x3xf32>, tensor<4xi32>) outs(%e1 : tensor<8x6xf32>) -> tensor<8x6xf32>
  %ones = arith.constant dense<1.0> : tensor<8x6xf32>
  %act = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%y, %ones : tensor<8x6xf32>, tensor<8x6xf32>) outs(%e1 : tensor<8x6xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<8x6xf32>
  %cols = tensor.extract_slice %act[0, 0] [8, 3] [1, 1] : tensor<8x6xf32> to tensor<8x3xf32>
  %e2 = tensor.empty() : tensor<8x3xf32>
  %out = zest.expert_combine group_size = 1 ins(%cols, %ends, %r#0 : tensor<8x3xf32>, tensor<4xi32>, tensor<4xi64>) outs(%e2 : tensor<8x3xf32>) -> tensor<8x3xf32>
  %g = zest.expert_dispatch group_size = 1 ins(%dy, %ends, %r#0 : tensor<8x3xf32>, tensor<4xi32>, tensor<4xi64>) outs(%e0 : tensor<8x3xf32>) -> tensor<8x3xf32>
  %gcols = tensor.concat dim(1) %g, %g : (tensor<8x3xf32>, tensor<8x3xf32>) -> tensor<8x6xf32>
  %e3 = tensor.empty() : tensor<4x6x3xf32>
  %gw = zest.grouped_matmul_weight_grad transpose_weight ins(%in, %gcols, %r#1 : tensor<8x3xf32>, tensor<8x6xf32>, tensor<4xi32>) outs(%e3 : tensor<4x6x3xf32>) -> tensor<4x6x3xf32>
  %c0 = arith.constant 0 : index
  %loss = tensor.extract %out[%c0, %c0] : tensor<8x3xf32>
  return %loss, %gw : f32, tensor<4x6x3xf32>
}
