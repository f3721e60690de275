// RUN: zest-opt %s -split-input-file | FileCheck %s
// Round trip: printed IR parses back to the same text, in custom and generic form.
// RUN: zest-opt %s -split-input-file | zest-opt -split-input-file | FileCheck %s
// RUN: zest-opt %s -split-input-file -mlir-print-op-generic | zest-opt -split-input-file | FileCheck %s

// Grouped-query attention (8 query heads over 2 key/value heads), causal,
// on tensors, and its backward.
// CHECK-LABEL: func.func @attention_gqa(
// CHECK: %{{.*}}:2 = zest.attention causal scale(1.250000e-01) ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<2x8x16x4xf32>, tensor<2x2x16x4xf32>, tensor<2x2x16x4xf32>) outs(%{{.*}}, %{{.*}} : tensor<2x8x16x4xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16x4xf32>, tensor<2x8x16xf32>
// CHECK: %{{.*}}:3 = zest.attention_backward causal scale(1.250000e-01) grad_output(%{{.*}} : tensor<2x8x16x4xf32>) ins(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x8x16x4xf32>, tensor<2x2x16x4xf32>, tensor<2x2x16x4xf32>, tensor<2x8x16x4xf32>, tensor<2x8x16xf32>) outs(%{{.*}}, %{{.*}}, %{{.*}} : tensor<2x8x16x4xf32>, tensor<2x2x16x4xf32>, tensor<2x2x16x4xf32>) -> tensor<2x8x16x4xf32>, tensor<2x2x16x4xf32>, tensor<2x2x16x4xf32>
func.func @attention_gqa(%q: tensor<2x8x16x4xf32>, %k: tensor<2x2x16x4xf32>, %v: tensor<2x2x16x4xf32>, %do: tensor<2x8x16x4xf32>) -> (tensor<2x8x16x4xf32>, tensor<2x2x16x4xf32>, tensor<2x2x16x4xf32>) {
  %e0 = tensor.empty() : tensor<2x8x16x4xf32>
  %e1 = tensor.empty() : tensor<2x8x16xf32>
  %o, %lse = zest.attention causal scale(0.125) ins(%q, %k, %v : tensor<2x8x16x4xf32>, tensor<2x2x16x4xf32>, tensor<2x2x16x4xf32>) outs(%e0, %e1 : tensor<2x8x16x4xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16x4xf32>, tensor<2x8x16xf32>
  %e2 = tensor.empty() : tensor<2x2x16x4xf32>
  %dq, %dk, %dv = zest.attention_backward causal scale(0.125) grad_output(%do : tensor<2x8x16x4xf32>) ins(%q, %k, %v, %o, %lse : tensor<2x8x16x4xf32>, tensor<2x2x16x4xf32>, tensor<2x2x16x4xf32>, tensor<2x8x16x4xf32>, tensor<2x8x16xf32>) outs(%e0, %e2, %e2 : tensor<2x8x16x4xf32>, tensor<2x2x16x4xf32>, tensor<2x2x16x4xf32>) -> tensor<2x8x16x4xf32>, tensor<2x2x16x4xf32>, tensor<2x2x16x4xf32>
  return %dq, %dk, %dv : tensor<2x8x16x4xf32>, tensor<2x2x16x4xf32>, tensor<2x2x16x4xf32>
}

// -----

// A broadcast boolean padding mask ([batch, 1, 1, keys]) on bf16 memrefs,
// and an additive bf16 mask with a value width of its own.
// CHECK-LABEL: func.func @attention_masks(
// CHECK: zest.attention scale(5.000000e-01) ins(%{{.*}}, %{{.*}}, %{{.*}} : memref<2x4x8x16xbf16>, memref<2x4x8x16xbf16>, memref<2x4x8x16xbf16>) mask(%{{.*}} : memref<2x1x1x8xi1>) outs(%{{.*}}, %{{.*}} : memref<2x4x8x16xbf16>, memref<2x4x8xf32>)
// CHECK: zest.attention scale(1.000000e+00) ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<1x2x3x8xbf16>, tensor<1x2x5x8xbf16>, tensor<1x2x5x6xbf16>) mask(%{{.*}} : tensor<1x1x3x5xbf16>) outs(%{{.*}}, %{{.*}} : tensor<1x2x3x6xbf16>, tensor<1x2x3xf32>)
func.func @attention_masks(%q: memref<2x4x8x16xbf16>, %m: memref<2x1x1x8xi1>, %o: memref<2x4x8x16xbf16>, %lse: memref<2x4x8xf32>,
                           %q2: tensor<1x2x3x8xbf16>, %k2: tensor<1x2x5x8xbf16>, %v2: tensor<1x2x5x6xbf16>, %m2: tensor<1x1x3x5xbf16>,
                           %o2: tensor<1x2x3x6xbf16>, %l2: tensor<1x2x3xf32>) {
  zest.attention scale(0.5) ins(%q, %q, %q : memref<2x4x8x16xbf16>, memref<2x4x8x16xbf16>, memref<2x4x8x16xbf16>) mask(%m : memref<2x1x1x8xi1>) outs(%o, %lse : memref<2x4x8x16xbf16>, memref<2x4x8xf32>)
  %r:2 = zest.attention scale(1.0) ins(%q2, %k2, %v2 : tensor<1x2x3x8xbf16>, tensor<1x2x5x8xbf16>, tensor<1x2x5x6xbf16>) mask(%m2 : tensor<1x1x3x5xbf16>) outs(%o2, %l2 : tensor<1x2x3x6xbf16>, tensor<1x2x3xf32>) -> tensor<1x2x3x6xbf16>, tensor<1x2x3xf32>
  return
}
