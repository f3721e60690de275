// RUN: zest-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(zest-group-parameter-casts))' | FileCheck %s

zest.unit @u sharded : f32, world_size = 1, padded_size = 64, shard_size = 64 [
  "u.w1" : tensor<4x8xf32> at 0,
  "u.norm" : tensor<8xf32> at 32,
  "u.w2" : tensor<2x8xf32> at 40,
  "u.tail" : tensor<8xf32> at 56
]

#id = affine_map<(i, j) -> (i, j)>

// Autocast's casts of two weights of one gathered unit: one cast of the
// span [0, 56) they occupy (the norm's weight between them included), where
// the first cast was; each weight a view into it. The norm's f32 read and
// the unit's tail are untouched.
// CHECK-LABEL: func.func @grouped(
// CHECK-SAME:      %[[FLAT:.*]]: tensor<64xf32>
// CHECK:         %[[SPAN:.*]] = tensor.extract_slice %[[FLAT]][0] [56] [1] : tensor<64xf32> to tensor<56xf32>
// CHECK:         %[[ONCE:.*]] = linalg.generic {{.*}} ins(%[[SPAN]] : tensor<56xf32>) outs(%{{.*}} : tensor<56xbf16>)
// CHECK:           arith.truncf
// CHECK:         %[[S1:.*]] = tensor.extract_slice %[[ONCE]][0] [32] [1] : tensor<56xbf16> to tensor<32xbf16>
// CHECK:         %[[W1:.*]] = tensor.expand_shape %[[S1]] {{\[\[}}0, 1]] output_shape [4, 8] : tensor<32xbf16> into tensor<4x8xbf16>
// CHECK:         %[[S2:.*]] = tensor.extract_slice %[[ONCE]][40] [16] [1] : tensor<56xbf16> to tensor<16xbf16>
// CHECK:         %[[W2:.*]] = tensor.expand_shape %[[S2]] {{\[\[}}0, 1]] output_shape [2, 8] : tensor<16xbf16> into tensor<2x8xbf16>
// CHECK-NOT:     arith.truncf
// CHECK:         return %[[W1]], %[[W2]], %{{.*}} : tensor<4x8xbf16>, tensor<2x8xbf16>, tensor<8xf32>
func.func @grouped(%flat: tensor<64xf32>) -> (tensor<4x8xbf16>, tensor<2x8xbf16>, tensor<8xf32>) {
  %w1 = zest.unflatten %flat, @u, "u.w1" : tensor<64xf32> -> tensor<4x8xf32>
  %n = zest.unflatten %flat, @u, "u.norm" : tensor<64xf32> -> tensor<8xf32>
  %w2 = zest.unflatten %flat, @u, "u.w2" : tensor<64xf32> -> tensor<2x8xf32>
  %e1 = tensor.empty() : tensor<4x8xbf16>
  %r1 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w1 : tensor<4x8xf32>) outs(%e1 : tensor<4x8xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<4x8xbf16>
  %e2 = tensor.empty() : tensor<2x8xbf16>
  %r2 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w2 : tensor<2x8xf32>) outs(%e2 : tensor<2x8xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<2x8xbf16>
  return %r1, %r2, %n : tensor<4x8xbf16>, tensor<2x8xbf16>, tensor<8xf32>
}

// -----

zest.unit @u sharded : f32, world_size = 1, padded_size = 64, shard_size = 64 [
  "u.w1" : tensor<4x8xf32> at 0,
  "u.norm" : tensor<8xf32> at 32,
  "u.w2" : tensor<2x8xf32> at 40,
  "u.tail" : tensor<8xf32> at 56
]

#id = affine_map<(i, j) -> (i, j)>
#v = affine_map<(i) -> (i)>

// Casts to different types, one cast alone, and casts in different blocks
// (one in a loop's body) are left as they are: there is nothing to group.
// CHECK-LABEL: func.func @kept(
// CHECK-NOT:     tensor.extract_slice
// CHECK-COUNT-2: zest.unflatten
// CHECK:         arith.truncf %{{.*}} : f32 to bf16
// CHECK:         arith.truncf %{{.*}} : f32 to f16
// CHECK:         scf.for
// CHECK:           zest.unflatten
// CHECK:           arith.truncf %{{.*}} : f32 to bf16
func.func @kept(%flat: tensor<64xf32>, %n: index) -> (tensor<4x8xbf16>, tensor<2x8xf16>, tensor<8xbf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %w1 = zest.unflatten %flat, @u, "u.w1" : tensor<64xf32> -> tensor<4x8xf32>
  %w2 = zest.unflatten %flat, @u, "u.w2" : tensor<64xf32> -> tensor<2x8xf32>
  %e1 = tensor.empty() : tensor<4x8xbf16>
  %r1 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w1 : tensor<4x8xf32>) outs(%e1 : tensor<4x8xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<4x8xbf16>
  %e2 = tensor.empty() : tensor<2x8xf16>
  %r2 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w2 : tensor<2x8xf32>) outs(%e2 : tensor<2x8xf16>) {
  ^bb0(%in: f32, %out: f16):
    %t = arith.truncf %in : f32 to f16
    linalg.yield %t : f16
  } -> tensor<2x8xf16>
  %e3 = tensor.empty() : tensor<8xbf16>
  %r3 = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %e3) -> (tensor<8xbf16>) {
    %t8 = zest.unflatten %flat, @u, "u.tail" : tensor<64xf32> -> tensor<8xf32>
    %r = linalg.generic {indexing_maps = [#v, #v], iterator_types = ["parallel"]} ins(%t8 : tensor<8xf32>) outs(%acc : tensor<8xbf16>) {
    ^bb0(%in: f32, %out: bf16):
      %t = arith.truncf %in : f32 to bf16
      linalg.yield %t : bf16
    } -> tensor<8xbf16>
    scf.yield %r : tensor<8xbf16>
  }
  return %r1, %r2, %r3 : tensor<4x8xbf16>, tensor<2x8xf16>, tensor<8xbf16>
}

// -----

zest.unit @u sharded : f32, world_size = 1, padded_size = 64, shard_size = 64 [
  "u.w1" : tensor<4x8xf32> at 0,
  "u.norm" : tensor<8xf32> at 32,
  "u.w2" : tensor<2x8xf32> at 40,
  "u.tail" : tensor<8xf32> at 56
]

#id = affine_map<(i, j) -> (i, j)>
#v = affine_map<(i) -> (i)>

// The span covers the casts' parameters whatever their order in the block
// (here the last parameter first) and takes the whole buffer without a
// slice when they reach both ends; a 1-D parameter is a slice alone.
// CHECK-LABEL: func.func @whole_buffer(
// CHECK-SAME:      %[[FLAT:.*]]: tensor<64xf32>
// CHECK-NOT:     tensor.extract_slice %[[FLAT]]
// CHECK:         %[[ONCE:.*]] = linalg.generic {{.*}} ins(%[[FLAT]] : tensor<64xf32>) outs(%{{.*}} : tensor<64xbf16>)
// CHECK:         %[[T:.*]] = tensor.extract_slice %[[ONCE]][56] [8] [1] : tensor<64xbf16> to tensor<8xbf16>
// CHECK:         %[[S1:.*]] = tensor.extract_slice %[[ONCE]][0] [32] [1] : tensor<64xbf16> to tensor<32xbf16>
// CHECK:         %[[W1:.*]] = tensor.expand_shape %[[S1]]
// CHECK:         return %[[T]], %[[W1]]
func.func @whole_buffer(%flat: tensor<64xf32>) -> (tensor<8xbf16>, tensor<4x8xbf16>) {
  %t8 = zest.unflatten %flat, @u, "u.tail" : tensor<64xf32> -> tensor<8xf32>
  %e0 = tensor.empty() : tensor<8xbf16>
  %r0 = linalg.generic {indexing_maps = [#v, #v], iterator_types = ["parallel"]} ins(%t8 : tensor<8xf32>) outs(%e0 : tensor<8xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<8xbf16>
  %w1 = zest.unflatten %flat, @u, "u.w1" : tensor<64xf32> -> tensor<4x8xf32>
  %e1 = tensor.empty() : tensor<4x8xbf16>
  %r1 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w1 : tensor<4x8xf32>) outs(%e1 : tensor<4x8xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<4x8xbf16>
  return %r0, %r1 : tensor<8xbf16>, tensor<4x8xbf16>
}
