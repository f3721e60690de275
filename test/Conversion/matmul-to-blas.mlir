// RUN: zest-opt %s -split-input-file -zest-matmul-to-blas | FileCheck %s

// C += A B^T (y = x W^T): transB = 1, lda/ldb/ldc are row strides.
// CHECK-LABEL: func.func @nt(
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : i32
// CHECK-DAG: %[[C1:.*]] = arith.constant 1 : i32
// CHECK: call @zest_sgemm(%[[C0]], %[[C1]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (i32, i32, i64, i64, i64, !llvm.ptr, i64, !llvm.ptr, i64, !llvm.ptr, i64) -> ()
// CHECK-NOT: linalg.matmul
func.func @nt(%x: memref<8x16xf32>, %w: memref<32x16xf32>, %y: memref<8x32xf32>) {
  linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
      ins(%x, %w : memref<8x16xf32>, memref<32x16xf32>) outs(%y : memref<8x32xf32>)
  return
}

// C += A^T B (dW = dY^T X) on strided views: the leading dimension is the
// view's row stride (48), not its width.
// CHECK-LABEL: func.func @tn_strided(
// CHECK: call @zest_sgemm(%c1_i32, %c0_i32, %c16_i64, %c16_i64, %c8_i64, %{{.*}}, %c48_i64, %{{.*}}, %c16_i64, %{{.*}}, %c16_i64)
func.func @tn_strided(%dy: memref<8x16xf32, strided<[48, 1], offset: 16>>, %x: memref<8x16xf32>, %dw: memref<16x16xf32>) {
  linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (k, m)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>]
      ins(%dy, %x : memref<8x16xf32, strided<[48, 1], offset: 16>>, memref<8x16xf32>) outs(%dw : memref<16x16xf32>)
  return
}

// Batched, plain maps.
// CHECK-LABEL: func.func @batched(
// CHECK: call @zest_sgemm_batched(%c0_i32, %c0_i32
func.func @batched(%p: memref<2x4x4xf32>, %v: memref<2x4x16xf32>, %o: memref<2x4x16xf32>) {
  linalg.batch_matmul ins(%p, %v : memref<2x4x4xf32>, memref<2x4x16xf32>) outs(%o : memref<2x4x16xf32>)
  return
}

// Left to the loop lowering: tensors, non-f32, non-unit inner strides.
// CHECK-LABEL: func.func @unchanged(
// CHECK-COUNT-3: linalg.matmul
// CHECK-NOT: call @zest_sgemm
func.func @unchanged(%a: tensor<4x4xf32>, %b: memref<4x4xf64>, %c: memref<4x4xf32, strided<[1, 4]>>, %d: memref<4x4xf32>) -> tensor<4x4xf32> {
  %r = linalg.matmul ins(%a, %a : tensor<4x4xf32>, tensor<4x4xf32>) outs(%a : tensor<4x4xf32>) -> tensor<4x4xf32>
  linalg.matmul ins(%b, %b : memref<4x4xf64>, memref<4x4xf64>) outs(%b : memref<4x4xf64>)
  linalg.matmul ins(%c, %d : memref<4x4xf32, strided<[1, 4]>>, memref<4x4xf32>) outs(%d : memref<4x4xf32>)
  return %r : tensor<4x4xf32>
}
