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

// -----

// Sequence-major arrays ([batch, rows, heads, dim]: 16 queries, 8 query
// heads over 2 key/value heads, 24 keys) on tensors, the log-sum-exp and
// the mask still [batch, heads, queries(, keys)]; and strided memrefs (q
// and k cut from one projection's rows).
// CHECK-LABEL: func.func @attention_sequence_major(
// CHECK: zest.attention causal sequence_major scale(1.250000e-01) ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<2x16x8x4xf32>, tensor<2x24x2x4xf32>, tensor<2x24x2x6xf32>) mask(%{{.*}} : tensor<2x1x1x24xi1>) outs(%{{.*}}, %{{.*}} : tensor<2x16x8x6xf32>, tensor<2x8x16xf32>)
// CHECK: zest.attention_backward sequence_major scale(1.250000e-01) grad_output(%{{.*}} : tensor<2x16x8x6xf32>)
// CHECK: zest.attention sequence_major scale(5.000000e-01) ins(%{{.*}}, %{{.*}}, %{{.*}} : memref<1x8x2x4xf32, strided<[384, 48, 8, 1]>>, memref<1x8x2x4xf32, strided<[384, 48, 8, 1], offset: 16>>
func.func @attention_sequence_major(%q: tensor<2x16x8x4xf32>, %k: tensor<2x24x2x4xf32>, %v: tensor<2x24x2x6xf32>, %m: tensor<2x1x1x24xi1>,
                                    %do: tensor<2x16x8x6xf32>, %qkv: memref<1x8x48xf32>, %o: memref<1x8x2x4xf32>, %l: memref<1x2x8xf32>) {
  %e0 = tensor.empty() : tensor<2x16x8x6xf32>
  %e1 = tensor.empty() : tensor<2x8x16xf32>
  %o1, %lse = zest.attention causal sequence_major scale(0.125) ins(%q, %k, %v : tensor<2x16x8x4xf32>, tensor<2x24x2x4xf32>, tensor<2x24x2x6xf32>) mask(%m : tensor<2x1x1x24xi1>) outs(%e0, %e1 : tensor<2x16x8x6xf32>, tensor<2x8x16xf32>) -> tensor<2x16x8x6xf32>, tensor<2x8x16xf32>
  %eq = tensor.empty() : tensor<2x16x8x4xf32>
  %ek = tensor.empty() : tensor<2x24x2x4xf32>
  %ev = tensor.empty() : tensor<2x24x2x6xf32>
  %dq, %dk, %dv = zest.attention_backward sequence_major scale(0.125) grad_output(%do : tensor<2x16x8x6xf32>) ins(%q, %k, %v, %o1, %lse : tensor<2x16x8x4xf32>, tensor<2x24x2x4xf32>, tensor<2x24x2x6xf32>, tensor<2x16x8x6xf32>, tensor<2x8x16xf32>) outs(%eq, %ek, %ev : tensor<2x16x8x4xf32>, tensor<2x24x2x4xf32>, tensor<2x24x2x6xf32>) -> tensor<2x16x8x4xf32>, tensor<2x24x2x4xf32>, tensor<2x24x2x6xf32>
  %split = memref.expand_shape %qkv [[0], [1], [2, 3]] output_shape [1, 8, 6, 8] : memref<1x8x48xf32> into memref<1x8x6x8xf32>
  %qs = memref.subview %split[0, 0, 0, 0] [1, 8, 2, 4] [1, 1, 1, 1] : memref<1x8x6x8xf32> to memref<1x8x2x4xf32, strided<[384, 48, 8, 1]>>
  %ks = memref.subview %split[0, 0, 2, 0] [1, 8, 2, 4] [1, 1, 1, 1] : memref<1x8x6x8xf32> to memref<1x8x2x4xf32, strided<[384, 48, 8, 1], offset: 16>>
  zest.attention sequence_major scale(0.5) ins(%qs, %ks, %ks : memref<1x8x2x4xf32, strided<[384, 48, 8, 1]>>, memref<1x8x2x4xf32, strided<[384, 48, 8, 1], offset: 16>>, memref<1x8x2x4xf32, strided<[384, 48, 8, 1], offset: 16>>) outs(%o, %l : memref<1x8x2x4xf32>, memref<1x2x8xf32>)
  return
}
