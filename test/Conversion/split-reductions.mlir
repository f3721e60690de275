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

// -----

// A loss: the sum of squares of a 4096x1024 matrix, both dimensions reduced.
// Collapsed to one dimension (a reshape of a contiguous tensor), it splits as
// a one-dimensional sum: 1024 partial sums of 4096 elements, then one.

// CHECK-LABEL: func.func @matrix(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<4096x1024xf32>, %[[INIT:[^:]*]]: tensor<f32>)
// CHECK:         %[[FLAT:.*]] = tensor.collapse_shape %[[X]] {{\[\[}}0, 1]] : tensor<4096x1024xf32> into tensor<4194304xf32>
// CHECK:         %[[CHUNKS:.*]] = tensor.expand_shape %[[FLAT]] {{\[\[}}0, 1]] output_shape [1024, 4096]
// CHECK:         %[[PARTIAL:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]{{.*}} ins(%[[CHUNKS]] : tensor<1024x4096xf32>) outs(%{{.*}} : tensor<1024xf32>)
// CHECK:           arith.mulf
// CHECK:         linalg.generic {{.*}}iterator_types = ["reduction"]{{.*}} ins(%[[PARTIAL]] : tensor<1024xf32>) outs(%[[INIT]] : tensor<f32>)
// SMALL-LABEL: func.func @matrix(
// SMALL:         tensor.collapse_shape
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#scalar2 = affine_map<(d0, d1) -> ()>
func.func @matrix(%x: tensor<4096x1024xf32>, %init: tensor<f32>) -> tensor<f32> {
  %r = linalg.generic {indexing_maps = [#id2, #scalar2], iterator_types = ["reduction", "reduction"]}
      ins(%x : tensor<4096x1024xf32>) outs(%init : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %sq = arith.mulf %a, %a : f32
    %s = arith.addf %sq, %acc : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %r : tensor<f32>
}

// -----

// A column sum (LayerNorm's weight gradient: sum over 4096 rows of x * dy,
// 1024 columns) would be one thread per column on a GPU. Split into 128
// chunks of 32 rows, it is 128 x 1024 threads; the 128 partial rows are
// split again into 8 chunks of 16, then the 8 rows are summed per column.
// The named linalg.reduce (the bias-like sum) splits the same way.

// CHECK-LABEL: func.func @columns(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<4096x1024xf32>, %[[DY:[^:]*]]: tensor<4096x1024xf32>, %[[INIT:[^:]*]]: tensor<1024xf32>)
// CHECK:         %[[XC:.*]] = tensor.expand_shape %[[X]] {{\[\[}}0, 1], [2]] output_shape [128, 32, 1024]
// CHECK:         %[[DYC:.*]] = tensor.expand_shape %[[DY]] {{\[\[}}0, 1], [2]] output_shape [128, 32, 1024]
// CHECK:         %[[P1:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction", "parallel"]{{.*}} ins(%[[XC]], %[[DYC]] : {{.*}}) outs(%{{.*}} : tensor<128x1024xf32>)
// CHECK:           arith.mulf
// CHECK:         %[[P1C:.*]] = tensor.expand_shape %[[P1]] {{\[\[}}0, 1], [2]] output_shape [8, 16, 1024]
// CHECK:         %[[P2:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction", "parallel"]{{.*}} ins(%[[P1C]] : tensor<8x16x1024xf32>) outs(%{{.*}} : tensor<8x1024xf32>)
// CHECK:         %[[SUM:.*]] = linalg.generic {{.*}}iterator_types = ["reduction", "parallel"]{{.*}} ins(%[[P2]] : tensor<8x1024xf32>) outs(%[[INIT]] : tensor<1024xf32>)
// CHECK:         return %[[SUM]]
// CHECK-LABEL: func.func @reduce(
// CHECK:         tensor.expand_shape {{.*}} output_shape [128, 32, 1024]
// CHECK:         linalg.generic {{.*}} outs(%{{.*}} : tensor<128x1024xf32>)
// SMALL-LABEL: func.func @columns(
// SMALL:         tensor.expand_shape {{.*}} output_shape [128, 32, 1024]
// SMALL-NOT:     output_shape [8, 16, 1024]
#rows = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @columns(%x: tensor<4096x1024xf32>, %dy: tensor<4096x1024xf32>, %init: tensor<1024xf32>) -> tensor<1024xf32> {
  %r = linalg.generic {indexing_maps = [#rows, #rows, #col], iterator_types = ["reduction", "parallel"]}
      ins(%x, %dy : tensor<4096x1024xf32>, tensor<4096x1024xf32>) outs(%init : tensor<1024xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %p, %acc : f32
    linalg.yield %s : f32
  } -> tensor<1024xf32>
  return %r : tensor<1024xf32>
}
func.func @reduce(%x: tensor<4096x1024xf32>, %init: tensor<1024xf32>) -> tensor<1024xf32> {
  %r = linalg.reduce ins(%x : tensor<4096x1024xf32>) outs(%init : tensor<1024xf32>) dimensions = [0]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  return %r : tensor<1024xf32>
}

// -----

// A column sum over a [B, S, D] array's batch and sequence (RMSNorm's
// weight gradient as imported: 8 x 512 rows, 768 columns) is first a sum
// over its 4096 rows, collapsed, then split as above (128 chunks of 32
// rows, then 8 of 16).
// CHECK-LABEL: func.func @columns_3d(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<8x512x768xf32>
// CHECK:         %[[X2:.*]] = tensor.collapse_shape %[[X]] {{\[\[}}0, 1], [2]] : tensor<8x512x768xf32> into tensor<4096x768xf32>
// CHECK:         %[[XC:.*]] = tensor.expand_shape %[[X2]] {{\[\[}}0, 1], [2]] output_shape [128, 32, 768]
// CHECK:         linalg.generic {{.*}}iterator_types = ["parallel", "reduction", "parallel"]{{.*}} ins(%[[XC]], %{{.*}} : {{.*}}) outs(%{{.*}} : tensor<128x768xf32>)
// CHECK:         linalg.generic {{.*}} outs(%{{.*}} : tensor<8x768xf32>)
// CHECK:         linalg.generic {{.*}}iterator_types = ["reduction", "parallel"]{{.*}} outs(%{{.*}} : tensor<768xf32>)
#bsd = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#d = affine_map<(d0, d1, d2) -> (d2)>
func.func @columns_3d(%x: tensor<8x512x768xf32>, %dy: tensor<8x512x768xf32>, %init: tensor<768xf32>) -> tensor<768xf32> {
  %r = linalg.generic {indexing_maps = [#bsd, #bsd, #d], iterator_types = ["reduction", "reduction", "parallel"]}
      ins(%x, %dy : tensor<8x512x768xf32>, tensor<8x512x768xf32>) outs(%init : tensor<768xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %p, %acc : f32
    linalg.yield %s : f32
  } -> tensor<768xf32>
  return %r : tensor<768xf32>
}

// -----

// A keepdim column sum (a bias gradient as torch-mlir imports it: the
// result [1, N], its row pinned to 0 by the map) is split as a column sum
// of [N] whose result is expanded back: upstream's split needs results
// indexed by dimensions only.

// CHECK-LABEL: func.func @keepdim(
// CHECK-SAME:      %[[DY:[^:]*]]: tensor<4096x768xf32>, %[[INIT:[^:]*]]: tensor<1x768xf32>)
// CHECK:         %[[FLAT:.*]] = tensor.collapse_shape %[[INIT]] {{\[\[}}0, 1]] : tensor<1x768xf32> into tensor<768xf32>
// CHECK:         tensor.expand_shape %[[DY]] {{\[\[}}0, 1], [2]] output_shape [128, 32, 768]
// CHECK:         linalg.generic {{.*}} outs(%{{.*}} : tensor<128x768xf32>)
// CHECK:         %[[SUM:.*]] = linalg.generic {{.*}}iterator_types = ["reduction", "parallel"]{{.*}} outs(%[[FLAT]] : tensor<768xf32>)
// CHECK:         %[[KEPT:.*]] = tensor.expand_shape %[[SUM]] {{\[\[}}0, 1]] output_shape [1, 768] : tensor<768xf32> into tensor<1x768xf32>
// CHECK:         return %[[KEPT]]
#rows = affine_map<(d0, d1) -> (d0, d1)>
#kept = affine_map<(d0, d1) -> (0, d1)>
func.func @keepdim(%dy: tensor<4096x768xf32>, %init: tensor<1x768xf32>) -> tensor<1x768xf32> {
  %r = linalg.generic {indexing_maps = [#rows, #kept], iterator_types = ["reduction", "parallel"]}
      ins(%dy : tensor<4096x768xf32>) outs(%init : tensor<1x768xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  } -> tensor<1x768xf32>
  return %r : tensor<1x768xf32>
}

// -----

// A row sum (a LayerNorm's mean: the reduced dimension is contiguous) is
// already one block per row, reading it coalesced; a column sum with many
// columns already has a thread for each; both stay whole.

// CHECK-LABEL: func.func @rows(
// CHECK-NOT:     tensor.expand_shape
// CHECK-LABEL: func.func @wide(
// CHECK-NOT:     tensor.expand_shape
#rows3 = affine_map<(d0, d1) -> (d0, d1)>
#row3 = affine_map<(d0, d1) -> (d0)>
#col3 = affine_map<(d0, d1) -> (d1)>
func.func @rows(%x: tensor<4096x1024xf32>, %init: tensor<4096xf32>) -> tensor<4096xf32> {
  %r = linalg.generic {indexing_maps = [#rows3, #row3], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4096x1024xf32>) outs(%init : tensor<4096xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  } -> tensor<4096xf32>
  return %r : tensor<4096xf32>
}
func.func @wide(%x: tensor<64x131072xf32>, %init: tensor<131072xf32>) -> tensor<131072xf32> {
  %r = linalg.generic {indexing_maps = [#rows3, #col3], iterator_types = ["reduction", "parallel"]}
      ins(%x : tensor<64x131072xf32>) outs(%init : tensor<131072xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  } -> tensor<131072xf32>
  return %r : tensor<131072xf32>
}
