// RUN: zest-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(zest-fold-transposes))' | FileCheck %s

// A tied head: logits = x * E^T with E the embedding [vocab, dim]. The
// product reads E in place (B transposed); the copy goes.
// CHECK-DAG:   #[[$A:.+]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG:   #[[$BT:.+]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-DAG:   #[[$C:.+]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func @tied_head
// CHECK-SAME:    (%[[X:.+]]: tensor<8x16xf32>, %[[E:.+]]: tensor<100x16xf32>)
// CHECK-NOT:     linalg.transpose
// CHECK:         linalg.generic {indexing_maps = [#[[$A]], #[[$BT]], #[[$C]]], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK-SAME:      ins(%[[X]], %[[E]] : tensor<8x16xf32>, tensor<100x16xf32>)
// CHECK:           arith.mulf
// CHECK:           arith.addf
// CHECK-NOT:     linalg.transpose
func.func @tied_head(%x: tensor<8x16xf32>, %e: tensor<100x16xf32>) -> tensor<8x100xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<16x100xf32>
  %t = linalg.transpose ins(%e : tensor<100x16xf32>) outs(%empty : tensor<16x100xf32>) permutation = [1, 0]
  %init = tensor.empty() : tensor<8x100xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%init : tensor<8x100xf32>) -> tensor<8x100xf32>
  %y = linalg.matmul ins(%x, %t : tensor<8x16xf32>, tensor<16x100xf32>) outs(%acc : tensor<8x100xf32>) -> tensor<8x100xf32>
  return %y : tensor<8x100xf32>
}

// -----

// A weight gradient x^T * g: A transposed. The transpose also feeds an
// elementwise op, so it stays for that one.
// CHECK-DAG:   #[[$AT:.+]] = affine_map<(d0, d1, d2) -> (d2, d0)>
// CHECK-DAG:   #[[$B:.+]] = affine_map<(d0, d1, d2) -> (d2, d1)>
// CHECK-LABEL: func.func @grad_weight
// CHECK-SAME:    (%[[X:.+]]: tensor<8x16xf32>, %[[G:.+]]: tensor<8x4xf32>)
// CHECK:         %[[T:.+]] = linalg.transpose ins(%[[X]]
// CHECK:         linalg.generic {indexing_maps = [#[[$AT]], #[[$B]], {{.+}}]
// CHECK-SAME:      ins(%[[X]], %[[G]] : tensor<8x16xf32>, tensor<8x4xf32>)
// CHECK:         linalg.exp ins(%[[T]]
func.func @grad_weight(%x: tensor<8x16xf32>, %g: tensor<8x4xf32>) -> (tensor<16x4xf32>, tensor<16x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<16x8xf32>
  %t = linalg.transpose ins(%x : tensor<8x16xf32>) outs(%empty : tensor<16x8xf32>) permutation = [1, 0]
  %init = tensor.empty() : tensor<16x4xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%init : tensor<16x4xf32>) -> tensor<16x4xf32>
  %dw = linalg.matmul ins(%t, %g : tensor<16x8xf32>, tensor<8x4xf32>) outs(%acc : tensor<16x4xf32>) -> tensor<16x4xf32>
  %e = linalg.exp ins(%t : tensor<16x8xf32>) outs(%empty : tensor<16x8xf32>) -> tensor<16x8xf32>
  return %dw, %e : tensor<16x4xf32>, tensor<16x8xf32>
}

// -----

// Attention's scores q * k^T per head: a batched product with both a
// batch-preserving transpose (folded) and a plain operand.
// CHECK-DAG:   #[[$BBT:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>
// CHECK-LABEL: func.func @scores
// CHECK-SAME:    (%[[Q:.+]]: tensor<4x8x16xf32>, %[[K:.+]]: tensor<4x8x16xf32>)
// CHECK-NOT:     linalg.transpose
// CHECK:         linalg.generic {indexing_maps = [{{.+}}, #[[$BBT]], {{.+}}], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
// CHECK-SAME:      ins(%[[Q]], %[[K]] : tensor<4x8x16xf32>, tensor<4x8x16xf32>)
func.func @scores(%q: tensor<4x8x16xf32>, %k: tensor<4x8x16xf32>) -> tensor<4x8x8xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<4x16x8xf32>
  %kt = linalg.transpose ins(%k : tensor<4x8x16xf32>) outs(%empty : tensor<4x16x8xf32>) permutation = [0, 2, 1]
  %init = tensor.empty() : tensor<4x8x8xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%init : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<4x8x16xf32>, tensor<4x16x8xf32>) outs(%acc : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  return %s : tensor<4x8x8xf32>
}

// -----

// Not folded: a transpose that moves the batch dimension (a head split),
// and a transpose read by something that is not a product.
// CHECK-LABEL: func.func @kept
// CHECK:         linalg.transpose {{.+}} permutation = [1, 0, 2]
// CHECK:         linalg.batch_matmul
// CHECK:         linalg.transpose {{.+}} permutation = [1, 0]
// CHECK:         linalg.exp
func.func @kept(%q: tensor<8x4x16xf32>, %k: tensor<4x16x8xf32>, %w: tensor<8x16xf32>) -> (tensor<4x8x8xf32>, tensor<16x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<4x8x16xf32>
  %qh = linalg.transpose ins(%q : tensor<8x4x16xf32>) outs(%empty : tensor<4x8x16xf32>) permutation = [1, 0, 2]
  %init = tensor.empty() : tensor<4x8x8xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%init : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %s = linalg.batch_matmul ins(%qh, %k : tensor<4x8x16xf32>, tensor<4x16x8xf32>) outs(%acc : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %e2 = tensor.empty() : tensor<16x8xf32>
  %wt = linalg.transpose ins(%w : tensor<8x16xf32>) outs(%e2 : tensor<16x8xf32>) permutation = [1, 0]
  %x = linalg.exp ins(%wt : tensor<16x8xf32>) outs(%e2 : tensor<16x8xf32>) -> tensor<16x8xf32>
  return %s, %x : tensor<4x8x8xf32>, tensor<16x8xf32>
}

// -----

// Autocast: each weight is transposed, then rounded to bf16, then read by
// a widening product. The rounding moves before the transpose (on the
// weight itself) and the transpose, now read by the product, folds into
// it: no transposed copy of the weight in f32 or in bf16.
// CHECK-DAG:   #[[$ID:.+]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG:   #[[$B:.+]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-LABEL: func.func @rounded_weight
// CHECK-SAME:    (%[[X:.+]]: tensor<8x16xbf16>, %[[W:.+]]: tensor<32x16xf32>)
// CHECK-NOT:     linalg.transpose
// CHECK:         %[[WB:.+]] = linalg.generic {indexing_maps = [#[[$ID]], #[[$ID]]]{{.*}} ins(%[[W]] : tensor<32x16xf32>) outs(%{{.+}} : tensor<32x16xbf16>)
// CHECK:           arith.truncf
// CHECK:         linalg.generic {indexing_maps = [#{{.+}}, #[[$B]], #{{.+}}]{{.*}} ins(%[[X]], %[[WB]] : tensor<8x16xbf16>, tensor<32x16xbf16>)
// CHECK-NOT:     linalg.transpose
func.func @rounded_weight(%x: tensor<8x16xbf16>, %w: tensor<32x16xf32>) -> tensor<8x32xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x32xf32>
  %wt = linalg.transpose ins(%w : tensor<32x16xf32>) outs(%e : tensor<16x32xf32>) permutation = [1, 0]
  %eb = tensor.empty() : tensor<16x32xbf16>
  %wb = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%wt : tensor<16x32xf32>) outs(%eb : tensor<16x32xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<16x32xbf16>
  %init = tensor.empty() : tensor<8x32xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%init : tensor<8x32xf32>) -> tensor<8x32xf32>
  %y = linalg.matmul ins(%x, %wb : tensor<8x16xbf16>, tensor<16x32xbf16>) outs(%acc : tensor<8x32xf32>) -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}

// A rounding of a transpose another op also reads, or a widening, stays.
// CHECK-LABEL: func.func @not_rounded_first
// CHECK:         linalg.transpose
// CHECK:         arith.truncf
// CHECK:         linalg.transpose
// CHECK:         arith.extf
func.func @not_rounded_first(%w: tensor<32x16xf32>, %v: tensor<32x16xbf16>) -> (tensor<16x32xbf16>, tensor<16x32xf32>, tensor<16x32xf32>) {
  %e = tensor.empty() : tensor<16x32xf32>
  %wt = linalg.transpose ins(%w : tensor<32x16xf32>) outs(%e : tensor<16x32xf32>) permutation = [1, 0]
  %eb = tensor.empty() : tensor<16x32xbf16>
  %wb = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%wt : tensor<16x32xf32>) outs(%eb : tensor<16x32xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<16x32xbf16>
  %vt = linalg.transpose ins(%v : tensor<32x16xbf16>) outs(%eb : tensor<16x32xbf16>) permutation = [1, 0]
  %vw = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%vt : tensor<16x32xbf16>) outs(%e : tensor<16x32xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %t = arith.extf %in : bf16 to f32
    linalg.yield %t : f32
  } -> tensor<16x32xf32>
  return %wb, %wt, %vw : tensor<16x32xbf16>, tensor<16x32xf32>, tensor<16x32xf32>
}
