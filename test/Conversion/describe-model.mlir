// RUN: zest-opt %s -zest-describe-model | FileCheck %s
// RUN: zest-opt %s -zest-describe-model=keep-units | FileCheck %s --check-prefix=KEEP

// The descriptor records the roles; the C interface takes every argument
// and every result but those updated in place; then the roles are gone.
// CHECK-LABEL: module attributes {
// CHECK-SAME: zest.entry_points = [{c_interface_args = 4 : i64, name = "step"}]
// CHECK-SAME: zest.model_descriptor = "zest-model 1\0Aworld_size 2\0Aunit u sharded F32 6 8 4 1\0Aparam u.w F32 0 1 6\0Afunction step 3 1\0Aoptimizer sgd\0Aarg unit u\0Aarg data F32 1 2\0Aarg hyper 10\0Aresult loss F32 0\0Aend\0A"
// CHECK: func.func @step(%{{.*}}: tensor<4xf32>, %{{.*}}: tensor<2xf32>, %{{.*}}: tensor<10xf32>)
// CHECK-SAME: -> (tensor<4xf32> {zest.updated = 0 : i64}, tensor<f32>)
// CHECK-NOT: zest.optimizer
// CHECK-NOT: zest.unit =
// KEEP-LABEL: module attributes
// KEEP: func.func @step(%{{.*}}: tensor<4xf32> {zest.unit = @u}, %{{.*}}: tensor<2xf32>, %{{.*}}: tensor<10xf32>)
zest.unit @u sharded : f32, world_size = 2, padded_size = 8, shard_size = 4 ["u.w" : tensor<6xf32> at 0]
func.func @step(%s: tensor<4xf32> {zest.unit = @u}, %x: tensor<2xf32>, %h: tensor<10xf32> {zest.hyper})
    -> (tensor<4xf32> {zest.updated = 0 : i64}, tensor<f32> {zest.loss}) attributes {zest.optimizer = "sgd"} {
  %c = arith.constant dense<0.0> : tensor<f32>
  return %s, %c : tensor<4xf32>, tensor<f32>
}

