// RUN: zest-opt %s -split-input-file -zest-fuse-linear | FileCheck %s

#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#km = affine_map<(m, n, k) -> (k, m)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (j)>

// torch.nn.Linear + ReLU as torch-mlir writes it: a product into zeros, a
// bias add, ReLU as compare and select. The pre-activation is not kept:
// nothing else reads it.
// CHECK-LABEL: func.func @linear_relu_select(
// CHECK-SAME: %[[X:.*]]: tensor<8x16xf32>, %[[W:.*]]: tensor<32x16xf32>, %[[B:.*]]: tensor<32xf32>
// CHECK: %[[E:.*]] = tensor.empty() : tensor<8x32xf32>
// CHECK: %[[Y:.*]] = zest.linear relu transpose_weight ins(%[[X]], %[[W]], %[[B]] : {{.*}}) outs(%[[E]] : tensor<8x32xf32>) -> tensor<8x32xf32>
// CHECK-NOT: linalg.
// CHECK: return %[[Y]]
func.func @linear_relu_select(%x: tensor<8x16xf32>, %w: tensor<32x16xf32>, %b: tensor<32xf32>) -> tensor<8x32xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x32xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<8x32xf32>) -> tensor<8x32xf32>
  %mm = linalg.matmul indexing_maps = [#mk, #nk, #mn] ins(%x, %w : tensor<8x16xf32>, tensor<32x16xf32>) outs(%z : tensor<8x32xf32>) -> tensor<8x32xf32>
  %e1 = tensor.empty() : tensor<8x32xf32>
  %pre = linalg.generic {indexing_maps = [#row, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%b, %mm : tensor<32xf32>, tensor<8x32xf32>) outs(%e1 : tensor<8x32xf32>) {
  ^bb0(%bv: f32, %v: f32, %o: f32):
    %s = arith.addf %v, %bv : f32
    linalg.yield %s : f32
  } -> tensor<8x32xf32>
  %e2 = tensor.empty() : tensor<8x32xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%pre : tensor<8x32xf32>) outs(%e2 : tensor<8x32xf32>) {
  ^bb0(%v: f32, %o: f32):
    %c = arith.cmpf ugt, %v, %zero : f32
    %r = arith.select %c, %v, %zero : f32
    linalg.yield %r : f32
  } -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}

// -----

#mk = affine_map<(m, n, k) -> (m, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(i, j) -> (i, j)>

// A plain [in, out] weight, the bias broadcast into the product's
// destination, GELU (tanh) spelled out; the pre-activation is also returned,
// so it is kept as a second result.
// CHECK-LABEL: func.func @plain_weight_gelu_tanh(
// CHECK: %[[F:.*]]:2 = zest.linear gelu_tanh ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<8x6xf32>, tensor<6xf32>) outs(%{{.*}}, %{{.*}} : tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>, tensor<4x6xf32>
// CHECK-NOT: linalg.matmul
// CHECK: return %[[F]]#0, %[[F]]#1
func.func @plain_weight_gelu_tanh(%x: tensor<4x8xf32>, %w: tensor<8x6xf32>, %b: tensor<6xf32>) -> (tensor<4x6xf32>, tensor<4x6xf32>) {
  %c = arith.constant 0.7978845608028654 : f32
  %a = arith.constant 0.044715 : f32
  %half = arith.constant 0.5 : f32
  %one = arith.constant 1.0 : f32
  %e = tensor.empty() : tensor<4x6xf32>
  %bb = linalg.broadcast ins(%b : tensor<6xf32>) outs(%e : tensor<4x6xf32>) dimensions = [0]
  %pre = linalg.matmul indexing_maps = [#mk, #kn, #mn] ins(%x, %w : tensor<4x8xf32>, tensor<8x6xf32>) outs(%bb : tensor<4x6xf32>) -> tensor<4x6xf32>
  %e2 = tensor.empty() : tensor<4x6xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%pre : tensor<4x6xf32>) outs(%e2 : tensor<4x6xf32>) {
  ^bb0(%z: f32, %o: f32):
    %z2 = arith.mulf %z, %z : f32
    %z3 = arith.mulf %z2, %z : f32
    %t0 = arith.mulf %z3, %a : f32
    %t1 = arith.addf %z, %t0 : f32
    %t2 = arith.mulf %t1, %c : f32
    %t = math.tanh %t2 : f32
    %u = arith.addf %t, %one : f32
    %h = arith.mulf %z, %half : f32
    %r = arith.mulf %h, %u : f32
    linalg.yield %r : f32
  } -> tensor<4x6xf32>
  return %y, %pre : tensor<4x6xf32>, tensor<4x6xf32>
}

// -----

#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(i, j) -> (i, j)>

// GELU with erf and SiLU as x * sigmoid(x): both recognized; no bias.
// CHECK-LABEL: func.func @erf_and_silu(
// CHECK: zest.linear gelu_erf transpose_weight ins(%{{[^,]*}}, %{{[^,]*}} : tensor<4x8xf32>, tensor<6x8xf32>)
// CHECK: zest.linear silu transpose_weight ins(
func.func @erf_and_silu(%x: tensor<4x8xf32>, %w: tensor<6x8xf32>) -> (tensor<4x6xf32>, tensor<4x6xf32>) {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %half = arith.constant 0.5 : f32
  %isqrt2 = arith.constant 0.70710678118654752 : f32
  %e = tensor.empty() : tensor<4x6xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x6xf32>) -> tensor<4x6xf32>
  %p0 = linalg.matmul indexing_maps = [#mk, #nk, #mn] ins(%x, %w : tensor<4x8xf32>, tensor<6x8xf32>) outs(%z : tensor<4x6xf32>) -> tensor<4x6xf32>
  %y0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%p0 : tensor<4x6xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = arith.mulf %v, %isqrt2 : f32
    %f = math.erf %s : f32
    %g = arith.addf %f, %one : f32
    %h = arith.mulf %v, %half : f32
    %r = arith.mulf %h, %g : f32
    linalg.yield %r : f32
  } -> tensor<4x6xf32>
  %z1 = linalg.fill ins(%zero : f32) outs(%e : tensor<4x6xf32>) -> tensor<4x6xf32>
  %p1 = linalg.matmul indexing_maps = [#mk, #nk, #mn] ins(%x, %w : tensor<4x8xf32>, tensor<6x8xf32>) outs(%z1 : tensor<4x6xf32>) -> tensor<4x6xf32>
  %y1 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%p1 : tensor<4x6xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%v: f32, %o: f32):
    %n = arith.negf %v : f32
    %ex = math.exp %n : f32
    %d = arith.addf %ex, %one : f32
    %s = arith.divf %one, %d : f32
    %r = arith.mulf %v, %s : f32
    linalg.yield %r : f32
  } -> tensor<4x6xf32>
  return %y0, %y1 : tensor<4x6xf32>, tensor<4x6xf32>
}

// -----

#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(i, j) -> (i, j)>
#col = affine_map<(i, j) -> (i)>

// Near misses stay as they are: a leaky ReLU, a GELU with another constant,
// a bias broadcast along the wrong dimension, a product accumulating into
// something other than zeros, and a plain product (nothing to fuse).
// CHECK-LABEL: func.func @near_misses(
// CHECK-NOT: zest.linear
// CHECK-COUNT-5: linalg.matmul
// CHECK-NOT: zest.linear
// CHECK: return
func.func @near_misses(%x: tensor<4x8xf32>, %w: tensor<6x8xf32>, %bcol: tensor<4xf32>, %acc: tensor<4x6xf32>) -> (tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>) {
  %zero = arith.constant 0.0 : f32
  %slope = arith.constant 0.01 : f32
  %c = arith.constant 0.7978845608028654 : f32
  %a = arith.constant 0.045 : f32
  %half = arith.constant 0.5 : f32
  %one = arith.constant 1.0 : f32
  %e = tensor.empty() : tensor<4x6xf32>
  %z0 = linalg.fill ins(%zero : f32) outs(%e : tensor<4x6xf32>) -> tensor<4x6xf32>
  %p0 = linalg.matmul indexing_maps = [#mk, #nk, #mn] ins(%x, %w : tensor<4x8xf32>, tensor<6x8xf32>) outs(%z0 : tensor<4x6xf32>) -> tensor<4x6xf32>
  %leaky = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%p0 : tensor<4x6xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = arith.mulf %v, %slope : f32
    %r = arith.maximumf %v, %s : f32
    linalg.yield %r : f32
  } -> tensor<4x6xf32>
  %z1 = linalg.fill ins(%zero : f32) outs(%e : tensor<4x6xf32>) -> tensor<4x6xf32>
  %p1 = linalg.matmul indexing_maps = [#mk, #nk, #mn] ins(%x, %w : tensor<4x8xf32>, tensor<6x8xf32>) outs(%z1 : tensor<4x6xf32>) -> tensor<4x6xf32>
  %gelu = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%p1 : tensor<4x6xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%z: f32, %o: f32):
    %z2 = arith.mulf %z, %z : f32
    %z3 = arith.mulf %z2, %z : f32
    %t0 = arith.mulf %z3, %a : f32
    %t1 = arith.addf %z, %t0 : f32
    %t2 = arith.mulf %t1, %c : f32
    %t = math.tanh %t2 : f32
    %u = arith.addf %t, %one : f32
    %h = arith.mulf %z, %half : f32
    %r = arith.mulf %h, %u : f32
    linalg.yield %r : f32
  } -> tensor<4x6xf32>
  %z2 = linalg.fill ins(%zero : f32) outs(%e : tensor<4x6xf32>) -> tensor<4x6xf32>
  %p2 = linalg.matmul indexing_maps = [#mk, #nk, #mn] ins(%x, %w : tensor<4x8xf32>, tensor<6x8xf32>) outs(%z2 : tensor<4x6xf32>) -> tensor<4x6xf32>
  %colbias = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%p2, %bcol : tensor<4x6xf32>, tensor<4xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%v: f32, %bv: f32, %o: f32):
    %s = arith.addf %v, %bv : f32
    linalg.yield %s : f32
  } -> tensor<4x6xf32>
  %p3 = linalg.matmul indexing_maps = [#mk, #nk, #mn] ins(%x, %w : tensor<4x8xf32>, tensor<6x8xf32>) outs(%acc : tensor<4x6xf32>) -> tensor<4x6xf32>
  %relu3 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%p3 : tensor<4x6xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = arith.maximumf %v, %zero : f32
    linalg.yield %r : f32
  } -> tensor<4x6xf32>
  %z4 = linalg.fill ins(%zero : f32) outs(%e : tensor<4x6xf32>) -> tensor<4x6xf32>
  %p4 = linalg.matmul indexing_maps = [#mk, #nk, #mn] ins(%x, %w : tensor<4x8xf32>, tensor<6x8xf32>) outs(%z4 : tensor<4x6xf32>) -> tensor<4x6xf32>
  return %leaky, %gelu, %colbias, %relu3, %p4 : tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>
}

// -----

#mk = affine_map<(m, n, k) -> (m, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#km = affine_map<(m, n, k) -> (k, m)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(i, j) -> (i, j)>

// The backward of Linear + GELU(tanh): the activation backward, the input,
// weight and bias gradients of one g become one op; g is not materialized.
// CHECK-LABEL: func.func @backward_gelu(
// CHECK-SAME: %[[DY:[^:]*]]: tensor<4x6xf32>, %[[PRE:[^:]*]]: tensor<4x6xf32>, %[[X:[^:]*]]: tensor<4x8xf32>, %[[W:[^:]*]]: tensor<6x8xf32>
// CHECK: %[[G:.*]]:3 = zest.linear_backward gelu_tanh transpose_weight transpose_grad_weight grad_output(%[[DY]] : tensor<4x6xf32>) preactivation(%[[PRE]] : tensor<4x6xf32>) input(%[[X]] : tensor<4x8xf32>) weight(%[[W]] : tensor<6x8xf32>) outs(grad_input %{{.*}} : tensor<4x8xf32> grad_weight %{{.*}} : tensor<6x8xf32> grad_bias %{{.*}} : tensor<6xf32>)
// CHECK-NOT: linalg.
// CHECK: return %[[G]]#0, %[[G]]#1, %[[G]]#2
func.func @backward_gelu(%dy: tensor<4x6xf32>, %pre: tensor<4x6xf32>, %x: tensor<4x8xf32>, %w: tensor<6x8xf32>) -> (tensor<4x8xf32>, tensor<6x8xf32>, tensor<6xf32>) {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %half = arith.constant 0.5 : f32
  %c = arith.constant 0.7978845608028654 : f32
  %a = arith.constant 0.044715 : f32
  %a3 = arith.constant 0.134145 : f32
  %e = tensor.empty() : tensor<4x6xf32>
  %g = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dy, %pre : tensor<4x6xf32>, tensor<4x6xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%d: f32, %z: f32, %o: f32):
    %z2 = arith.mulf %z, %z : f32
    %z3 = arith.mulf %z2, %z : f32
    %t0 = arith.mulf %z3, %a : f32
    %t1 = arith.addf %z, %t0 : f32
    %t2 = arith.mulf %t1, %c : f32
    %t = math.tanh %t2 : f32
    %u0 = arith.mulf %z2, %a3 : f32
    %u1 = arith.addf %u0, %one : f32
    %u2 = arith.mulf %u1, %c : f32
    %u3 = arith.mulf %z, %half : f32
    %tt = arith.mulf %t, %t : f32
    %s = arith.subf %one, %tt : f32
    %v0 = arith.mulf %u3, %s : f32
    %v1 = arith.mulf %v0, %u2 : f32
    %l0 = arith.addf %t, %one : f32
    %l = arith.mulf %l0, %half : f32
    %deriv = arith.addf %l, %v1 : f32
    %r = arith.mulf %d, %deriv : f32
    linalg.yield %r : f32
  } -> tensor<4x6xf32>
  %ew = tensor.empty() : tensor<6x8xf32>
  %zw = linalg.fill ins(%zero : f32) outs(%ew : tensor<6x8xf32>) -> tensor<6x8xf32>
  %dw = linalg.matmul indexing_maps = [#km, #kn, #mn] ins(%g, %x : tensor<4x6xf32>, tensor<4x8xf32>) outs(%zw : tensor<6x8xf32>) -> tensor<6x8xf32>
  %eb = tensor.empty() : tensor<6xf32>
  %zb = linalg.fill ins(%zero : f32) outs(%eb : tensor<6xf32>) -> tensor<6xf32>
  %db = linalg.reduce ins(%g : tensor<4x6xf32>) outs(%zb : tensor<6xf32>) dimensions = [0]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  %ex = tensor.empty() : tensor<4x8xf32>
  %zx = linalg.fill ins(%zero : f32) outs(%ex : tensor<4x8xf32>) -> tensor<4x8xf32>
  %dx = linalg.matmul ins(%g, %w : tensor<4x6xf32>, tensor<6x8xf32>) outs(%zx : tensor<4x8xf32>) -> tensor<4x8xf32>
  return %dx, %dw, %db : tensor<4x8xf32>, tensor<6x8xf32>, tensor<6xf32>
}

// -----

#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#km = affine_map<(m, n, k) -> (k, m)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (j)>

// ReLU backward read from the layer's output, an [in, out] weight (dx uses
// W^T, dw = x^T g), and the bias gradient as a generic reduction.
// CHECK-LABEL: func.func @backward_relu_plain(
// CHECK-SAME: %[[DY:[^:]*]]: tensor<4x6xf32>, %[[Y:[^:]*]]: tensor<4x6xf32>, %[[X:[^:]*]]: tensor<4x8xf32>, %[[W:[^:]*]]: tensor<8x6xf32>
// CHECK: zest.linear_backward relu grad_output(%[[DY]] : tensor<4x6xf32>) preactivation(%[[Y]] : tensor<4x6xf32>) input(%[[X]] : tensor<4x8xf32>) weight(%[[W]] : tensor<8x6xf32>) outs(grad_input %{{.*}} : tensor<4x8xf32> grad_weight %{{.*}} : tensor<8x6xf32> grad_bias %{{.*}} : tensor<6xf32>)
// CHECK-NOT: linalg.
func.func @backward_relu_plain(%dy: tensor<4x6xf32>, %y: tensor<4x6xf32>, %x: tensor<4x8xf32>, %w: tensor<8x6xf32>) -> (tensor<4x8xf32>, tensor<8x6xf32>, tensor<6xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x6xf32>
  %g = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y, %dy : tensor<4x6xf32>, tensor<4x6xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%yv: f32, %d: f32, %o: f32):
    %c = arith.cmpf ole, %yv, %zero : f32
    %r = arith.select %c, %zero, %d : f32
    linalg.yield %r : f32
  } -> tensor<4x6xf32>
  %ew = tensor.empty() : tensor<8x6xf32>
  %zw = linalg.fill ins(%zero : f32) outs(%ew : tensor<8x6xf32>) -> tensor<8x6xf32>
  %dw = linalg.matmul indexing_maps = [#km, #kn, #mn] ins(%x, %g : tensor<4x8xf32>, tensor<4x6xf32>) outs(%zw : tensor<8x6xf32>) -> tensor<8x6xf32>
  %eb = tensor.empty() : tensor<6xf32>
  %zb = linalg.fill ins(%zero : f32) outs(%eb : tensor<6xf32>) -> tensor<6xf32>
  %db = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["reduction", "parallel"]}
      ins(%g : tensor<4x6xf32>) outs(%zb : tensor<6xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %in, %acc : f32
    linalg.yield %s : f32
  } -> tensor<6xf32>
  %ex = tensor.empty() : tensor<4x8xf32>
  %zx = linalg.fill ins(%zero : f32) outs(%ex : tensor<4x8xf32>) -> tensor<4x8xf32>
  %dx = linalg.matmul indexing_maps = [#mk, #nk, #mn] ins(%g, %w : tensor<4x6xf32>, tensor<8x6xf32>) outs(%zx : tensor<4x8xf32>) -> tensor<4x8xf32>
  return %dx, %dw, %db : tensor<4x8xf32>, tensor<8x6xf32>, tensor<6xf32>
}

// -----

#kn = affine_map<(m, n, k) -> (k, n)>
#km = affine_map<(m, n, k) -> (k, m)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(i, j) -> (i, j)>

// g has another user: the activation backward stays (g is needed anyway)
// and the weight and bias gradients are fused without it. A lone gradient
// without an activation is a plain product and stays.
// CHECK-LABEL: func.func @backward_partial(
// CHECK: %[[G:.*]] = linalg.generic
// CHECK: zest.linear_backward none transpose_grad_weight grad_output(%[[G]] : tensor<4x6xf32>) input(%{{.*}} : tensor<4x8xf32>) outs( grad_weight %{{.*}} : tensor<6x8xf32> grad_bias %{{.*}} : tensor<6xf32>)
// CHECK: linalg.matmul
// CHECK-NOT: zest.linear_backward
func.func @backward_partial(%dy: tensor<4x6xf32>, %pre: tensor<4x6xf32>, %x: tensor<4x8xf32>, %dy2: tensor<4x6xf32>) -> (tensor<4x6xf32>, tensor<6x8xf32>, tensor<6xf32>, tensor<6x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x6xf32>
  %g = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dy, %pre : tensor<4x6xf32>, tensor<4x6xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%d: f32, %z: f32, %o: f32):
    %c = arith.cmpf ogt, %z, %zero : f32
    %r = arith.select %c, %d, %zero : f32
    linalg.yield %r : f32
  } -> tensor<4x6xf32>
  %ew = tensor.empty() : tensor<6x8xf32>
  %zw = linalg.fill ins(%zero : f32) outs(%ew : tensor<6x8xf32>) -> tensor<6x8xf32>
  %dw = linalg.matmul indexing_maps = [#km, #kn, #mn] ins(%g, %x : tensor<4x6xf32>, tensor<4x8xf32>) outs(%zw : tensor<6x8xf32>) -> tensor<6x8xf32>
  %eb = tensor.empty() : tensor<6xf32>
  %zb = linalg.fill ins(%zero : f32) outs(%eb : tensor<6xf32>) -> tensor<6xf32>
  %db = linalg.reduce ins(%g : tensor<4x6xf32>) outs(%zb : tensor<6xf32>) dimensions = [0]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  %zw2 = linalg.fill ins(%zero : f32) outs(%ew : tensor<6x8xf32>) -> tensor<6x8xf32>
  %dw2 = linalg.matmul indexing_maps = [#km, #kn, #mn] ins(%dy2, %x : tensor<4x6xf32>, tensor<4x8xf32>) outs(%zw2 : tensor<6x8xf32>) -> tensor<6x8xf32>
  return %g, %dw, %db, %dw2 : tensor<4x6xf32>, tensor<6x8xf32>, tensor<6xf32>, tensor<6x8xf32>
}

// -----

#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (j)>

// bf16 layers fuse as f32 ones do (the kernels have bf16 storage); a GELU
// written with bf16 constants is recognized at bf16 precision. An
// activation whose result is stored in another type (bf16 in, f32 out) is
// left apart: the kernels store one type.
// CHECK-LABEL: func.func @bf16_layers(
// CHECK: %[[Y:.*]] = zest.linear gelu_tanh transpose_weight ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<4x8xbf16>, tensor<6x8xbf16>, tensor<6xbf16>) outs(%{{.*}} : tensor<4x6xbf16>) -> tensor<4x6xbf16>
// CHECK: %[[P:.*]] = zest.linear none transpose_weight ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<4x8xbf16>, tensor<6x8xbf16>, tensor<6xbf16>) outs(%{{.*}} : tensor<4x6xbf16>) -> tensor<4x6xbf16>
// CHECK: %[[M:.*]] = linalg.generic
// CHECK-SAME: ins(%[[P]] : tensor<4x6xbf16>)
// CHECK: math.tanh {{.*}} : bf16
// CHECK: arith.extf
// CHECK: return %[[Y]], %[[M]]
func.func @bf16_layers(%x: tensor<4x8xbf16>, %w: tensor<6x8xbf16>, %b: tensor<6xbf16>) -> (tensor<4x6xbf16>, tensor<4x6xf32>) {
  %c = arith.constant 0.7978845608028654 : bf16
  %a = arith.constant 0.044715 : bf16
  %half = arith.constant 0.5 : bf16
  %one = arith.constant 1.0 : bf16
  %e = tensor.empty() : tensor<4x6xbf16>
  %bb = linalg.broadcast ins(%b : tensor<6xbf16>) outs(%e : tensor<4x6xbf16>) dimensions = [0]
  %pre = linalg.matmul indexing_maps = [#mk, #nk, #mn] ins(%x, %w : tensor<4x8xbf16>, tensor<6x8xbf16>) outs(%bb : tensor<4x6xbf16>) -> tensor<4x6xbf16>
  %e2 = tensor.empty() : tensor<4x6xbf16>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%pre : tensor<4x6xbf16>) outs(%e2 : tensor<4x6xbf16>) {
  ^bb0(%z: bf16, %o: bf16):
    %z2 = arith.mulf %z, %z : bf16
    %z3 = arith.mulf %z2, %z : bf16
    %t0 = arith.mulf %z3, %a : bf16
    %t1 = arith.addf %z, %t0 : bf16
    %t2 = arith.mulf %t1, %c : bf16
    %t = math.tanh %t2 : bf16
    %u = arith.addf %t, %one : bf16
    %h = arith.mulf %z, %half : bf16
    %r = arith.mulf %h, %u : bf16
    linalg.yield %r : bf16
  } -> tensor<4x6xbf16>
  %e3 = tensor.empty() : tensor<4x6xbf16>
  %bb2 = linalg.broadcast ins(%b : tensor<6xbf16>) outs(%e3 : tensor<4x6xbf16>) dimensions = [0]
  %pre2 = linalg.matmul indexing_maps = [#mk, #nk, #mn] ins(%x, %w : tensor<4x8xbf16>, tensor<6x8xbf16>) outs(%bb2 : tensor<4x6xbf16>) -> tensor<4x6xbf16>
  %e4 = tensor.empty() : tensor<4x6xf32>
  %m = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%pre2 : tensor<4x6xbf16>) outs(%e4 : tensor<4x6xf32>) {
  ^bb0(%z: bf16, %o: f32):
    %t = math.tanh %z : bf16
    %r = arith.extf %t : bf16 to f32
    linalg.yield %r : f32
  } -> tensor<4x6xf32>
  return %y, %m : tensor<4x6xbf16>, tensor<4x6xf32>
}

// -----

#mk = affine_map<(m, n, k) -> (m, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(i, j) -> (i, j)>

// f16 layers fuse too, their activations recognized at f16 precision
// (2^-10): x / (1 + e^-x) is SiLU; x / (1 + e^-1.01x), within bf16's 2^-7
// of SiLU but not within f16's, is left apart (a plain product, and its
// own loop nest).
// CHECK-LABEL: func.func @f16_layers(
// CHECK: %[[Y:.*]] = zest.linear silu ins(%{{.*}}, %{{.*}} : tensor<4x8xf16>, tensor<8x6xf16>) outs(%{{.*}} : tensor<4x6xf16>) -> tensor<4x6xf16>
// CHECK: %[[P:.*]] = linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<4x8xf16>, tensor<8x6xf16>)
// CHECK: %[[M:.*]] = linalg.generic
// CHECK-SAME: ins(%[[P]] : tensor<4x6xf16>)
// CHECK: return %[[Y]], %[[M]]
func.func @f16_layers(%x: tensor<4x8xf16>, %w: tensor<8x6xf16>) -> (tensor<4x6xf16>, tensor<4x6xf16>) {
  %zero = arith.constant 0.0 : f16
  %one = arith.constant 1.0 : f16
  %k = arith.constant -1.01 : f16
  %e = tensor.empty() : tensor<4x6xf16>
  %z0 = linalg.fill ins(%zero : f16) outs(%e : tensor<4x6xf16>) -> tensor<4x6xf16>
  %pre = linalg.matmul indexing_maps = [#mk, #kn, #mn] ins(%x, %w : tensor<4x8xf16>, tensor<8x6xf16>) outs(%z0 : tensor<4x6xf16>) -> tensor<4x6xf16>
  %e2 = tensor.empty() : tensor<4x6xf16>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%pre : tensor<4x6xf16>) outs(%e2 : tensor<4x6xf16>) {
  ^bb0(%z: f16, %o: f16):
    %n = arith.negf %z : f16
    %ex = math.exp %n : f16
    %d = arith.addf %ex, %one : f16
    %r = arith.divf %z, %d : f16
    linalg.yield %r : f16
  } -> tensor<4x6xf16>
  %e3 = tensor.empty() : tensor<4x6xf16>
  %z1 = linalg.fill ins(%zero : f16) outs(%e3 : tensor<4x6xf16>) -> tensor<4x6xf16>
  %pre2 = linalg.matmul indexing_maps = [#mk, #kn, #mn] ins(%x, %w : tensor<4x8xf16>, tensor<8x6xf16>) outs(%z1 : tensor<4x6xf16>) -> tensor<4x6xf16>
  %e4 = tensor.empty() : tensor<4x6xf16>
  %m = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%pre2 : tensor<4x6xf16>) outs(%e4 : tensor<4x6xf16>) {
  ^bb0(%z: f16, %o: f16):
    %n = arith.mulf %z, %k : f16
    %ex = math.exp %n : f16
    %d = arith.addf %ex, %one : f16
    %r = arith.divf %z, %d : f16
    linalg.yield %r : f16
  } -> tensor<4x6xf16>
  return %y, %m : tensor<4x6xf16>, tensor<4x6xf16>
}

// -----

#kn = affine_map<(m, n, k) -> (k, n)>
#km = affine_map<(m, n, k) -> (k, m)>
#mn = affine_map<(m, n, k) -> (m, n)>

// Gradients packed into one flat buffer (what convert-zest-to-runtime
// builds): the bias gradient's slice is taken after the weight gradient's
// insertion, so the fused op takes the same slice of the buffer before it
// (the insertion writes elsewhere). Had it overlapped, nothing would fuse.
// CHECK-LABEL: func.func @packed_gradients(
// CHECK: %[[FLAT:.*]] = tensor.empty() : tensor<54xf32>
// CHECK: %[[DB:.*]] = tensor.extract_slice %[[FLAT]][48] [6] [1]
// CHECK: %[[G:.*]]:2 = zest.linear_backward none transpose_grad_weight {{.*}} outs( grad_weight %{{.*}} : tensor<6x8xf32> grad_bias %[[DB]] : tensor<6xf32>)
// CHECK: tensor.insert_slice %{{.*}} into %[[FLAT]][0] [48] [1]
// CHECK: tensor.insert_slice %[[G]]#1 into %{{.*}}[48] [6] [1]
func.func @packed_gradients(%g: tensor<4x6xf32>, %x: tensor<4x8xf32>) -> tensor<54xf32> {
  %zero = arith.constant 0.0 : f32
  %flat = tensor.empty() : tensor<54xf32>
  %s = tensor.extract_slice %flat[0] [48] [1] : tensor<54xf32> to tensor<48xf32>
  %dw0 = tensor.expand_shape %s [[0, 1]] output_shape [6, 8] : tensor<48xf32> into tensor<6x8xf32>
  %zw = linalg.fill ins(%zero : f32) outs(%dw0 : tensor<6x8xf32>) -> tensor<6x8xf32>
  %dw = linalg.matmul indexing_maps = [#km, #kn, #mn] ins(%g, %x : tensor<4x6xf32>, tensor<4x8xf32>) outs(%zw : tensor<6x8xf32>) -> tensor<6x8xf32>
  %c = tensor.collapse_shape %dw [[0, 1]] : tensor<6x8xf32> into tensor<48xf32>
  %f1 = tensor.insert_slice %c into %flat[0] [48] [1] : tensor<48xf32> into tensor<54xf32>
  %sb = tensor.extract_slice %f1[48] [6] [1] : tensor<54xf32> to tensor<6xf32>
  %zb = linalg.fill ins(%zero : f32) outs(%sb : tensor<6xf32>) -> tensor<6xf32>
  %db = linalg.reduce ins(%g : tensor<4x6xf32>) outs(%zb : tensor<6xf32>) dimensions = [0]
    (%in: f32, %acc: f32) {
      %a = arith.addf %in, %acc : f32
      linalg.yield %a : f32
    }
  %f2 = tensor.insert_slice %db into %f1[48] [6] [1] : tensor<6xf32> into tensor<54xf32>
  return %f2 : tensor<54xf32>
}

// -----

#kn = affine_map<(m, n, k) -> (k, n)>
#km = affine_map<(m, n, k) -> (k, m)>
#mn = affine_map<(m, n, k) -> (m, n)>

// The same, but the bias gradient's slice overlaps what was inserted in
// between: its old contents are not the buffer's, so nothing fuses.
// CHECK-LABEL: func.func @overlapping_slices(
// CHECK-NOT: zest.linear_backward
// CHECK: linalg.matmul
// CHECK: linalg.reduce
func.func @overlapping_slices(%g: tensor<4x6xf32>, %x: tensor<4x8xf32>) -> tensor<54xf32> {
  %zero = arith.constant 0.0 : f32
  %flat = tensor.empty() : tensor<54xf32>
  %s = tensor.extract_slice %flat[0] [48] [1] : tensor<54xf32> to tensor<48xf32>
  %dw0 = tensor.expand_shape %s [[0, 1]] output_shape [6, 8] : tensor<48xf32> into tensor<6x8xf32>
  %zw = linalg.fill ins(%zero : f32) outs(%dw0 : tensor<6x8xf32>) -> tensor<6x8xf32>
  %dw = linalg.matmul indexing_maps = [#km, #kn, #mn] ins(%g, %x : tensor<4x6xf32>, tensor<4x8xf32>) outs(%zw : tensor<6x8xf32>) -> tensor<6x8xf32>
  %c = tensor.collapse_shape %dw [[0, 1]] : tensor<6x8xf32> into tensor<48xf32>
  %f1 = tensor.insert_slice %c into %flat[0] [48] [1] : tensor<48xf32> into tensor<54xf32>
  %sb = tensor.extract_slice %f1[44] [6] [1] : tensor<54xf32> to tensor<6xf32>
  %zb = linalg.fill ins(%zero : f32) outs(%sb : tensor<6xf32>) -> tensor<6xf32>
  %db = linalg.reduce ins(%g : tensor<4x6xf32>) outs(%zb : tensor<6xf32>) dimensions = [0]
    (%in: f32, %acc: f32) {
      %a = arith.addf %in, %acc : f32
      linalg.yield %a : f32
    }
  %f2 = tensor.insert_slice %db into %f1[44] [6] [1] : tensor<6xf32> into tensor<54xf32>
  return %f2 : tensor<54xf32>
}

// -----

#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id3 = affine_map<(b, s, d) -> (b, s, d)>
#last = affine_map<(b, s, d) -> (d)>

// PyTorch's decomposition of Linear on a [B, S, K] activation: a 2-D product
// between reshapes, with the bias add and the activation on the 3-D view.
// The 3-D ops are flattened to rows and the whole layer fuses.
// CHECK-LABEL: func.func @linear_3d_between_reshapes(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x3x16xf32>, %[[W:[^:]*]]: tensor<32x16xf32>, %[[B:[^:]*]]: tensor<32xf32>
// CHECK: %[[X2:.*]] = tensor.collapse_shape %[[X]] {{\[}}[0, 1], [2]]
// CHECK: %[[Y:.*]] = zest.linear silu transpose_weight ins(%[[X2]], %[[W]], %[[B]] : tensor<6x16xf32>, tensor<32x16xf32>, tensor<32xf32>)
// CHECK: %[[Y3:.*]] = tensor.expand_shape %[[Y]] {{\[}}[0, 1], [2]] output_shape [2, 3, 32]
// CHECK-NOT: linalg.
// CHECK: return %[[Y3]]
func.func @linear_3d_between_reshapes(%x: tensor<2x3x16xf32>, %w: tensor<32x16xf32>, %b: tensor<32xf32>) -> tensor<2x3x32xf32> {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %x2 = tensor.collapse_shape %x [[0, 1], [2]] : tensor<2x3x16xf32> into tensor<6x16xf32>
  %e = tensor.empty() : tensor<6x32xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<6x32xf32>) -> tensor<6x32xf32>
  %mm = linalg.matmul indexing_maps = [#mk, #nk, #mn] ins(%x2, %w : tensor<6x16xf32>, tensor<32x16xf32>) outs(%z : tensor<6x32xf32>) -> tensor<6x32xf32>
  %mm3 = tensor.expand_shape %mm [[0, 1], [2]] output_shape [2, 3, 32] : tensor<6x32xf32> into tensor<2x3x32xf32>
  %e1 = tensor.empty() : tensor<2x3x32xf32>
  %pre = linalg.generic {indexing_maps = [#id3, #last, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%mm3, %b : tensor<2x3x32xf32>, tensor<32xf32>) outs(%e1 : tensor<2x3x32xf32>) {
  ^bb0(%v: f32, %bv: f32, %o: f32):
    %s = arith.addf %v, %bv : f32
    linalg.yield %s : f32
  } -> tensor<2x3x32xf32>
  %e2 = tensor.empty() : tensor<2x3x32xf32>
  %y = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%pre : tensor<2x3x32xf32>) outs(%e2 : tensor<2x3x32xf32>) {
  ^bb0(%v: f32, %o: f32):
    %n = arith.negf %v : f32
    %ex = math.exp %n : f32
    %d = arith.addf %ex, %one : f32
    %r = arith.divf %v, %d : f32
    linalg.yield %r : f32
  } -> tensor<2x3x32xf32>
  return %y : tensor<2x3x32xf32>
}

// The same layer in bf16 (an autocast model): flattened to rows and fused
// into one bf16 linear call as well.
// CHECK-LABEL: func.func @linear_3d_bf16(
// CHECK: %[[X2:.*]] = tensor.collapse_shape %{{.*}} {{\[}}[0, 1], [2]]
// CHECK: %[[Y:.*]] = zest.linear silu transpose_weight ins(%[[X2]], %{{.*}}, %{{.*}} : tensor<6x16xbf16>, tensor<32x16xbf16>, tensor<32xbf16>)
// CHECK: %[[Y3:.*]] = tensor.expand_shape %[[Y]] {{\[}}[0, 1], [2]] output_shape [2, 3, 32]
// CHECK-NOT: linalg.
// CHECK: return %[[Y3]]
func.func @linear_3d_bf16(%x: tensor<2x3x16xbf16>, %w: tensor<32x16xbf16>, %b: tensor<32xbf16>) -> tensor<2x3x32xbf16> {
  %zero = arith.constant 0.0 : bf16
  %one = arith.constant 1.0 : bf16
  %x2 = tensor.collapse_shape %x [[0, 1], [2]] : tensor<2x3x16xbf16> into tensor<6x16xbf16>
  %e = tensor.empty() : tensor<6x32xbf16>
  %z = linalg.fill ins(%zero : bf16) outs(%e : tensor<6x32xbf16>) -> tensor<6x32xbf16>
  %mm = linalg.matmul indexing_maps = [#mk, #nk, #mn] ins(%x2, %w : tensor<6x16xbf16>, tensor<32x16xbf16>) outs(%z : tensor<6x32xbf16>) -> tensor<6x32xbf16>
  %mm3 = tensor.expand_shape %mm [[0, 1], [2]] output_shape [2, 3, 32] : tensor<6x32xbf16> into tensor<2x3x32xbf16>
  %e1 = tensor.empty() : tensor<2x3x32xbf16>
  %pre = linalg.generic {indexing_maps = [#id3, #last, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%mm3, %b : tensor<2x3x32xbf16>, tensor<32xbf16>) outs(%e1 : tensor<2x3x32xbf16>) {
  ^bb0(%v: bf16, %bv: bf16, %o: bf16):
    %s = arith.addf %v, %bv : bf16
    linalg.yield %s : bf16
  } -> tensor<2x3x32xbf16>
  %e2 = tensor.empty() : tensor<2x3x32xbf16>
  %y = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%pre : tensor<2x3x32xbf16>) outs(%e2 : tensor<2x3x32xbf16>) {
  ^bb0(%v: bf16, %o: bf16):
    %n = arith.negf %v : bf16
    %ex = math.exp %n : bf16
    %d = arith.addf %ex, %one : bf16
    %r = arith.divf %v, %d : bf16
    linalg.yield %r : bf16
  } -> tensor<2x3x32xbf16>
  return %y : tensor<2x3x32xbf16>
}

// -----

#bsk = affine_map<(b, s, n, k) -> (b, s, k)>
#nk4 = affine_map<(b, s, n, k) -> (n, k)>
#bsn = affine_map<(b, s, n, k) -> (b, s, n)>
#id3 = affine_map<(b, s, d) -> (b, s, d)>
#bkn = affine_map<(b, k, n) -> (b, k, n)>
#kn3 = affine_map<(b, k, n) -> (k, n)>

// A product over loops (b, s, n, k) with a 2-D weight, the bias broadcast
// into its destination, and ReLU; and torch-mlir's matmul of a 3-D input
// with a 2-D weight, a batch matmul with the weight broadcast over B: the
// broadcast is folded (no B copies of W) and both become rows.
// CHECK-LABEL: func.func @linear_3d_products(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x3x16xf32>, %[[W:[^:]*]]: tensor<32x16xf32>, %[[B:[^:]*]]: tensor<32xf32>, %[[V:[^:]*]]: tensor<16x8xf32>, %[[C:[^:]*]]: tensor<8xf32>
// CHECK: %[[X2:.*]] = tensor.collapse_shape %[[X]] {{\[}}[0, 1], [2]]
// CHECK: %[[Y:.*]] = zest.linear relu transpose_weight ins(%[[X2]], %[[W]], %[[B]] : tensor<6x16xf32>, tensor<32x16xf32>, tensor<32xf32>)
// CHECK: %[[X2B:.*]] = tensor.collapse_shape %[[X]] {{\[}}[0, 1], [2]]
// CHECK: %[[U:.*]] = zest.linear none ins(%[[X2B]], %[[V]], %[[C]] : tensor<6x16xf32>, tensor<16x8xf32>, tensor<8xf32>)
// CHECK-NOT: linalg.
// CHECK: return
func.func @linear_3d_products(%x: tensor<2x3x16xf32>, %w: tensor<32x16xf32>, %b: tensor<32xf32>, %v: tensor<16x8xf32>, %c: tensor<8xf32>) -> (tensor<2x3x32xf32>, tensor<2x3x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x3x32xf32>
  %bb = linalg.broadcast ins(%b : tensor<32xf32>) outs(%e : tensor<2x3x32xf32>) dimensions = [0, 1]
  %pre = linalg.generic {indexing_maps = [#bsk, #nk4, #bsn], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<2x3x16xf32>, tensor<32x16xf32>) outs(%bb : tensor<2x3x32xf32>) {
  ^bb0(%a: f32, %m: f32, %acc: f32):
    %p = arith.mulf %a, %m : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<2x3x32xf32>
  %e2 = tensor.empty() : tensor<2x3x32xf32>
  %y = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%pre : tensor<2x3x32xf32>) outs(%e2 : tensor<2x3x32xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.maximumf %a, %zero : f32
    linalg.yield %r : f32
  } -> tensor<2x3x32xf32>
  %ev = tensor.empty() : tensor<2x16x8xf32>
  %vb = linalg.generic {indexing_maps = [#kn3, #bkn], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%v : tensor<16x8xf32>) outs(%ev : tensor<2x16x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<2x16x8xf32>
  %eu = tensor.empty() : tensor<2x3x8xf32>
  %zu = linalg.fill ins(%zero : f32) outs(%eu : tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %mu = linalg.batch_matmul ins(%x, %vb : tensor<2x3x16xf32>, tensor<2x16x8xf32>) outs(%zu : tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %e3 = tensor.empty() : tensor<2x3x8xf32>
  %u = linalg.generic {indexing_maps = [#id3, affine_map<(b, s, d) -> (d)>, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%mu, %c : tensor<2x3x8xf32>, tensor<8xf32>) outs(%e3 : tensor<2x3x8xf32>) {
  ^bb0(%a: f32, %cv: f32, %o: f32):
    %s = arith.addf %a, %cv : f32
    linalg.yield %s : f32
  } -> tensor<2x3x8xf32>
  return %y, %u : tensor<2x3x32xf32>, tensor<2x3x8xf32>
}

// -----

#mk = affine_map<(m, n, k) -> (m, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#km = affine_map<(m, n, k) -> (k, m)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id3 = affine_map<(b, s, d) -> (b, s, d)>
#last = affine_map<(b, s, d) -> (d)>

// The backward of a Linear + ReLU over [B, S, D]: the activation backward
// and the bias gradient (a sum over b and s) on 3-D tensors, the products
// on the 2-D view of g. All of it becomes one op over rows.
// CHECK-LABEL: func.func @backward_3d(
// CHECK-SAME: %[[DY:[^:]*]]: tensor<2x3x6xf32>, %[[PRE:[^:]*]]: tensor<2x3x6xf32>, %[[X:[^:]*]]: tensor<6x8xf32>, %[[W:[^:]*]]: tensor<6x8xf32>
// CHECK-DAG: %[[DY2:.*]] = tensor.collapse_shape %[[DY]] {{\[}}[0, 1], [2]]
// CHECK-DAG: %[[PRE2:.*]] = tensor.collapse_shape %[[PRE]] {{\[}}[0, 1], [2]]
// CHECK: %[[G:.*]]:3 = zest.linear_backward relu transpose_weight transpose_grad_weight grad_output(%[[DY2]] : tensor<6x6xf32>) preactivation(%[[PRE2]] : tensor<6x6xf32>) input(%[[X]] : tensor<6x8xf32>) weight(%[[W]] : tensor<6x8xf32>)
// CHECK-NOT: linalg.
// CHECK: return %[[G]]#0, %[[G]]#1, %[[G]]#2
func.func @backward_3d(%dy: tensor<2x3x6xf32>, %pre: tensor<2x3x6xf32>, %x: tensor<6x8xf32>, %w: tensor<6x8xf32>) -> (tensor<6x8xf32>, tensor<6x8xf32>, tensor<6xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x3x6xf32>
  %g = linalg.generic {indexing_maps = [#id3, #id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%dy, %pre : tensor<2x3x6xf32>, tensor<2x3x6xf32>) outs(%e : tensor<2x3x6xf32>) {
  ^bb0(%d: f32, %z: f32, %o: f32):
    %c = arith.cmpf ogt, %z, %zero : f32
    %r = arith.select %c, %d, %zero : f32
    linalg.yield %r : f32
  } -> tensor<2x3x6xf32>
  %g2 = tensor.collapse_shape %g [[0, 1], [2]] : tensor<2x3x6xf32> into tensor<6x6xf32>
  %ew = tensor.empty() : tensor<6x8xf32>
  %zw = linalg.fill ins(%zero : f32) outs(%ew : tensor<6x8xf32>) -> tensor<6x8xf32>
  %dw = linalg.matmul indexing_maps = [#km, #kn, #mn] ins(%g2, %x : tensor<6x6xf32>, tensor<6x8xf32>) outs(%zw : tensor<6x8xf32>) -> tensor<6x8xf32>
  %eb = tensor.empty() : tensor<6xf32>
  %zb = linalg.fill ins(%zero : f32) outs(%eb : tensor<6xf32>) -> tensor<6xf32>
  %db = linalg.generic {indexing_maps = [#id3, #last], iterator_types = ["reduction", "reduction", "parallel"]}
      ins(%g : tensor<2x3x6xf32>) outs(%zb : tensor<6xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  } -> tensor<6xf32>
  %ex = tensor.empty() : tensor<6x8xf32>
  %zx = linalg.fill ins(%zero : f32) outs(%ex : tensor<6x8xf32>) -> tensor<6x8xf32>
  %dx = linalg.matmul ins(%g2, %w : tensor<6x6xf32>, tensor<6x8xf32>) outs(%zx : tensor<6x8xf32>) -> tensor<6x8xf32>
  return %dx, %dw, %db : tensor<6x8xf32>, tensor<6x8xf32>, tensor<6xf32>
}

// -----

#id3 = affine_map<(b, s, d) -> (b, s, d)>

// Attention scores: a batch matmul whose operands are both batched is not
// a linear layer, and 3-D ops away from 2-D code keep their shapes.
// CHECK-LABEL: func.func @batched_not_linear(
// CHECK: linalg.batch_matmul
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel"]
// CHECK-NOT: zest.linear
// CHECK-NOT: collapse_shape
func.func @batched_not_linear(%q: tensor<2x4x8xf32>, %k: tensor<2x8x4xf32>) -> tensor<2x4x4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x4x4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %s = linalg.batch_matmul ins(%q, %k : tensor<2x4x8xf32>, tensor<2x8x4xf32>) outs(%z : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %e2 = tensor.empty() : tensor<2x4x4xf32>
  %r = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s : tensor<2x4x4xf32>) outs(%e2 : tensor<2x4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.maximumf %a, %zero : f32
    linalg.yield %m : f32
  } -> tensor<2x4x4xf32>
  return %r : tensor<2x4x4xf32>
}

// -----

#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(i, j) -> (i, j)>

// Autocast's plain products: bf16 operands into f32 zeros that a truncf
// rounds back to bf16 (the head's logits, x * W^T; a gradient, g * W)
// become bf16 layers without bias or activation: no f32 matrix.
// CHECK-LABEL: func.func @rounded_products(
// CHECK-NOT: linalg.matmul
// CHECK: %[[L:.*]] = zest.linear none transpose_weight ins(%{{.*}}, %{{.*}} : tensor<4x8xbf16>, tensor<6x8xbf16>) outs(%{{.*}} : tensor<4x6xbf16>) -> tensor<4x6xbf16>
// CHECK: %[[G:.*]] = zest.linear none ins(%{{.*}}, %{{.*}} : tensor<4x6xbf16>, tensor<6x8xbf16>) outs(%{{.*}} : tensor<4x8xbf16>) -> tensor<4x8xbf16>
// CHECK-NOT: arith.truncf
// CHECK: return %[[L]], %[[G]]
func.func @rounded_products(%x: tensor<4x8xbf16>, %w: tensor<6x8xbf16>, %g: tensor<4x6xbf16>) -> (tensor<4x6xbf16>, tensor<4x8xbf16>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x6xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x6xf32>) -> tensor<4x6xf32>
  %p = linalg.matmul indexing_maps = [#mk, #nk, #mn] ins(%x, %w : tensor<4x8xbf16>, tensor<6x8xbf16>) outs(%f : tensor<4x6xf32>) -> tensor<4x6xf32>
  %e1 = tensor.empty() : tensor<4x6xbf16>
  %l = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%p : tensor<4x6xf32>) outs(%e1 : tensor<4x6xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<4x6xbf16>
  %e2 = tensor.empty() : tensor<4x8xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %q = linalg.matmul ins(%g, %w : tensor<4x6xbf16>, tensor<6x8xbf16>) outs(%f2 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %e3 = tensor.empty() : tensor<4x8xbf16>
  %dx = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%q : tensor<4x8xf32>) outs(%e3 : tensor<4x8xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<4x8xbf16>
  return %l, %dx : tensor<4x6xbf16>, tensor<4x8xbf16>
}

// -----

#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(i, j) -> (i, j)>

// The f32 product read elsewhere too, or rounded to another type, stays.
// CHECK-LABEL: func.func @rounded_products_kept(
// CHECK-NOT: zest.linear
// CHECK: linalg.matmul
// CHECK: linalg.matmul
// CHECK-NOT: zest.linear
func.func @rounded_products_kept(%x: tensor<4x8xbf16>, %w: tensor<6x8xbf16>) -> (tensor<4x6xbf16>, tensor<4x6xf32>, tensor<4x6xf16>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x6xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x6xf32>) -> tensor<4x6xf32>
  %p = linalg.matmul indexing_maps = [#mk, #nk, #mn] ins(%x, %w : tensor<4x8xbf16>, tensor<6x8xbf16>) outs(%f : tensor<4x6xf32>) -> tensor<4x6xf32>
  %e1 = tensor.empty() : tensor<4x6xbf16>
  %l = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%p : tensor<4x6xf32>) outs(%e1 : tensor<4x6xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<4x6xbf16>
  %e2 = tensor.empty() : tensor<4x6xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<4x6xf32>) -> tensor<4x6xf32>
  %q = linalg.matmul indexing_maps = [#mk, #nk, #mn] ins(%x, %w : tensor<4x8xbf16>, tensor<6x8xbf16>) outs(%f2 : tensor<4x6xf32>) -> tensor<4x6xf32>
  %e3 = tensor.empty() : tensor<4x6xf16>
  %h = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%q : tensor<4x6xf32>) outs(%e3 : tensor<4x6xf16>) {
  ^bb0(%in: f32, %out: f16):
    %t = arith.truncf %in : f32 to f16
    linalg.yield %t : f16
  } -> tensor<4x6xf16>
  return %l, %p, %h : tensor<4x6xbf16>, tensor<4x6xf32>, tensor<4x6xf16>
}

// -----

#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(i, j) -> (i, j)>

// CSE leaves one fill of zeros for every product of a shape (a Llama's
// bias-free projections): each product still becomes a layer of its own.
// CHECK-LABEL: func.func @rounded_products_shared_zeros(
// CHECK-NOT: linalg.matmul
// CHECK: %[[A:.*]] = zest.linear none transpose_weight ins(%{{.*}}, %{{.*}} : tensor<4x8xbf16>, tensor<6x8xbf16>)
// CHECK: %[[B:.*]] = zest.linear none transpose_weight ins(%{{.*}}, %{{.*}} : tensor<4x8xbf16>, tensor<6x8xbf16>)
// CHECK-NOT: arith.truncf
// CHECK: return %[[A]], %[[B]]
func.func @rounded_products_shared_zeros(%x: tensor<4x8xbf16>, %w: tensor<6x8xbf16>, %v: tensor<6x8xbf16>) -> (tensor<4x6xbf16>, tensor<4x6xbf16>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x6xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x6xf32>) -> tensor<4x6xf32>
  %p = linalg.matmul indexing_maps = [#mk, #nk, #mn] ins(%x, %w : tensor<4x8xbf16>, tensor<6x8xbf16>) outs(%f : tensor<4x6xf32>) -> tensor<4x6xf32>
  %q = linalg.matmul indexing_maps = [#mk, #nk, #mn] ins(%x, %v : tensor<4x8xbf16>, tensor<6x8xbf16>) outs(%f : tensor<4x6xf32>) -> tensor<4x6xf32>
  %e1 = tensor.empty() : tensor<4x6xbf16>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%p : tensor<4x6xf32>) outs(%e1 : tensor<4x6xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<4x6xbf16>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%q : tensor<4x6xf32>) outs(%e1 : tensor<4x6xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<4x6xbf16>
  return %a, %b : tensor<4x6xbf16>, tensor<4x6xbf16>
}

// -----

#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(i, j) -> (i, j)>

// Shared zeros in a gradient buffer's slice are not a fresh destination
// for each product: those products stay.
// CHECK-LABEL: func.func @shared_zeros_in_slice(
// CHECK-NOT: zest.linear
// CHECK-COUNT-2: linalg.matmul
func.func @shared_zeros_in_slice(%x: tensor<4x8xbf16>, %w: tensor<6x8xbf16>, %v: tensor<6x8xbf16>, %buf: tensor<48xf32>) -> (tensor<4x6xbf16>, tensor<4x6xbf16>) {
  %zero = arith.constant 0.0 : f32
  %s = tensor.extract_slice %buf[0] [24] [1] : tensor<48xf32> to tensor<24xf32>
  %e = tensor.expand_shape %s [[0, 1]] output_shape [4, 6] : tensor<24xf32> into tensor<4x6xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x6xf32>) -> tensor<4x6xf32>
  %p = linalg.matmul indexing_maps = [#mk, #nk, #mn] ins(%x, %w : tensor<4x8xbf16>, tensor<6x8xbf16>) outs(%f : tensor<4x6xf32>) -> tensor<4x6xf32>
  %q = linalg.matmul indexing_maps = [#mk, #nk, #mn] ins(%x, %v : tensor<4x8xbf16>, tensor<6x8xbf16>) outs(%f : tensor<4x6xf32>) -> tensor<4x6xf32>
  %e1 = tensor.empty() : tensor<4x6xbf16>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%p : tensor<4x6xf32>) outs(%e1 : tensor<4x6xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<4x6xbf16>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%q : tensor<4x6xf32>) outs(%e1 : tensor<4x6xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<4x6xbf16>
  return %a, %b : tensor<4x6xbf16>, tensor<4x6xbf16>
}

// -----

#kn = affine_map<(m, n, k) -> (k, n)>
#mk = affine_map<(m, n, k) -> (m, k)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (j)>

// Autocast's addmm as torch-mlir writes it (GPT-2's Conv1D): x and W
// widened from bf16 and multiplied in f32, the bias added, the sum rounded.
// The product reads the bf16 matrices themselves (a 16-bit product into the
// same f32 zeros); the widened copies go, the bias and rounding stay.
// CHECK-LABEL: func.func @widened_product(
// CHECK-SAME:      %[[X:.*]]: tensor<4x8xbf16>, %[[W:.*]]: tensor<8x6xbf16>
// CHECK-NOT:     arith.extf {{.*}} : bf16 to f32
// CHECK:         %[[P:.*]] = linalg.matmul ins(%[[X]], %[[W]] : tensor<4x8xbf16>, tensor<8x6xbf16>) outs(%{{.*}} : tensor<4x6xf32>) -> tensor<4x6xf32>
// CHECK:         arith.addf
// CHECK:         arith.truncf
func.func @widened_product(%x: tensor<4x8xbf16>, %w: tensor<8x6xbf16>, %b: tensor<6xf32>) -> tensor<4x6xbf16> {
  %zero = arith.constant 0.0 : f32
  %ex = tensor.empty() : tensor<4x8xf32>
  %xw = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x8xbf16>) outs(%ex : tensor<4x8xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %t = arith.extf %in : bf16 to f32
    linalg.yield %t : f32
  } -> tensor<4x8xf32>
  %ew = tensor.empty() : tensor<8x6xf32>
  %ww = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<8x6xbf16>) outs(%ew : tensor<8x6xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %t = arith.extf %in : bf16 to f32
    linalg.yield %t : f32
  } -> tensor<8x6xf32>
  %e = tensor.empty() : tensor<4x6xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x6xf32>) -> tensor<4x6xf32>
  %p = linalg.matmul ins(%xw, %ww : tensor<4x8xf32>, tensor<8x6xf32>) outs(%f : tensor<4x6xf32>) -> tensor<4x6xf32>
  %s = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%p, %b : tensor<4x6xf32>, tensor<6xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%in: f32, %bias: f32, %out: f32):
    %a = arith.addf %in, %bias : f32
    linalg.yield %a : f32
  } -> tensor<4x6xf32>
  %e1 = tensor.empty() : tensor<4x6xbf16>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%s : tensor<4x6xf32>) outs(%e1 : tensor<4x6xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<4x6xbf16>
  return %r : tensor<4x6xbf16>
}

// -----

#kn = affine_map<(m, n, k) -> (k, n)>
#mk = affine_map<(m, n, k) -> (m, k)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (j)>

// Autocast's addmm with its bf16 bias widened, repeated over the rows (as
// torch-mlir expands it) and added before the rounding: one bf16 layer with
// that bias. Added as a row vector, the same.
// CHECK-LABEL: func.func @rounded_bias_products(
// CHECK-SAME:      %[[X:.*]]: tensor<4x8xbf16>, %[[W:.*]]: tensor<8x6xbf16>, %[[B:.*]]: tensor<6xbf16>
// CHECK-NOT:     linalg.matmul
// CHECK:         %[[L:.*]] = zest.linear none ins(%[[X]], %[[W]], %[[B]] : tensor<4x8xbf16>, tensor<8x6xbf16>, tensor<6xbf16>) outs(%{{.*}} : tensor<4x6xbf16>) -> tensor<4x6xbf16>
// CHECK:         %[[M:.*]] = zest.linear none ins(%[[X]], %[[W]], %[[B]] : tensor<4x8xbf16>, tensor<8x6xbf16>, tensor<6xbf16>) outs(%{{.*}} : tensor<4x6xbf16>) -> tensor<4x6xbf16>
// CHECK-NOT:     arith.truncf
// CHECK:         return %[[L]], %[[M]]
func.func @rounded_bias_products(%x: tensor<4x8xbf16>, %w: tensor<8x6xbf16>, %b: tensor<6xbf16>) -> (tensor<4x6xbf16>, tensor<4x6xbf16>) {
  %zero = arith.constant 0.0 : f32
  %eb = tensor.empty() : tensor<6xf32>
  %bw = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]} ins(%b : tensor<6xbf16>) outs(%eb : tensor<6xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %t = arith.extf %in : bf16 to f32
    linalg.yield %t : f32
  } -> tensor<6xf32>
  %e = tensor.empty() : tensor<4x6xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x6xf32>) -> tensor<4x6xf32>
  %p = linalg.matmul ins(%x, %w : tensor<4x8xbf16>, tensor<8x6xbf16>) outs(%f : tensor<4x6xf32>) -> tensor<4x6xf32>
  %rep = linalg.generic {indexing_maps = [#row, #id], iterator_types = ["parallel", "parallel"]} ins(%bw : tensor<6xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<4x6xf32>
  %s = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%p, %rep : tensor<4x6xf32>, tensor<4x6xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%in: f32, %bias: f32, %out: f32):
    %a = arith.addf %in, %bias : f32
    linalg.yield %a : f32
  } -> tensor<4x6xf32>
  %e1 = tensor.empty() : tensor<4x6xbf16>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%s : tensor<4x6xf32>) outs(%e1 : tensor<4x6xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<4x6xbf16>
  %q = linalg.matmul ins(%x, %w : tensor<4x8xbf16>, tensor<8x6xbf16>) outs(%f : tensor<4x6xf32>) -> tensor<4x6xf32>
  %s2 = linalg.generic {indexing_maps = [#row, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%bw, %q : tensor<6xf32>, tensor<4x6xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%bias: f32, %in: f32, %out: f32):
    %a = arith.addf %bias, %in : f32
    linalg.yield %a : f32
  } -> tensor<4x6xf32>
  %r2 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%s2 : tensor<4x6xf32>) outs(%e1 : tensor<4x6xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<4x6xbf16>
  return %r, %r2 : tensor<4x6xbf16>, tensor<4x6xbf16>
}

// -----

#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (j)>

// A bias widened from f16 under bf16 operands, or a repeated matrix that is
// not a plain copy of its row (here scaled), is not the layer's bias: the
// products stay.
// CHECK-LABEL: func.func @rounded_bias_products_kept(
// CHECK-NOT: zest.linear
// CHECK-COUNT-2: linalg.matmul
func.func @rounded_bias_products_kept(%x: tensor<4x8xbf16>, %w: tensor<8x6xbf16>, %h: tensor<6xf16>, %b: tensor<6xbf16>) -> (tensor<4x6xbf16>, tensor<4x6xbf16>) {
  %zero = arith.constant 0.0 : f32
  %two = arith.constant 2.0 : f32
  %eb = tensor.empty() : tensor<6xf32>
  %hw = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]} ins(%h : tensor<6xf16>) outs(%eb : tensor<6xf32>) {
  ^bb0(%in: f16, %out: f32):
    %t = arith.extf %in : f16 to f32
    linalg.yield %t : f32
  } -> tensor<6xf32>
  %bw = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]} ins(%b : tensor<6xbf16>) outs(%eb : tensor<6xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %t = arith.extf %in : bf16 to f32
    linalg.yield %t : f32
  } -> tensor<6xf32>
  %e = tensor.empty() : tensor<4x6xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x6xf32>) -> tensor<4x6xf32>
  %p = linalg.matmul ins(%x, %w : tensor<4x8xbf16>, tensor<8x6xbf16>) outs(%f : tensor<4x6xf32>) -> tensor<4x6xf32>
  %s = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%p, %hw : tensor<4x6xf32>, tensor<6xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%in: f32, %bias: f32, %out: f32):
    %a = arith.addf %in, %bias : f32
    linalg.yield %a : f32
  } -> tensor<4x6xf32>
  %e1 = tensor.empty() : tensor<4x6xbf16>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%s : tensor<4x6xf32>) outs(%e1 : tensor<4x6xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<4x6xbf16>
  %q = linalg.matmul ins(%x, %w : tensor<4x8xbf16>, tensor<8x6xbf16>) outs(%f : tensor<4x6xf32>) -> tensor<4x6xf32>
  %rep = linalg.generic {indexing_maps = [#row, #id], iterator_types = ["parallel", "parallel"]} ins(%bw : tensor<6xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%in: f32, %out: f32):
    %d = arith.mulf %in, %two : f32
    linalg.yield %d : f32
  } -> tensor<4x6xf32>
  %s2 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%q, %rep : tensor<4x6xf32>, tensor<4x6xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%in: f32, %bias: f32, %out: f32):
    %a = arith.addf %in, %bias : f32
    linalg.yield %a : f32
  } -> tensor<4x6xf32>
  %r2 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%s2 : tensor<4x6xf32>) outs(%e1 : tensor<4x6xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<4x6xbf16>
  return %r, %r2 : tensor<4x6xbf16>, tensor<4x6xbf16>
}

// -----

#id = affine_map<(i, j) -> (i, j)>
#t = affine_map<(i, j) -> (j, i)>
#row = affine_map<(i, j) -> (j)>

// Autocast's nn.Linear as torch-mlir fuses it (Pythia's): the weight
// widened and transposed in one generic. The product reads the bf16 weight
// transposed in place, and with the widened bias and the rounding it is one
// bf16 layer reading W as [out, in].
// CHECK-LABEL: func.func @widened_transposed_weight(
// CHECK-SAME:      %[[X:.*]]: tensor<4x8xbf16>, %[[W:.*]]: tensor<6x8xbf16>, %[[B:.*]]: tensor<6xbf16>
// CHECK-NOT:     arith.extf
// CHECK:         %[[L:.*]] = zest.linear none transpose_weight ins(%[[X]], %[[W]], %[[B]] : tensor<4x8xbf16>, tensor<6x8xbf16>, tensor<6xbf16>) outs(%{{.*}} : tensor<4x6xbf16>)
// CHECK-NOT:     arith.truncf
// CHECK:         return %[[L]]
func.func @widened_transposed_weight(%x: tensor<4x8xbf16>, %w: tensor<6x8xbf16>, %b: tensor<6xbf16>) -> tensor<4x6xbf16> {
  %zero = arith.constant 0.0 : f32
  %ex = tensor.empty() : tensor<4x8xf32>
  %xw = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x8xbf16>) outs(%ex : tensor<4x8xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %t = arith.extf %in : bf16 to f32
    linalg.yield %t : f32
  } -> tensor<4x8xf32>
  %ew = tensor.empty() : tensor<8x6xf32>
  %wt = linalg.generic {indexing_maps = [#t, #id], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<6x8xbf16>) outs(%ew : tensor<8x6xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %t = arith.extf %in : bf16 to f32
    linalg.yield %t : f32
  } -> tensor<8x6xf32>
  %eb = tensor.empty() : tensor<6xf32>
  %bw = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]} ins(%b : tensor<6xbf16>) outs(%eb : tensor<6xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %t = arith.extf %in : bf16 to f32
    linalg.yield %t : f32
  } -> tensor<6xf32>
  %e = tensor.empty() : tensor<4x6xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x6xf32>) -> tensor<4x6xf32>
  %p = linalg.matmul ins(%xw, %wt : tensor<4x8xf32>, tensor<8x6xf32>) outs(%f : tensor<4x6xf32>) -> tensor<4x6xf32>
  %s = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%p, %bw : tensor<4x6xf32>, tensor<6xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%in: f32, %bias: f32, %out: f32):
    %a = arith.addf %in, %bias : f32
    linalg.yield %a : f32
  } -> tensor<4x6xf32>
  %e1 = tensor.empty() : tensor<4x6xbf16>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%s : tensor<4x6xf32>) outs(%e1 : tensor<4x6xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<4x6xbf16>
  return %r : tensor<4x6xbf16>
}

// -----

#id = affine_map<(i, j) -> (i, j)>

// One operand widened from f16 and the other from bf16, or one not widened
// at all: the f32 product stays.
// CHECK-LABEL: func.func @widened_product_kept(
// CHECK-COUNT-2: linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<8x6xf32>)
func.func @widened_product_kept(%x: tensor<4x8xbf16>, %w: tensor<8x6xf16>, %v: tensor<8x6xf32>) -> (tensor<4x6xf32>, tensor<4x6xf32>) {
  %zero = arith.constant 0.0 : f32
  %ex = tensor.empty() : tensor<4x8xf32>
  %xw = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x8xbf16>) outs(%ex : tensor<4x8xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %t = arith.extf %in : bf16 to f32
    linalg.yield %t : f32
  } -> tensor<4x8xf32>
  %ew = tensor.empty() : tensor<8x6xf32>
  %ww = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<8x6xf16>) outs(%ew : tensor<8x6xf32>) {
  ^bb0(%in: f16, %out: f32):
    %t = arith.extf %in : f16 to f32
    linalg.yield %t : f32
  } -> tensor<8x6xf32>
  %e = tensor.empty() : tensor<4x6xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x6xf32>) -> tensor<4x6xf32>
  %p = linalg.matmul ins(%xw, %ww : tensor<4x8xf32>, tensor<8x6xf32>) outs(%f : tensor<4x6xf32>) -> tensor<4x6xf32>
  %q = linalg.matmul ins(%xw, %v : tensor<4x8xf32>, tensor<8x6xf32>) outs(%f : tensor<4x6xf32>) -> tensor<4x6xf32>
  return %p, %q : tensor<4x6xf32>, tensor<4x6xf32>
}

// -----

#gt = affine_map<(m, n, k) -> (k, m)>
#xk = affine_map<(m, n, k) -> (k, n)>

// One `g` read by two layers of different widths (a parallel residual):
// the input gradient of one (g * W, 8 wide) and the weight gradient of the
// other (g^T x, x 5 wide) are not one layer's backward; both stay products.
// CHECK-LABEL: func.func @two_layers_one_g(
// CHECK-NOT:     zest.linear_backward
// CHECK-COUNT-2: linalg.matmul
func.func @two_layers_one_g(%g: tensor<4x6xf32>, %w: tensor<6x8xf32>, %x: tensor<4x5xf32>) -> (tensor<4x8xf32>, tensor<6x5xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %dx = linalg.matmul ins(%g, %w : tensor<4x6xf32>, tensor<6x8xf32>) outs(%f : tensor<4x8xf32>) -> tensor<4x8xf32>
  %e2 = tensor.empty() : tensor<6x5xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<6x5xf32>) -> tensor<6x5xf32>
  %dw = linalg.matmul indexing_maps = [#gt, #xk, affine_map<(m, n, k) -> (m, n)>] ins(%g, %x : tensor<4x6xf32>, tensor<4x5xf32>) outs(%f2 : tensor<6x5xf32>) -> tensor<6x5xf32>
  return %dx, %dw : tensor<4x8xf32>, tensor<6x5xf32>
}
