// RUN: zest-opt %s -zest-group-units="world-size=2 leaf-modules=layers.*,root" | FileCheck %s
// RUN: zest-opt %s -zest-group-units="world-size=2 leaf-modules=layers.*,root param-dtype=bf16 reduce-dtype=f16" | FileCheck %s --check-prefix=MIXED

// Mixed precision: f32 units gather in bf16 and reduce in f16; the bf16 and
// i32 units keep their own type on the wire.
// MIXED:      zest.unit @"layers.0[f32]" sharded : f32, {{.*}} [
// MIXED:      ] {gather_type = bf16, reduce_type = f16}
// MIXED-NEXT: zest.unit @"layers.0[bf16]" sharded : bf16, {{.*}} [
// MIXED:      ]{{$}}
// MIXED-NEXT: zest.unit @root sharded : i32, {{.*}} [
// MIXED:      ]{{$}}
// MIXED-NEXT: zest.unit @root_1 sharded : f32, {{.*}} [
// MIXED:      ] {gather_type = bf16, reduce_type = f16}

// A unit holds one element type: a block mixing f32 and bf16 splits into one
// unit per element type, in order of first appearance.
// CHECK:      zest.unit @"layers.0[f32]" sharded : f32, world_size = 2, padded_size = 10, shard_size = 5 [
// CHECK-NEXT:   "layers.0.w" : tensor<8xf32> at 0,
// CHECK-NEXT:   "layers.0.b" : tensor<2xf32> at 8
// CHECK-NEXT: ]
// CHECK-NEXT: zest.unit @"layers.0[bf16]" sharded : bf16, world_size = 2, padded_size = 4, shard_size = 2 [
// CHECK-NEXT:   "layers.0.scale" : tensor<3xbf16> at 0
// CHECK-NEXT: ]
// A module literally called "root" takes the name; the root unit is renamed.
// CHECK-NEXT: zest.unit @root sharded : i32, world_size = 2, padded_size = 2, shard_size = 1 [
// CHECK-NEXT:   "root.count" : tensor<1xi32> at 0
// CHECK-NEXT: ]
// CHECK-NEXT: zest.unit @root_1 sharded : f32, world_size = 2, padded_size = 2, shard_size = 1 [
// CHECK-NEXT:   "bias" : tensor<1xf32> at 0
// CHECK-NEXT: ]
// Unit names never clash with other symbols.
// CHECK: func.func @step
module attributes {zest.module_classes = {}} {
  func.func @step(%w: tensor<8xf32> {zest.param = "layers.0.w"},
                  %s: tensor<3xbf16> {zest.param = "layers.0.scale"},
                  %b: tensor<2xf32> {zest.param = "layers.0.b"},
                  %c: tensor<1xi32> {zest.param = "root.count"},
                  %t: tensor<1xf32> {zest.param = "bias"}) {
    return
  }
}
