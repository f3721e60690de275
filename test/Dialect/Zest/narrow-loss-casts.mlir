// RUN: zest-opt %s -split-input-file -zest-narrow-loss-casts | FileCheck %s

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>

// Autocast's chain as imported: bf16 logits widened to f32 (through an
// expand_shape and a collapse_shape), the f32 gradient rounded back. Both
// ops read the bf16 logits; the backward writes the bf16 gradient that
// replaces the rounded one; no f32 [rows, classes] array is left (and the
// collapse of the expanded logits folds away).
// CHECK-LABEL: func.func @autocast(
// CHECK-SAME: %[[N:[^:]*]]: tensor<4x10xbf16>
// CHECK-NOT: arith.extf
// CHECK: zest.cross_entropy mean ignore_index(-100) ins(%[[N]], %{{.*}} : tensor<4x10xbf16>, tensor<4xi64>)
// CHECK: %[[E:.*]] = tensor.empty() : tensor<4x10xbf16>
// CHECK: %[[G:.*]] = zest.cross_entropy_backward mean ignore_index(-100) grad_loss(%{{.*}} : tensor<f32>) ins(%[[N]], %{{.*}}, %{{.*}} : tensor<4x10xbf16>, tensor<4xi64>, tensor<4xf32>) outs(%[[E]] : tensor<4x10xbf16>) -> tensor<4x10xbf16>
// CHECK-NOT: arith.truncf
// CHECK: %[[X:.*]] = tensor.expand_shape %[[G]] {{\[}}[0, 1], [2]] {{.*}} : tensor<4x10xbf16> into tensor<2x2x10xbf16>
// CHECK: return %{{.*}}, %[[X]]
func.func @autocast(%n: tensor<4x10xbf16>, %t: tensor<4xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<2x2x10xbf16>) {
  %n3 = tensor.expand_shape %n [[0, 1], [2]] output_shape [2, 2, 10] : tensor<4x10xbf16> into tensor<2x2x10xbf16>
  %e0 = tensor.empty() : tensor<2x2x10xf32>
  %w = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%n3 : tensor<2x2x10xbf16>) outs(%e0 : tensor<2x2x10xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %x = arith.extf %in : bf16 to f32
    linalg.yield %x : f32
  } -> tensor<2x2x10xf32>
  %logits = tensor.collapse_shape %w [[0, 1], [2]] : tensor<2x2x10xf32> into tensor<4x10xf32>
  %e1 = tensor.empty() : tensor<f32>
  %e2 = tensor.empty() : tensor<4xf32>
  %loss, %lse = zest.cross_entropy mean ignore_index(-100) ins(%logits, %t : tensor<4x10xf32>, tensor<4xi64>) outs(%e1, %e2 : tensor<f32>, tensor<4xf32>) -> tensor<f32>, tensor<4xf32>
  %e3 = tensor.empty() : tensor<4x10xf32>
  %dx = zest.cross_entropy_backward mean ignore_index(-100) grad_loss(%g : tensor<f32>) ins(%logits, %t, %lse : tensor<4x10xf32>, tensor<4xi64>, tensor<4xf32>) outs(%e3 : tensor<4x10xf32>) -> tensor<4x10xf32>
  %dx3 = tensor.expand_shape %dx [[0, 1], [2]] output_shape [2, 2, 10] : tensor<4x10xf32> into tensor<2x2x10xf32>
  %e4 = tensor.empty() : tensor<2x2x10xbf16>
  %r = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%dx3 : tensor<2x2x10xf32>) outs(%e4 : tensor<2x2x10xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %x = arith.truncf %in : f32 to bf16
    linalg.yield %x : bf16
  } -> tensor<2x2x10xbf16>
  return %loss, %r : tensor<f32>, tensor<2x2x10xbf16>
}

// -----

#id2 = affine_map<(d0, d1) -> (d0, d1)>

// Without reshapes, in f16. The gradient is also read in f32 elsewhere: the
// backward keeps the f32 logits (the forward reads the f16 ones).
// CHECK-LABEL: func.func @gradient_read_in_f32(
// CHECK-SAME: %[[N:[^:]*]]: tensor<4x10xf16>
// CHECK: %[[W:.*]] = linalg.generic
// CHECK: zest.cross_entropy sum ignore_index(-1) ins(%[[N]], %{{.*}} : tensor<4x10xf16>, tensor<4xi64>)
// CHECK: zest.cross_entropy_backward sum ignore_index(-1) grad_loss(%{{.*}} : tensor<f32>) ins(%[[W]], %{{.*}}, %{{.*}} : tensor<4x10xf32>, tensor<4xi64>, tensor<4xf32>) outs(%{{.*}} : tensor<4x10xf32>)
func.func @gradient_read_in_f32(%n: tensor<4x10xf16>, %t: tensor<4xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<4x10xf16>, tensor<4x10xf32>) {
  %e0 = tensor.empty() : tensor<4x10xf32>
  %logits = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%n : tensor<4x10xf16>) outs(%e0 : tensor<4x10xf32>) {
  ^bb0(%in: f16, %out: f32):
    %x = arith.extf %in : f16 to f32
    linalg.yield %x : f32
  } -> tensor<4x10xf32>
  %e1 = tensor.empty() : tensor<f32>
  %e2 = tensor.empty() : tensor<4xf32>
  %loss, %lse = zest.cross_entropy sum ignore_index(-1) ins(%logits, %t : tensor<4x10xf32>, tensor<4xi64>) outs(%e1, %e2 : tensor<f32>, tensor<4xf32>) -> tensor<f32>, tensor<4xf32>
  %e3 = tensor.empty() : tensor<4x10xf32>
  %dx = zest.cross_entropy_backward sum ignore_index(-1) grad_loss(%g : tensor<f32>) ins(%logits, %t, %lse : tensor<4x10xf32>, tensor<4xi64>, tensor<4xf32>) outs(%e3 : tensor<4x10xf32>) -> tensor<4x10xf32>
  %e4 = tensor.empty() : tensor<4x10xf16>
  %r = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%dx : tensor<4x10xf32>) outs(%e4 : tensor<4x10xf16>) {
  ^bb0(%in: f32, %out: f16):
    %x = arith.truncf %in : f32 to f16
    linalg.yield %x : f16
  } -> tensor<4x10xf16>
  return %loss, %r, %dx : tensor<f32>, tensor<4x10xf16>, tensor<4x10xf32>
}

// -----

#id2 = affine_map<(d0, d1) -> (d0, d1)>

// A gradient rounded to another type than the logits' (f16 logits, bf16
// gradient) keeps the f32 backward.
// CHECK-LABEL: func.func @other_rounding(
// CHECK: zest.cross_entropy_backward {{.*}} outs(%{{.*}} : tensor<4x10xf32>)
// CHECK: arith.truncf %{{.*}} : f32 to bf16
func.func @other_rounding(%n: tensor<4x10xf16>, %t: tensor<4xi64>, %g: tensor<f32>, %lse: tensor<4xf32>) -> tensor<4x10xbf16> {
  %e0 = tensor.empty() : tensor<4x10xf32>
  %logits = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%n : tensor<4x10xf16>) outs(%e0 : tensor<4x10xf32>) {
  ^bb0(%in: f16, %out: f32):
    %x = arith.extf %in : f16 to f32
    linalg.yield %x : f32
  } -> tensor<4x10xf32>
  %e3 = tensor.empty() : tensor<4x10xf32>
  %dx = zest.cross_entropy_backward sum ignore_index(-1) grad_loss(%g : tensor<f32>) ins(%logits, %t, %lse : tensor<4x10xf32>, tensor<4xi64>, tensor<4xf32>) outs(%e3 : tensor<4x10xf32>) -> tensor<4x10xf32>
  %e4 = tensor.empty() : tensor<4x10xbf16>
  %r = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%dx : tensor<4x10xf32>) outs(%e4 : tensor<4x10xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %x = arith.truncf %in : f32 to bf16
    linalg.yield %x : bf16
  } -> tensor<4x10xbf16>
  return %r : tensor<4x10xbf16>
}

// -----

// f32 logits that are not widened stay as they are.
// CHECK-LABEL: func.func @plain_f32(
// CHECK-SAME: %[[X:[^:]*]]: tensor<4x10xf32>
// CHECK: zest.cross_entropy mean ignore_index(-100) ins(%[[X]], %{{.*}} : tensor<4x10xf32>, tensor<4xi64>)
func.func @plain_f32(%x: tensor<4x10xf32>, %t: tensor<4xi64>) -> tensor<f32> {
  %e1 = tensor.empty() : tensor<f32>
  %e2 = tensor.empty() : tensor<4xf32>
  %loss, %lse = zest.cross_entropy mean ignore_index(-100) ins(%x, %t : tensor<4x10xf32>, tensor<4xi64>) outs(%e1, %e2 : tensor<f32>, tensor<4xf32>) -> tensor<f32>, tensor<4xf32>
  return %loss : tensor<f32>
}
