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

// A head split that moves the batch dimension ([S, H, Dh] read as
// [H, S, Dh]) folds: each head is a matrix with rows H * Dh apart. A
// transpose read by a named elementwise op (not a generic) stays.
// CHECK-DAG:   #[[$QH:.+]] = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
// CHECK-LABEL: func.func @head_split
// CHECK-SAME:    (%[[Q:[^:]+]]: tensor<8x4x16xf32>
// CHECK-NOT:     permutation = [1, 0, 2]
// CHECK:         linalg.generic {indexing_maps = [#[[$QH]], {{.+}}]
// CHECK-SAME:      ins(%[[Q]], %{{.+}} : tensor<8x4x16xf32>, tensor<4x16x8xf32>)
// CHECK:         linalg.transpose {{.+}} permutation = [1, 0]
// CHECK:         linalg.exp
func.func @head_split(%q: tensor<8x4x16xf32>, %k: tensor<4x16x8xf32>, %w: tensor<8x16xf32>) -> (tensor<4x8x8xf32>, tensor<16x8xf32>) {
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

// Attention as torch-mlir imports it: heads split from [B, S, H * Dh] by
// expand + transpose, collapsed to [B * H, S, Dh] for batch matmuls, the
// output transposed back and collapsed to rows for the projection. The
// batch loop splits into (b, h), every transpose folds into a product or
// into the elementwise scaling, and the output product writes [B, S, H, Dh]
// directly: no copy of any head.
// CHECK-DAG:   #[[$Q:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>
// CHECK-DAG:   #[[$KT:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4, d3)>
// CHECK-DAG:   #[[$S:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
// CHECK-DAG:   #[[$V:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d1, d3)>
// CHECK-DAG:   #[[$O:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d2, d1, d3)>
// CHECK-DAG:   #[[$SPLIT:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d2, d1, d3)>
// CHECK-DAG:   #[[$KSPLIT:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d3, d1, d2)>
// CHECK-LABEL: func.func @attention
// CHECK-SAME:    (%[[Q:[^:]+]]: tensor<2x8x24xf32>, %[[K:[^:]+]]: tensor<2x8x24xf32>, %[[V:[^:]+]]: tensor<2x8x24xf32>
// CHECK-NOT:     linalg.transpose
// CHECK-DAG:     %[[Q4:.+]] = tensor.expand_shape %[[Q]] {{.+}} into tensor<2x8x3x8xf32>
// CHECK-DAG:     %[[K4:.+]] = tensor.expand_shape %[[K]] {{.+}} into tensor<2x8x3x8xf32>
// CHECK-DAG:     %[[V4:.+]] = tensor.expand_shape %[[V]] {{.+}} into tensor<2x8x3x8xf32>
// CHECK-DAG:     %[[QS:.+]] = linalg.generic {indexing_maps = [#[[$SPLIT]], {{.+}}]{{.*}} ins(%[[Q4]] : tensor<2x8x3x8xf32>) outs(%{{.+}} : tensor<2x3x8x8xf32>)
// CHECK-DAG:     %[[KS:.+]] = linalg.generic {indexing_maps = [#[[$KSPLIT]], {{.+}}]{{.*}} ins(%[[K4]] : tensor<2x8x3x8xf32>) outs(%{{.+}} : tensor<2x3x8x8xf32>)
// CHECK:         %[[SC:.+]] = linalg.generic {indexing_maps = [#[[$Q]], #[[$KT]], #[[$S]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
// CHECK-SAME:      ins(%[[QS]], %[[KS]] : tensor<2x3x8x8xf32>, tensor<2x3x8x8xf32>)
// CHECK:         %[[O:.+]] = linalg.generic {indexing_maps = [#[[$Q]], #[[$V]], #[[$O]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
// CHECK-SAME:      ins(%[[SC]], %[[V4]] : tensor<2x3x8x8xf32>, tensor<2x8x3x8xf32>) outs(%{{.+}} : tensor<2x8x3x8xf32>)
// CHECK:         tensor.collapse_shape %[[O]] {{\[\[}}0, 1], [2, 3]] : tensor<2x8x3x8xf32> into tensor<16x24xf32>
func.func @attention(%q: tensor<2x8x24xf32>, %k: tensor<2x8x24xf32>, %v: tensor<2x8x24xf32>) -> tensor<16x24xf32> {
  %zero = arith.constant 0.0 : f32
  %scale = arith.constant 0.5 : f32
  %q4 = tensor.expand_shape %q [[0], [1], [2, 3]] output_shape [2, 8, 3, 8] : tensor<2x8x24xf32> into tensor<2x8x3x8xf32>
  %k4 = tensor.expand_shape %k [[0], [1], [2, 3]] output_shape [2, 8, 3, 8] : tensor<2x8x24xf32> into tensor<2x8x3x8xf32>
  %v4 = tensor.expand_shape %v [[0], [1], [2, 3]] output_shape [2, 8, 3, 8] : tensor<2x8x24xf32> into tensor<2x8x3x8xf32>
  %eh = tensor.empty() : tensor<2x3x8x8xf32>
  %qh = linalg.transpose ins(%q4 : tensor<2x8x3x8xf32>) outs(%eh : tensor<2x3x8x8xf32>) permutation = [0, 2, 1, 3]
  %kt = linalg.transpose ins(%k4 : tensor<2x8x3x8xf32>) outs(%eh : tensor<2x3x8x8xf32>) permutation = [0, 2, 3, 1]
  %vh = linalg.transpose ins(%v4 : tensor<2x8x3x8xf32>) outs(%eh : tensor<2x3x8x8xf32>) permutation = [0, 2, 1, 3]
  %qs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%qh : tensor<2x3x8x8xf32>) outs(%eh : tensor<2x3x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.mulf %in, %scale : f32
    linalg.yield %m : f32
  } -> tensor<2x3x8x8xf32>
  %ks = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%kt : tensor<2x3x8x8xf32>) outs(%eh : tensor<2x3x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.mulf %in, %scale : f32
    linalg.yield %m : f32
  } -> tensor<2x3x8x8xf32>
  %qc = tensor.collapse_shape %qs [[0, 1], [2], [3]] : tensor<2x3x8x8xf32> into tensor<6x8x8xf32>
  %kc = tensor.collapse_shape %ks [[0, 1], [2], [3]] : tensor<2x3x8x8xf32> into tensor<6x8x8xf32>
  %es = tensor.empty() : tensor<6x8x8xf32>
  %fs = linalg.fill ins(%zero : f32) outs(%es : tensor<6x8x8xf32>) -> tensor<6x8x8xf32>
  %s = linalg.batch_matmul ins(%qc, %kc : tensor<6x8x8xf32>, tensor<6x8x8xf32>) outs(%fs : tensor<6x8x8xf32>) -> tensor<6x8x8xf32>
  %vc = tensor.collapse_shape %vh [[0, 1], [2], [3]] : tensor<2x3x8x8xf32> into tensor<6x8x8xf32>
  %o = linalg.batch_matmul ins(%s, %vc : tensor<6x8x8xf32>, tensor<6x8x8xf32>) outs(%fs : tensor<6x8x8xf32>) -> tensor<6x8x8xf32>
  %o4 = tensor.expand_shape %o [[0, 1], [2], [3]] output_shape [2, 3, 8, 8] : tensor<6x8x8xf32> into tensor<2x3x8x8xf32>
  %eo = tensor.empty() : tensor<2x8x3x8xf32>
  %ot = linalg.transpose ins(%o4 : tensor<2x3x8x8xf32>) outs(%eo : tensor<2x8x3x8xf32>) permutation = [0, 2, 1, 3]
  %rows = tensor.collapse_shape %ot [[0, 1], [2, 3]] : tensor<2x8x3x8xf32> into tensor<16x24xf32>
  return %rows : tensor<16x24xf32>
}

// -----

// The backward of the scaling, an elementwise op, writes the gradient back
// in the [B, S, H, Dh] layout through its output map: the transpose goes.
// A transposed product result whose destination is not a fill, and an
// elementwise op that reads its destination, keep their transposes.
// CHECK-DAG:   #[[$ID:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
// CHECK-DAG:   #[[$OUT:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d2, d1, d3)>
// CHECK-LABEL: func.func @written_transposed
// CHECK-SAME:    (%[[G:[^:]+]]: tensor<2x3x8x8xf32>
// CHECK:         linalg.generic {indexing_maps = [#[[$ID]], #[[$OUT]]]{{.*}} ins(%[[G]] : tensor<2x3x8x8xf32>) outs(%{{.+}} : tensor<2x8x3x8xf32>)
// CHECK:         linalg.batch_matmul
// CHECK:         linalg.transpose
// CHECK:         linalg.generic
// CHECK:         linalg.transpose
func.func @written_transposed(%g: tensor<2x3x8x8xf32>, %a: tensor<6x8x8xf32>, %acc: tensor<6x8x8xf32>) -> (tensor<2x8x3x8xf32>, tensor<6x8x8xf32>, tensor<2x8x3x8xf32>) {
  %scale = arith.constant 0.5 : f32
  %eh = tensor.empty() : tensor<2x3x8x8xf32>
  %gs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g : tensor<2x3x8x8xf32>) outs(%eh : tensor<2x3x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.mulf %in, %scale : f32
    linalg.yield %m : f32
  } -> tensor<2x3x8x8xf32>
  %eo = tensor.empty() : tensor<2x8x3x8xf32>
  %gt = linalg.transpose ins(%gs : tensor<2x3x8x8xf32>) outs(%eo : tensor<2x8x3x8xf32>) permutation = [0, 2, 1, 3]
  %p = linalg.batch_matmul ins(%a, %a : tensor<6x8x8xf32>, tensor<6x8x8xf32>) outs(%acc : tensor<6x8x8xf32>) -> tensor<6x8x8xf32>
  %e3 = tensor.empty() : tensor<6x8x8xf32>
  %pt = linalg.transpose ins(%p : tensor<6x8x8xf32>) outs(%e3 : tensor<6x8x8xf32>) permutation = [0, 2, 1]
  %sum = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g : tensor<2x3x8x8xf32>) outs(%g : tensor<2x3x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.addf %in, %out : f32
    linalg.yield %m : f32
  } -> tensor<2x3x8x8xf32>
  %st = linalg.transpose ins(%sum : tensor<2x3x8x8xf32>) outs(%eo : tensor<2x8x3x8xf32>) permutation = [0, 2, 1, 3]
  return %gt, %pt, %st : tensor<2x8x3x8xf32>, tensor<6x8x8xf32>, tensor<2x8x3x8xf32>
}

// -----

// Autocast: each weight is transposed, then rounded to bf16, then read by
// a widening product. The rounding moves before the transpose (on the
// weight itself) and the transpose, now read by the product, folds into
// it: no transposed copy of the weight in f32 or in bf16.
// CHECK-DAG:   #[[$ID:.+]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG:   #[[$B:.+]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-DAG:   #[[$T:.+]] = affine_map<(d0, d1) -> (d1, d0)>
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

// A rounding of a transpose another op also reads, or a widening, is not
// moved before it: it reads the transpose's input through its map (the
// transpose stays for its other user).
// CHECK-LABEL: func.func @not_rounded_first
// CHECK-SAME:    (%[[W:[^:]+]]: tensor<32x16xf32>, %[[V:[^:]+]]: tensor<32x16xbf16>)
// CHECK:         %[[WT:.+]] = linalg.transpose ins(%[[W]]
// CHECK:         %[[WB:.+]] = linalg.generic {indexing_maps = [#[[$T]], {{.+}}]{{.*}} ins(%[[W]] : tensor<32x16xf32>)
// CHECK:           arith.truncf
// CHECK:         %[[VW:.+]] = linalg.generic {indexing_maps = [#[[$T]], {{.+}}]{{.*}} ins(%[[V]] : tensor<32x16xbf16>)
// CHECK:           arith.extf
// CHECK:         return %[[WB]], %[[WT]], %[[VW]]
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

// -----

// Grouped-query attention: 2 key heads, each shared by 2 query heads. The
// keys are repeated per query head (a broadcast over r) and collapsed with
// the groups to [B, H, S, Dh]; the product reads the 2 key heads in place
// (no r in K's map), and its output, collapsed back and transposed to
// [B, S, H, Dh], is written in that layout directly.
// CHECK-DAG:   #[[$Q:.+]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3, d5)>
// CHECK-DAG:   #[[$K:.+]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d5, d4)>
// CHECK-DAG:   #[[$O:.+]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d3, d1, d2, d4)>
// CHECK-LABEL: func.func @grouped
// CHECK-SAME:    (%[[P:[^:]+]]: tensor<1x4x8x8xf32>, %[[K:[^:]+]]: tensor<1x2x8x8xf32>)
// CHECK-NOT:     linalg.transpose
// CHECK:         %[[O:.+]] = linalg.generic {indexing_maps = [#[[$Q]], #[[$K]], #[[$O]]]
// CHECK-SAME:      ins(%{{.+}}, %[[K]] : tensor<1x2x2x8x8xf32>, tensor<1x2x8x8xf32>) outs(%{{.+}} : tensor<1x8x2x2x8xf32>)
// CHECK-NOT:     linalg.transpose
// CHECK:         tensor.collapse_shape %[[O]] {{\[\[}}0], [1], [2, 3], [4]] : tensor<1x8x2x2x8xf32> into tensor<1x8x4x8xf32>
func.func @grouped(%p: tensor<1x4x8x8xf32>, %k: tensor<1x2x8x8xf32>) -> tensor<1x8x4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %eb = tensor.empty() : tensor<1x2x2x8x8xf32>
  %kr = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]}
      ins(%k : tensor<1x2x8x8xf32>) outs(%eb : tensor<1x2x2x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<1x2x2x8x8xf32>
  %kc = tensor.collapse_shape %kr [[0], [1, 2], [3], [4]] : tensor<1x2x2x8x8xf32> into tensor<1x4x8x8xf32>
  %pc = tensor.collapse_shape %p [[0, 1], [2], [3]] : tensor<1x4x8x8xf32> into tensor<4x8x8xf32>
  %kcc = tensor.collapse_shape %kc [[0, 1], [2], [3]] : tensor<1x4x8x8xf32> into tensor<4x8x8xf32>
  %es = tensor.empty() : tensor<4x8x8xf32>
  %fs = linalg.fill ins(%zero : f32) outs(%es : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %o = linalg.batch_matmul ins(%pc, %kcc : tensor<4x8x8xf32>, tensor<4x8x8xf32>) outs(%fs : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %o4 = tensor.expand_shape %o [[0, 1], [2], [3]] output_shape [1, 4, 8, 8] : tensor<4x8x8xf32> into tensor<1x4x8x8xf32>
  %eo = tensor.empty() : tensor<1x8x4x8xf32>
  %ot = linalg.transpose ins(%o4 : tensor<1x4x8x8xf32>) outs(%eo : tensor<1x8x4x8xf32>) permutation = [0, 2, 1, 3]
  return %ot : tensor<1x8x4x8xf32>
}

// -----

// Rotary embeddings and fused projections: slices of a head split become
// head splits of slices, which fold into the elementwise ops reading them;
// the one a concatenation reads stays (the concatenation copies it anyway).
// A concatenation's transpose becomes its operands' transposes, each
// written by the op that made the operand. A reduction into a fill writes
// its transposed result into a transposed fill.
// CHECK-DAG:   #[[$SPLIT:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d2, d1, d3)>
// CHECK-LABEL: func.func @moved
// CHECK-SAME:    (%[[X:[^:]+]]: tensor<1x8x2x16xf32>
// CHECK-DAG:     %[[LOW:.+]] = tensor.extract_slice %[[X]][0, 0, 0, 0] [1, 8, 2, 8] [1, 1, 1, 1]
// CHECK-DAG:     %[[HIGH:.+]] = tensor.extract_slice %[[X]][0, 0, 0, 8] [1, 8, 2, 8] [1, 1, 1, 1]
// CHECK-DAG:     %[[HT:.+]] = linalg.transpose ins(%[[HIGH]] : tensor<1x8x2x8xf32>) {{.+}} permutation = [0, 2, 1, 3]
// CHECK-DAG:     %[[NEG:.+]] = linalg.generic {indexing_maps = [#[[$SPLIT]], {{.+}}]{{.*}} ins(%[[LOW]] : tensor<1x8x2x8xf32>)
// CHECK:         tensor.concat dim(3) %[[NEG]], %[[HT]]
// CHECK:         %[[A:.+]] = linalg.generic {{.+}} outs(%{{.+}} : tensor<1x8x2x8xf32>)
// CHECK:         %[[B:.+]] = linalg.generic {{.+}} outs(%{{.+}} : tensor<1x8x2x8xf32>)
// CHECK:         tensor.concat dim(3) %[[A]], %[[B]] : (tensor<1x8x2x8xf32>, tensor<1x8x2x8xf32>) -> tensor<1x8x2x16xf32>
// CHECK:         %[[FILL:.+]] = linalg.fill ins(%{{.+}} : f32) outs(%{{.+}} : tensor<1x8x2x8xf32>)
// CHECK:         linalg.generic {{.+}} iterator_types = ["parallel", "parallel", "reduction", "parallel", "parallel"]{{.*}} outs(%[[FILL]] : tensor<1x8x2x8xf32>)
// CHECK-NOT:     linalg.transpose
func.func @moved(%x: tensor<1x8x2x16xf32>, %g: tensor<1x2x8x8xf32>, %r: tensor<1x2x3x8x8xf32>) -> (tensor<1x2x8x16xf32>, tensor<1x8x2x16xf32>, tensor<1x8x2x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %scale = arith.constant 0.5 : f32
  %eh = tensor.empty() : tensor<1x2x8x16xf32>
  %xh = linalg.transpose ins(%x : tensor<1x8x2x16xf32>) outs(%eh : tensor<1x2x8x16xf32>) permutation = [0, 2, 1, 3]
  %low = tensor.extract_slice %xh[0, 0, 0, 0] [1, 2, 8, 8] [1, 1, 1, 1] : tensor<1x2x8x16xf32> to tensor<1x2x8x8xf32>
  %high = tensor.extract_slice %xh[0, 0, 0, 8] [1, 2, 8, 8] [1, 1, 1, 1] : tensor<1x2x8x16xf32> to tensor<1x2x8x8xf32>
  %e8 = tensor.empty() : tensor<1x2x8x8xf32>
  %neg = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%low : tensor<1x2x8x8xf32>) outs(%e8 : tensor<1x2x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.negf %in : f32
    linalg.yield %n : f32
  } -> tensor<1x2x8x8xf32>
  %rot = tensor.concat dim(3) %neg, %high : (tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>) -> tensor<1x2x8x16xf32>
  %a = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g : tensor<1x2x8x8xf32>) outs(%e8 : tensor<1x2x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.mulf %in, %scale : f32
    linalg.yield %m : f32
  } -> tensor<1x2x8x8xf32>
  %b = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g : tensor<1x2x8x8xf32>) outs(%e8 : tensor<1x2x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.addf %in, %scale : f32
    linalg.yield %m : f32
  } -> tensor<1x2x8x8xf32>
  %ab = tensor.concat dim(3) %a, %b : (tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>) -> tensor<1x2x8x16xf32>
  %eo = tensor.empty() : tensor<1x8x2x16xf32>
  %abt = linalg.transpose ins(%ab : tensor<1x2x8x16xf32>) outs(%eo : tensor<1x8x2x16xf32>) permutation = [0, 2, 1, 3]
  %fill = linalg.fill ins(%zero : f32) outs(%e8 : tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3, d4)>], iterator_types = ["parallel", "parallel", "reduction", "parallel", "parallel"]}
      ins(%r : tensor<1x2x3x8x8xf32>) outs(%fill : tensor<1x2x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %in, %out : f32
    linalg.yield %s : f32
  } -> tensor<1x2x8x8xf32>
  %e28 = tensor.empty() : tensor<1x8x2x8xf32>
  %sumt = linalg.transpose ins(%sum : tensor<1x2x8x8xf32>) outs(%e28 : tensor<1x8x2x8xf32>) permutation = [0, 2, 1, 3]
  return %rot, %abt, %sumt : tensor<1x2x8x16xf32>, tensor<1x8x2x16xf32>, tensor<1x8x2x8xf32>
}

// -----

// GPT-2's attention as zest-import writes it: q, k and v cut from one
// projection's rows, split into heads and transposed to [B, H, S, D]; the
// output transposed back to rows; in the backward the output's gradient
// transposed, the gradients transposed back and joined. Both ops become
// sequence-major: they read the [B, S, H, D] arrays where the projection
// wrote them and write rows; no transpose is left.
// CHECK-LABEL: func.func @attention_sequence_major(
// CHECK-SAME:      %[[QKV:[^:]*]]: tensor<2x8x48xf32>, %[[DY:[^:]*]]: tensor<2x8x16xf32>
// CHECK-NOT:     linalg.transpose
// CHECK-DAG:     %[[Q:.*]] = tensor.expand_shape {{.*}} into tensor<2x8x4x4xf32>
// CHECK:         %[[O:.*]]:2 = zest.attention causal sequence_major scale(2.500000e-01) ins(%[[Q]], %{{.*}}, %{{.*}} : tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>) outs(%{{.*}}, %{{.*}} : tensor<2x8x4x4xf32>, tensor<2x4x8xf32>)
// CHECK:         %[[Y:.*]] = tensor.collapse_shape %[[O]]#0 {{.*}} into tensor<2x8x16xf32>
// CHECK:         %[[DY4:.*]] = tensor.expand_shape %[[DY]]
// CHECK:         %[[G:.*]]:3 = zest.attention_backward causal sequence_major scale(2.500000e-01) grad_output(%[[DY4]] : tensor<2x8x4x4xf32>) ins(%[[Q]], %{{.*}}, %{{.*}}, %[[O]]#0, %[[O]]#1 :
// CHECK-NOT:     linalg.transpose
// CHECK:         tensor.concat
// CHECK-NOT:     linalg.transpose
// CHECK:         return %[[Y]]
func.func @attention_sequence_major(%qkv: tensor<2x8x48xf32>, %dy: tensor<2x8x16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x48xf32>) {
  %q = tensor.extract_slice %qkv[0, 0, 0] [2, 8, 16] [1, 1, 1] : tensor<2x8x48xf32> to tensor<2x8x16xf32>
  %k = tensor.extract_slice %qkv[0, 0, 16] [2, 8, 16] [1, 1, 1] : tensor<2x8x48xf32> to tensor<2x8x16xf32>
  %v = tensor.extract_slice %qkv[0, 0, 32] [2, 8, 16] [1, 1, 1] : tensor<2x8x48xf32> to tensor<2x8x16xf32>
  %q4 = tensor.expand_shape %q [[0], [1], [2, 3]] output_shape [2, 8, 4, 4] : tensor<2x8x16xf32> into tensor<2x8x4x4xf32>
  %k4 = tensor.expand_shape %k [[0], [1], [2, 3]] output_shape [2, 8, 4, 4] : tensor<2x8x16xf32> into tensor<2x8x4x4xf32>
  %v4 = tensor.expand_shape %v [[0], [1], [2, 3]] output_shape [2, 8, 4, 4] : tensor<2x8x16xf32> into tensor<2x8x4x4xf32>
  %e = tensor.empty() : tensor<2x4x8x4xf32>
  %qt = linalg.transpose ins(%q4 : tensor<2x8x4x4xf32>) outs(%e : tensor<2x4x8x4xf32>) permutation = [0, 2, 1, 3]
  %kt = linalg.transpose ins(%k4 : tensor<2x8x4x4xf32>) outs(%e : tensor<2x4x8x4xf32>) permutation = [0, 2, 1, 3]
  %vt = linalg.transpose ins(%v4 : tensor<2x8x4x4xf32>) outs(%e : tensor<2x4x8x4xf32>) permutation = [0, 2, 1, 3]
  %el = tensor.empty() : tensor<2x4x8xf32>
  %o, %lse = zest.attention causal scale(0.25) ins(%qt, %kt, %vt : tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>) outs(%e, %el : tensor<2x4x8x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8x4xf32>, tensor<2x4x8xf32>
  %eb = tensor.empty() : tensor<2x8x4x4xf32>
  %ot = linalg.transpose ins(%o : tensor<2x4x8x4xf32>) outs(%eb : tensor<2x8x4x4xf32>) permutation = [0, 2, 1, 3]
  %y = tensor.collapse_shape %ot [[0], [1], [2, 3]] : tensor<2x8x4x4xf32> into tensor<2x8x16xf32>
  %dy4 = tensor.expand_shape %dy [[0], [1], [2, 3]] output_shape [2, 8, 4, 4] : tensor<2x8x16xf32> into tensor<2x8x4x4xf32>
  %dyt = linalg.transpose ins(%dy4 : tensor<2x8x4x4xf32>) outs(%e : tensor<2x4x8x4xf32>) permutation = [0, 2, 1, 3]
  %dq, %dk, %dv = zest.attention_backward causal scale(0.25) grad_output(%dyt : tensor<2x4x8x4xf32>) ins(%qt, %kt, %vt, %o, %lse : tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>, tensor<2x4x8xf32>) outs(%e, %e, %e : tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>) -> tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>
  %dqt = linalg.transpose ins(%dq : tensor<2x4x8x4xf32>) outs(%eb : tensor<2x8x4x4xf32>) permutation = [0, 2, 1, 3]
  %dkt = linalg.transpose ins(%dk : tensor<2x4x8x4xf32>) outs(%eb : tensor<2x8x4x4xf32>) permutation = [0, 2, 1, 3]
  %dvt = linalg.transpose ins(%dv : tensor<2x4x8x4xf32>) outs(%eb : tensor<2x8x4x4xf32>) permutation = [0, 2, 1, 3]
  %dq3 = tensor.collapse_shape %dqt [[0], [1], [2, 3]] : tensor<2x8x4x4xf32> into tensor<2x8x16xf32>
  %dk3 = tensor.collapse_shape %dkt [[0], [1], [2, 3]] : tensor<2x8x4x4xf32> into tensor<2x8x16xf32>
  %dv3 = tensor.collapse_shape %dvt [[0], [1], [2, 3]] : tensor<2x8x4x4xf32> into tensor<2x8x16xf32>
  %g = tensor.concat dim(2) %dq3, %dk3, %dv3 : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x48xf32>
  return %y, %g : tensor<2x8x16xf32>, tensor<2x8x48xf32>
}

// -----

// An attention whose arrays are mostly [B, H, S, D] as they were computed
// (one transposed key among them) stays as it is.
// CHECK-LABEL: func.func @attention_kept(
// CHECK:         linalg.transpose
// CHECK:         zest.attention scale(
func.func @attention_kept(%q: tensor<1x2x8x4xf32>, %k: tensor<1x8x2x4xf32>, %v: tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32> {
  %e = tensor.empty() : tensor<1x2x8x4xf32>
  %kt = linalg.transpose ins(%k : tensor<1x8x2x4xf32>) outs(%e : tensor<1x2x8x4xf32>) permutation = [0, 2, 1, 3]
  %el = tensor.empty() : tensor<1x2x8xf32>
  %o, %lse = zest.attention scale(0.5) ins(%q, %kt, %v : tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) outs(%e, %el : tensor<1x2x8x4xf32>, tensor<1x2x8xf32>) -> tensor<1x2x8x4xf32>, tensor<1x2x8xf32>
  return %o : tensor<1x2x8x4xf32>
}

// -----

// A Llama's attention: q and k come from its rotary embedding and v from an
// elementwise op, each read by the forward and the backward only; the
// output is transposed back to rows, the gradients are read by elementwise
// ops. Elementwise ops write or read either layout at the same cost, so
// they count for neither side; the transposes of the output and of its
// gradient decide. Both ops become sequence-major: each elementwise op
// writes (or reads) [B, S, H, D] through its map, q, k and v once for both
// readers, and no transpose is left.
#rows = affine_map<(b, h, s, d) -> (b, s, h, d)>
#id4 = affine_map<(b, h, s, d) -> (b, h, s, d)>
#table = affine_map<(b, h, s, d) -> (s, d)>
// CHECK-DAG:     #[[$ROWS:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d2, d1, d3)>
// CHECK-LABEL: func.func @attention_elementwise_inputs(
// CHECK-NOT:     linalg.transpose
// CHECK:         %[[Q:.*]] = linalg.generic {indexing_maps = [#[[$ROWS]], #{{.*}}, #[[$ROWS]]]{{.*}} outs(%{{.*}} : tensor<2x8x4x4xf32>)
// CHECK:         %[[K:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<2x8x4x4xf32>)
// CHECK:         %[[V:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<2x8x4x4xf32>)
// CHECK:         %[[O:.*]]:2 = zest.attention causal sequence_major scale(5.000000e-01) ins(%[[Q]], %[[K]], %[[V]] :
// CHECK:         %[[G:.*]]:3 = zest.attention_backward causal sequence_major scale(5.000000e-01) grad_output(%{{.*}} : tensor<2x8x4x4xf32>) ins(%[[Q]], %[[K]], %[[V]], %[[O]]#0, %[[O]]#1 :
// CHECK:         linalg.generic {indexing_maps = [#[[$ROWS]], #{{.*}}]{{.*}} ins(%[[G]]#0 : tensor<2x8x4x4xf32>) outs(%{{.*}} : tensor<2x4x8x4xf32>)
// CHECK-NOT:     linalg.transpose
func.func @attention_elementwise_inputs(%qkv: tensor<2x8x48xf32>, %dy: tensor<2x8x16xf32>, %cos: tensor<8x4xf32>) -> (tensor<2x8x16xf32>, tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>) {
  %q = tensor.extract_slice %qkv[0, 0, 0] [2, 8, 16] [1, 1, 1] : tensor<2x8x48xf32> to tensor<2x8x16xf32>
  %k = tensor.extract_slice %qkv[0, 0, 16] [2, 8, 16] [1, 1, 1] : tensor<2x8x48xf32> to tensor<2x8x16xf32>
  %v = tensor.extract_slice %qkv[0, 0, 32] [2, 8, 16] [1, 1, 1] : tensor<2x8x48xf32> to tensor<2x8x16xf32>
  %q4 = tensor.expand_shape %q [[0], [1], [2, 3]] output_shape [2, 8, 4, 4] : tensor<2x8x16xf32> into tensor<2x8x4x4xf32>
  %k4 = tensor.expand_shape %k [[0], [1], [2, 3]] output_shape [2, 8, 4, 4] : tensor<2x8x16xf32> into tensor<2x8x4x4xf32>
  %v4 = tensor.expand_shape %v [[0], [1], [2, 3]] output_shape [2, 8, 4, 4] : tensor<2x8x16xf32> into tensor<2x8x4x4xf32>
  %e = tensor.empty() : tensor<2x4x8x4xf32>
  %qr = linalg.generic {indexing_maps = [#rows, #table, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%q4, %cos : tensor<2x8x4x4xf32>, tensor<8x4xf32>) outs(%e : tensor<2x4x8x4xf32>) {
  ^bb0(%in: f32, %c: f32, %out: f32):
    %m = arith.mulf %in, %c : f32
    linalg.yield %m : f32
  } -> tensor<2x4x8x4xf32>
  %kr = linalg.generic {indexing_maps = [#rows, #table, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%k4, %cos : tensor<2x8x4x4xf32>, tensor<8x4xf32>) outs(%e : tensor<2x4x8x4xf32>) {
  ^bb0(%in: f32, %c: f32, %out: f32):
    %m = arith.mulf %in, %c : f32
    linalg.yield %m : f32
  } -> tensor<2x4x8x4xf32>
  %vr = linalg.generic {indexing_maps = [#rows, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%v4 : tensor<2x8x4x4xf32>) outs(%e : tensor<2x4x8x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.negf %in : f32
    linalg.yield %n : f32
  } -> tensor<2x4x8x4xf32>
  %el = tensor.empty() : tensor<2x4x8xf32>
  %o, %lse = zest.attention causal scale(0.5) ins(%qr, %kr, %vr : tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>) outs(%e, %el : tensor<2x4x8x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8x4xf32>, tensor<2x4x8xf32>
  %eb = tensor.empty() : tensor<2x8x4x4xf32>
  %ot = linalg.transpose ins(%o : tensor<2x4x8x4xf32>) outs(%eb : tensor<2x8x4x4xf32>) permutation = [0, 2, 1, 3]
  %y = tensor.collapse_shape %ot [[0], [1], [2, 3]] : tensor<2x8x4x4xf32> into tensor<2x8x16xf32>
  %dy4 = tensor.expand_shape %dy [[0], [1], [2, 3]] output_shape [2, 8, 4, 4] : tensor<2x8x16xf32> into tensor<2x8x4x4xf32>
  %dyt = linalg.transpose ins(%dy4 : tensor<2x8x4x4xf32>) outs(%e : tensor<2x4x8x4xf32>) permutation = [0, 2, 1, 3]
  %dq, %dk, %dv = zest.attention_backward causal scale(0.5) grad_output(%dyt : tensor<2x4x8x4xf32>) ins(%qr, %kr, %vr, %o, %lse : tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>, tensor<2x4x8xf32>) outs(%e, %e, %e : tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>) -> tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>
  %dq2 = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%dq : tensor<2x4x8x4xf32>) outs(%e : tensor<2x4x8x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.negf %in : f32
    linalg.yield %n : f32
  } -> tensor<2x4x8x4xf32>
  %dk2 = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%dk : tensor<2x4x8x4xf32>) outs(%e : tensor<2x4x8x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.negf %in : f32
    linalg.yield %n : f32
  } -> tensor<2x4x8x4xf32>
  %dv2 = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%dv : tensor<2x4x8x4xf32>) outs(%e : tensor<2x4x8x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.negf %in : f32
    linalg.yield %n : f32
  } -> tensor<2x4x8x4xf32>
  return %y, %dq2, %dk2, %dv2 : tensor<2x8x16xf32>, tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>
}

// -----

// An elementwise q read by something other than attention (here returned)
// would need a transpose of its own: it counts against the switch, which
// the output's transpose alone does not outweigh (k and v, elementwise and
// read by attention only, count for neither side); the op stays.
#id4 = affine_map<(b, h, s, d) -> (b, h, s, d)>
// CHECK-LABEL: func.func @attention_input_read_elsewhere(
// CHECK:         zest.attention scale(
// CHECK:         linalg.transpose
func.func @attention_input_read_elsewhere(%q: tensor<1x2x8x4xf32>, %k: tensor<1x2x8x4xf32>, %v: tensor<1x2x8x4xf32>) -> (tensor<1x8x2x4xf32>, tensor<1x2x8x4xf32>) {
  %e = tensor.empty() : tensor<1x2x8x4xf32>
  %qn = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%q : tensor<1x2x8x4xf32>) outs(%e : tensor<1x2x8x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.negf %in : f32
    linalg.yield %n : f32
  } -> tensor<1x2x8x4xf32>
  %kn = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%k : tensor<1x2x8x4xf32>) outs(%e : tensor<1x2x8x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.negf %in : f32
    linalg.yield %n : f32
  } -> tensor<1x2x8x4xf32>
  %vn = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%v : tensor<1x2x8x4xf32>) outs(%e : tensor<1x2x8x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.negf %in : f32
    linalg.yield %n : f32
  } -> tensor<1x2x8x4xf32>
  %el = tensor.empty() : tensor<1x2x8xf32>
  %o, %lse = zest.attention scale(0.5) ins(%qn, %kn, %vn : tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) outs(%e, %el : tensor<1x2x8x4xf32>, tensor<1x2x8xf32>) -> tensor<1x2x8x4xf32>, tensor<1x2x8xf32>
  %eb = tensor.empty() : tensor<1x8x2x4xf32>
  %ot = linalg.transpose ins(%o : tensor<1x2x8x4xf32>) outs(%eb : tensor<1x8x2x4xf32>) permutation = [0, 2, 1, 3]
  return %ot, %qn : tensor<1x8x2x4xf32>, tensor<1x2x8x4xf32>
}
