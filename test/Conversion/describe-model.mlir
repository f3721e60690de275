// RUN: zest-opt %s -split-input-file -zest-describe-model | FileCheck %s
// RUN: zest-opt %s -split-input-file -zest-describe-model=keep-units | FileCheck %s --check-prefix=KEEP

// The descriptor records the roles; the C interface takes every argument
// and every result but those updated in place; then the roles are gone.
// CHECK-LABEL: module attributes {
// CHECK-SAME: zest.entry_points = [{c_interface_args = 4 : i64, name = "step"}]
// CHECK-SAME: zest.model_descriptor = "zest-model 1\0Aworld_size 2\0Aunit u sharded F32 6 8 4 1\0Aparam u.w F32 0 1 6\0Afunction step 3 1\0Aoptimizer sgd\0Aarg unit u\0Aarg data F32 1 2\0Aarg hyper 10\0Aresult loss F32 0\0Aend\0A"
// No optimizer state, no accumulators: the unit records zero bytes of each.
// CHECK: zest.unit @u
// CHECK-NEXT: "u.w"
// CHECK-NEXT: ] {zest.argument_bytes = {accumulators = 0 : i64, optimizer_state = 0 : i64}}
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


// -----

// Each unit records the bytes of its optimizer state (two AdamW moments) and
// its gradient accumulators, the most any entry point takes: the
// accumulate-only entry point holds the full flat gradient sum (8 floats),
// the step the moments of the shard (2 x 4 floats).
// CHECK-LABEL: module attributes
// CHECK: zest.unit @u
// CHECK-NEXT: "u.w"
// CHECK-NEXT: ] {zest.argument_bytes = {accumulators = 32 : i64, optimizer_state = 32 : i64}}
// CHECK: zest.unit @v
// CHECK-NEXT: "v.w"
// CHECK-NEXT: ] {zest.argument_bytes = {accumulators = 0 : i64, optimizer_state = 16 : i64}}
zest.unit @u sharded : f32, world_size = 2, padded_size = 8, shard_size = 4 ["u.w" : tensor<6xf32> at 0]
zest.unit @v sharded : f32, world_size = 2, padded_size = 4, shard_size = 2 ["v.w" : tensor<4xf32> at 0]
func.func @step(%s: tensor<4xf32> {zest.unit = @u}, %t: tensor<2xf32> {zest.unit = @v},
                %m: tensor<4xf32> {zest.optimizer_state = {unit = @u, name = "exp_avg"}},
                %v: tensor<4xf32> {zest.optimizer_state = {unit = @u, name = "exp_avg_sq"}},
                %n: tensor<2xf32> {zest.optimizer_state = {unit = @v, name = "exp_avg"}},
                %w: tensor<2xf32> {zest.optimizer_state = {unit = @v, name = "exp_avg_sq"}},
                %a: tensor<4xf32> {zest.grad_accum = @u},
                %x: tensor<2xf32>, %h: tensor<10xf32> {zest.hyper})
    -> (tensor<f32> {zest.loss}) attributes {zest.optimizer = "adamw"} {
  %c = arith.constant dense<0.0> : tensor<f32>
  return %c : tensor<f32>
}
func.func @accumulate(%s: tensor<4xf32> {zest.unit = @u}, %t: tensor<2xf32> {zest.unit = @v},
                      %g: tensor<8xf32> {zest.grad_sum = @u}, %x: tensor<2xf32>)
    -> (tensor<f32> {zest.loss}) attributes {zest.accumulate_for = "step"} {
  %c = arith.constant dense<0.0> : tensor<f32>
  return %c : tensor<f32>
}
