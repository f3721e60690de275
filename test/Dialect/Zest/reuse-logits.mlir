// RUN: zest-opt %s -split-input-file -zest-reuse-logits | FileCheck %s
// RUN: zest-opt %s -split-input-file -zest-reuse-logits -one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" | FileCheck %s --check-prefix=BUF

// A fresh destination of the logits' type becomes the logits; bufferized,
// the gradient overwrites the logits' buffer (nothing reads them later):
// no second [rows, classes] buffer, no copy.
// CHECK-LABEL: func.func @dead_logits(
// CHECK-SAME: %[[X:[^:]*]]: tensor<6x50xf32>
// CHECK: zest.cross_entropy_backward {{.*}} outs(%[[X]] : tensor<6x50xf32>)
// BUF-LABEL: func.func @dead_logits(
// BUF-SAME: %[[X:[^:]*]]: memref<6x50xf32>
// BUF-NOT: memref.alloc() {{.*}} : memref<6x50xf32>
// BUF-NOT: memref.copy
// BUF: zest.cross_entropy_backward {{.*}} outs(%[[X]] : memref<6x50xf32>)
// BUF: return %[[X]]
func.func @dead_logits(%x: tensor<6x50xf32>, %t: tensor<6xi64>, %g: tensor<f32>) -> tensor<6x50xf32> {
  %e0 = tensor.empty() : tensor<f32>
  %e1 = tensor.empty() : tensor<6xf32>
  %loss, %lse = zest.cross_entropy mean ignore_index(-100) ins(%x, %t : tensor<6x50xf32>, tensor<6xi64>) outs(%e0, %e1 : tensor<f32>, tensor<6xf32>) -> tensor<f32>, tensor<6xf32>
  %e2 = tensor.empty() : tensor<6x50xf32>
  %dx = zest.cross_entropy_backward mean ignore_index(-100) grad_loss(%g : tensor<f32>) ins(%x, %t, %lse : tensor<6x50xf32>, tensor<6xi64>, tensor<6xf32>) outs(%e2 : tensor<6x50xf32>) -> tensor<6x50xf32>
  return %dx : tensor<6x50xf32>
}

// -----

// Logits read after the backward keep their buffer: the gradient gets one
// of its own, not initialized from the logits (the destination is only
// written).
// CHECK-LABEL: func.func @live_logits(
// CHECK-SAME: %[[X:[^:]*]]: tensor<4x8xbf16>
// CHECK: zest.cross_entropy_backward {{.*}} outs(%[[X]] : tensor<4x8xbf16>)
// BUF-LABEL: func.func @live_logits(
// BUF-SAME: %[[X:[^:]*]]: memref<4x8xbf16>
// BUF: %[[DX:.*]] = memref.alloc() {{.*}} : memref<4x8xbf16>
// BUF-NOT: memref.copy
// BUF: zest.cross_entropy_backward {{.*}} outs(%[[DX]] : memref<4x8xbf16>)
// BUF: return %[[DX]], %[[X]]
func.func @live_logits(%x: tensor<4x8xbf16>, %t: tensor<4xi32>, %g: tensor<4xf32>, %lse: tensor<4xf32>) -> (tensor<4x8xbf16>, tensor<4x8xbf16>) {
  %e = tensor.empty() : tensor<4x8xbf16>
  %dx = zest.cross_entropy_backward none ignore_index(0) grad_loss(%g : tensor<4xf32>) ins(%x, %t, %lse : tensor<4x8xbf16>, tensor<4xi32>, tensor<4xf32>) outs(%e : tensor<4x8xbf16>) -> tensor<4x8xbf16>
  return %dx, %x : tensor<4x8xbf16>, tensor<4x8xbf16>
}

// -----

// A destination that is not fresh (a buffer the gradient is meant for)
// stays.
// CHECK-LABEL: func.func @given_destination(
// CHECK-SAME: %[[X:[^:]*]]: tensor<4x8xf32>, %{{[^:]*}}: tensor<4xi64>, %{{[^:]*}}: tensor<f32>, %{{[^:]*}}: tensor<4xf32>, %[[D:[^:]*]]: tensor<4x8xf32>
// CHECK: zest.cross_entropy_backward {{.*}} outs(%[[D]] : tensor<4x8xf32>)
func.func @given_destination(%x: tensor<4x8xf32>, %t: tensor<4xi64>, %g: tensor<f32>, %lse: tensor<4xf32>, %d: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %dx = zest.cross_entropy_backward sum ignore_index(-1) grad_loss(%g : tensor<f32>) ins(%x, %t, %lse : tensor<4x8xf32>, tensor<4xi64>, tensor<4xf32>) outs(%d : tensor<4x8xf32>) -> tensor<4x8xf32>
  return %dx : tensor<4x8xf32>
}
