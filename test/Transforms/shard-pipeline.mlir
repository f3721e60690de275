// RUN: zest-opt %s -zest-shard-pipeline="world-size=2 leaf-modules=layers.* ignore=norm.* manifest=%t.json" | FileCheck %s
// RUN: FileCheck %s --input-file=%t.json --check-prefix=JSON
// The pipeline equals its passes run one by one.
// RUN: zest-opt %s -zest-shard-pipeline="world-size=2 leaf-modules=layers.* ignore=norm.*" > %t.pipeline.mlir
// RUN: zest-opt %s -zest-verify-contract -zest-group-units="world-size=2 leaf-modules=layers.* ignore=norm.*" -zest-shard-params > %t.passes.mlir
// RUN: diff %t.pipeline.mlir %t.passes.mlir
// Contract errors stop the pipeline with a located error.
// RUN: not zest-opt %s -zest-shard-pipeline="leaf-modules=blocks.*" 2>&1 | FileCheck %s --check-prefix=ERR

// CHECK: zest.unit @ignored replicated : f32, world_size = 2, padded_size = 2, shard_size = 2
// CHECK: zest.unit @layers.0 sharded : f32, world_size = 2, padded_size = 4, shard_size = 2
// CHECK: zest.unit @layers.1 sharded : f32, world_size = 2, padded_size = 4, shard_size = 2
// CHECK-LABEL: func.func @step(
// CHECK-SAME: tensor<2xf32> {zest.unit = @ignored}, %{{.*}}: tensor<2xf32> {zest.unit = @layers.0}, %{{.*}}: tensor<2xf32> {zest.unit = @layers.1}, %{{.*}}: tensor<4xf32>)
// CHECK-SAME: -> (f32 {zest.loss}, tensor<2xf32> {zest.unit_grad = @layers.0}, tensor<2xf32> {zest.unit_grad = @layers.1})
// CHECK-DAG: zest.all_gather %{{.*}} for @layers.0
// CHECK-DAG: zest.all_gather %{{.*}} for @layers.1
// CHECK-DAG: zest.reduce_scatter avg %{{.*}} for @layers.1
// CHECK-DAG: zest.reduce_scatter avg %{{.*}} for @layers.0

// JSON: "world_size": 2,
// JSON: "name": "ignored",
// JSON: "name": "layers.0",
// JSON: "name": "layers.1",

// ERR: shard-pipeline.mlir:[[@LINE+1]]:1: error: no module matches 'blocks.*' (leaf-modules)
module {
  func.func @step(%n: tensor<2xf32> {zest.param = "norm.scale"},
                  %w0: tensor<4xf32> {zest.param = "layers.0.w"},
                  %w1: tensor<4xf32> {zest.param = "layers.1.w"},
                  %x: tensor<4xf32>)
      -> (f32 {zest.loss}, tensor<4xf32> {zest.grad = "layers.0.w"}, tensor<4xf32> {zest.grad = "layers.1.w"}) {
    %c0 = arith.constant 0 : index
    %h = arith.mulf %x, %w0 : tensor<4xf32>
    %y = arith.mulf %h, %w1 : tensor<4xf32>
    %s = tensor.extract %n[%c0] : tensor<2xf32>
    %l0 = tensor.extract %y[%c0] : tensor<4xf32>
    %l = arith.mulf %l0, %s : f32
    %dw1 = arith.mulf %y, %h : tensor<4xf32>
    %dh = arith.mulf %y, %w1 : tensor<4xf32>
    %dw0 = arith.mulf %dh, %w0 : tensor<4xf32>
    return %l, %dw0, %dw1 : f32, tensor<4xf32>, tensor<4xf32>
  }
}
