// RUN: zest-opt %s -split-input-file | FileCheck %s
// Round trip: printed IR parses back to the same text, in custom and generic form.
// RUN: zest-opt %s -split-input-file | zest-opt -split-input-file | FileCheck %s
// RUN: zest-opt %s -split-input-file -mlir-print-op-generic | zest-opt -split-input-file | FileCheck %s

// A mixture-of-experts projection on tensors: the experts' [experts, out,
// in] weights (transpose_weight), i32 group ends; the input's gradient (the
// other layout) and the weights'.
// CHECK-LABEL: func.func @experts(
// CHECK: zest.grouped_matmul transpose_weight ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<32x16xf32>, tensor<4x24x16xf32>, tensor<4xi32>) outs(%{{.*}} : tensor<32x24xf32>) -> tensor<32x24xf32>
// CHECK: zest.grouped_matmul ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<32x24xf32>, tensor<4x24x16xf32>, tensor<4xi32>) outs(%{{.*}} : tensor<32x16xf32>) -> tensor<32x16xf32>
// CHECK: zest.grouped_matmul_weight_grad transpose_weight ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<32x16xf32>, tensor<32x24xf32>, tensor<4xi32>) outs(%{{.*}} : tensor<4x24x16xf32>) -> tensor<4x24x16xf32>
func.func @experts(%x: tensor<32x16xf32>, %w: tensor<4x24x16xf32>, %ends: tensor<4xi32>, %dy: tensor<32x24xf32>) -> (tensor<32x24xf32>, tensor<32x16xf32>, tensor<4x24x16xf32>) {
  %e0 = tensor.empty() : tensor<32x24xf32>
  %y = zest.grouped_matmul transpose_weight ins(%x, %w, %ends : tensor<32x16xf32>, tensor<4x24x16xf32>, tensor<4xi32>) outs(%e0 : tensor<32x24xf32>) -> tensor<32x24xf32>
  %e1 = tensor.empty() : tensor<32x16xf32>
  %dx = zest.grouped_matmul ins(%dy, %w, %ends : tensor<32x24xf32>, tensor<4x24x16xf32>, tensor<4xi32>) outs(%e1 : tensor<32x16xf32>) -> tensor<32x16xf32>
  %e2 = tensor.empty() : tensor<4x24x16xf32>
  %dw = zest.grouped_matmul_weight_grad transpose_weight ins(%x, %dy, %ends : tensor<32x16xf32>, tensor<32x24xf32>, tensor<4xi32>) outs(%e2 : tensor<4x24x16xf32>) -> tensor<4x24x16xf32>
  return %y, %dx, %dw : tensor<32x24xf32>, tensor<32x16xf32>, tensor<4x24x16xf32>
}

// -----

// [groups, K, N] weights, bf16 storage, i64 ends, on memrefs.
// CHECK-LABEL: func.func @memrefs(
// CHECK: zest.grouped_matmul ins(%{{.*}}, %{{.*}}, %{{.*}} : memref<8x4xbf16>, memref<2x4x6xbf16>, memref<2xi64>) outs(%{{.*}} : memref<8x6xbf16>)
// CHECK: zest.grouped_matmul_weight_grad ins(%{{.*}}, %{{.*}}, %{{.*}} : memref<8x4xbf16>, memref<8x6xbf16>, memref<2xi64>) outs(%{{.*}} : memref<2x4x6xbf16>)
func.func @memrefs(%x: memref<8x4xbf16>, %w: memref<2x4x6xbf16>, %ends: memref<2xi64>, %y: memref<8x6xbf16>, %dw: memref<2x4x6xbf16>) {
  zest.grouped_matmul ins(%x, %w, %ends : memref<8x4xbf16>, memref<2x4x6xbf16>, memref<2xi64>) outs(%y : memref<8x6xbf16>)
  zest.grouped_matmul_weight_grad ins(%x, %y, %ends : memref<8x4xbf16>, memref<8x6xbf16>, memref<2xi64>) outs(%dw : memref<2x4x6xbf16>)
  return
}
