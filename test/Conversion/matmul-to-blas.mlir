// RUN: zest-opt %s -split-input-file -zest-matmul-to-blas -canonicalize | FileCheck %s
// With target=cuda the same calls go to the CUDA runtime's cuBLASLt
// products (zest_cuda_*, same signatures), none to OpenBLAS's.
// RUN: zest-opt %s -split-input-file -zest-matmul-to-blas=target=cuda \
// RUN:   | FileCheck %s --check-prefix=CUDA
// RUN: zest-opt %s -split-input-file -zest-matmul-to-blas=target=cuda \
// RUN:   | not grep -E "call @zest_(sgemm|linear)"
// RUN: not zest-opt %s -split-input-file -zest-matmul-to-blas=target=tpu 2>&1 \
// RUN:   | FileCheck %s --check-prefix=TARGET
// TARGET: error: zest-matmul-to-blas: unknown target 'tpu' (cpu or cuda)
// CUDA-LABEL: func.func @nt(
// CUDA: call @zest_cuda_sgemm(
// (The pass rewrites in one walk without folding; -canonicalize folds the
// static sizes and strides into the constants checked below.)

// C += A B^T (y = x W^T): transB = 1, lda/ldb/ldc are row strides.
// CHECK-LABEL: func.func @nt(
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : i32
// CHECK-DAG: %[[C1:.*]] = arith.constant 1 : i32
// CHECK: call @zest_sgemm(%[[C0]], %[[C1]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[C1]]) : (i32, i32, i64, i64, i64, !llvm.ptr, i64, !llvm.ptr, i64, !llvm.ptr, i64, i32) -> ()
// CHECK-NOT: linalg.matmul
func.func @nt(%x: memref<8x16xf32>, %w: memref<32x16xf32>, %y: memref<8x32xf32>) {
  linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
      ins(%x, %w : memref<8x16xf32>, memref<32x16xf32>) outs(%y : memref<8x32xf32>)
  return
}

// C += A^T B (dW = dY^T X) on strided views: the leading dimension is the
// view's row stride (48), not its width.
// CHECK-LABEL: func.func @tn_strided(
// CHECK: call @zest_sgemm(%c1_i32, %c0_i32, %c16_i64, %c16_i64, %c8_i64, %{{.*}}, %c48_i64, %{{.*}}, %c16_i64, %{{.*}}, %c16_i64, %c1_i32)
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

// Attention's output per head, O[b, m, h, n] += P[b, h, m, k] V[b, k, h, n]
// with V and O in the [B, S, H, Dh] layout: each head's matrix has rows
// H * Dh = 24 apart and starts Dh = 8 after the previous head. The longest
// batch loop (h, 3) is the call's batch, the other (b) an scf.for over
// rank-reduced subviews.
// CHECK-LABEL: func.func @heads(
// CHECK-SAME:    %[[P:[^:]+]]: memref<2x3x8x8xf32>, %[[V:[^:]+]]: memref<2x8x3x8xf32>, %[[O:[^:]+]]: memref<2x8x3x8xf32>
// CHECK:         scf.for %[[B:.+]] = %c0 to %c2 step %c1
// CHECK-DAG:       memref.subview %[[P]][%[[B]], 0, 0, 0] [1, 3, 8, 8] [1, 1, 1, 1] : memref<2x3x8x8xf32> to memref<3x8x8xf32, strided<[64, 8, 1], offset: ?>>
// CHECK-DAG:       memref.subview %[[V]][%[[B]], 0, 0, 0] [1, 8, 3, 8] [1, 1, 1, 1] : memref<2x8x3x8xf32> to memref<8x3x8xf32, strided<[24, 8, 1], offset: ?>>
// CHECK-DAG:       memref.subview %[[O]][%[[B]], 0, 0, 0] [1, 8, 3, 8] [1, 1, 1, 1] : memref<2x8x3x8xf32> to memref<8x3x8xf32, strided<[24, 8, 1], offset: ?>>
// CHECK:           call @zest_sgemm_batched(%c0_i32, %c0_i32, %c3_i64, %c8_i64, %c8_i64, %c8_i64, %{{.*}}, %c8_i64, %c64_i64, %{{.*}}, %c24_i64, %c8_i64, %{{.*}}, %c24_i64, %c8_i64, %c1_i32)
// CHECK-NOT:     linalg.generic
func.func @heads(%p: memref<2x3x8x8xf32>, %v: memref<2x8x3x8xf32>, %o: memref<2x8x3x8xf32>) {
  linalg.generic {indexing_maps = [affine_map<(b, h, m, n, k) -> (b, h, m, k)>, affine_map<(b, h, m, n, k) -> (b, k, h, n)>, affine_map<(b, h, m, n, k) -> (b, m, h, n)>],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%p, %v : memref<2x3x8x8xf32>, memref<2x8x3x8xf32>) outs(%o : memref<2x8x3x8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %mul = arith.mulf %a, %b : f32
    %add = arith.addf %c, %mul : f32
    linalg.yield %add : f32
  }
  return
}

// Scores per head, S[b, h, m, n] += Q[b, m, h, k] K[b, n, h, k] (K read
// transposed: transB = 1), both read in place from [B, S, H, Dh].
// CHECK-LABEL: func.func @scores(
// CHECK:         scf.for
// CHECK:           call @zest_sgemm_batched(%c0_i32, %c1_i32, %c3_i64, %c8_i64, %c8_i64, %c8_i64, %{{.*}}, %c24_i64, %c8_i64, %{{.*}}, %c24_i64, %c8_i64, %{{.*}}, %c8_i64, %c64_i64, %c1_i32)
func.func @scores(%q: memref<2x8x3x8xf32>, %k: memref<2x8x3x8xf32>, %s: memref<2x3x8x8xf32>) {
  linalg.generic {indexing_maps = [affine_map<(b, h, m, n, k) -> (b, m, h, k)>, affine_map<(b, h, m, n, k) -> (b, n, h, k)>, affine_map<(b, h, m, n, k) -> (b, h, m, n)>],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : memref<2x8x3x8xf32>, memref<2x8x3x8xf32>) outs(%s : memref<2x3x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %mul = arith.mulf %a, %b : f32
    %add = arith.addf %c, %mul : f32
    linalg.yield %add : f32
  }
  return
}

// A key head shared by two query heads (grouped-query attention): K has no
// r loop. The call's batch is a loop every operand reads (g, the longest);
// r becomes an scf.for, K's view not moving with it.
// CHECK-LABEL: func.func @shared_keys(
// CHECK-SAME:    %[[Q:[^:]+]]: memref<2x3x8x8xf32>, %[[K:[^:]+]]: memref<2x8x8xf32>, %[[S:[^:]+]]: memref<2x3x8x8xf32>
// CHECK:         scf.for %[[R:.+]] = %c0 to %c3 step %c1
// CHECK-DAG:       memref.subview %[[Q]][0, %[[R]], 0, 0] [2, 1, 8, 8] [1, 1, 1, 1]
// CHECK-DAG:       memref.subview %[[S]][0, %[[R]], 0, 0] [2, 1, 8, 8] [1, 1, 1, 1]
// CHECK:           call @zest_sgemm_batched(%c0_i32, %c1_i32, %c2_i64, %c8_i64, %c8_i64, %c8_i64, %{{.*}}, %c8_i64, %c192_i64, %[[KP:.*]], %c8_i64, %c64_i64, %{{.*}}, %c8_i64, %c192_i64, %c1_i32)
// With no batch loop that every operand reads, the calls are unbatched.
// CHECK-LABEL: func.func @no_common_batch(
// CHECK:         scf.for
// CHECK:           call @zest_sgemm(
func.func @shared_keys(%q: memref<2x3x8x8xf32>, %k: memref<2x8x8xf32>, %s: memref<2x3x8x8xf32>) {
  linalg.generic {indexing_maps = [affine_map<(g, r, m, n, k) -> (g, r, m, k)>, affine_map<(g, r, m, n, k) -> (g, n, k)>, affine_map<(g, r, m, n, k) -> (g, r, m, n)>],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : memref<2x3x8x8xf32>, memref<2x8x8xf32>) outs(%s : memref<2x3x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %mul = arith.mulf %a, %b : f32
    %add = arith.addf %c, %mul : f32
    linalg.yield %add : f32
  }
  return
}

func.func @no_common_batch(%x: memref<4x8x16xf32>, %w: memref<16x8xf32>, %y: memref<4x8x8xf32>) {
  linalg.generic {indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (k, n)>, affine_map<(b, m, n, k) -> (b, m, n)>],
                  iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<4x8x16xf32>, memref<16x8xf32>) outs(%y : memref<4x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %mul = arith.mulf %a, %b : f32
    %add = arith.addf %c, %mul : f32
    linalg.yield %add : f32
  }
  return
}

// A product into a buffer just filled with zeros overwrites it (the last
// argument, accumulate, is 0) and the fill goes; a fill of another value,
// or a write in between, keeps the accumulation.
// CHECK-LABEL: func.func @zero_init(
// CHECK-NOT:     linalg.fill
// CHECK:         call @zest_sgemm(%c0_i32, %c1_i32, %c8_i64, %c32_i64, %c16_i64, %{{.*}}, %c16_i64, %{{.*}}, %c16_i64, %{{.*}}, %c32_i64, %c0_i32)
// CHECK:         linalg.fill ins(%{{.*}} : f32) outs(%[[Y2:.*]] : memref<8x32xf32>)
// CHECK-NEXT:    memref.copy
// CHECK:         call @zest_sgemm({{.*}}, %c1_i32)
// CHECK:         linalg.fill
// CHECK:         call @zest_sgemm({{.*}}, %c1_i32)
func.func @zero_init(%x: memref<8x16xf32>, %w: memref<32x16xf32>, %y: memref<8x32xf32>, %y2: memref<8x32xf32>, %y3: memref<8x32xf32>) {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  linalg.fill ins(%zero : f32) outs(%y : memref<8x32xf32>)
  linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
      ins(%x, %w : memref<8x16xf32>, memref<32x16xf32>) outs(%y : memref<8x32xf32>)
  linalg.fill ins(%zero : f32) outs(%y2 : memref<8x32xf32>)
  memref.copy %y, %y2 : memref<8x32xf32> to memref<8x32xf32>
  linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
      ins(%x, %w : memref<8x16xf32>, memref<32x16xf32>) outs(%y2 : memref<8x32xf32>)
  linalg.fill ins(%one : f32) outs(%y3 : memref<8x32xf32>)
  linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
      ins(%x, %w : memref<8x16xf32>, memref<32x16xf32>) outs(%y3 : memref<8x32xf32>)
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

// -----

// Matrix products written as linalg.generic contractions (acc + a * b) go to
// BLAS too, with their transposition read off the maps.
#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#mn = affine_map<(m, n, k) -> (m, n)>
// CHECK-LABEL: func.func @generic_nt(
// CHECK: call @zest_sgemm(%c0_i32, %c1_i32, %c8_i64, %c32_i64, %c16_i64
// CHECK-NOT: linalg.generic
func.func @generic_nt(%a: memref<8x16xf32>, %b: memref<32x16xf32>, %c: memref<8x32xf32>) {
  linalg.generic {indexing_maps = [#mk, #nk, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<8x16xf32>, memref<32x16xf32>) outs(%c : memref<8x32xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %y, %x : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  }
  return
}

// CHECK-LABEL: func.func @generic_batched(
// CHECK: call @zest_sgemm_batched(%c0_i32, %c0_i32, %c2_i64, %c4_i64, %c5_i64, %c8_i64
func.func @generic_batched(%p: memref<2x4x8xf32>, %q: memref<2x8x5xf32>, %r: memref<2x4x5xf32>) {
  linalg.generic {indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (b, k, n)>, affine_map<(b, m, n, k) -> (b, m, n)>],
                  iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%p, %q : memref<2x4x8xf32>, memref<2x8x5xf32>) outs(%r : memref<2x4x5xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}

// Not a product: a max-plus contraction and a difference stay loops.
// CHECK-LABEL: func.func @not_products(
// CHECK-COUNT-2: linalg.generic
// CHECK-NOT: call @zest_sgemm
func.func @not_products(%a: memref<8x16xf32>, %b: memref<32x16xf32>, %c: memref<8x32xf32>) {
  linalg.generic {indexing_maps = [#mk, #nk, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<8x16xf32>, memref<32x16xf32>) outs(%c : memref<8x32xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.addf %x, %y : f32
    %s = arith.maximumf %acc, %m : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#mk, #nk, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<8x16xf32>, memref<32x16xf32>) outs(%c : memref<8x32xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.subf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A fused linear forward: sizes, pointers, leading dimensions, the
// transpose flag, the activation code (gelu_tanh = 2) and a null pointer for
// the pre-activation it does not keep.
// CHECK-LABEL: func.func @linear_forward(
// CHECK-DAG: %[[M:.*]] = arith.constant 8 : i64
// CHECK-DAG: %[[N:.*]] = arith.constant 32 : i64
// CHECK-DAG: %[[K:.*]] = arith.constant 16 : i64
// CHECK-DAG: %[[T:.*]] = arith.constant 1 : i32
// CHECK-DAG: %[[ACT:.*]] = arith.constant 2 : i32
// CHECK-DAG: %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK: call @zest_linear_forward(%[[M]], %[[N]], %[[K]], %{{.*}}, %[[K]], %{{.*}}, %[[K]], %[[T]], %{{.*}}, %[[ACT]], %[[NULL]], %{{.*}}, %{{.*}}, %[[N]])
// CHECK-NOT: zest.linear
func.func @linear_forward(%x: memref<8x16xf32>, %w: memref<32x16xf32>, %b: memref<32xf32>, %y: memref<8x32xf32>) {
  zest.linear gelu_tanh transpose_weight ins(%x, %w, %b : memref<8x16xf32>, memref<32x16xf32>, memref<32xf32>) outs(%y : memref<8x32xf32>)
  return
}

// -----

// bf16 storage calls the bf16 kernels, on the same pointers and strides.
// CHECK-LABEL: func.func @linear_bf16(
// CHECK: call @zest_linear_forward_bf16(
// CHECK: call @zest_linear_backward_bf16(
// CUDA: call @zest_cuda_linear_forward_bf16(
// CUDA: call @zest_cuda_linear_backward_bf16(
// CHECK-NOT: zest.linear
func.func @linear_bf16(%x: memref<8x16xbf16>, %w: memref<32x16xbf16>, %b: memref<32xbf16>, %y: memref<8x32xbf16>, %pre: memref<8x32xbf16>, %dx: memref<8x16xbf16>) {
  zest.linear relu transpose_weight ins(%x, %w, %b : memref<8x16xbf16>, memref<32x16xbf16>, memref<32xbf16>) outs(%y, %pre : memref<8x32xbf16>, memref<8x32xbf16>)
  zest.linear_backward relu transpose_weight grad_output(%y : memref<8x32xbf16>) preactivation(%pre : memref<8x32xbf16>) weight(%w : memref<32x16xbf16>) outs(grad_input %dx : memref<8x16xbf16>)
  return
}

// -----

// f16 storage calls the f16 kernels.
// CHECK-LABEL: func.func @linear_f16(
// CHECK: call @zest_linear_forward_f16(
// CHECK: call @zest_linear_backward_f16(
// CUDA: call @zest_cuda_linear_forward_f16(
// CUDA: call @zest_cuda_linear_backward_f16(
// CHECK-NOT: zest.linear
func.func @linear_f16(%x: memref<8x16xf16>, %w: memref<32x16xf16>, %b: memref<32xf16>, %y: memref<8x32xf16>, %pre: memref<8x32xf16>, %dx: memref<8x16xf16>) {
  zest.linear silu transpose_weight ins(%x, %w, %b : memref<8x16xf16>, memref<32x16xf16>, memref<32xf16>) outs(%y, %pre : memref<8x32xf16>, memref<8x32xf16>)
  zest.linear_backward silu transpose_weight grad_output(%y : memref<8x32xf16>) preactivation(%pre : memref<8x32xf16>) weight(%w : memref<32x16xf16>) outs(grad_input %dx : memref<8x16xf16>)
  return
}

// -----

// A fused linear backward with a plain weight, writing the input gradient
// into a column slice (row stride 48) and the weight gradient through a
// transposed view, which goes through a contiguous copy.
// CHECK-LABEL: func.func @linear_backward(
// CHECK-SAME: %[[DW:[^:]*]]: memref<6x8xf32, strided<[1, 6]>>
// CHECK: %[[COPY:.*]] = memref.alloc() : memref<6x8xf32>
// CHECK: call @zest_linear_backward(
// CHECK: memref.copy %[[COPY]], %[[DW]]
func.func @linear_backward(%dy: memref<4x6xf32>, %pre: memref<4x6xf32>, %x: memref<4x8xf32>, %w: memref<8x6xf32>, %dx: memref<4x8xf32, strided<[48, 1]>>, %dw: memref<6x8xf32, strided<[1, 6]>>, %db: memref<6xf32>) {
  zest.linear_backward relu transpose_grad_weight grad_output(%dy : memref<4x6xf32>) preactivation(%pre : memref<4x6xf32>) input(%x : memref<4x8xf32>) weight(%w : memref<8x6xf32>) outs(grad_input %dx : memref<4x8xf32, strided<[48, 1]>> grad_weight %dw : memref<6x8xf32, strided<[1, 6]>> grad_bias %db : memref<6xf32>)
  return
}

// -----

// 16-bit operands into an f32 destination (autocast's products, as
// torch-mlir imports them: linalg.matmul widens its inputs to the
// accumulator's type) go to the widening products, bf16 or f16 by the
// operands' type; so does the generic form that spells the widening out.
// Mixed operands, or a 16-bit destination, stay loops.
// CHECK-LABEL: func.func @widening(
// CHECK: call @zest_widening_gemm_bf16(%c0_i32, %c1_i32, %c8_i64, %c32_i64, %c16_i64, %{{.*}}, %c16_i64, %{{.*}}, %c16_i64, %{{.*}}, %c32_i64, %c1_i32) : (i32, i32, i64, i64, i64, !llvm.ptr, i64, !llvm.ptr, i64, !llvm.ptr, i64, i32) -> ()
// CHECK: call @zest_widening_gemm_batched_f16(%c0_i32, %c0_i32, %c2_i64, %c4_i64, %c16_i64, %c4_i64
// CHECK: call @zest_widening_gemm_bf16(%c1_i32, %c0_i32, %c16_i64, %c32_i64, %c8_i64
// CHECK-COUNT-2: linalg.matmul
// CHECK-NOT: call @zest_
// CUDA-LABEL: func.func @widening(
// CUDA: call @zest_cuda_widening_gemm_bf16(
// CUDA: call @zest_cuda_widening_gemm_batched_f16(
// CUDA: call @zest_cuda_widening_gemm_bf16(
#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#km = affine_map<(m, n, k) -> (k, m)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
func.func @widening(%x: memref<8x16xbf16>, %w: memref<32x16xbf16>, %y: memref<8x32xf32>,
                    %p: memref<2x4x4xf16>, %v: memref<2x4x16xf16>, %o: memref<2x4x16xf32>,
                    %dy: memref<8x16xbf16>, %xb: memref<8x32xbf16>, %dw: memref<16x32xf32>,
                    %xf: memref<8x16xf32>, %yb: memref<8x32xbf16>) {
  linalg.matmul indexing_maps = [#mk, #nk, #mn]
      ins(%x, %w : memref<8x16xbf16>, memref<32x16xbf16>) outs(%y : memref<8x32xf32>)
  linalg.batch_matmul ins(%p, %v : memref<2x4x4xf16>, memref<2x4x16xf16>) outs(%o : memref<2x4x16xf32>)
  linalg.generic {indexing_maps = [#km, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%dy, %xb : memref<8x16xbf16>, memref<8x32xbf16>) outs(%dw : memref<16x32xf32>) {
  ^bb0(%a: bf16, %b: bf16, %acc: f32):
    %a32 = arith.extf %a : bf16 to f32
    %b32 = arith.extf %b : bf16 to f32
    %m = arith.mulf %a32, %b32 : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  linalg.matmul indexing_maps = [#mk, #nk, #mn]
      ins(%xf, %w : memref<8x16xf32>, memref<32x16xbf16>) outs(%y : memref<8x32xf32>)
  linalg.matmul indexing_maps = [#mk, #nk, #mn]
      ins(%x, %w : memref<8x16xbf16>, memref<32x16xbf16>) outs(%yb : memref<8x32xbf16>)
  return
}

// -----

// Attention: one call each way, on the contiguous arrays' pointers, with
// its sizes (batch 2, 8 query heads over 2 key/value heads, 16 queries, 24 keys,
// features 4 and values 6), the scale as an f32, causal, no mask (null,
// kind 0, sizes 0), then each array's batch, head and row strides (q 512,
// 64, 4; k 192, 96, 4; v 288, 144, 6; the output 768, 96, 6).
// CHECK-LABEL: func.func @attention(
// CHECK-DAG: %[[B:.*]] = arith.constant 2 : i64
// CHECK-DAG: %[[H:.*]] = arith.constant 8 : i64
// CHECK-DAG: %[[S:.*]] = arith.constant 16 : i64
// CHECK-DAG: %[[T:.*]] = arith.constant 24 : i64
// CHECK-DAG: %[[D:.*]] = arith.constant 4 : i64
// CHECK-DAG: %[[E:.*]] = arith.constant 6 : i64
// CHECK-DAG: %[[SCALE:.*]] = arith.constant 5.000000e-01 : f32
// CHECK-DAG: %[[CAUSAL:.*]] = arith.constant 1 : i32
// CHECK-DAG: %[[NONE:.*]] = arith.constant 0 : i32
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0 : i64
// CHECK-DAG: %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK: call @zest_attention_forward(%[[B]], %[[H]], %[[B]], %[[S]], %[[T]], %[[D]], %[[E]], %[[SCALE]], %[[CAUSAL]], %{{.*}}, %{{.*}}, %{{.*}}, %[[NULL]], %[[NONE]], %[[ZERO]], %[[ZERO]], %[[ZERO]], %[[ZERO]], %{{.*}}, %{{.*}}, %c512_i64, %c64_i64, %[[D]], %c192_i64, %c96_i64, %[[D]], %c288_i64, %c144_i64, %[[E]], %c768_i64, %c96_i64, %[[E]]) : (i64, i64, i64, i64, i64, i64, i64, f32, i32, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i32, i64, i64, i64, i64, !llvm.ptr, !llvm.ptr, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64) -> ()
// CHECK: call @zest_attention_backward(%[[B]], %[[H]], %[[B]], %[[S]], %[[T]], %[[D]], %[[E]], %[[SCALE]], %[[CAUSAL]], {{.*}}, %c512_i64, %c64_i64, %[[D]], %c192_i64, %c96_i64, %[[D]], %c288_i64, %c144_i64, %[[E]], %c768_i64, %c96_i64, %[[E]], %c768_i64, %c96_i64, %[[E]], %c512_i64, %c64_i64, %[[D]], %c192_i64, %c96_i64, %[[D]], %c288_i64, %c144_i64, %[[E]]) : (i64, i64, i64, i64, i64, i64, i64, f32, i32, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i32, i64, i64, i64, i64, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64) -> ()
// CHECK-NOT: zest.attention
// CUDA-LABEL: func.func @attention(
// CUDA: call @zest_cuda_attention_forward(
// CUDA: call @zest_cuda_attention_backward(
func.func @attention(%q: memref<2x8x16x4xf32>, %k: memref<2x2x24x4xf32>, %v: memref<2x2x24x6xf32>, %o: memref<2x8x16x6xf32>, %lse: memref<2x8x16xf32>,
                     %dq: memref<2x8x16x4xf32>, %dk: memref<2x2x24x4xf32>, %dv: memref<2x2x24x6xf32>) {
  zest.attention causal scale(0.5) ins(%q, %k, %v : memref<2x8x16x4xf32>, memref<2x2x24x4xf32>, memref<2x2x24x6xf32>) outs(%o, %lse : memref<2x8x16x6xf32>, memref<2x8x16xf32>)
  zest.attention_backward causal scale(0.5) grad_output(%o : memref<2x8x16x6xf32>) ins(%q, %k, %v, %o, %lse : memref<2x8x16x4xf32>, memref<2x2x24x4xf32>, memref<2x2x24x6xf32>, memref<2x8x16x6xf32>, memref<2x8x16xf32>) outs(%dq, %dk, %dv : memref<2x8x16x4xf32>, memref<2x2x24x4xf32>, memref<2x2x24x6xf32>)
  return
}

// -----

// A bf16 attention with a boolean padding mask ([batch, 1, 1, keys], kind
// 1, its sizes passed) and a query view of a [B, S, H, D] array (a
// transposed layout): the view is read where it lies, with its batch, head
// and row strides (512, 16, 64); no copy.
// CHECK-LABEL: func.func @attention_masked_bf16(
// CHECK-SAME:      %[[Q:[^:]*]]: memref<2x4x8x16xbf16, strided<[512, 16, 64, 1]>>
// CHECK-NOT: memref.copy
// CHECK: %[[INT:.*]] = memref.extract_aligned_pointer_as_index %[[Q]]
// CHECK: %[[QI:.*]] = arith.index_cast %[[INT]]
// CHECK: %[[QP:.*]] = llvm.inttoptr %[[QI]]
// CHECK: call @zest_attention_forward_bf16(%c2_i64, %c4_i64, %c4_i64, %c8_i64, %c8_i64, %c16_i64, %c16_i64, %cst, %c0_i32, %[[QP]], %{{.*}}, %{{.*}}, %{{.*}}, %c1_i32, %c2_i64, %c1_i64, %c1_i64, %c8_i64, %{{.*}}, %{{.*}}, %c512_i64, %c16_i64, %c64_i64, %c512_i64, %c128_i64, %c16_i64, %c512_i64, %c128_i64, %c16_i64, %c512_i64, %c128_i64, %c16_i64)
// CUDA-LABEL: func.func @attention_masked_bf16(
// CUDA: call @zest_cuda_attention_forward_bf16(
func.func @attention_masked_bf16(%q: memref<2x4x8x16xbf16, strided<[512, 16, 64, 1]>>, %k: memref<2x4x8x16xbf16>, %m: memref<2x1x1x8xi1>, %o: memref<2x4x8x16xbf16>, %lse: memref<2x4x8xf32>) {
  zest.attention scale(0.25) ins(%q, %k, %k : memref<2x4x8x16xbf16, strided<[512, 16, 64, 1]>>, memref<2x4x8x16xbf16>, memref<2x4x8x16xbf16>) mask(%m : memref<2x1x1x8xi1>) outs(%o, %lse : memref<2x4x8x16xbf16>, memref<2x4x8xf32>)
  return
}

// -----

// A sequence-major attention on q, k and v cut from one projection's rows
// ([1, 8 rows, 3 x 2 heads, 4]): heads are dimension 2, rows dimension 1,
// so the sizes are (batch 1, heads 2, rows 8) and the strides passed are
// (dimension 0, 2, 1) = (192, 4, 24) for q and v, read where they lie; the
// output written as [1, 8, 2, 4] rows (64, 4, 8). A key whose rows are not
// contiguous (every other element) goes through a copy (then 64, 4, 8), and
// so does a
// log-sum-exp that is not a contiguous array.
// CHECK-LABEL: func.func @attention_sequence_major(
// CHECK-SAME:      %[[QKV:[^:]*]]: memref<1x8x24xf32>
// CHECK: %[[COPY:.*]] = memref.alloc() : memref<1x8x2x4xf32>
// CHECK: memref.copy %{{.*}}, %[[COPY]] : memref<1x8x2x4xf32, strided<[128, 16, 8, 2]>> to memref<1x8x2x4xf32>
// CHECK: %[[L:.*]] = memref.alloc() : memref<1x2x8xf32>
// CHECK: call @zest_attention_forward(%c1_i64, %c2_i64, %c2_i64, %c8_i64, %c8_i64, %c4_i64, %c4_i64, {{.*}}, %c192_i64, %c4_i64, %c24_i64, %c64_i64, %c4_i64, %c8_i64, %c192_i64, %c4_i64, %c24_i64, %c64_i64, %c4_i64, %c8_i64)
// CHECK: memref.copy %[[L]], %{{.*}} : memref<1x2x8xf32> to memref<1x2x8xf32, strided<[32, 16, 1]>>
func.func @attention_sequence_major(%qkv: memref<1x8x24xf32>, %k: memref<1x8x2x4xf32, strided<[128, 16, 8, 2]>>, %o: memref<1x8x2x4xf32>, %lse: memref<1x2x16xf32>) {
  %split = memref.expand_shape %qkv [[0], [1], [2, 3]] output_shape [1, 8, 6, 4] : memref<1x8x24xf32> into memref<1x8x6x4xf32>
  %q = memref.subview %split[0, 0, 0, 0] [1, 8, 2, 4] [1, 1, 1, 1] : memref<1x8x6x4xf32> to memref<1x8x2x4xf32, strided<[192, 24, 4, 1]>>
  %v = memref.subview %split[0, 0, 4, 0] [1, 8, 2, 4] [1, 1, 1, 1] : memref<1x8x6x4xf32> to memref<1x8x2x4xf32, strided<[192, 24, 4, 1], offset: 16>>
  %l = memref.subview %lse[0, 0, 0] [1, 2, 8] [1, 1, 1] : memref<1x2x16xf32> to memref<1x2x8xf32, strided<[32, 16, 1]>>
  zest.attention sequence_major scale(0.5) ins(%q, %k, %v : memref<1x8x2x4xf32, strided<[192, 24, 4, 1]>>, memref<1x8x2x4xf32, strided<[128, 16, 8, 2]>>, memref<1x8x2x4xf32, strided<[192, 24, 4, 1], offset: 16>>) outs(%o, %l : memref<1x8x2x4xf32>, memref<1x2x8xf32, strided<[32, 16, 1]>>)
  return
}

// -----

// Cross-entropy: one call each way, on the logits' row stride (a view of
// rows 512 wide), the i64 targets (64), ignore_index, label smoothing as
// an f32 and the reduction (mean: 1); the gradient with its own stride.
// CHECK-LABEL: func.func @cross_entropy(
// CHECK-DAG: %[[ROWS:.*]] = arith.constant 6 : i64
// CHECK-DAG: %[[CLASSES:.*]] = arith.constant 50 : i64
// CHECK-DAG: %[[LD:.*]] = arith.constant 512 : i64
// CHECK-DAG: %[[BITS:.*]] = arith.constant 64 : i32
// CHECK-DAG: %[[IGNORE:.*]] = arith.constant -100 : i64
// CHECK-DAG: %[[SMOOTH:.*]] = arith.constant 1.000000e-01 : f32
// CHECK-DAG: %[[MEAN:.*]] = arith.constant 1 : i32
// CHECK: call @zest_cross_entropy_forward(%[[ROWS]], %[[CLASSES]], %{{.*}}, %[[LD]], %{{.*}}, %[[BITS]], %[[IGNORE]], %[[SMOOTH]], %[[MEAN]], %{{.*}}, %{{.*}}) : (i64, i64, !llvm.ptr, i64, !llvm.ptr, i32, i64, f32, i32, !llvm.ptr, !llvm.ptr) -> ()
// CHECK: call @zest_cross_entropy_backward(%[[ROWS]], %[[CLASSES]], %{{.*}}, %[[LD]], %{{.*}}, %[[BITS]], %[[IGNORE]], %[[SMOOTH]], %[[MEAN]], %{{.*}}, %{{.*}}, %{{.*}}, %[[CLASSES]]) : (i64, i64, !llvm.ptr, i64, !llvm.ptr, i32, i64, f32, i32, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64) -> ()
// CHECK-NOT: zest.cross_entropy
// CUDA-LABEL: func.func @cross_entropy(
// CUDA: call @zest_cuda_cross_entropy_forward(
// CUDA: call @zest_cuda_cross_entropy_backward(
func.func @cross_entropy(%x: memref<6x50xf32, strided<[512, 1]>>, %t: memref<6xi64>, %loss: memref<f32>, %lse: memref<6xf32>, %dx: memref<6x50xf32>) {
  zest.cross_entropy mean ignore_index(-100) label_smoothing(0.1) ins(%x, %t : memref<6x50xf32, strided<[512, 1]>>, memref<6xi64>) outs(%loss, %lse : memref<f32>, memref<6xf32>)
  zest.cross_entropy_backward mean ignore_index(-100) label_smoothing(0.1) grad_loss(%loss : memref<f32>) ins(%x, %t, %lse : memref<6x50xf32, strided<[512, 1]>>, memref<6xi64>, memref<6xf32>) outs(%dx : memref<6x50xf32>)
  return
}

// -----

// Grouped products: one call each, shapes (rows, n, k, groups), the
// weights' layout, the offsets with their width (32), contiguous arrays.
// CHECK-LABEL: func.func @grouped_matmul(
// CHECK-DAG: %[[ROWS:.*]] = arith.constant 32 : i64
// CHECK-DAG: %[[N:.*]] = arith.constant 24 : i64
// CHECK-DAG: %[[K:.*]] = arith.constant 16 : i64
// CHECK-DAG: %[[GROUPS:.*]] = arith.constant 4 : i64
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1 : i32
// CHECK-DAG: %[[BITS:.*]] = arith.constant 32 : i32
// CHECK: call @zest_grouped_matmul(%[[ROWS]], %[[N]], %[[K]], %[[GROUPS]], %{{.*}}, %{{.*}}, %[[ONE]], %{{.*}}, %[[BITS]], %{{.*}}) : (i64, i64, i64, i64, !llvm.ptr, !llvm.ptr, i32, !llvm.ptr, i32, !llvm.ptr) -> ()
// CHECK: call @zest_grouped_matmul_weight_grad(%[[ROWS]], %[[N]], %[[K]], %[[GROUPS]], %{{.*}}, %{{.*}}, %{{.*}}, %[[BITS]], %{{.*}}, %[[ONE]]) : (i64, i64, i64, i64, !llvm.ptr, !llvm.ptr, !llvm.ptr, i32, !llvm.ptr, i32) -> ()
// CHECK-NOT: zest.grouped
// CUDA-LABEL: func.func @grouped_matmul(
// CUDA: call @zest_cuda_grouped_matmul(
// CUDA: call @zest_cuda_grouped_matmul_weight_grad(
func.func @grouped_matmul(%x: memref<32x16xf32>, %w: memref<4x24x16xf32>, %ends: memref<4xi32>, %y: memref<32x24xf32>, %dw: memref<4x24x16xf32>) {
  zest.grouped_matmul transpose_weight ins(%x, %w, %ends : memref<32x16xf32>, memref<4x24x16xf32>, memref<4xi32>) outs(%y : memref<32x24xf32>)
  zest.grouped_matmul_weight_grad transpose_weight ins(%x, %y, %ends : memref<32x16xf32>, memref<32x24xf32>, memref<4xi32>) outs(%dw : memref<4x24x16xf32>)
  return
}
