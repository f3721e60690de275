// RUN: zest-opt %s -split-input-file -zest-fuse-rows | FileCheck %s

// A residual add and a LayerNorm-like normalization of its 8 rows of 64: the
// add, the row sums (their zero fill folded into the sum), a value per row
// and the scaling by it and by a weight every row reads become one row
// group. The allocations between them move before it, the frees after it.

#id = affine_map<(r, c) -> (r, c)>
#row = affine_map<(r, c) -> (r)>
#col = affine_map<(r, c) -> (c)>
#one = affine_map<(r) -> (r)>
// CHECK-LABEL: func.func @layer_norm(
// CHECK:         %[[H:.*]] = memref.alloc() : memref<8x64xf32>
// CHECK-NEXT:    %[[SUM:.*]] = memref.alloc() : memref<8xf32>
// CHECK-NEXT:    %[[INV:.*]] = memref.alloc() : memref<8xf32>
// CHECK-NEXT:    scf.execute_region {
// CHECK-NEXT:      linalg.add
// CHECK-NEXT:      linalg.generic
// CHECK-SAME:        iterator_types = ["parallel", "reduction"]
// CHECK-SAME:        attrs = {zest.init_is_identity}
// CHECK:           linalg.generic
// CHECK-SAME:        iterator_types = ["parallel"]
// CHECK:           linalg.generic
// CHECK-SAME:        iterator_types = ["parallel", "parallel"]
// CHECK:           scf.yield
// CHECK-NEXT:    } {zest.row_kernel = 8 : i64}
// CHECK-NEXT:    memref.dealloc %[[SUM]]
// CHECK-NEXT:    memref.dealloc %[[H]]
// CHECK-NEXT:    memref.dealloc %[[INV]]
// CHECK-NEXT:    return
func.func @layer_norm(%x: memref<8x64xf32>, %r: memref<8x64xf32>,
                      %w: memref<64xf32>, %y: memref<8x64xf32>) {
  %zero = arith.constant 0.0 : f32
  %n = arith.constant 64.0 : f32
  %h = memref.alloc() : memref<8x64xf32>
  linalg.add ins(%x, %r : memref<8x64xf32>, memref<8x64xf32>)
             outs(%h : memref<8x64xf32>)
  %sum = memref.alloc() : memref<8xf32>
  linalg.fill ins(%zero : f32) outs(%sum : memref<8xf32>)
  linalg.generic {indexing_maps = [#id, #row],
                  iterator_types = ["parallel", "reduction"]}
      ins(%h : memref<8x64xf32>) outs(%sum : memref<8xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }
  %inv = memref.alloc() : memref<8xf32>
  linalg.generic {indexing_maps = [#one, #one],
                  iterator_types = ["parallel"]}
      ins(%sum : memref<8xf32>) outs(%inv : memref<8xf32>) {
  ^bb0(%s: f32, %o: f32):
    %m = arith.divf %n, %s : f32
    linalg.yield %m : f32
  }
  memref.dealloc %sum : memref<8xf32>
  linalg.generic {indexing_maps = [#id, #row, #col, #id],
                  iterator_types = ["parallel", "parallel"]}
      ins(%h, %inv, %w : memref<8x64xf32>, memref<8xf32>, memref<64xf32>)
      outs(%y : memref<8x64xf32>) {
  ^bb0(%a: f32, %s: f32, %g: f32, %o: f32):
    %c = arith.mulf %a, %s : f32
    %v = arith.mulf %c, %g : f32
    linalg.yield %v : f32
  }
  memref.dealloc %h : memref<8x64xf32>
  memref.dealloc %inv : memref<8xf32>
  return
}

// -----

// Column slices of one concatenation: a row's slice of one op never meets
// another row's slice of the other, so the writer of the first half and the
// sum of the second share a group.

#id = affine_map<(r, c) -> (r, c)>
#row = affine_map<(r, c) -> (r)>
// CHECK-LABEL: func.func @slices(
// CHECK:         scf.execute_region {
// CHECK-NEXT:      linalg.copy
// CHECK-NEXT:      linalg.generic
// CHECK:         } {zest.row_kernel = 8 : i64}
func.func @slices(%x: memref<8x64xf32>, %s: memref<8xf32>) {
  %cat = memref.alloc() : memref<8x128xf32>
  %left = memref.subview %cat[0, 0] [8, 64] [1, 1]
      : memref<8x128xf32> to memref<8x64xf32, strided<[128, 1]>>
  %right = memref.subview %cat[0, 64] [8, 64] [1, 1]
      : memref<8x128xf32> to memref<8x64xf32, strided<[128, 1], offset: 64>>
  linalg.copy ins(%x : memref<8x64xf32>)
              outs(%left : memref<8x64xf32, strided<[128, 1]>>)
  linalg.generic {indexing_maps = [#id, #row],
                  iterator_types = ["parallel", "reduction"]}
      ins(%right : memref<8x64xf32, strided<[128, 1], offset: 64>>)
      outs(%s : memref<8xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %t = arith.addf %acc, %a : f32
    linalg.yield %t : f32
  }
  memref.dealloc %cat : memref<8x128xf32>
  return
}

// -----

// A write that reaches other rows (a transposed write of the summed buffer)
// would race with the blocks still summing them: no group.

#id = affine_map<(r, c) -> (r, c)>
#t = affine_map<(r, c) -> (c, r)>
#row = affine_map<(r, c) -> (r)>
// CHECK-LABEL: func.func @transposed_write(
// CHECK-NOT:     scf.execute_region
func.func @transposed_write(%h: memref<64x64xf32>, %s: memref<64xf32>,
                            %x: memref<64x64xf32>) {
  linalg.generic {indexing_maps = [#id, #row],
                  iterator_types = ["parallel", "reduction"]}
      ins(%h : memref<64x64xf32>) outs(%s : memref<64xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %t = arith.addf %acc, %a : f32
    linalg.yield %t : f32
  }
  linalg.generic {indexing_maps = [#id, #t],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<64x64xf32>) outs(%h : memref<64x64xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  return
}

// -----

// Anything but views, allocations and frees between two ops (a call: a
// product, a collective) ends a group; an op over other rows does not join
// one (8 rows of 64 before a sum over 4 rows of 128).

#id = affine_map<(r, c) -> (r, c)>
#row = affine_map<(r, c) -> (r)>
// CHECK-LABEL: func.func @breaks(
// CHECK-NOT:     scf.execute_region
// CHECK:         call @product
// CHECK-NOT:     scf.execute_region
// CHECK:         return
func.func private @product(memref<8x64xf32>)
func.func @breaks(%h: memref<8x64xf32>, %s: memref<8xf32>,
                  %y: memref<8x64xf32>, %z: memref<4x128xf32>,
                  %t: memref<4xf32>) {
  linalg.generic {indexing_maps = [#id, #row],
                  iterator_types = ["parallel", "reduction"]}
      ins(%h : memref<8x64xf32>) outs(%s : memref<8xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %v = arith.addf %acc, %a : f32
    linalg.yield %v : f32
  }
  call @product(%h) : (memref<8x64xf32>) -> ()
  linalg.generic {indexing_maps = [#id, #row, #id],
                  iterator_types = ["parallel", "parallel"]}
      ins(%h, %s : memref<8x64xf32>, memref<8xf32>)
      outs(%y : memref<8x64xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %v = arith.mulf %a, %b : f32
    linalg.yield %v : f32
  }
  linalg.generic {indexing_maps = [#id, #row],
                  iterator_types = ["parallel", "reduction"]}
      ins(%z : memref<4x128xf32>) outs(%t : memref<4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %v = arith.maximumf %acc, %a : f32
    linalg.yield %v : f32
  }
  return
}

// -----

// An op between that does not join (a column sum: a bias's gradient) moves
// after the group when the ops joining after it touch nothing it writes and
// write nothing it reads; one that writes what a later op reads stays, and
// the group ends before it.

#id = affine_map<(r, c) -> (r, c)>
#row = affine_map<(r, c) -> (r)>
#colsum_in = affine_map<(c, r) -> (r, c)>
#colsum_out = affine_map<(c, r) -> (c)>
// CHECK-LABEL: func.func @deferred(
// CHECK:         scf.execute_region {
// CHECK-NEXT:      linalg.generic
// CHECK-SAME:        iterator_types = ["parallel", "reduction"]
// CHECK:           linalg.generic
// CHECK-SAME:        iterator_types = ["parallel", "parallel"]
// CHECK:           scf.yield
// CHECK-NEXT:    } {zest.row_kernel = 8 : i64}
// CHECK-NEXT:    linalg.generic
// CHECK-SAME:      iterator_types = ["parallel", "reduction"]
// CHECK-SAME:      outs(%arg3 : memref<64xf32>)
// CHECK-NEXT:    ^bb0
// CHECK:         return
func.func @deferred(%h: memref<8x64xf32>, %s: memref<8xf32>,
                    %y: memref<8x64xf32>, %db: memref<64xf32>) {
  linalg.generic {indexing_maps = [#id, #row],
                  iterator_types = ["parallel", "reduction"]}
      ins(%h : memref<8x64xf32>) outs(%s : memref<8xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %v = arith.addf %acc, %a : f32
    linalg.yield %v : f32
  }
  linalg.generic {indexing_maps = [#colsum_in, #colsum_out],
                  iterator_types = ["parallel", "reduction"]}
      ins(%h : memref<8x64xf32>) outs(%db : memref<64xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %v = arith.addf %acc, %a : f32
    linalg.yield %v : f32
  }
  linalg.generic {indexing_maps = [#id, #row, #id],
                  iterator_types = ["parallel", "parallel"]}
      ins(%h, %s : memref<8x64xf32>, memref<8xf32>)
      outs(%y : memref<8x64xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %v = arith.mulf %a, %b : f32
    linalg.yield %v : f32
  }
  return
}

#tr = affine_map<(r, c) -> (c, r)>
// CHECK-LABEL: func.func @not_deferred(
// CHECK-NOT:     scf.execute_region
// CHECK:         return
func.func @not_deferred(%h: memref<8x64xf32>, %s: memref<8xf32>,
                        %t: memref<64x8xf32>, %y: memref<8x64xf32>) {
  linalg.generic {indexing_maps = [#id, #row],
                  iterator_types = ["parallel", "reduction"]}
      ins(%h : memref<8x64xf32>) outs(%s : memref<8xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %v = arith.addf %acc, %a : f32
    linalg.yield %v : f32
  }
  linalg.transpose ins(%h : memref<8x64xf32>) outs(%t : memref<64x8xf32>)
      permutation = [1, 0]
  linalg.generic {indexing_maps = [#tr, #row, #id],
                  iterator_types = ["parallel", "parallel"]}
      ins(%t, %s : memref<64x8xf32>, memref<8xf32>)
      outs(%y : memref<8x64xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %v = arith.mulf %a, %b : f32
    linalg.yield %v : f32
  }
  return
}
