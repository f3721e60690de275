// RUN: zest-opt %s -split-input-file -zest-group-units | FileCheck %s

// Parameters shared by two functions are grouped once, in order of first
// appearance across functions; a parameter only the second function has
// comes last.
// CHECK-LABEL: zest.unit @root sharded : f32, world_size = 1, padded_size = 14, shard_size = 14 [
// CHECK-NEXT:    "layers.0.w" : tensor<4xf32> at 0,
// CHECK-NEXT:    "layers.1.w" : tensor<4xf32> at 4,
// CHECK-NEXT:    "layers.2.w" : tensor<6xf32> at 8
// CHECK-NEXT:  ]
func.func @train(%w0: tensor<4xf32> {zest.param = "layers.0.w"},
                 %w1: tensor<4xf32> {zest.param = "layers.1.w"}) {
  return
}
func.func @eval(%w1: tensor<4xf32> {zest.param = "layers.1.w"},
                %w2: tensor<6xf32> {zest.param = "layers.2.w"},
                %w0: tensor<4xf32> {zest.param = "layers.0.w"}) {
  return
}

// -----

// A model without parameters gets no units.
// CHECK-LABEL: func.func @no_params
// CHECK-NOT: zest.unit
func.func @no_params(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
