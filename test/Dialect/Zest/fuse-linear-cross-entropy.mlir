// RUN: zest-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(zest-fuse-linear-cross-entropy{chunk-rows=4}))' | FileCheck %s
// RUN: zest-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(zest-fuse-linear-cross-entropy))' | FileCheck %s --check-prefix=AUTO
// The fused op round-trips (custom and generic form).
// RUN: zest-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(zest-fuse-linear-cross-entropy{chunk-rows=4}))' | zest-opt -split-input-file -mlir-print-op-generic | zest-opt -split-input-file | FileCheck %s

// GPT-2's head (tied weight [classes, in]) in linalg, as zest-fuse-linear
// leaves it: the forward product, the loss, its backward and both gradient
// products become one op where the loss was, in chunks of 4 rows (the
// last one partial); the logits and their gradient are gone.
// CHECK-LABEL: func.func @linalg_head(
// CHECK-SAME: %[[X:[^:]*]]: tensor<10x3xf32>, %[[W:[^:]*]]: tensor<8x3xf32>, %[[T:[^:]*]]: tensor<10xi64>, %[[G:[^:]*]]: tensor<f32>
// CHECK-NOT: linalg.matmul
// CHECK-NOT: linalg.generic
// CHECK-NOT: zest.cross_entropy
// CHECK: %[[F:.*]]:5 = zest.linear_cross_entropy mean ignore_index(-100) transpose_weight transpose_grad_weight grad_loss(%[[G]] : tensor<f32>) ins(%[[X]], %[[W]], %[[T]] : tensor<10x3xf32>, tensor<8x3xf32>, tensor<10xi64>) outs(loss %{{.*}} : tensor<f32>, logits %{{.*}} : tensor<4x8xf32>, logsumexp %{{.*}} : tensor<10xf32> grad_input %{{.*}} : tensor<10x3xf32> grad_weight %{{.*}} : tensor<8x3xf32>)
// CHECK-NOT: zest.cross_entropy
// CHECK: return %[[F]]#0, %[[F]]#3, %[[F]]#4
// The head's input features (3) are the default chunk.
// AUTO-LABEL: func.func @linalg_head(
// AUTO: logits %{{.*}} : tensor<3x8xf32>
#xw = affine_map<(m, n, k) -> (m, k)>
#wt = affine_map<(m, n, k) -> (n, k)>
#mn = affine_map<(m, n, k) -> (m, n)>
#gt = affine_map<(m, n, k) -> (k, m)>
#xk = affine_map<(m, n, k) -> (k, n)>
func.func @linalg_head(%x: tensor<10x3xf32>, %w: tensor<8x3xf32>, %t: tensor<10xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<10x3xf32>, tensor<8x3xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<10x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<10x8xf32>) -> tensor<10x8xf32>
  %logits = linalg.generic {indexing_maps = [#xw, #wt, #mn], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : tensor<10x3xf32>, tensor<8x3xf32>) outs(%z : tensor<10x8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  } -> tensor<10x8xf32>
  %e0 = tensor.empty() : tensor<f32>
  %e1 = tensor.empty() : tensor<10xf32>
  %loss, %lse = zest.cross_entropy mean ignore_index(-100) ins(%logits, %t : tensor<10x8xf32>, tensor<10xi64>) outs(%e0, %e1 : tensor<f32>, tensor<10xf32>) -> tensor<f32>, tensor<10xf32>
  %e2 = tensor.empty() : tensor<10x8xf32>
  %dlogits = zest.cross_entropy_backward mean ignore_index(-100) grad_loss(%g : tensor<f32>) ins(%logits, %t, %lse : tensor<10x8xf32>, tensor<10xi64>, tensor<10xf32>) outs(%e2 : tensor<10x8xf32>) -> tensor<10x8xf32>
  %e3 = tensor.empty() : tensor<8x3xf32>
  %z3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<8x3xf32>) -> tensor<8x3xf32>
  %dw = linalg.generic {indexing_maps = [#gt, #xk, #mn], iterator_types = ["parallel", "parallel", "reduction"]} ins(%dlogits, %x : tensor<10x8xf32>, tensor<10x3xf32>) outs(%z3 : tensor<8x3xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  } -> tensor<8x3xf32>
  %e4 = tensor.empty() : tensor<10x3xf32>
  %z4 = linalg.fill ins(%zero : f32) outs(%e4 : tensor<10x3xf32>) -> tensor<10x3xf32>
  %dx = linalg.matmul ins(%dlogits, %w : tensor<10x8xf32>, tensor<8x3xf32>) outs(%z4 : tensor<10x3xf32>) -> tensor<10x3xf32>
  return %loss, %dx, %dw : tensor<f32>, tensor<10x3xf32>, tensor<8x3xf32>
}

// -----

// A head in fused form ([in, classes] weight, `zest.linear` and
// `zest.linear_backward`), a sum, label smoothing, a seed defined after
// the loss (a constant: cloned where the fused op goes).
// CHECK-LABEL: func.func @fused_head(
// CHECK: %[[SEED:.*]] = arith.constant dense<1.000000e+00> : tensor<f32>
// CHECK: zest.linear_cross_entropy sum ignore_index(0) label_smoothing(1.000000e-01) grad_loss(%[[SEED]] : tensor<f32>) ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<6x3xf32>, tensor<3x5xf32>, tensor<6xi32>) outs(loss %{{.*}} : tensor<f32>, logits %{{.*}} : tensor<4x5xf32>, logsumexp %{{.*}} : tensor<6xf32> grad_input %{{.*}} : tensor<6x3xf32> grad_weight %{{.*}} : tensor<3x5xf32>)
// CHECK-NOT: zest.linear
func.func @fused_head(%x: tensor<6x3xf32>, %w: tensor<3x5xf32>, %t: tensor<6xi32>) -> (tensor<f32>, tensor<6x3xf32>, tensor<3x5xf32>) {
  %e = tensor.empty() : tensor<6x5xf32>
  %logits = zest.linear none ins(%x, %w : tensor<6x3xf32>, tensor<3x5xf32>) outs(%e : tensor<6x5xf32>) -> tensor<6x5xf32>
  %e0 = tensor.empty() : tensor<f32>
  %e1 = tensor.empty() : tensor<6xf32>
  %loss, %lse = zest.cross_entropy sum ignore_index(0) label_smoothing(0.1) ins(%logits, %t : tensor<6x5xf32>, tensor<6xi32>) outs(%e0, %e1 : tensor<f32>, tensor<6xf32>) -> tensor<f32>, tensor<6xf32>
  %g = arith.constant dense<1.0> : tensor<f32>
  %e2 = tensor.empty() : tensor<6x5xf32>
  %dlogits = zest.cross_entropy_backward sum ignore_index(0) label_smoothing(0.1) grad_loss(%g : tensor<f32>) ins(%logits, %t, %lse : tensor<6x5xf32>, tensor<6xi32>, tensor<6xf32>) outs(%e2 : tensor<6x5xf32>) -> tensor<6x5xf32>
  %e3 = tensor.empty() : tensor<6x3xf32>
  %e4 = tensor.empty() : tensor<3x5xf32>
  %dx, %dw = zest.linear_backward none grad_output(%dlogits : tensor<6x5xf32>) input(%x : tensor<6x3xf32>) weight(%w : tensor<3x5xf32>) outs(grad_input %e3 : tensor<6x3xf32> grad_weight %e4 : tensor<3x5xf32>) -> tensor<6x3xf32>, tensor<3x5xf32>
  return %loss, %dx, %dw : tensor<f32>, tensor<6x3xf32>, tensor<3x5xf32>
}

// -----

// Autocast's head: bf16 input, weight and logits (zest.linear from
// zest-fuse-linear, the loss narrowed by zest-narrow-loss-casts), the
// gradients widened bf16 products into f32, then rounded: the fused op
// stores the logits and their gradient in bf16 and yields the f32
// products, whose rounding stays.
// CHECK-LABEL: func.func @autocast_head(
// CHECK: %[[F:.*]]:5 = zest.linear_cross_entropy mean ignore_index(-100) transpose_weight transpose_grad_weight grad_loss(%{{.*}} : tensor<f32>) ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<10x3xbf16>, tensor<8x3xbf16>, tensor<10xi64>) outs(loss %{{.*}} : tensor<f32>, logits %{{.*}} : tensor<4x8xbf16>, logsumexp %{{.*}} : tensor<10xf32> grad_input %{{.*}} : tensor<10x3xf32> grad_weight %{{.*}} : tensor<8x3xf32>)
// CHECK: linalg.generic {{.*}} ins(%[[F]]#4 : tensor<8x3xf32>)
// CHECK: arith.truncf
// CHECK: linalg.generic {{.*}} ins(%[[F]]#3 : tensor<10x3xf32>)
// CHECK: arith.truncf
#gt2 = affine_map<(m, n, k) -> (k, m)>
#xk2 = affine_map<(m, n, k) -> (k, n)>
#mk2 = affine_map<(m, n, k) -> (m, k)>
#mn2 = affine_map<(m, n, k) -> (m, n)>
#id2 = affine_map<(i, j) -> (i, j)>
func.func @autocast_head(%x: tensor<10x3xbf16>, %w: tensor<8x3xbf16>, %t: tensor<10xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<10x3xbf16>, tensor<8x3xbf16>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<10x8xbf16>
  %logits = zest.linear none transpose_weight ins(%x, %w : tensor<10x3xbf16>, tensor<8x3xbf16>) outs(%e : tensor<10x8xbf16>) -> tensor<10x8xbf16>
  %e0 = tensor.empty() : tensor<f32>
  %e1 = tensor.empty() : tensor<10xf32>
  %loss, %lse = zest.cross_entropy mean ignore_index(-100) ins(%logits, %t : tensor<10x8xbf16>, tensor<10xi64>) outs(%e0, %e1 : tensor<f32>, tensor<10xf32>) -> tensor<f32>, tensor<10xf32>
  %e2 = tensor.empty() : tensor<10x8xbf16>
  %dlogits = zest.cross_entropy_backward mean ignore_index(-100) grad_loss(%g : tensor<f32>) ins(%logits, %t, %lse : tensor<10x8xbf16>, tensor<10xi64>, tensor<10xf32>) outs(%e2 : tensor<10x8xbf16>) -> tensor<10x8xbf16>
  %e3 = tensor.empty() : tensor<8x3xf32>
  %z3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<8x3xf32>) -> tensor<8x3xf32>
  %dw = linalg.generic {indexing_maps = [#gt2, #xk2, #mn2], iterator_types = ["parallel", "parallel", "reduction"]} ins(%dlogits, %x : tensor<10x8xbf16>, tensor<10x3xbf16>) outs(%z3 : tensor<8x3xf32>) {
  ^bb0(%a: bf16, %b: bf16, %c: f32):
    %a32 = arith.extf %a : bf16 to f32
    %b32 = arith.extf %b : bf16 to f32
    %p = arith.mulf %a32, %b32 : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  } -> tensor<8x3xf32>
  %e4 = tensor.empty() : tensor<8x3xbf16>
  %dw16 = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%dw : tensor<8x3xf32>) outs(%e4 : tensor<8x3xbf16>) {
  ^bb0(%a: f32, %b: bf16):
    %r = arith.truncf %a : f32 to bf16
    linalg.yield %r : bf16
  } -> tensor<8x3xbf16>
  %e5 = tensor.empty() : tensor<10x3xf32>
  %z5 = linalg.fill ins(%zero : f32) outs(%e5 : tensor<10x3xf32>) -> tensor<10x3xf32>
  %dx = linalg.generic {indexing_maps = [#mk2, #xk2, #mn2], iterator_types = ["parallel", "parallel", "reduction"]} ins(%dlogits, %w : tensor<10x8xbf16>, tensor<8x3xbf16>) outs(%z5 : tensor<10x3xf32>) {
  ^bb0(%a: bf16, %b: bf16, %c: f32):
    %a32 = arith.extf %a : bf16 to f32
    %b32 = arith.extf %b : bf16 to f32
    %p = arith.mulf %a32, %b32 : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  } -> tensor<10x3xf32>
  %e6 = tensor.empty() : tensor<10x3xbf16>
  %dx16 = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%dx : tensor<10x3xf32>) outs(%e6 : tensor<10x3xbf16>) {
  ^bb0(%a: f32, %b: bf16):
    %r = arith.truncf %a : f32 to bf16
    linalg.yield %r : bf16
  } -> tensor<10x3xbf16>
  return %loss, %dx16, %dw16 : tensor<f32>, tensor<10x3xbf16>, tensor<8x3xbf16>
}

// -----

// The same head once zest-fuse-linear has made the input's rounded
// gradient a bf16 zest.linear of the logits' gradient: the fused op's f32
// gradient is rounded in its place.
// CHECK-LABEL: func.func @autocast_head_rounded_grad(
// CHECK: %[[F:.*]]:4 = zest.linear_cross_entropy mean ignore_index(-100) transpose_weight grad_loss(%{{.*}} : tensor<f32>) ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<10x3xbf16>, tensor<8x3xbf16>, tensor<10xi64>) outs(loss %{{.*}} : tensor<f32>, logits %{{.*}} : tensor<4x8xbf16>, logsumexp %{{.*}} : tensor<10xf32> grad_input %{{.*}} : tensor<10x3xf32>)
// CHECK: %[[R:.*]] = linalg.generic {{.*}} ins(%[[F]]#3 : tensor<10x3xf32>)
// CHECK: arith.truncf
// CHECK-NOT: zest.linear
// CHECK: return %[[F]]#0, %[[R]]
func.func @autocast_head_rounded_grad(%x: tensor<10x3xbf16>, %w: tensor<8x3xbf16>, %t: tensor<10xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<10x3xbf16>) {
  %e = tensor.empty() : tensor<10x8xbf16>
  %logits = zest.linear none transpose_weight ins(%x, %w : tensor<10x3xbf16>, tensor<8x3xbf16>) outs(%e : tensor<10x8xbf16>) -> tensor<10x8xbf16>
  %e0 = tensor.empty() : tensor<f32>
  %e1 = tensor.empty() : tensor<10xf32>
  %loss, %lse = zest.cross_entropy mean ignore_index(-100) ins(%logits, %t : tensor<10x8xbf16>, tensor<10xi64>) outs(%e0, %e1 : tensor<f32>, tensor<10xf32>) -> tensor<f32>, tensor<10xf32>
  %e2 = tensor.empty() : tensor<10x8xbf16>
  %dlogits = zest.cross_entropy_backward mean ignore_index(-100) grad_loss(%g : tensor<f32>) ins(%logits, %t, %lse : tensor<10x8xbf16>, tensor<10xi64>, tensor<10xf32>) outs(%e2 : tensor<10x8xbf16>) -> tensor<10x8xbf16>
  %e3 = tensor.empty() : tensor<10x3xbf16>
  %dx = zest.linear none ins(%dlogits, %w : tensor<10x8xbf16>, tensor<8x3xbf16>) outs(%e3 : tensor<10x3xbf16>) -> tensor<10x3xbf16>
  return %loss, %dx : tensor<f32>, tensor<10x3xbf16>
}

// -----

// A rounded linear of the logits' gradient by another weight is not the
// head's gradient: nothing is fused.
// CHECK-LABEL: func.func @autocast_head_other_weight(
// CHECK-NOT: zest.linear_cross_entropy
// CHECK: zest.cross_entropy_backward
// CHECK: zest.linear none ins
func.func @autocast_head_other_weight(%x: tensor<10x3xbf16>, %w: tensor<8x3xbf16>, %v: tensor<8x3xbf16>, %t: tensor<10xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<10x3xbf16>) {
  %e = tensor.empty() : tensor<10x8xbf16>
  %logits = zest.linear none transpose_weight ins(%x, %w : tensor<10x3xbf16>, tensor<8x3xbf16>) outs(%e : tensor<10x8xbf16>) -> tensor<10x8xbf16>
  %e0 = tensor.empty() : tensor<f32>
  %e1 = tensor.empty() : tensor<10xf32>
  %loss, %lse = zest.cross_entropy mean ignore_index(-100) ins(%logits, %t : tensor<10x8xbf16>, tensor<10xi64>) outs(%e0, %e1 : tensor<f32>, tensor<10xf32>) -> tensor<f32>, tensor<10xf32>
  %e2 = tensor.empty() : tensor<10x8xbf16>
  %dlogits = zest.cross_entropy_backward mean ignore_index(-100) grad_loss(%g : tensor<f32>) ins(%logits, %t, %lse : tensor<10x8xbf16>, tensor<10xi64>, tensor<10xf32>) outs(%e2 : tensor<10x8xbf16>) -> tensor<10x8xbf16>
  %e3 = tensor.empty() : tensor<10x3xbf16>
  %dx = zest.linear none ins(%dlogits, %v : tensor<10x8xbf16>, tensor<8x3xbf16>) outs(%e3 : tensor<10x3xbf16>) -> tensor<10x3xbf16>
  return %loss, %dx : tensor<f32>, tensor<10x3xbf16>
}

// -----

// A frozen head (no weight gradient): only grad_input.
// CHECK-LABEL: func.func @frozen_head(
// CHECK: %[[F:.*]]:4 = zest.linear_cross_entropy mean ignore_index(-100) transpose_weight grad_loss
// CHECK-SAME: grad_input %{{.*}} : tensor<6x3xf32>)
// CHECK: return %[[F]]#0, %[[F]]#3
func.func @frozen_head(%x: tensor<6x3xf32>, %w: tensor<5x3xf32>, %t: tensor<6xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<6x3xf32>) {
  %e = tensor.empty() : tensor<6x5xf32>
  %logits = zest.linear none transpose_weight ins(%x, %w : tensor<6x3xf32>, tensor<5x3xf32>) outs(%e : tensor<6x5xf32>) -> tensor<6x5xf32>
  %e0 = tensor.empty() : tensor<f32>
  %e1 = tensor.empty() : tensor<6xf32>
  %loss, %lse = zest.cross_entropy mean ignore_index(-100) ins(%logits, %t : tensor<6x5xf32>, tensor<6xi64>) outs(%e0, %e1 : tensor<f32>, tensor<6xf32>) -> tensor<f32>, tensor<6xf32>
  %e2 = tensor.empty() : tensor<6x5xf32>
  %dlogits = zest.cross_entropy_backward mean ignore_index(-100) grad_loss(%g : tensor<f32>) ins(%logits, %t, %lse : tensor<6x5xf32>, tensor<6xi64>, tensor<6xf32>) outs(%e2 : tensor<6x5xf32>) -> tensor<6x5xf32>
  %zero = arith.constant 0.0 : f32
  %e3 = tensor.empty() : tensor<6x3xf32>
  %z3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<6x3xf32>) -> tensor<6x3xf32>
  %dx = linalg.matmul ins(%dlogits, %w : tensor<6x5xf32>, tensor<5x3xf32>) outs(%z3 : tensor<6x3xf32>) -> tensor<6x3xf32>
  return %loss, %dx : tensor<f32>, tensor<6x3xf32>
}

// -----

// Left alone: logits the step also returns; a loss per row; 16-bit
// gradients rounded inside a fused layer; a gradient read by more than the
// head's backward; a seed computed after the loss; a gradient product
// reading another weight.
// CHECK-LABEL: func.func @returned_logits(
// CHECK-NOT: zest.linear_cross_entropy
// CHECK: zest.cross_entropy_backward
func.func @returned_logits(%x: tensor<6x3xf32>, %w: tensor<5x3xf32>, %t: tensor<6xi64>, %g: tensor<f32>) -> (tensor<6x5xf32>, tensor<6x3xf32>) {
  %e = tensor.empty() : tensor<6x5xf32>
  %logits = zest.linear none transpose_weight ins(%x, %w : tensor<6x3xf32>, tensor<5x3xf32>) outs(%e : tensor<6x5xf32>) -> tensor<6x5xf32>
  %e0 = tensor.empty() : tensor<f32>
  %e1 = tensor.empty() : tensor<6xf32>
  %loss, %lse = zest.cross_entropy mean ignore_index(-100) ins(%logits, %t : tensor<6x5xf32>, tensor<6xi64>) outs(%e0, %e1 : tensor<f32>, tensor<6xf32>) -> tensor<f32>, tensor<6xf32>
  %e2 = tensor.empty() : tensor<6x5xf32>
  %dlogits = zest.cross_entropy_backward mean ignore_index(-100) grad_loss(%g : tensor<f32>) ins(%logits, %t, %lse : tensor<6x5xf32>, tensor<6xi64>, tensor<6xf32>) outs(%e2 : tensor<6x5xf32>) -> tensor<6x5xf32>
  %e3 = tensor.empty() : tensor<6x3xf32>
  %dx = zest.linear_backward none transpose_weight grad_output(%dlogits : tensor<6x5xf32>) weight(%w : tensor<5x3xf32>) outs(grad_input %e3 : tensor<6x3xf32>) -> tensor<6x3xf32>
  return %logits, %dx : tensor<6x5xf32>, tensor<6x3xf32>
}

// -----

// CHECK-LABEL: func.func @per_row(
// CHECK-NOT: zest.linear_cross_entropy
func.func @per_row(%x: tensor<6x3xf32>, %w: tensor<5x3xf32>, %t: tensor<6xi64>, %g: tensor<6xf32>) -> (tensor<6xf32>, tensor<6x3xf32>) {
  %e = tensor.empty() : tensor<6x5xf32>
  %logits = zest.linear none transpose_weight ins(%x, %w : tensor<6x3xf32>, tensor<5x3xf32>) outs(%e : tensor<6x5xf32>) -> tensor<6x5xf32>
  %e0 = tensor.empty() : tensor<6xf32>
  %e1 = tensor.empty() : tensor<6xf32>
  %loss, %lse = zest.cross_entropy none ignore_index(-100) ins(%logits, %t : tensor<6x5xf32>, tensor<6xi64>) outs(%e0, %e1 : tensor<6xf32>, tensor<6xf32>) -> tensor<6xf32>, tensor<6xf32>
  %e2 = tensor.empty() : tensor<6x5xf32>
  %dlogits = zest.cross_entropy_backward none ignore_index(-100) grad_loss(%g : tensor<6xf32>) ins(%logits, %t, %lse : tensor<6x5xf32>, tensor<6xi64>, tensor<6xf32>) outs(%e2 : tensor<6x5xf32>) -> tensor<6x5xf32>
  %e3 = tensor.empty() : tensor<6x3xf32>
  %dx = zest.linear_backward none transpose_weight grad_output(%dlogits : tensor<6x5xf32>) weight(%w : tensor<5x3xf32>) outs(grad_input %e3 : tensor<6x3xf32>) -> tensor<6x3xf32>
  return %loss, %dx : tensor<6xf32>, tensor<6x3xf32>
}

// -----

// CHECK-LABEL: func.func @bf16_head(
// CHECK-NOT: zest.linear_cross_entropy
func.func @bf16_head(%x: tensor<6x3xbf16>, %w: tensor<5x3xbf16>, %t: tensor<6xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<6x3xbf16>) {
  %e = tensor.empty() : tensor<6x5xbf16>
  %logits = zest.linear none transpose_weight ins(%x, %w : tensor<6x3xbf16>, tensor<5x3xbf16>) outs(%e : tensor<6x5xbf16>) -> tensor<6x5xbf16>
  %e0 = tensor.empty() : tensor<f32>
  %e1 = tensor.empty() : tensor<6xf32>
  %loss, %lse = zest.cross_entropy mean ignore_index(-100) ins(%logits, %t : tensor<6x5xbf16>, tensor<6xi64>) outs(%e0, %e1 : tensor<f32>, tensor<6xf32>) -> tensor<f32>, tensor<6xf32>
  %e2 = tensor.empty() : tensor<6x5xbf16>
  %dlogits = zest.cross_entropy_backward mean ignore_index(-100) grad_loss(%g : tensor<f32>) ins(%logits, %t, %lse : tensor<6x5xbf16>, tensor<6xi64>, tensor<6xf32>) outs(%e2 : tensor<6x5xbf16>) -> tensor<6x5xbf16>
  %e3 = tensor.empty() : tensor<6x3xbf16>
  %dx = zest.linear_backward none transpose_weight grad_output(%dlogits : tensor<6x5xbf16>) weight(%w : tensor<5x3xbf16>) outs(grad_input %e3 : tensor<6x3xbf16>) -> tensor<6x3xbf16>
  return %loss, %dx : tensor<f32>, tensor<6x3xbf16>
}

// -----

// CHECK-LABEL: func.func @gradient_read_elsewhere(
// CHECK-NOT: zest.linear_cross_entropy
func.func @gradient_read_elsewhere(%x: tensor<6x3xf32>, %w: tensor<5x3xf32>, %t: tensor<6xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<6x3xf32>, tensor<6x5xf32>) {
  %e = tensor.empty() : tensor<6x5xf32>
  %logits = zest.linear none transpose_weight ins(%x, %w : tensor<6x3xf32>, tensor<5x3xf32>) outs(%e : tensor<6x5xf32>) -> tensor<6x5xf32>
  %e0 = tensor.empty() : tensor<f32>
  %e1 = tensor.empty() : tensor<6xf32>
  %loss, %lse = zest.cross_entropy mean ignore_index(-100) ins(%logits, %t : tensor<6x5xf32>, tensor<6xi64>) outs(%e0, %e1 : tensor<f32>, tensor<6xf32>) -> tensor<f32>, tensor<6xf32>
  %e2 = tensor.empty() : tensor<6x5xf32>
  %dlogits = zest.cross_entropy_backward mean ignore_index(-100) grad_loss(%g : tensor<f32>) ins(%logits, %t, %lse : tensor<6x5xf32>, tensor<6xi64>, tensor<6xf32>) outs(%e2 : tensor<6x5xf32>) -> tensor<6x5xf32>
  %e3 = tensor.empty() : tensor<6x3xf32>
  %dx = zest.linear_backward none transpose_weight grad_output(%dlogits : tensor<6x5xf32>) weight(%w : tensor<5x3xf32>) outs(grad_input %e3 : tensor<6x3xf32>) -> tensor<6x3xf32>
  return %loss, %dx, %dlogits : tensor<f32>, tensor<6x3xf32>, tensor<6x5xf32>
}

// -----

// CHECK-LABEL: func.func @late_seed(
// CHECK-NOT: zest.linear_cross_entropy
func.func @late_seed(%x: tensor<6x3xf32>, %w: tensor<5x3xf32>, %t: tensor<6xi64>) -> (tensor<f32>, tensor<6x3xf32>) {
  %e = tensor.empty() : tensor<6x5xf32>
  %logits = zest.linear none transpose_weight ins(%x, %w : tensor<6x3xf32>, tensor<5x3xf32>) outs(%e : tensor<6x5xf32>) -> tensor<6x5xf32>
  %e0 = tensor.empty() : tensor<f32>
  %e1 = tensor.empty() : tensor<6xf32>
  %loss, %lse = zest.cross_entropy mean ignore_index(-100) ins(%logits, %t : tensor<6x5xf32>, tensor<6xi64>) outs(%e0, %e1 : tensor<f32>, tensor<6xf32>) -> tensor<f32>, tensor<6xf32>
  %g = arith.addf %loss, %loss : tensor<f32>
  %e2 = tensor.empty() : tensor<6x5xf32>
  %dlogits = zest.cross_entropy_backward mean ignore_index(-100) grad_loss(%g : tensor<f32>) ins(%logits, %t, %lse : tensor<6x5xf32>, tensor<6xi64>, tensor<6xf32>) outs(%e2 : tensor<6x5xf32>) -> tensor<6x5xf32>
  %e3 = tensor.empty() : tensor<6x3xf32>
  %dx = zest.linear_backward none transpose_weight grad_output(%dlogits : tensor<6x5xf32>) weight(%w : tensor<5x3xf32>) outs(grad_input %e3 : tensor<6x3xf32>) -> tensor<6x3xf32>
  return %loss, %dx : tensor<f32>, tensor<6x3xf32>
}

// -----

// CHECK-LABEL: func.func @other_weight(
// CHECK-NOT: zest.linear_cross_entropy
func.func @other_weight(%x: tensor<6x3xf32>, %w: tensor<5x3xf32>, %w2: tensor<5x3xf32>, %t: tensor<6xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<6x3xf32>) {
  %e = tensor.empty() : tensor<6x5xf32>
  %logits = zest.linear none transpose_weight ins(%x, %w : tensor<6x3xf32>, tensor<5x3xf32>) outs(%e : tensor<6x5xf32>) -> tensor<6x5xf32>
  %e0 = tensor.empty() : tensor<f32>
  %e1 = tensor.empty() : tensor<6xf32>
  %loss, %lse = zest.cross_entropy mean ignore_index(-100) ins(%logits, %t : tensor<6x5xf32>, tensor<6xi64>) outs(%e0, %e1 : tensor<f32>, tensor<6xf32>) -> tensor<f32>, tensor<6xf32>
  %e2 = tensor.empty() : tensor<6x5xf32>
  %dlogits = zest.cross_entropy_backward mean ignore_index(-100) grad_loss(%g : tensor<f32>) ins(%logits, %t, %lse : tensor<6x5xf32>, tensor<6xi64>, tensor<6xf32>) outs(%e2 : tensor<6x5xf32>) -> tensor<6x5xf32>
  %e3 = tensor.empty() : tensor<6x3xf32>
  %dx = zest.linear_backward none transpose_weight grad_output(%dlogits : tensor<6x5xf32>) weight(%w2 : tensor<5x3xf32>) outs(grad_input %e3 : tensor<6x3xf32>) -> tensor<6x3xf32>
  return %loss, %dx : tensor<f32>, tensor<6x3xf32>
}
