// RUN: zest-opt %s -split-input-file -pass-pipeline='builtin.module(zest-write-copies-in-place)' | FileCheck %s

// Attention's q, k and v gradients, each written into a buffer of its own,
// collapsed to rows and copied into their slice of the fused projection's
// gradient: the op writes the three slices (reshaped back to [B, S, H, D])
// directly, the concatenation allocated before it; no copy and no buffer
// per gradient is left.
// CHECK-LABEL: func.func @attention_gradients(
// CHECK:         %[[T:.*]] = memref.alloc() : memref<1x8x48xf32>
// CHECK-DAG:     %[[S0:.*]] = memref.subview %[[T]][0, 0, 0] [1, 8, 16] [1, 1, 1]
// CHECK-DAG:     %[[S1:.*]] = memref.subview %[[T]][0, 0, 16] [1, 8, 16] [1, 1, 1]
// CHECK-DAG:     %[[S2:.*]] = memref.subview %[[T]][0, 0, 32] [1, 8, 16] [1, 1, 1]
// CHECK-DAG:     %[[E0:.*]] = memref.expand_shape %[[S0]] {{\[\[}}0], [1], [2, 3]] output_shape [1, 8, 4, 4] : memref<1x8x16xf32, strided<[384, 48, 1]>> into memref<1x8x4x4xf32, strided<[384, 48, 4, 1]>>
// CHECK-DAG:     %[[E1:.*]] = memref.expand_shape %[[S1]]
// CHECK-DAG:     %[[E2:.*]] = memref.expand_shape %[[S2]]
// CHECK:         zest.attention_backward {{.*}} outs(%[[E0]], %[[E1]], %[[E2]] :
// CHECK-NOT:     memref.copy
// CHECK:         return %[[T]]
func.func @attention_gradients(%x: memref<1x8x4x4xf32>, %lse: memref<1x4x8xf32>) -> memref<1x8x48xf32> {
  %a = memref.alloc() : memref<1x8x4x4xf32>
  %b = memref.alloc() : memref<1x8x4x4xf32>
  %c = memref.alloc() : memref<1x8x4x4xf32>
  zest.attention_backward causal sequence_major scale(0.5) grad_output(%x : memref<1x8x4x4xf32>) ins(%x, %x, %x, %x, %lse : memref<1x8x4x4xf32>, memref<1x8x4x4xf32>, memref<1x8x4x4xf32>, memref<1x8x4x4xf32>, memref<1x4x8xf32>) outs(%a, %b, %c : memref<1x8x4x4xf32>, memref<1x8x4x4xf32>, memref<1x8x4x4xf32>)
  %ra = memref.collapse_shape %a [[0], [1], [2, 3]] : memref<1x8x4x4xf32> into memref<1x8x16xf32>
  %rb = memref.collapse_shape %b [[0], [1], [2, 3]] : memref<1x8x4x4xf32> into memref<1x8x16xf32>
  %rc = memref.collapse_shape %c [[0], [1], [2, 3]] : memref<1x8x4x4xf32> into memref<1x8x16xf32>
  %t = memref.alloc() : memref<1x8x48xf32>
  %s0 = memref.subview %t[0, 0, 0] [1, 8, 16] [1, 1, 1] : memref<1x8x48xf32> to memref<1x8x16xf32, strided<[384, 48, 1]>>
  memref.copy %ra, %s0 : memref<1x8x16xf32> to memref<1x8x16xf32, strided<[384, 48, 1]>>
  %s1 = memref.subview %t[0, 0, 16] [1, 8, 16] [1, 1, 1] : memref<1x8x48xf32> to memref<1x8x16xf32, strided<[384, 48, 1], offset: 16>>
  memref.copy %rb, %s1 : memref<1x8x16xf32> to memref<1x8x16xf32, strided<[384, 48, 1], offset: 16>>
  %s2 = memref.subview %t[0, 0, 32] [1, 8, 16] [1, 1, 1] : memref<1x8x48xf32> to memref<1x8x16xf32, strided<[384, 48, 1], offset: 32>>
  memref.copy %rc, %s2 : memref<1x8x16xf32> to memref<1x8x16xf32, strided<[384, 48, 1], offset: 32>>
  return %t : memref<1x8x48xf32>
}

// -----

#id = affine_map<(i, j) -> (i, j)>

// Kept: a source read after its copy, a target read between the op and
// the copy, a source written by a call (its signature fixes the buffer's
// layout), and a source two ops write whose target, larger, is allocated
// after the first (allocated earlier, it would hold more than the source).
// CHECK-LABEL: func.func @kept(
// CHECK-COUNT-4: memref.copy
func.func private @produce(memref<4x8xf32>)
func.func @kept(%x: memref<4x8xf32>, %y: memref<4x8xf32>) -> (memref<8x8xf32>, memref<8x8xf32>, memref<8x8xf32>) {
  %two = memref.alloc() : memref<4x8xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : memref<4x8xf32>) outs(%two : memref<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.negf %a : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : memref<4x8xf32>) outs(%two : memref<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %a, %o : f32
    linalg.yield %r : f32
  }
  %big = memref.alloc() : memref<8x8xf32>
  %bs = memref.subview %big[0, 0] [4, 8] [1, 1] : memref<8x8xf32> to memref<4x8xf32, strided<[8, 1]>>
  memref.copy %two, %bs : memref<4x8xf32> to memref<4x8xf32, strided<[8, 1]>>
  %late = memref.alloc() : memref<4x8xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : memref<4x8xf32>) outs(%late : memref<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.negf %a : f32
    linalg.yield %r : f32
  }
  %t = memref.alloc() : memref<8x8xf32>
  %s = memref.subview %t[0, 0] [4, 8] [1, 1] : memref<8x8xf32> to memref<4x8xf32, strided<[8, 1]>>
  memref.copy %late, %s : memref<4x8xf32> to memref<4x8xf32, strided<[8, 1]>>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%late : memref<4x8xf32>) outs(%y : memref<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  %w = memref.alloc() : memref<8x8xf32>
  %v = memref.alloc() : memref<4x8xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : memref<4x8xf32>) outs(%v : memref<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.negf %a : f32
    linalg.yield %r : f32
  }
  %ws = memref.subview %w[0, 0] [4, 8] [1, 1] : memref<8x8xf32> to memref<4x8xf32, strided<[8, 1]>>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%ws : memref<4x8xf32, strided<[8, 1]>>) outs(%y : memref<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  memref.copy %v, %ws : memref<4x8xf32> to memref<4x8xf32, strided<[8, 1]>>
  %p = memref.alloc() : memref<4x8xf32>
  func.call @produce(%p) : (memref<4x8xf32>) -> ()
  %ps = memref.subview %w[4, 0] [4, 8] [1, 1] : memref<8x8xf32> to memref<4x8xf32, strided<[8, 1], offset: 32>>
  memref.copy %p, %ps : memref<4x8xf32> to memref<4x8xf32, strided<[8, 1], offset: 32>>
  return %t, %w, %big : memref<8x8xf32>, memref<8x8xf32>, memref<8x8xf32>
}

// -----

#id = affine_map<(i, j) -> (i, j)>
#cols = affine_map<(i, j) -> (j)>

// Sources several ops access before their copy: a column sum started from
// a fill (a norm's weight gradient, copied into the unit's gradient
// buffer), and a buffer written and then read by another op before the
// copy. Every access uses the target's slice instead; no copy is left. The
// second source's target is allocated after its first use but is no larger
// than it, so it is allocated there instead.
// CHECK-LABEL: func.func @forwarded(
// CHECK:         %[[T:.*]] = memref.alloc() : memref<8x8xf32>
// CHECK:         %[[S:.*]] = memref.subview %[[T]][0, 0] [1, 8] [1, 1]
// CHECK:         %[[S1:.*]] = memref.collapse_shape %[[S]]
// CHECK:         linalg.fill ins(%{{.*}} : f32) outs(%[[S1]] :
// CHECK:         linalg.generic {{.*}} ins(%{{.*}} : memref<4x8xf32>) outs(%[[S1]] :
// CHECK:         %[[U:.*]] = memref.alloc() : memref<4x8xf32>
// CHECK:         linalg.generic {{.*}} outs(%[[U]] :
// CHECK:         linalg.generic {{.*}} ins(%[[U]] : {{.*}}) outs(%{{.*}} : memref<4x8xf32>)
// CHECK-NOT:     memref.copy
// CHECK:         return %[[T]], %[[U]]
func.func @forwarded(%x: memref<4x8xf32>, %y: memref<4x8xf32>) -> (memref<8x8xf32>, memref<4x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %t = memref.alloc() : memref<8x8xf32>
  %sum = memref.alloc() : memref<8xf32>
  linalg.fill ins(%zero : f32) outs(%sum : memref<8xf32>)
  linalg.generic {indexing_maps = [#id, #cols], iterator_types = ["reduction", "parallel"]} ins(%x : memref<4x8xf32>) outs(%sum : memref<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %a, %o : f32
    linalg.yield %r : f32
  }
  %row = memref.subview %t[0, 0] [1, 8] [1, 1] : memref<8x8xf32> to memref<1x8xf32, strided<[8, 1]>>
  %row1 = memref.collapse_shape %row [[0, 1]] : memref<1x8xf32, strided<[8, 1]>> into memref<8xf32, strided<[1]>>
  memref.copy %sum, %row1 : memref<8xf32> to memref<8xf32, strided<[1]>>
  %shared = memref.alloc() : memref<4x8xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : memref<4x8xf32>) outs(%shared : memref<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.negf %a : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%shared : memref<4x8xf32>) outs(%y : memref<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  %u = memref.alloc() : memref<4x8xf32>
  memref.copy %shared, %u : memref<4x8xf32> to memref<4x8xf32>
  return %t, %u : memref<8x8xf32>, memref<4x8xf32>
}

// -----

#id = affine_map<(i, j) -> (i, j)>

// A region's result made an out-parameter: every call passes an allocation
// of its own, so nothing else aliases %out in @region. One op writes both
// halves of a rotary embedding: the first into its slice of %out already
// (leaving a copy onto itself, erased), the second into a slice of a
// buffer of its own, copied into %out: it writes %out's slice directly.
// CHECK-LABEL: func.func private @region(
// CHECK-SAME:      %[[X:[^:]*]]: memref<2x4xf32>, %[[OUT:[^:]*]]: memref<2x8xf32>
// CHECK-DAG:     %[[LO:.*]] = memref.subview %[[OUT]][0, 0] [2, 4] [1, 1]
// CHECK-DAG:     %[[HI:.*]] = memref.subview %[[OUT]][0, 4] [2, 4] [1, 1]
// CHECK:         linalg.generic {{.*}} ins(%[[X]] : memref<2x4xf32>) outs(%[[LO]], %[[HI]] :
// CHECK-NOT:     memref.alloc
// CHECK-NOT:     memref.copy
// CHECK:         return
func.func private @region(%x: memref<2x4xf32>, %out: memref<2x8xf32>) {
  %lo = memref.subview %out[0, 0] [2, 4] [1, 1] : memref<2x8xf32> to memref<2x4xf32, strided<[8, 1]>>
  %part = memref.alloc() : memref<2x8xf32>
  %hi = memref.subview %part[0, 4] [2, 4] [1, 1] : memref<2x8xf32> to memref<2x4xf32, strided<[8, 1], offset: 4>>
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : memref<2x4xf32>) outs(%lo, %hi : memref<2x4xf32, strided<[8, 1]>>, memref<2x4xf32, strided<[8, 1], offset: 4>>) {
  ^bb0(%a: f32, %o: f32, %p: f32):
    %n = arith.negf %a : f32
    linalg.yield %n, %a : f32, f32
  }
  %lo2 = memref.subview %out[0, 0] [2, 4] [1, 1] : memref<2x8xf32> to memref<2x4xf32, strided<[8, 1]>>
  memref.copy %lo, %lo2 : memref<2x4xf32, strided<[8, 1]>> to memref<2x4xf32, strided<[8, 1]>>
  %hi2 = memref.subview %out[0, 4] [2, 4] [1, 1] : memref<2x8xf32> to memref<2x4xf32, strided<[8, 1], offset: 4>>
  memref.copy %hi, %hi2 : memref<2x4xf32, strided<[8, 1], offset: 4>> to memref<2x4xf32, strided<[8, 1], offset: 4>>
  return
}

func.func @step(%x: memref<2x4xf32>) -> (memref<2x8xf32>, memref<2x8xf32>) {
  %a = memref.alloc() : memref<2x8xf32>
  call @region(%x, %a) : (memref<2x4xf32>, memref<2x8xf32>) -> ()
  %b = memref.alloc() : memref<2x8xf32>
  call @region(%x, %b) : (memref<2x4xf32>, memref<2x8xf32>) -> ()
  return %a, %b : memref<2x8xf32>, memref<2x8xf32>
}

// -----

#id = affine_map<(i, j) -> (i, j)>

// Kept: a target argument a call passes twice (%t may alias %u, which the
// op reads), and one of a public function (any caller).
// CHECK-LABEL: func.func private @aliased(
// CHECK:         memref.copy
// CHECK-LABEL: func.func @public(
// CHECK:         memref.copy
func.func private @aliased(%t: memref<2x8xf32>, %u: memref<2x8xf32>) {
  %part = memref.alloc() : memref<2x4xf32>
  %v = memref.subview %u[0, 0] [2, 4] [1, 1] : memref<2x8xf32> to memref<2x4xf32, strided<[8, 1]>>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%v : memref<2x4xf32, strided<[8, 1]>>) outs(%part : memref<2x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %n = arith.negf %a : f32
    linalg.yield %n : f32
  }
  %s = memref.subview %t[0, 4] [2, 4] [1, 1] : memref<2x8xf32> to memref<2x4xf32, strided<[8, 1], offset: 4>>
  memref.copy %part, %s : memref<2x4xf32> to memref<2x4xf32, strided<[8, 1], offset: 4>>
  return
}

func.func @public(%x: memref<2x4xf32>, %t: memref<2x8xf32>) {
  %part = memref.alloc() : memref<2x4xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : memref<2x4xf32>) outs(%part : memref<2x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %n = arith.negf %a : f32
    linalg.yield %n : f32
  }
  %s = memref.subview %t[0, 4] [2, 4] [1, 1] : memref<2x8xf32> to memref<2x4xf32, strided<[8, 1], offset: 4>>
  memref.copy %part, %s : memref<2x4xf32> to memref<2x4xf32, strided<[8, 1], offset: 4>>
  return
}

func.func @caller() -> memref<2x8xf32> {
  %a = memref.alloc() : memref<2x8xf32>
  call @aliased(%a, %a) : (memref<2x8xf32>, memref<2x8xf32>) -> ()
  return %a : memref<2x8xf32>
}

// -----

#id4 = affine_map<(b, s, h, d) -> (b, s, h, d)>

// Pythia's gradients: q's and k's pass through the rotary embedding's
// backward (here a negation each) before their copies, v's is copied as
// attention's backward wrote it. The copies of the other parts, into
// slices apart from v's, lie between that op and v's copy: they do not
// stop it from writing v's slice, and every part is written in place.
// CHECK-LABEL: func.func @parts_written_between(
// CHECK:         %[[T:.*]] = memref.alloc() : memref<1x8x48xf32>
// CHECK:         %[[V:.*]] = memref.subview %[[T]][0, 0, 32] [1, 8, 16] [1, 1, 1]
// CHECK:         %[[V4:.*]] = memref.expand_shape %[[V]]
// CHECK:         zest.attention_backward {{.*}} outs(%{{.*}}, %{{.*}}, %[[V4]] :
// CHECK-NOT:     memref.copy
// CHECK:         return %[[T]]
func.func @parts_written_between(%x: memref<1x8x4x4xf32>, %lse: memref<1x4x8xf32>) -> memref<1x8x48xf32> {
  %a = memref.alloc() : memref<1x8x4x4xf32>
  %b = memref.alloc() : memref<1x8x4x4xf32>
  %c = memref.alloc() : memref<1x8x4x4xf32>
  zest.attention_backward causal sequence_major scale(0.5) grad_output(%x : memref<1x8x4x4xf32>) ins(%x, %x, %x, %x, %lse : memref<1x8x4x4xf32>, memref<1x8x4x4xf32>, memref<1x8x4x4xf32>, memref<1x8x4x4xf32>, memref<1x4x8xf32>) outs(%a, %b, %c : memref<1x8x4x4xf32>, memref<1x8x4x4xf32>, memref<1x8x4x4xf32>)
  %qa = memref.alloc() : memref<1x8x4x4xf32>
  linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%a : memref<1x8x4x4xf32>) outs(%qa : memref<1x8x4x4xf32>) {
  ^bb0(%in: f32, %o: f32):
    %n = arith.negf %in : f32
    linalg.yield %n : f32
  }
  %kb = memref.alloc() : memref<1x8x4x4xf32>
  linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%b : memref<1x8x4x4xf32>) outs(%kb : memref<1x8x4x4xf32>) {
  ^bb0(%in: f32, %o: f32):
    %n = arith.negf %in : f32
    linalg.yield %n : f32
  }
  %rq = memref.collapse_shape %qa [[0], [1], [2, 3]] : memref<1x8x4x4xf32> into memref<1x8x16xf32>
  %rk = memref.collapse_shape %kb [[0], [1], [2, 3]] : memref<1x8x4x4xf32> into memref<1x8x16xf32>
  %rv = memref.collapse_shape %c [[0], [1], [2, 3]] : memref<1x8x4x4xf32> into memref<1x8x16xf32>
  %t = memref.alloc() : memref<1x8x48xf32>
  %s0 = memref.subview %t[0, 0, 0] [1, 8, 16] [1, 1, 1] : memref<1x8x48xf32> to memref<1x8x16xf32, strided<[384, 48, 1]>>
  memref.copy %rq, %s0 : memref<1x8x16xf32> to memref<1x8x16xf32, strided<[384, 48, 1]>>
  %s1 = memref.subview %t[0, 0, 16] [1, 8, 16] [1, 1, 1] : memref<1x8x48xf32> to memref<1x8x16xf32, strided<[384, 48, 1], offset: 16>>
  memref.copy %rk, %s1 : memref<1x8x16xf32> to memref<1x8x16xf32, strided<[384, 48, 1], offset: 16>>
  %s2 = memref.subview %t[0, 0, 32] [1, 8, 16] [1, 1, 1] : memref<1x8x48xf32> to memref<1x8x16xf32, strided<[384, 48, 1], offset: 32>>
  memref.copy %rv, %s2 : memref<1x8x16xf32> to memref<1x8x16xf32, strided<[384, 48, 1], offset: 32>>
  return %t : memref<1x8x48xf32>
}

// -----

#id = affine_map<(i, j) -> (i, j)>

// Pythia's partial rotary embedding: its rotated part (the first 8 of 16
// features here) is a slice of q's buffer, and each half a slice of that
// slice. The op writes the first half there and the second into a buffer
// of its own, copied into the second half: the halves are boxes of q's
// buffer that do not overlap (nested slices compose), so it writes the
// second half directly.
// CHECK-LABEL: func.func @nested_slices(
// CHECK:         %[[T:.*]] = memref.alloc() : memref<2x16xf32>
// CHECK:         %[[LO:.*]] = memref.subview %{{.*}}[0, 0] [2, 4] [1, 1]
// CHECK:         %[[HI:.*]] = memref.subview %{{.*}}[0, 4] [2, 4] [1, 1]
// CHECK:         linalg.generic {{.*}} outs(%[[LO]], %[[HI]] :
// CHECK-NOT:     memref.copy
// CHECK:         return %[[T]]
func.func @nested_slices(%x: memref<2x4xf32>) -> memref<2x16xf32> {
  %t = memref.alloc() : memref<2x16xf32>
  %part = memref.subview %t[0, 0] [2, 8] [1, 1] : memref<2x16xf32> to memref<2x8xf32, strided<[16, 1]>>
  %lo = memref.subview %part[0, 0] [2, 4] [1, 1] : memref<2x8xf32, strided<[16, 1]>> to memref<2x4xf32, strided<[16, 1]>>
  %own = memref.alloc() : memref<2x4xf32>
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : memref<2x4xf32>) outs(%lo, %own : memref<2x4xf32, strided<[16, 1]>>, memref<2x4xf32>) {
  ^bb0(%a: f32, %o: f32, %p: f32):
    %n = arith.negf %a : f32
    linalg.yield %n, %a : f32, f32
  }
  %hi = memref.subview %part[0, 4] [2, 4] [1, 1] : memref<2x8xf32, strided<[16, 1]>> to memref<2x4xf32, strided<[16, 1], offset: 4>>
  memref.copy %own, %hi : memref<2x4xf32> to memref<2x4xf32, strided<[16, 1], offset: 4>>
  return %t : memref<2x16xf32>
}
