// RUN: zest-opt %s -split-input-file -zest-outline-kernels | FileCheck %s

// Two structurally identical loop nests (two blocks of a stack) share one
// kernel: a fresh allocation and a slice of a flat buffer at another offset
// are both passed with a dynamic offset. Constants of the body are cloned
// into the kernel; values from above become arguments.
// CHECK-LABEL: func.func @step(
// CHECK-SAME:      %[[FLAT:.*]]: memref<16xf32>, %[[X:.*]]: memref<4xf32>, %[[S:.*]]: f32)
// CHECK:         %[[A:.*]] = memref.alloc() : memref<4xf32>
// CHECK:         %[[AC:.*]] = memref.cast %[[A]] : memref<4xf32> to memref<4xf32, strided<[1], offset: ?>>
// CHECK:         call @zest_kernel_0_map_mul_add_f32(%{{.*}}, %[[AC]], %[[S]])
// CHECK:         %[[V:.*]] = memref.subview %[[FLAT]][8] [4] [1]
// CHECK:         %[[VC:.*]] = memref.cast %[[V]] : memref<4xf32, strided<[1], offset: 8>> to memref<4xf32, strided<[1], offset: ?>>
// CHECK:         call @zest_kernel_0_map_mul_add_f32(%{{.*}}, %[[VC]], %[[S]])
// CHECK:         call @zest_kernel_1_map_mul_add_f32(
// CHECK-NOT:     linalg.
// CHECK:         return
// CHECK:       func.func private @zest_kernel_0_map_mul_add_f32(
// CHECK-SAME:      %{{.*}}: memref<4xf32, strided<[1], offset: ?>>, %{{.*}}: memref<4xf32, strided<[1], offset: ?>>, %[[SK:.*]]: f32)
// CHECK-SAME:      attributes {llvm.linkage = #llvm.linkage<internal>, passthrough = ["noinline"], zest.kernel, zest.noalias_pointers = array<i64: 1, 6>}
// CHECK:         %[[TWO:.*]] = arith.constant 2.0
// CHECK:         linalg.generic
// CHECK:           arith.mulf %{{.*}}, %[[TWO]]
// CHECK:           arith.addf %{{.*}}, %[[SK]]
// CHECK:         return
// The same body with another constant is another kernel.
// CHECK:       func.func private @zest_kernel_1_map_mul_add_f32(
// CHECK:         arith.constant 3.0
// CHECK-NOT:   func.func private @zest_kernel_2
#id = affine_map<(i) -> (i)>
func.func @step(%flat: memref<16xf32>, %x: memref<4xf32>, %s: f32) {
  %two = arith.constant 2.0 : f32
  %three = arith.constant 3.0 : f32
  %a = memref.alloc() : memref<4xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : memref<4xf32>) outs(%a : memref<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.mulf %in, %two : f32
    %r = arith.addf %m, %s : f32
    linalg.yield %r : f32
  }
  %v = memref.subview %flat[8] [4] [1] : memref<16xf32> to memref<4xf32, strided<[1], offset: 8>>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%a : memref<4xf32>) outs(%v : memref<4xf32, strided<[1], offset: 8>>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.mulf %in, %two : f32
    %r = arith.addf %m, %s : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : memref<4xf32>) outs(%a : memref<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.mulf %in, %three : f32
    %r = arith.addf %m, %s : f32
    linalg.yield %r : f32
  }
  memref.dealloc %a : memref<4xf32>
  return
}

// -----

// A result-less scf.if holding only computation on buffers (the optimizer's
// apply / accumulate branches) becomes one kernel, its condition an
// argument: the entry point keeps no such branch. A branch with anything
// else (a call) stays, its linalg ops outlined one by one. Ops on tensors
// are left alone (the pass runs after bufferization).
// CHECK-LABEL: func.func @nested(
// CHECK-SAME:      %[[C:[^:]*]]: i1, %[[M:[^:]*]]: memref<4xf32>
// CHECK:         %[[MC:.*]] = memref.cast %[[M]]
// CHECK-NEXT:    call @zest_kernel_0_guarded_fill_f32(%[[C]], %[[MC]]) : (i1, memref<4xf32, strided<[1], offset: ?>>) -> ()
// CHECK-NEXT:    scf.if %[[C]] {
// CHECK-NEXT:      func.call @effect()
// CHECK-NEXT:      memref.cast
// CHECK-NEXT:      func.call @zest_kernel_1_fill_f32(
// CHECK:         linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<4xf32>)
// CHECK:       func.func private @zest_kernel_0_guarded_fill_f32(%[[KC:.*]]: i1, %[[KM:.*]]: memref<4xf32, strided<[1], offset: ?>>)
// CHECK:         scf.if %[[KC]] {
// CHECK-NEXT:      linalg.fill ins(%{{.*}} : f32) outs(%[[KM]] :
func.func @nested(%c: i1, %m: memref<4xf32>, %t: tensor<4xf32>) -> tensor<4xf32> {
  %zero = arith.constant 0.0 : f32
  scf.if %c {
    linalg.fill ins(%zero : f32) outs(%m : memref<4xf32>)
  }
  scf.if %c {
    func.call @effect() : () -> ()
    linalg.fill ins(%zero : f32) outs(%m : memref<4xf32>)
  }
  %r = linalg.fill ins(%zero : f32) outs(%t : tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}
func.func private @effect()

// -----

// Buffers that may overlap (two views of one allocation with overlapping
// ranges) get a kernel without the no-alias mark; disjoint views of one
// buffer and an in-place update (the same buffer read and written) keep it.
// CHECK-LABEL: func.func @aliasing(
// CHECK:         call @zest_kernel_0_copy_f32(
// CHECK:         call @zest_kernel_1_copy_f32(
// CHECK:         call @zest_kernel_0_copy_f32(
// CHECK:       func.func private @zest_kernel_0_copy_f32({{.*}}) attributes {{{.*}}zest.noalias_pointers = array<i64: 1, 6>}
// CHECK:       func.func private @zest_kernel_1_copy_f32(
// CHECK-NOT:     zest.noalias_pointers
// CHECK-SAME:    {
#id = affine_map<(i) -> (i)>
func.func @aliasing(%flat: memref<16xf32>) {
  %a = memref.subview %flat[0] [4] [1] : memref<16xf32> to memref<4xf32, strided<[1]>>
  %b = memref.subview %flat[4] [4] [1] : memref<16xf32> to memref<4xf32, strided<[1], offset: 4>>
  %c = memref.subview %flat[2] [4] [1] : memref<16xf32> to memref<4xf32, strided<[1], offset: 2>>
  linalg.copy ins(%a : memref<4xf32, strided<[1]>>) outs(%b : memref<4xf32, strided<[1], offset: 4>>)
  linalg.copy ins(%a : memref<4xf32, strided<[1]>>) outs(%c : memref<4xf32, strided<[1], offset: 2>>)
  linalg.copy ins(%b : memref<4xf32, strided<[1], offset: 4>>) outs(%a : memref<4xf32, strided<[1]>>)
  return
}

// -----

// Arguments of a private function may alias each other: no mark.
// CHECK-LABEL: func.func private @helper(
// CHECK:       func.func private @zest_kernel_0_copy_f32(
// CHECK-NOT:     zest.noalias_pointers
// CHECK-SAME:    {
func.func private @helper(%a: memref<4xf32>, %b: memref<4xf32>) {
  linalg.copy ins(%a : memref<4xf32>) outs(%b : memref<4xf32>)
  return
}

// -----

// A copy into a column slice (a gradient into its part of a concatenation)
// is no memcpy: it becomes a linalg.copy kernel. A contiguous copy stays a
// memref.copy.
// CHECK-LABEL: func.func @copies(
// CHECK-SAME:      %[[SRC:.*]]: memref<4x8xf32>, %[[DST:.*]]: memref<4x24xf32>, %[[FLAT:.*]]: memref<64xf32>)
// CHECK:         %[[COLS:.*]] = memref.subview %[[DST]][0, 8] [4, 8] [1, 1]
// CHECK:         call @zest_kernel_0_copy_f32(%{{.*}}, %{{.*}})
// CHECK:         %[[ROWS:.*]] = memref.subview %[[FLAT]][32] [32] [1]
// CHECK:         memref.copy %{{.*}}, %[[ROWS]]
// CHECK:       func.func private @zest_kernel_0_copy_f32(
// CHECK:         linalg.copy
func.func @copies(%src: memref<4x8xf32>, %dst: memref<4x24xf32>, %flat: memref<64xf32>) {
  %cols = memref.subview %dst[0, 8] [4, 8] [1, 1] : memref<4x24xf32> to memref<4x8xf32, strided<[24, 1], offset: 8>>
  memref.copy %src, %cols : memref<4x8xf32> to memref<4x8xf32, strided<[24, 1], offset: 8>>
  %rows = memref.subview %flat[32] [32] [1] : memref<64xf32> to memref<32xf32, strided<[1], offset: 32>>
  %v = memref.collapse_shape %src [[0, 1]] : memref<4x8xf32> into memref<32xf32>
  memref.copy %v, %rows : memref<32xf32> to memref<32xf32, strided<[1], offset: 32>>
  return
}

// -----

// A kernel's name says what it computes: its kind (a reduction, an
// elementwise map, a move of elements), its body's arithmetic in order and
// the element type it writes.
// CHECK-LABEL: func.func @names(
// CHECK:         call @zest_kernel_0_reduce_max_f32(
// CHECK:         call @zest_kernel_1_move_bf16(
// CHECK:         call @zest_kernel_2_map_sub_exp_div_more_f32(
#rows = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>
#t = affine_map<(i, j) -> (j, i)>
func.func @names(%x: memref<4x8xf32>, %m: memref<4xf32>, %h: memref<4x8xbf16>,
                 %ht: memref<8x4xbf16>, %y: memref<4x8xf32>) {
  linalg.generic {indexing_maps = [#rows, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x8xf32>) outs(%m : memref<4xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.maximumf %in, %acc : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#rows, #t], iterator_types = ["parallel", "parallel"]}
      ins(%h : memref<4x8xbf16>) outs(%ht : memref<8x4xbf16>) {
  ^bb0(%in: bf16, %out: bf16):
    linalg.yield %in : bf16
  }
  linalg.generic {indexing_maps = [#rows, #row, #rows], iterator_types = ["parallel", "parallel"]}
      ins(%x, %m : memref<4x8xf32>, memref<4xf32>) outs(%y : memref<4x8xf32>) {
  ^bb0(%in: f32, %max: f32, %out: f32):
    %d = arith.subf %in, %max : f32
    %e = math.exp %d : f32
    %q = arith.divf %e, %max : f32
    %n = arith.negf %q : f32
    linalg.yield %n : f32
  }
  return
}
