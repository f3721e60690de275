// RUN: zest-opt %s -split-input-file -zest-split-reductions | FileCheck %s
// RUN: zest-opt %s -split-input-file -zest-split-reductions=min-elements=2000000 \
// RUN:   | FileCheck %s --check-prefix=SMALL

// A squared norm of 2^20 elements: 1024 partial sums of 1024 contiguous
// elements each (the squares computed in the first stage), then their sum
// into the scalar.

// CHECK-LABEL: func.func @norm(
// CHECK-SAME:      %[[G:[^:]*]]: tensor<1048576xf32>, %[[INIT:[^:]*]]: tensor<f32>)
// CHECK:         %[[CHUNKS:.*]] = tensor.expand_shape %[[G]] {{\[\[}}0, 1]] output_shape [1024, 1024] : tensor<1048576xf32> into tensor<1024x1024xf32>
// CHECK:         %[[EMPTY:.*]] = tensor.empty() : tensor<1024xf32>
// CHECK:         %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK:         %[[FILL:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[EMPTY]] : tensor<1024xf32>)
// CHECK:         %[[PARTIAL:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]{{.*}} ins(%[[CHUNKS]] : tensor<1024x1024xf32>) outs(%[[FILL]] : tensor<1024xf32>)
// CHECK:           arith.mulf
// CHECK:           arith.addf
// CHECK:         %[[TOTAL:.*]] = linalg.generic {{.*}}iterator_types = ["reduction"]{{.*}} ins(%[[PARTIAL]] : tensor<1024xf32>) outs(%[[INIT]] : tensor<f32>)
// CHECK:           arith.addf
// CHECK:         return %[[TOTAL]]
// SMALL-LABEL: func.func @norm(
// SMALL-NOT:     tensor.expand_shape
#id = affine_map<(d0) -> (d0)>
#scalar = affine_map<(d0) -> ()>
func.func @norm(%g: tensor<1048576xf32>, %init: tensor<f32>) -> tensor<f32> {
  %r = linalg.generic {indexing_maps = [#id, #scalar], iterator_types = ["reduction"]}
      ins(%g : tensor<1048576xf32>) outs(%init : tensor<f32>) {
  ^bb0(%x: f32, %acc: f32):
    %sq = arith.mulf %x, %x : f32
    %s = arith.addf %sq, %acc : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %r : tensor<f32>
}

// -----

// Under a branch (the gradient norm when accumulating or applying): the
// partial results are initialized before it, so the branch holds only the
// reshape and the two reductions.

// CHECK-LABEL: func.func @branch(
// CHECK:         %[[EMPTY:.*]] = tensor.empty() : tensor<1024xf32>
// CHECK:         %[[FILL:.*]] = linalg.fill {{.*}} outs(%[[EMPTY]] : tensor<1024xf32>)
// CHECK:         scf.if
// CHECK-NEXT:      tensor.expand_shape
// CHECK-NEXT:      linalg.generic {{.*}} outs(%[[FILL]] : tensor<1024xf32>)
#id = affine_map<(d0) -> (d0)>
#scalar = affine_map<(d0) -> ()>
func.func @branch(%c: i1, %g: tensor<1048576xf32>, %init: tensor<f32>) -> tensor<f32> {
  %r = scf.if %c -> tensor<f32> {
    %s = linalg.generic {indexing_maps = [#id, #scalar], iterator_types = ["reduction"]}
        ins(%g : tensor<1048576xf32>) outs(%init : tensor<f32>) {
    ^bb0(%x: f32, %acc: f32):
      %a = arith.addf %x, %acc : f32
      linalg.yield %a : f32
    } -> tensor<f32>
    scf.yield %s : tensor<f32>
  } else {
    scf.yield %init : tensor<f32>
  }
  return %r : tensor<f32>
}

// -----

// A size with no divisor between 2 and 1024 leaving 256 elements a chunk
// (a prime), and a small reduction, stay whole.

// CHECK-LABEL: func.func @prime(
// CHECK-NOT:     tensor.expand_shape
// CHECK-LABEL: func.func @small(
// CHECK-NOT:     tensor.expand_shape
#id = affine_map<(d0) -> (d0)>
#scalar = affine_map<(d0) -> ()>
func.func @prime(%g: tensor<65537xf32>, %init: tensor<f32>) -> tensor<f32> {
  %r = linalg.generic {indexing_maps = [#id, #scalar], iterator_types = ["reduction"]}
      ins(%g : tensor<65537xf32>) outs(%init : tensor<f32>) {
  ^bb0(%x: f32, %acc: f32):
    %s = arith.addf %x, %acc : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %r : tensor<f32>
}
func.func @small(%g: tensor<4096xf32>, %init: tensor<f32>) -> tensor<f32> {
  %r = linalg.generic {indexing_maps = [#id, #scalar], iterator_types = ["reduction"]}
      ins(%g : tensor<4096xf32>) outs(%init : tensor<f32>) {
  ^bb0(%x: f32, %acc: f32):
    %s = arith.addf %x, %acc : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %r : tensor<f32>
}
