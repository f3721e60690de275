// RUN: zest-opt %s -split-input-file -zest-reassociate-reductions | FileCheck %s

// The combiner of a float sum becomes reassociable; the rest of the body
// (the square) keeps IEEE semantics.
// CHECK-LABEL: func.func @sum_of_squares(
// CHECK:         linalg.generic
// CHECK:           %[[SQ:.*]] = arith.mulf %{{.*}}, %{{.*}} : f32
// CHECK-NEXT:      %[[S:.*]] = arith.addf %{{.*}}, %[[SQ]] fastmath<reassoc> : f32
// CHECK-NEXT:      linalg.yield %[[S]]
func.func @sum_of_squares(%x: tensor<4x8xf32>, %init: tensor<4xf32>) -> tensor<4xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x8xf32>) outs(%init : tensor<4xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %sq = arith.mulf %in, %in : f32
    %s = arith.addf %acc, %sq : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// linalg.reduce on buffers (after bufferization) too, and existing flags
// are kept.
// CHECK-LABEL: func.func @reduce(
// CHECK:         arith.addf %{{.*}}, %{{.*}} fastmath<reassoc,contract> : f32
func.func @reduce(%x: memref<4x8xf32>, %out: memref<4xf32>) {
  linalg.reduce ins(%x : memref<4x8xf32>) outs(%out : memref<4xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc fastmath<contract> : f32
      linalg.yield %s : f32
    }
  return
}

// -----

// Not sums: a max reduction, an addition that does not combine with the
// output, and parallel-only ops are left alone.
// CHECK-LABEL: func.func @untouched(
// CHECK-NOT:     reassoc
func.func @untouched(%x: tensor<4x8xf32>, %init: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %max = linalg.reduce ins(%x : tensor<4x8xf32>) outs(%init : tensor<4xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %m = arith.maximumf %in, %acc : f32
      linalg.yield %m : f32
    }
  %last = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                          iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x8xf32>) outs(%init : tensor<4xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %in, %in : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %par = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                         iterator_types = ["parallel"]}
      ins(%y : tensor<4xf32>) outs(%init : tensor<4xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %in, %acc : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %max, %last, %par : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
