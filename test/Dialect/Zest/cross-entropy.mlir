// RUN: zest-opt %s -split-input-file | FileCheck %s
// Round trip: printed IR parses back to the same text, in custom and generic form.
// RUN: zest-opt %s -split-input-file | zest-opt -split-input-file | FileCheck %s
// RUN: zest-opt %s -split-input-file -mlir-print-op-generic | zest-opt -split-input-file | FileCheck %s

// The mean over the rows not ignored, forward and backward, on tensors.
// CHECK-LABEL: func.func @mean(
// CHECK: %{{.*}}:2 = zest.cross_entropy mean ignore_index(-100) ins(%{{.*}}, %{{.*}} : tensor<6x50xf32>, tensor<6xi64>) outs(%{{.*}}, %{{.*}} : tensor<f32>, tensor<6xf32>) -> tensor<f32>, tensor<6xf32>
// CHECK: zest.cross_entropy_backward mean ignore_index(-100) grad_loss(%{{.*}} : tensor<f32>) ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<6x50xf32>, tensor<6xi64>, tensor<6xf32>) outs(%{{.*}} : tensor<6x50xf32>) -> tensor<6x50xf32>
func.func @mean(%x: tensor<6x50xf32>, %t: tensor<6xi64>, %g: tensor<f32>) -> tensor<6x50xf32> {
  %e0 = tensor.empty() : tensor<f32>
  %e1 = tensor.empty() : tensor<6xf32>
  %loss, %lse = zest.cross_entropy mean ignore_index(-100) ins(%x, %t : tensor<6x50xf32>, tensor<6xi64>) outs(%e0, %e1 : tensor<f32>, tensor<6xf32>) -> tensor<f32>, tensor<6xf32>
  %e2 = tensor.empty() : tensor<6x50xf32>
  %dx = zest.cross_entropy_backward mean ignore_index(-100) grad_loss(%g : tensor<f32>) ins(%x, %t, %lse : tensor<6x50xf32>, tensor<6xi64>, tensor<6xf32>) outs(%e2 : tensor<6x50xf32>) -> tensor<6x50xf32>
  return %dx : tensor<6x50xf32>
}

// -----

// One loss per row with label smoothing, bf16 logits and i32 targets, on
// memrefs.
// CHECK-LABEL: func.func @none(
// CHECK: zest.cross_entropy none ignore_index(0) label_smoothing(1.000000e-01) ins(%{{.*}}, %{{.*}} : memref<4x8xbf16>, memref<4xi32>) outs(%{{.*}}, %{{.*}} : memref<4xf32>, memref<4xf32>)
// CHECK: zest.cross_entropy_backward none ignore_index(0) label_smoothing(1.000000e-01) grad_loss(%{{.*}} : memref<4xf32>) ins(%{{.*}}, %{{.*}}, %{{.*}} : memref<4x8xbf16>, memref<4xi32>, memref<4xf32>) outs(%{{.*}} : memref<4x8xbf16>)
func.func @none(%x: memref<4x8xbf16>, %t: memref<4xi32>, %loss: memref<4xf32>, %lse: memref<4xf32>, %dx: memref<4x8xbf16>) {
  zest.cross_entropy none ignore_index(0) label_smoothing(0.1) ins(%x, %t : memref<4x8xbf16>, memref<4xi32>) outs(%loss, %lse : memref<4xf32>, memref<4xf32>)
  zest.cross_entropy_backward none ignore_index(0) label_smoothing(0.1) grad_loss(%loss : memref<4xf32>) ins(%x, %t, %lse : memref<4x8xbf16>, memref<4xi32>, memref<4xf32>) outs(%dx : memref<4x8xbf16>)
  return
}
