// RUN: zest-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(zest-widen-accumulators))' | FileCheck %s
// The rounding fuses with the widening after it: one op per sum's result.
// RUN: zest-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(zest-widen-accumulators,zest-fuse-elementwise))' | FileCheck %s --check-prefix=FUSED

#rows = affine_map<(i, j) -> (i, j)>
#col = affine_map<(i, j) -> (0, j)>
#vec = affine_map<(i) -> (i)>

// A bias's gradient under autocast (torch-mlir's `g.sum(0)` on bf16, then
// widened for the f32 master gradient): the sum accumulates in f32 from
// f32 zeros, the reshape takes the f32 sum, and the rounding follows it.
// CHECK-LABEL: func.func @column_sum(
// CHECK-SAME: %[[G:[^:]*]]: tensor<128x768xbf16>
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG: %[[EMPTY:.*]] = tensor.empty() : tensor<1x768xf32>
// CHECK: %[[INIT:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[EMPTY]] : tensor<1x768xf32>)
// CHECK: %[[SUM:.*]] = linalg.generic
// CHECK-SAME: iterator_types = ["reduction", "parallel"]
// CHECK-SAME: ins(%[[G]] : tensor<128x768xbf16>) outs(%[[INIT]] : tensor<1x768xf32>)
// CHECK: ^bb0(%[[IN:.*]]: bf16, %[[OUT:.*]]: f32):
// CHECK: %[[X:.*]] = arith.extf %[[IN]] : bf16 to f32
// CHECK: %[[ADD:.*]] = arith.addf %[[OUT]], %[[X]] : f32
// CHECK: linalg.yield %[[ADD]] : f32
// CHECK: %[[FLAT:.*]] = tensor.collapse_shape %[[SUM]] {{\[\[}}0, 1]] : tensor<1x768xf32> into tensor<768xf32>
// CHECK: %[[ROUND:.*]] = linalg.generic
// CHECK-SAME: ins(%[[FLAT]] : tensor<768xf32>)
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: linalg.generic
// CHECK-SAME: ins(%[[ROUND]] : tensor<768xbf16>)
// CHECK: arith.extf

// FUSED-LABEL: func.func @column_sum(
// FUSED: linalg.generic
// FUSED-SAME: iterator_types = ["reduction", "parallel"]
// FUSED: tensor.collapse_shape
// FUSED: %[[R:.*]] = linalg.generic
// FUSED: %[[T:.*]] = arith.truncf
// FUSED: arith.extf %[[T]] : bf16 to f32
// FUSED-NOT: linalg.generic
// FUSED: return %[[R]]
func.func @column_sum(%g: tensor<128x768xbf16>) -> tensor<768xf32> {
  %zero = arith.constant 0.0 : bf16
  %e = tensor.empty() : tensor<1x768xbf16>
  %init = linalg.fill ins(%zero : bf16) outs(%e : tensor<1x768xbf16>) -> tensor<1x768xbf16>
  %sum = linalg.generic {indexing_maps = [#rows, #col], iterator_types = ["reduction", "parallel"]}
      ins(%g : tensor<128x768xbf16>) outs(%init : tensor<1x768xbf16>) {
  ^bb0(%in: bf16, %out: bf16):
    %a = arith.addf %in, %out : bf16
    linalg.yield %a : bf16
  } -> tensor<1x768xbf16>
  %flat = tensor.collapse_shape %sum [[0, 1]] : tensor<1x768xbf16> into tensor<768xbf16>
  %e32 = tensor.empty() : tensor<768xf32>
  %wide = linalg.generic {indexing_maps = [#vec, #vec], iterator_types = ["parallel"]}
      ins(%flat : tensor<768xbf16>) outs(%e32 : tensor<768xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %x = arith.extf %in : bf16 to f32
    linalg.yield %x : f32
  } -> tensor<768xf32>
  return %wide : tensor<768xf32>
}

// -----

#rows = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>

// An f16 row sum of products, into a tensor that is no fill: the terms are
// computed (and rounded) in f16 as before, the running sum starts from the
// widened output and stays f32; the fast-math flags stay on the addition.
// CHECK-LABEL: func.func @row_sum_into_values(
// CHECK-SAME: %[[A:[^:]*]]: tensor<4x64xf16>, %[[B:[^:]*]]: tensor<4x64xf16>, %[[ACC:[^:]*]]: tensor<4xf16>
// CHECK: %[[INIT:.*]] = linalg.generic
// CHECK-SAME: ins(%[[ACC]] : tensor<4xf16>)
// CHECK: arith.extf
// CHECK: %[[SUM:.*]] = linalg.generic
// CHECK-SAME: outs(%[[INIT]] : tensor<4xf32>)
// CHECK: ^bb0(%[[X:.*]]: f16, %[[Y:.*]]: f16, %[[OUT:.*]]: f32):
// CHECK: %[[P:.*]] = arith.mulf %[[X]], %[[Y]] : f16
// CHECK: %[[W:.*]] = arith.extf %[[P]] : f16 to f32
// CHECK: arith.addf %[[OUT]], %[[W]] fastmath<reassoc> : f32
// CHECK: %[[R:.*]] = linalg.generic
// CHECK-SAME: ins(%[[SUM]] : tensor<4xf32>)
// CHECK: arith.truncf %{{.*}} : f32 to f16
// CHECK: return %[[R]] : tensor<4xf16>
func.func @row_sum_into_values(%a: tensor<4x64xf16>, %b: tensor<4x64xf16>, %acc: tensor<4xf16>) -> tensor<4xf16> {
  %sum = linalg.generic {indexing_maps = [#rows, #rows, #row], iterator_types = ["parallel", "reduction"]}
      ins(%a, %b : tensor<4x64xf16>, tensor<4x64xf16>) outs(%acc : tensor<4xf16>) {
  ^bb0(%x: f16, %y: f16, %out: f16):
    %p = arith.mulf %x, %y : f16
    %s = arith.addf %p, %out fastmath<reassoc> : f16
    linalg.yield %s : f16
  } -> tensor<4xf16>
  return %sum : tensor<4xf16>
}

// -----

#rows = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>

// Left as they are: an f32 sum, a bf16 maximum (exact in any type), a bf16
// reduction that reads its accumulator twice (no plain sum), and a bf16
// elementwise addition (no reduction).
// CHECK-LABEL: func.func @not_widened(
// CHECK-NOT: arith.extf
// CHECK-NOT: arith.truncf
// CHECK: return
func.func @not_widened(%a: tensor<4x64xf32>, %b: tensor<4x64xbf16>,
                       %s: tensor<4xf32>, %m: tensor<4xbf16>)
    -> (tensor<4xf32>, tensor<4xbf16>, tensor<4xbf16>, tensor<4x64xbf16>) {
  %sum = linalg.generic {indexing_maps = [#rows, #row], iterator_types = ["parallel", "reduction"]}
      ins(%a : tensor<4x64xf32>) outs(%s : tensor<4xf32>) {
  ^bb0(%x: f32, %out: f32):
    %r = arith.addf %x, %out : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  %max = linalg.generic {indexing_maps = [#rows, #row], iterator_types = ["parallel", "reduction"]}
      ins(%b : tensor<4x64xbf16>) outs(%m : tensor<4xbf16>) {
  ^bb0(%x: bf16, %out: bf16):
    %r = arith.maximumf %x, %out : bf16
    linalg.yield %r : bf16
  } -> tensor<4xbf16>
  %twice = linalg.generic {indexing_maps = [#rows, #row], iterator_types = ["parallel", "reduction"]}
      ins(%b : tensor<4x64xbf16>) outs(%m : tensor<4xbf16>) {
  ^bb0(%x: bf16, %out: bf16):
    %p = arith.mulf %x, %out : bf16
    %r = arith.addf %p, %out : bf16
    linalg.yield %r : bf16
  } -> tensor<4xbf16>
  %e = tensor.empty() : tensor<4x64xbf16>
  %add = linalg.generic {indexing_maps = [#rows, #rows, #rows], iterator_types = ["parallel", "parallel"]}
      ins(%b, %b : tensor<4x64xbf16>, tensor<4x64xbf16>) outs(%e : tensor<4x64xbf16>) {
  ^bb0(%x: bf16, %y: bf16, %out: bf16):
    %r = arith.addf %x, %y : bf16
    linalg.yield %r : bf16
  } -> tensor<4x64xbf16>
  return %sum, %max, %twice, %add : tensor<4xf32>, tensor<4xbf16>, tensor<4xbf16>, tensor<4x64xbf16>
}
