// RUN: zest-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(zest-fuse-elementwise))' | FileCheck %s

#id = affine_map<(i, j) -> (i, j)>

// A chain of elementwise ops becomes one loop nest; the temporaries are gone.
// CHECK-LABEL: func.func @chain(
// CHECK-SAME: %[[A:[^:]*]]: tensor<4x8xf32>, %[[B:[^:]*]]: tensor<4x8xf32>
// CHECK: %[[R:.*]] = linalg.generic
// CHECK-SAME: ins(%[[A]], %[[B]] : tensor<4x8xf32>, tensor<4x8xf32>)
// CHECK: arith.subf
// CHECK: arith.mulf
// CHECK: math.exp
// CHECK-NOT: linalg.generic
// CHECK: return %[[R]]
func.func @chain(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e0 = tensor.empty() : tensor<4x8xf32>
  %d = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e0 : tensor<4x8xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.subf %x, %y : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %e1 = tensor.empty() : tensor<4x8xf32>
  %m = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%d, %b : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e1 : tensor<4x8xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %p = arith.mulf %x, %y : f32
    linalg.yield %p : f32
  } -> tensor<4x8xf32>
  %e2 = tensor.empty() : tensor<4x8xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m : tensor<4x8xf32>) outs(%e2 : tensor<4x8xf32>) {
  ^bb0(%x: f32, %o: f32):
    %x2 = math.exp %x : f32
    linalg.yield %x2 : f32
  } -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// -----

#id = affine_map<(i, j) -> (i, j)>

// A sum of squares (a layer norm's variance): the named reduction becomes a
// generic that squares as it sums; the squares are never stored.
// CHECK-LABEL: func.func @sum_of_squares(
// CHECK-SAME: %[[X:[^:]*]]: tensor<4x8xf32>
// CHECK: %[[R:.*]] = linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "reduction"]
// CHECK-SAME: ins(%[[X]] : tensor<4x8xf32>)
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK-NOT: linalg.reduce
// CHECK-NOT: linalg.generic
// CHECK: return %[[R]]
func.func @sum_of_squares(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %sq = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %x : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %p = arith.mulf %a, %b : f32
    linalg.yield %p : f32
  } -> tensor<4x8xf32>
  %e1 = tensor.empty() : tensor<4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4xf32>) -> tensor<4xf32>
  %r = linalg.reduce ins(%sq : tensor<4x8xf32>) outs(%z : tensor<4xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  return %r : tensor<4xf32>
}

// -----

#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>
#mk = affine_map<(m, n, k) -> (m, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>

// Left apart: a producer something else also reads (it would be computed
// twice), a producer read through a broadcast (recomputed per column), and
// a matrix product (BLAS). A producer read twice by one consumer is read
// once (the operands deduplicated), then fused. The three ops that then
// read %a element by element (%u2, %u3 with tanh fused, the negation
// before the product) are one op of three results that reads it once.
// CHECK-LABEL: func.func @left_apart(
// CHECK-COUNT-3: linalg.generic
// CHECK:         %{{.*}}:3 = linalg.generic
// CHECK:         linalg.generic
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @left_apart(%a: tensor<4x8xf32>, %v: tensor<4xf32>, %w: tensor<8x8xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %e = tensor.empty() : tensor<4x8xf32>
  // Read by two ops.
  %shared = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = math.exp %x : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %u1 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%shared : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = arith.negf %x : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  // Read through a broadcast.
  %ev = tensor.empty() : tensor<4xf32>
  %rs = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      ins(%v : tensor<4xf32>) outs(%ev : tensor<4xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = math.rsqrt %x : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  %u2 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a, %rs : tensor<4x8xf32>, tensor<4xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%x: f32, %s: f32, %o: f32):
    %r = arith.mulf %x, %s : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  // Read twice by one consumer: fused.
  %tw = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = math.tanh %x : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %u3 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%tw, %tw : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %r = arith.mulf %x, %y : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  // Into a product.
  %sc = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = arith.negf %x : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %mm = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%sc, %w : tensor<4x8xf32>, tensor<8x8xf32>) outs(%a : tensor<4x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  return %shared, %u1, %u2, %u3, %mm : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

#id = affine_map<(i, j) -> (i, j)>

// An activation's intermediate that the forward and the backward both read
// (GELU's 0.5 x and tanh(...)): its input x stays alive for the backward
// anyway, so each reader computes it anew and it is never stored. Both
// readers then read x alone and become one op.
// CHECK-LABEL: func.func @recomputed(
// CHECK-SAME: %[[X:[^:]*]]: tensor<4x8xf32>, %[[DY:[^:]*]]: tensor<4x8xf32>
// CHECK: %[[R:.*]]:2 = linalg.generic
// CHECK-SAME: ins(%[[X]], %[[DY]] : tensor<4x8xf32>, tensor<4x8xf32>)
// CHECK: math.tanh
// CHECK: arith.mulf
// CHECK: math.tanh
// CHECK: arith.mulf
// CHECK-NOT: linalg.generic
// CHECK: return %[[R]]#0, %[[R]]#1
func.func @recomputed(%x: tensor<4x8xf32>, %dy: tensor<4x8xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %e = tensor.empty() : tensor<4x8xf32>
  %t = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.tanh %a : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %y = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%t, %x : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.mulf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %dx = linalg.generic {indexing_maps = [#id, #id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%t, %x, %dy : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %g: f32, %o: f32):
    %p = arith.mulf %a, %b : f32
    %r = arith.mulf %p, %g : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  return %y, %dx : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

#id = affine_map<(i, j) -> (i, j)>
#mk = affine_map<(m, n, k) -> (m, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>

// Not recomputed: the product %m, read only by the shared producer, would
// have to stay allocated until the last reader. Its two readers are one
// op.
// CHECK-LABEL: func.func @not_recomputed(
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "reduction"]
// CHECK: %[[S:.*]] = linalg.generic
// CHECK: math.exp
// CHECK: %{{.*}}:2 = linalg.generic
// CHECK-SAME: ins(%[[S]] :
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @not_recomputed(%a: tensor<4x8xf32>, %w: tensor<8x8xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %e = tensor.empty() : tensor<4x8xf32>
  %m = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %w : tensor<4x8xf32>, tensor<8x8xf32>) outs(%a : tensor<4x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %s = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = math.exp %x : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %u1 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = arith.negf %x : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %u2 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = math.sqrt %x : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  return %u1, %u2 : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

#id = affine_map<(i, j) -> (i, j)>
#id3 = affine_map<(b, i, j) -> (b, i, j)>
#scalar3 = affine_map<(b, i, j) -> ()>

// torch-mlir's unit views between an activation's backward ops (GPT-2's
// `1 - tanh^2` on `[1, S, D]` between two ops on `[S, D]`): the middle op
// loses its unit loop, the reshapes cancel and the three ops fuse.
// CHECK-LABEL: func.func @unit_reshapes(
// CHECK-SAME: %[[X:[^:]*]]: tensor<4x8xf32>
// CHECK-NOT: expand_shape
// CHECK-NOT: collapse_shape
// CHECK: %[[R:.*]] = linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel"]
// CHECK: math.tanh
// CHECK: arith.sitofp
// CHECK: arith.subf
// CHECK: arith.mulf
// CHECK-NOT: linalg.generic
// CHECK: return %[[R]]
func.func @unit_reshapes(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %one = arith.constant dense<1> : tensor<i64>
  %e = tensor.empty() : tensor<4x8xf32>
  %t = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.tanh %a : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %t3 = tensor.expand_shape %t [[0, 1], [2]] output_shape [1, 4, 8] : tensor<4x8xf32> into tensor<1x4x8xf32>
  %e3 = tensor.empty() : tensor<1x4x8xf32>
  %s3 = linalg.generic {indexing_maps = [#scalar3, #id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%one, %t3 : tensor<i64>, tensor<1x4x8xf32>) outs(%e3 : tensor<1x4x8xf32>) {
  ^bb0(%c: i64, %a: f32, %o: f32):
    %f = arith.sitofp %c : i64 to f32
    %r = arith.subf %f, %a : f32
    linalg.yield %r : f32
  } -> tensor<1x4x8xf32>
  %s = tensor.collapse_shape %s3 [[0, 1], [2]] : tensor<1x4x8xf32> into tensor<4x8xf32>
  %y = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s, %x : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.mulf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

#id = affine_map<(i, j) -> (i, j)>
#id3 = affine_map<(b, i, j) -> (b, i, j)>

// Left as it is: the middle op also reads a `[1, S, D]` tensor of its own,
// which dropping its unit loop would have to reshape.
// CHECK-LABEL: func.func @unit_reshape_kept(
// CHECK: tensor.expand_shape
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel"]
// CHECK: tensor.collapse_shape
func.func @unit_reshape_kept(%x: tensor<4x8xf32>, %z: tensor<1x4x8xf32>) -> tensor<4x8xf32> {
  %e = tensor.empty() : tensor<4x8xf32>
  %t = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.tanh %a : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %t3 = tensor.expand_shape %t [[0, 1], [2]] output_shape [1, 4, 8] : tensor<4x8xf32> into tensor<1x4x8xf32>
  %e3 = tensor.empty() : tensor<1x4x8xf32>
  %s3 = linalg.generic {indexing_maps = [#id3, #id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%z, %t3 : tensor<1x4x8xf32>, tensor<1x4x8xf32>) outs(%e3 : tensor<1x4x8xf32>) {
  ^bb0(%c: f32, %a: f32, %o: f32):
    %r = arith.subf %c, %a : f32
    linalg.yield %r : f32
  } -> tensor<1x4x8xf32>
  %s = tensor.collapse_shape %s3 [[0, 1], [2]] : tensor<1x4x8xf32> into tensor<4x8xf32>
  %y = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s, %x : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.mulf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// torch's max.dim in a softmax: only the maximum is read, so the indices
// (a compare and a select per element, and their buffer) are not computed.
// CHECK-LABEL: func.func @unused_argmax
// CHECK:         %[[MAX:.+]] = linalg.generic
// CHECK-SAME:      outs(%{{.+}} : tensor<4xf32>)
// CHECK-NOT:       arith.select
// CHECK:           arith.maximumf
// CHECK-NOT:       arith.select
// CHECK:         return %[[MAX]] : tensor<4xf32>
func.func @unused_argmax(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %c0 = arith.constant 0 : i64
  %em = tensor.empty() : tensor<4xf32>
  %m0 = linalg.fill ins(%ninf : f32) outs(%em : tensor<4xf32>) -> tensor<4xf32>
  %ei = tensor.empty() : tensor<4xi64>
  %i0 = linalg.fill ins(%c0 : i64) outs(%ei : tensor<4xi64>) -> tensor<4xi64>
  %r:2 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x8xf32>) outs(%m0, %i0 : tensor<4xf32>, tensor<4xi64>) {
  ^bb0(%in: f32, %m: f32, %i: i64):
    %j = linalg.index 1 : index
    %ji = arith.index_cast %j : index to i64
    %nm = arith.maximumf %in, %m : f32
    %gt = arith.cmpf ogt, %in, %m : f32
    %ni = arith.select %gt, %ji, %i : i64
    linalg.yield %nm, %ni : f32, i64
  } -> (tensor<4xf32>, tensor<4xi64>)
  return %r#0 : tensor<4xf32>
}

// -----

// A cast read through a broadcast (a bf16 LayerNorm weight widened to f32
// for every row) is fused all the same: a conversion per element costs less
// than a pass over memory and a launch.
#id = affine_map<(i, j) -> (i, j)>
#col = affine_map<(i, j) -> (j)>
// CHECK-LABEL: func.func @widened_weight(
// CHECK:         linalg.generic
// CHECK-SAME:      ins(%{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<8xbf16>)
// CHECK:           arith.extf
// CHECK:           arith.mulf
// CHECK-NOT:     linalg.generic
func.func @widened_weight(%a: tensor<4x8xf32>, %w: tensor<8xbf16>) -> tensor<4x8xf32> {
  %ew = tensor.empty() : tensor<8xf32>
  %wide = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      ins(%w : tensor<8xbf16>) outs(%ew : tensor<8xf32>) {
  ^bb0(%x: bf16, %o: f32):
    %r = arith.extf %x : bf16 to f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  %e = tensor.empty() : tensor<4x8xf32>
  %y = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a, %wide : tensor<4x8xf32>, tensor<8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%x: f32, %g: f32, %o: f32):
    %r = arith.mulf %x, %g : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

#id = affine_map<(i, j) -> (i, j)>

// Not recomputed: a reader in a loop's body would compute it again on every
// iteration.
// CHECK-LABEL: func.func @reader_in_loop(
// CHECK: %[[T:.*]] = linalg.generic
// CHECK: math.tanh
// CHECK: scf.for
// CHECK: linalg.generic
// CHECK-SAME: ins(%[[T]],
// CHECK: linalg.generic
// CHECK-SAME: ins(%[[T]],
func.func @reader_in_loop(%x: tensor<4x8xf32>, %n: index)
    -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %e = tensor.empty() : tensor<4x8xf32>
  %t = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.tanh %a : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %acc = scf.for %i = %c0 to %n step %c1 iter_args(%s = %x) -> (tensor<4x8xf32>) {
    %u = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
        ins(%t, %s : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
    ^bb0(%a: f32, %b: f32, %o: f32):
      %r = arith.addf %a, %b : f32
      linalg.yield %r : f32
    } -> tensor<4x8xf32>
    scf.yield %u : tensor<4x8xf32>
  }
  %y = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%t, %x : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.mulf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  return %acc, %y : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

#id = affine_map<(i, j) -> (i, j)>

// A rotary embedding's rotate_half, cat(-x2, x1), read once by
// x * cos + rotate_half(x) * sin: the sum is computed per half, each into
// its slice of the result, and the negation fuses into the first half. No
// concatenation is stored. Both halves read x1 and x2: they are one op,
// its two results inserted after it.
// CHECK-LABEL: func.func @rotate_half(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<2x8xf32>, %[[COS:[^:]*]]: tensor<2x8xf32>, %[[SIN:[^:]*]]: tensor<2x8xf32>
// CHECK-NOT:     tensor.concat
// CHECK-DAG:     %[[X2:.*]] = tensor.extract_slice %[[X]][0, 4] [2, 4] [1, 1]
// CHECK-DAG:     %[[X1:.*]] = tensor.extract_slice %[[X]][0, 0] [2, 4] [1, 1]
// CHECK-DAG:     %[[CA:.*]] = tensor.extract_slice %[[COS]][0, 0] [2, 4] [1, 1]
// CHECK-DAG:     %[[SA:.*]] = tensor.extract_slice %[[SIN]][0, 0] [2, 4] [1, 1]
// CHECK-DAG:     %[[CB:.*]] = tensor.extract_slice %[[COS]][0, 4] [2, 4] [1, 1]
// CHECK-DAG:     %[[SB:.*]] = tensor.extract_slice %[[SIN]][0, 4] [2, 4] [1, 1]
// CHECK:         %[[AB:.*]]:2 = linalg.generic {{.*}} ins(%[[X1]], %[[CA]], %[[X2]], %[[SA]], %[[CB]], %[[SB]] :
// CHECK:           arith.negf
// CHECK-NOT:       arith.negf
// CHECK:         %[[R0:.*]] = tensor.insert_slice %[[AB]]#0 into %{{.*}}[0, 0] [2, 4] [1, 1]
// CHECK:         %[[R:.*]] = tensor.insert_slice %[[AB]]#1 into %[[R0]][0, 4] [2, 4] [1, 1]
// CHECK:         return %[[R]]
func.func @rotate_half(%x: tensor<2x8xf32>, %cos: tensor<2x8xf32>, %sin: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %x1 = tensor.extract_slice %x[0, 0] [2, 4] [1, 1] : tensor<2x8xf32> to tensor<2x4xf32>
  %x2 = tensor.extract_slice %x[0, 4] [2, 4] [1, 1] : tensor<2x8xf32> to tensor<2x4xf32>
  %e4 = tensor.empty() : tensor<2x4xf32>
  %n = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x2 : tensor<2x4xf32>) outs(%e4 : tensor<2x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.negf %a : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  %rot = tensor.concat dim(1) %n, %x1 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x8xf32>
  %e = tensor.empty() : tensor<2x8xf32>
  %y = linalg.generic {indexing_maps = [#id, #id, #id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %cos, %rot, %sin : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) outs(%e : tensor<2x8xf32>) {
  ^bb0(%a: f32, %c: f32, %r: f32, %s: f32, %o: f32):
    %p = arith.mulf %a, %c : f32
    %q = arith.mulf %r, %s : f32
    %t = arith.addf %p, %q : f32
    linalg.yield %t : f32
  } -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

#id = affine_map<(i, j) -> (i, j)>
#t = affine_map<(i, j) -> (j, i)>

// rotate_half's backward assembles its halves as slices inserted into
// zeros, read once by the gradient's sum, which writes its result
// transposed: the sum is computed per half, each half reading its slice and
// the zeros as a constant, each written into its rows of the result. No
// padded tensor is stored.
// CHECK-LABEL: func.func @rotate_half_backward(
// CHECK-SAME:      %[[G:[^:]*]]: tensor<2x8xf32>, %[[COS:[^:]*]]: tensor<2x8xf32>
// CHECK:         %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NOT:     tensor.insert_slice {{.*}} into %cst
// CHECK:         %[[T:.*]] = linalg.generic
// CHECK-DAG:     %[[T1:.*]] = tensor.extract_slice %[[T]][0, 0] [2, 4] [1, 1]
// CHECK-DAG:     %[[T2:.*]] = tensor.extract_slice %[[T]][0, 4] [2, 4] [1, 1]
// CHECK-DAG:     %[[G1:.*]] = tensor.extract_slice %[[G]][0, 0] [2, 4] [1, 1]
// CHECK-DAG:     %[[C1:.*]] = tensor.extract_slice %[[COS]][0, 0] [2, 4] [1, 1]
// CHECK:         %[[A:.*]] = linalg.generic {{.*}} ins(%[[T2]], %[[G1]], %[[C1]] : {{.*}}) outs(%{{.*}} : tensor<4x2xf32>)
// CHECK:           arith.addf %{{.*}}, %[[ZERO]]
// CHECK:         %[[R0:.*]] = tensor.insert_slice %[[A]] into %{{.*}}[0, 0] [4, 2] [1, 1]
// CHECK:         %[[B:.*]] = linalg.generic {{.*}} ins(%[[T1]], %{{.*}}, %{{.*}} : {{.*}}) outs(%{{.*}} : tensor<4x2xf32>)
// CHECK:           arith.negf
// CHECK:           arith.addf %{{.*}}, %[[ZERO]]
// CHECK:         %[[R:.*]] = tensor.insert_slice %[[B]] into %[[R0]][4, 0] [4, 2] [1, 1]
// CHECK:         return %[[R]]
func.func @rotate_half_backward(%g: tensor<2x8xf32>, %cos: tensor<2x8xf32>, %sin: tensor<2x8xf32>) -> tensor<8x2xf32> {
  %zero = arith.constant dense<0.0> : tensor<2x8xf32>
  %e = tensor.empty() : tensor<2x8xf32>
  %t = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%g, %sin : tensor<2x8xf32>, tensor<2x8xf32>) outs(%e : tensor<2x8xf32>) {
  ^bb0(%a: f32, %s: f32, %o: f32):
    %r = arith.mulf %a, %s : f32
    linalg.yield %r : f32
  } -> tensor<2x8xf32>
  %t1 = tensor.extract_slice %t[0, 0] [2, 4] [1, 1] : tensor<2x8xf32> to tensor<2x4xf32>
  %t2 = tensor.extract_slice %t[0, 4] [2, 4] [1, 1] : tensor<2x8xf32> to tensor<2x4xf32>
  %e4 = tensor.empty() : tensor<2x4xf32>
  %n = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%t1 : tensor<2x4xf32>) outs(%e4 : tensor<2x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.negf %a : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  %p1 = tensor.insert_slice %n into %zero[0, 4] [2, 4] [1, 1] : tensor<2x4xf32> into tensor<2x8xf32>
  %p2 = tensor.insert_slice %t2 into %zero[0, 0] [2, 4] [1, 1] : tensor<2x4xf32> into tensor<2x8xf32>
  %et = tensor.empty() : tensor<8x2xf32>
  %y = linalg.generic {indexing_maps = [#id, #id, #id, #id, #t], iterator_types = ["parallel", "parallel"]}
      ins(%p1, %p2, %g, %cos : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) outs(%et : tensor<8x2xf32>) {
  ^bb0(%a: f32, %b: f32, %x: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    %m = arith.mulf %x, %c : f32
    %r = arith.addf %s, %m : f32
    linalg.yield %r : f32
  } -> tensor<8x2xf32>
  return %y : tensor<8x2xf32>
}

// -----

#id = affine_map<(i, j) -> (i, j)>

// A slice inserted into zeros along two dimensions, into a tensor that is
// not a constant, or read by two ops stays whole.
// CHECK-LABEL: func.func @padded_kept(
// CHECK-COUNT-3: tensor.insert_slice
// CHECK-NOT:     tensor.insert_slice
func.func @padded_kept(%x: tensor<2x4xf32>, %d: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %zero = arith.constant dense<0.0> : tensor<4x8xf32>
  %corner = tensor.insert_slice %x into %zero[0, 0] [2, 4] [1, 1] : tensor<2x4xf32> into tensor<4x8xf32>
  %rows = tensor.insert_slice %x into %d[0, 0] [2, 4] [1, 1] : tensor<2x4xf32> into tensor<4x8xf32>
  %e = tensor.empty() : tensor<4x8xf32>
  %y = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%corner, %rows : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %r = arith.addf %p, %q : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %x4 = tensor.concat dim(0) %x, %x : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %twice = tensor.insert_slice %x4 into %zero[0, 4] [4, 4] [1, 1] : tensor<4x4xf32> into tensor<4x8xf32>
  %z = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%twice : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%p: f32, %o: f32):
    %r = arith.negf %p : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %w = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%twice : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%p: f32, %o: f32):
    %r = arith.mulf %p, %p : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  return %y, %z, %w : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

#id = affine_map<(i, j) -> (i, j)>
#t = affine_map<(i, j) -> (j, i)>

// A concatenation read by two ops, or by an op that reads its loops'
// indices (they would be offset in a part), stays whole.
// CHECK-LABEL: func.func @concat_kept(
// CHECK:         tensor.concat
// CHECK:         tensor.concat
func.func @concat_kept(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>, %m: tensor<4x8xf32>, %s: tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8x8xf32>) {
  %c = tensor.concat dim(1) %a, %b : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x8xf32>
  %e = tensor.empty() : tensor<4x8xf32>
  %y = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c, %m : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %r = arith.addf %p, %q : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %z = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%p: f32, %o: f32):
    %r = arith.negf %p : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %d = tensor.concat dim(0) %a, %b : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %e8 = tensor.empty() : tensor<8x8xf32>
  %w = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, 0)>, #t, #id], iterator_types = ["parallel", "parallel"]}
      ins(%d, %s : tensor<8x4xf32>, tensor<8x8xf32>) outs(%e8 : tensor<8x8xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %i = linalg.index 0 : index
    %ii = arith.index_cast %i : index to i32
    %fi = arith.sitofp %ii : i32 to f32
    %r = arith.addf %p, %q : f32
    %rr = arith.addf %r, %fi : f32
    linalg.yield %rr : f32
  } -> tensor<8x8xf32>
  return %y, %z, %w : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8x8xf32>
}

// -----

#id = affine_map<(i, j, k) -> (i, j, k)>

// A transpose that keeps the innermost dimension, read only by an
// elementwise op, is read in place by it; one that moves the innermost
// dimension stays a transpose of its own.
// CHECK-LABEL: func.func @transposes(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<2x3x4xf32>
// CHECK:         linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}], {{.*}} ins(%[[X]] : tensor<2x3x4xf32>)
// CHECK:           arith.negf
// CHECK:         %[[T:.*]] = linalg.transpose ins(%[[X]] : tensor<2x3x4xf32>) {{.*}} permutation = [0, 2, 1]
// CHECK:         linalg.generic {{.*}} ins(%[[T]] : tensor<2x4x3xf32>)
func.func @transposes(%x: tensor<2x3x4xf32>) -> (tensor<3x2x4xf32>, tensor<2x4x3xf32>) {
  %e = tensor.empty() : tensor<3x2x4xf32>
  %t = linalg.transpose ins(%x : tensor<2x3x4xf32>) outs(%e : tensor<3x2x4xf32>) permutation = [1, 0, 2]
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%t : tensor<3x2x4xf32>) outs(%e : tensor<3x2x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.negf %a : f32
    linalg.yield %r : f32
  } -> tensor<3x2x4xf32>
  %e2 = tensor.empty() : tensor<2x4x3xf32>
  %u = linalg.transpose ins(%x : tensor<2x3x4xf32>) outs(%e2 : tensor<2x4x3xf32>) permutation = [0, 2, 1]
  %z = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%u : tensor<2x4x3xf32>) outs(%e2 : tensor<2x4x3xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.negf %a : f32
    linalg.yield %r : f32
  } -> tensor<2x4x3xf32>
  return %y, %z : tensor<3x2x4xf32>, tensor<2x4x3xf32>
}

// -----

#t = affine_map<(i, j) -> (j, i)>
#id = affine_map<(i, j) -> (i, j)>

// Split along the loop the concatenation's rows are read by, another
// operand read transposed is sliced in its own dimension (its columns) and
// a broadcast operand that does not vary along the loop is read whole.
// CHECK-LABEL: func.func @split_transposed_reader(
// CHECK-SAME:      %[[A:[^:]*]]: tensor<4x4xf32>, %[[B:[^:]*]]: tensor<4x4xf32>, %[[S:[^:]*]]: tensor<8x8xf32>, %[[V:[^:]*]]: tensor<8xf32>
// CHECK-NOT:     tensor.concat
// CHECK:         %[[S0:.*]] = tensor.extract_slice %[[S]][0, 0] [8, 4] [1, 1]
// CHECK:         linalg.generic {{.*}} ins(%[[A]], %[[S0]], %[[V]] : tensor<4x4xf32>, tensor<8x4xf32>, tensor<8xf32>) outs(%{{.*}} : tensor<4x8xf32>)
// CHECK:         tensor.insert_slice %{{.*}}[0, 0] [4, 8] [1, 1]
// CHECK:         %[[S1:.*]] = tensor.extract_slice %[[S]][0, 4] [8, 4] [1, 1]
// CHECK:         linalg.generic {{.*}} ins(%[[B]], %[[S1]], %[[V]] : tensor<4x4xf32>, tensor<8x4xf32>, tensor<8xf32>) outs(%{{.*}} : tensor<4x8xf32>)
// CHECK:         tensor.insert_slice %{{.*}}[4, 0] [4, 8] [1, 1]
func.func @split_transposed_reader(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>, %s: tensor<8x8xf32>, %v: tensor<8xf32>) -> tensor<8x8xf32> {
  %d = tensor.concat dim(0) %a, %b : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %e8 = tensor.empty() : tensor<8x8xf32>
  %w = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, 0)>, #t, affine_map<(i, j) -> (j)>, #id], iterator_types = ["parallel", "parallel"]}
      ins(%d, %s, %v : tensor<8x4xf32>, tensor<8x8xf32>, tensor<8xf32>) outs(%e8 : tensor<8x8xf32>) {
  ^bb0(%p: f32, %q: f32, %r: f32, %o: f32):
    %x = arith.addf %p, %q : f32
    %y = arith.mulf %x, %r : f32
    linalg.yield %y : f32
  } -> tensor<8x8xf32>
  return %w : tensor<8x8xf32>
}

// -----

#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (j)>

// Two elementwise ops over one domain that read the same slice of %x (two
// equal extract_slices, as the per-part ops of a rotary embedding do) are
// one op with both results, at the second one's place: the shared half is
// read once, through one operand.
// CHECK-LABEL: func.func @siblings(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<2x8xf32>, %[[C:[^:]*]]: tensor<4xf32>
// CHECK:         %[[X1:.*]] = tensor.extract_slice %[[X]][0, 0] [2, 4] [1, 1]
// CHECK:         %[[X2:.*]] = tensor.extract_slice %[[X]][0, 4] [2, 4] [1, 1]
// CHECK:         %[[M:.*]]:2 = linalg.generic
// CHECK-SAME:        ins(%[[X1]], %[[X2]], %[[C]] : tensor<2x4xf32>, tensor<2x4xf32>, tensor<4xf32>)
// CHECK-SAME:        outs(%{{.*}}, %{{.*}} : tensor<2x4xf32>, tensor<2x4xf32>)
// CHECK:           arith.subf
// CHECK:           arith.mulf
// CHECK:           linalg.yield
// CHECK-NOT:     linalg.generic
// CHECK:         return %[[M]]#0, %[[M]]#1
func.func @siblings(%x: tensor<2x8xf32>, %c: tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  %x1 = tensor.extract_slice %x[0, 0] [2, 4] [1, 1] : tensor<2x8xf32> to tensor<2x4xf32>
  %x2 = tensor.extract_slice %x[0, 4] [2, 4] [1, 1] : tensor<2x8xf32> to tensor<2x4xf32>
  %e = tensor.empty() : tensor<2x4xf32>
  %a = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x1, %x2 : tensor<2x4xf32>, tensor<2x4xf32>) outs(%e : tensor<2x4xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %r = arith.subf %p, %q : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  %x1b = tensor.extract_slice %x[0, 0] [2, 4] [1, 1] : tensor<2x8xf32> to tensor<2x4xf32>
  %f = tensor.empty() : tensor<2x4xf32>
  %b = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x1b, %c : tensor<2x4xf32>, tensor<4xf32>) outs(%f : tensor<2x4xf32>) {
  ^bb0(%p: f32, %s: f32, %o: f32):
    %r = arith.mulf %p, %s : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  return %a, %b : tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

#id = affine_map<(i, j) -> (i, j)>
#t = affine_map<(i, j) -> (j, i)>
#row = affine_map<(i, j) -> (j)>

// Kept apart: an op that reads the other's result (%b reads %a besides
// %x), a tensor shared through another map (%g reads %x transposed) or
// only broadcast (%g and %b read the row %c), and an op whose own input
// would be held longer (%k is the last reader of the product %y; %l
// shares only %b with it).
// CHECK-LABEL: func.func @siblings_kept(
// CHECK-COUNT-5: linalg.generic
// CHECK-NOT:     linalg.generic
func.func @siblings_kept(%x: tensor<4x4xf32>, %c: tensor<4xf32>)
    -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
  %e = tensor.empty() : tensor<4x4xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%p: f32, %o: f32):
    %r = arith.negf %p : f32
    linalg.yield %r : f32
  } -> tensor<4x4xf32>
  %b = linalg.generic {indexing_maps = [#id, #id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a, %x, %c : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%p: f32, %q: f32, %s: f32, %o: f32):
    %m = arith.mulf %p, %s : f32
    %r = arith.addf %m, %q : f32
    linalg.yield %r : f32
  } -> tensor<4x4xf32>
  %g = linalg.generic {indexing_maps = [#t, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %c : tensor<4x4xf32>, tensor<4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%p: f32, %s: f32, %o: f32):
    %r = arith.addf %p, %s : f32
    linalg.yield %r : f32
  } -> tensor<4x4xf32>
  %y = linalg.matmul ins(%x, %x : tensor<4x4xf32>, tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %k = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y, %b : tensor<4x4xf32>, tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %r = arith.subf %p, %q : f32
    linalg.yield %r : f32
  } -> tensor<4x4xf32>
  %l = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%b : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%p: f32, %o: f32):
    %r = arith.mulf %p, %p : f32
    linalg.yield %r : f32
  } -> tensor<4x4xf32>
  return %a, %b, %g, %k, %l : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// A value widened and transposed, then rounded and transposed back (a
// Llama's v once attention reads it sequence-major) fuses into a copy of
// the value in its own layout: that is the value itself, no kernel.
#rows = affine_map<(b, h, s, d) -> (b, s, h, d)>
#id4 = affine_map<(b, h, s, d) -> (b, h, s, d)>
// CHECK-LABEL: func.func @round_trip_transposed(
// CHECK-SAME:      %[[V:[^:]*]]: tensor<1x8x2x4xbf16>
// CHECK-NOT:     linalg.generic
// CHECK:         return %[[V]]
func.func @round_trip_transposed(%v: tensor<1x8x2x4xbf16>) -> tensor<1x8x2x4xbf16> {
  %e = tensor.empty() : tensor<1x2x8x4xf32>
  %w = linalg.generic {indexing_maps = [#rows, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%v : tensor<1x8x2x4xbf16>) outs(%e : tensor<1x2x8x4xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %x = arith.extf %in : bf16 to f32
    linalg.yield %x : f32
  } -> tensor<1x2x8x4xf32>
  %eb = tensor.empty() : tensor<1x8x2x4xbf16>
  %r = linalg.generic {indexing_maps = [#id4, #rows], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%w : tensor<1x2x8x4xf32>) outs(%eb : tensor<1x8x2x4xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<1x8x2x4xbf16>
  return %r : tensor<1x8x2x4xbf16>
}

// -----

// A generic that reads its input through one permutation and writes
// another moves elements: it stays.
#rows = affine_map<(b, h, s, d) -> (b, s, h, d)>
#id4 = affine_map<(b, h, s, d) -> (b, h, s, d)>
// CHECK-LABEL: func.func @transposing_copy(
// CHECK:         linalg.generic
func.func @transposing_copy(%v: tensor<1x8x2x4xf32>) -> tensor<1x2x8x4xf32> {
  %e = tensor.empty() : tensor<1x2x8x4xf32>
  %c = linalg.generic {indexing_maps = [#rows, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%v : tensor<1x8x2x4xf32>) outs(%e : tensor<1x2x8x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<1x2x8x4xf32>
  return %c : tensor<1x2x8x4xf32>
}
