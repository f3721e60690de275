// RUN: zest-opt %s -split-input-file -zest-outline-regions="min-ops=2" | FileCheck %s
// RUN: zest-opt %s -split-input-file -zest-outline-regions=min-ops=100 | FileCheck %s --check-prefix=LARGE

// Three identical blocks, each on its own unit's flat buffer: one region
// function called three times. The views of a unit's buffer are cloned into
// the region (which takes the whole buffer), so the three regions print
// alike. The op that reads no parameter (the square) goes with the unit its
// first user works for. `zest.unit` is consumed.
// CHECK-LABEL: func.func @stack(
// CHECK-SAME:      %[[U0:[^:]*]]: tensor<8xf32>, %[[U1:[^:]*]]: tensor<8xf32>, %[[U2:[^:]*]]: tensor<8xf32>, %[[X:[^:]*]]: tensor<4xf32>)
// CHECK-NOT:     zest.unit
// CHECK-NOT:     linalg.generic
// CHECK:         %[[Y0:.*]] = call @zest_region(%[[X]], %[[U0]])
// CHECK:         %[[Y1:.*]] = call @zest_region(%[[Y0]], %[[U1]])
// CHECK:         %[[Y2:.*]] = call @zest_region(%[[Y1]], %[[U2]])
// CHECK:         return %[[Y2]]
// CHECK:       func.func private @zest_region(%[[IN:.*]]: tensor<4xf32>, %[[FLAT:.*]]: tensor<8xf32>) -> tensor<4xf32>
// CHECK:         %[[SQ:.*]] = linalg.generic {{.*}} ins(%[[IN]], %[[IN]] :
// CHECK:         %[[W:.*]] = tensor.extract_slice %[[FLAT]][4] [4] [1]
// CHECK:         %[[OUT:.*]] = linalg.generic {{.*}} ins(%[[SQ]], %[[W]] :
// CHECK:         return %[[OUT]]
// CHECK-NOT:   func.func private @zest_region_0

// Regions under min-ops ops stay where they are.
// LARGE-LABEL: func.func @stack(
// LARGE-NOT:     call @zest_region
// LARGE-COUNT-6: linalg.generic
// LARGE-NOT:   func.func private @zest_region
#id = affine_map<(i) -> (i)>
func.func @stack(%u0: tensor<8xf32> {zest.unit = @b0}, %u1: tensor<8xf32> {zest.unit = @b1},
                 %u2: tensor<8xf32> {zest.unit = @b2}, %x: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %sq0 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%x, %x : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  %w0 = tensor.extract_slice %u0[4] [4] [1] : tensor<8xf32> to tensor<4xf32>
  %y0 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%sq0, %w0 : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.addf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  %sq1 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%y0, %y0 : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  %w1 = tensor.extract_slice %u1[4] [4] [1] : tensor<8xf32> to tensor<4xf32>
  %y1 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%sq1, %w1 : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.addf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  %sq2 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%y1, %y1 : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  %w2 = tensor.extract_slice %u2[4] [4] [1] : tensor<8xf32> to tensor<4xf32>
  %y2 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%sq2, %w2 : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.addf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  return %y2 : tensor<4xf32>
}

// -----

// Units of gathered buffers come from the tag their collective carries. A
// runtime call cuts regions. A region that occurs once stays inline (the
// last block's, which also computes the output). What a region returns
// that is a view of a buffer it computed is returned whole and viewed again
// by the caller, so bufferization does not copy the view out.
// CHECK-LABEL: func.func @gathered(
// CHECK:         %[[G0:.*]] = bufferization.to_tensor %{{.*}} restrict
// CHECK:         %[[R0:.*]] = call @zest_region(%{{.*}}, %[[G0]])
// CHECK:         %[[V0:.*]] = tensor.extract_slice %[[R0]][0] [2] [1]
// CHECK:         call @zest_pool_mark_gathered
// CHECK:         %[[G1:.*]] = bufferization.to_tensor %{{.*}} restrict
// CHECK:         %[[R1:.*]] = call @zest_region(%[[R0]], %[[G1]])
// CHECK:         %[[V1:.*]] = tensor.extract_slice %[[R1]][0] [2] [1]
// CHECK:         linalg.generic
// CHECK:         return %[[V0]], %[[V1]]
// CHECK:       func.func private @zest_region(%{{.*}}: tensor<4xf32>, %[[F:.*]]: tensor<4xf32>) -> tensor<4xf32>
// CHECK-NOT:     tensor.extract_slice
// CHECK:         return
#id1 = affine_map<(i) -> (i)>
llvm.mlir.global internal constant @zest.tag.b0("b0\00") {addr_space = 0 : i32}
llvm.mlir.global internal constant @zest.tag.b1("b1\00") {addr_space = 0 : i32}
llvm.mlir.global internal constant @zest.tag.b2("b2\00") {addr_space = 0 : i32}
func.func private @zest_all_gather(!llvm.ptr, !llvm.ptr)
func.func private @zest_pool_mark_gathered(!llvm.ptr)
func.func @gathered(%x: tensor<4xf32>) -> (tensor<2xf32>, tensor<2xf32>, tensor<4xf32>) {
  %e = tensor.empty() : tensor<4xf32>
  %t0 = llvm.mlir.addressof @zest.tag.b0 : !llvm.ptr
  %a0 = memref.alloc() : memref<4xf32>
  %i0 = memref.extract_aligned_pointer_as_index %a0 : memref<4xf32> -> index
  %c0 = arith.index_cast %i0 : index to i64
  %p0 = llvm.inttoptr %c0 : i64 to !llvm.ptr
  call @zest_all_gather(%p0, %t0) : (!llvm.ptr, !llvm.ptr) -> ()
  %g0 = bufferization.to_tensor %a0 restrict : memref<4xf32> to tensor<4xf32>
  %y0 = linalg.generic {indexing_maps = [#id1, #id1, #id1], iterator_types = ["parallel"]}
      ins(%x, %g0 : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  %z0 = linalg.generic {indexing_maps = [#id1, #id1, #id1], iterator_types = ["parallel"]}
      ins(%y0, %g0 : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.addf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  %v0 = tensor.extract_slice %z0[0] [2] [1] : tensor<4xf32> to tensor<2xf32>
  call @zest_pool_mark_gathered(%p0) : (!llvm.ptr) -> ()
  %t1 = llvm.mlir.addressof @zest.tag.b1 : !llvm.ptr
  %a1 = memref.alloc() : memref<4xf32>
  %i1 = memref.extract_aligned_pointer_as_index %a1 : memref<4xf32> -> index
  %c1 = arith.index_cast %i1 : index to i64
  %p1 = llvm.inttoptr %c1 : i64 to !llvm.ptr
  call @zest_all_gather(%p1, %t1) : (!llvm.ptr, !llvm.ptr) -> ()
  %g1 = bufferization.to_tensor %a1 restrict : memref<4xf32> to tensor<4xf32>
  %y1 = linalg.generic {indexing_maps = [#id1, #id1, #id1], iterator_types = ["parallel"]}
      ins(%z0, %g1 : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  %z1 = linalg.generic {indexing_maps = [#id1, #id1, #id1], iterator_types = ["parallel"]}
      ins(%y1, %g1 : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.addf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  %v1 = tensor.extract_slice %z1[0] [2] [1] : tensor<4xf32> to tensor<2xf32>
  %t2 = llvm.mlir.addressof @zest.tag.b2 : !llvm.ptr
  %a2 = memref.alloc() : memref<4xf32>
  %i2 = memref.extract_aligned_pointer_as_index %a2 : memref<4xf32> -> index
  %c2 = arith.index_cast %i2 : index to i64
  %p2 = llvm.inttoptr %c2 : i64 to !llvm.ptr
  call @zest_all_gather(%p2, %t2) : (!llvm.ptr, !llvm.ptr) -> ()
  %g2 = bufferization.to_tensor %a2 restrict : memref<4xf32> to tensor<4xf32>
  %y2 = linalg.generic {indexing_maps = [#id1, #id1, #id1], iterator_types = ["parallel"]}
      ins(%z1, %g2 : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.subf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  %z2 = linalg.generic {indexing_maps = [#id1, #id1, #id1], iterator_types = ["parallel"]}
      ins(%y2, %g2 : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.addf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  return %v0, %v1, %z2 : tensor<2xf32>, tensor<2xf32>, tensor<4xf32>
}

// -----

// A zero fill of an empty tensor that the regions start their reductions
// from is cloned into each region, not passed in: passed in, every op that
// writes it would write a copy of it.
// CHECK-LABEL: func.func @shared_fill(
// CHECK:         call @zest_region(%{{.*}}, %{{.*}}) : (tensor<4x4xf32>, tensor<8xf32>)
// CHECK:         call @zest_region(%{{.*}}, %{{.*}}) : (tensor<4x4xf32>, tensor<8xf32>)
// CHECK:       func.func private @zest_region(%{{[^:]*}}: tensor<4x4xf32>, %{{[^:]*}}: tensor<8xf32>) -> tensor<4x4xf32>
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<4xf32>
// CHECK:         %[[Z:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E]] : tensor<4xf32>)
// CHECK:         linalg.generic {{.*}} outs(%[[Z]] : tensor<4xf32>)
#rows = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>
#col = affine_map<(i, j) -> (j)>
func.func @shared_fill(%u0: tensor<8xf32> {zest.unit = @b0}, %u1: tensor<8xf32> {zest.unit = @b1},
                       %x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %e2 = tensor.empty() : tensor<4x4xf32>
  %w0 = tensor.extract_slice %u0[4] [4] [1] : tensor<8xf32> to tensor<4xf32>
  %s0 = linalg.generic {indexing_maps = [#rows, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x4xf32>) outs(%z : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.addf %a, %o : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  %y0 = linalg.generic {indexing_maps = [#row, #col, #rows], iterator_types = ["parallel", "parallel"]}
      ins(%s0, %w0 : tensor<4xf32>, tensor<4xf32>) outs(%e2 : tensor<4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4x4xf32>
  %w1 = tensor.extract_slice %u1[4] [4] [1] : tensor<8xf32> to tensor<4xf32>
  %s1 = linalg.generic {indexing_maps = [#rows, #row], iterator_types = ["parallel", "reduction"]}
      ins(%y0 : tensor<4x4xf32>) outs(%z : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.addf %a, %o : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  %y1 = linalg.generic {indexing_maps = [#row, #col, #rows], iterator_types = ["parallel", "parallel"]}
      ins(%s1, %w1 : tensor<4xf32>, tensor<4xf32>) outs(%e2 : tensor<4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4x4xf32>
  return %y1 : tensor<4x4xf32>
}

// -----

// So is a fill of a static view of an empty tensor (a gradient's slice of
// its unit's flat buffer), with the view: the region computes the gradient
// in its slice instead of a copy of the fill.
// CHECK-LABEL: func.func @shared_fill_of_slice(
// CHECK:         call @zest_region(%{{.*}}, %{{.*}}) : (tensor<4x4xf32>, tensor<8xf32>)
// CHECK:         call @zest_region(%{{.*}}, %{{.*}}) : (tensor<4x4xf32>, tensor<8xf32>)
// CHECK:       func.func private @zest_region(%{{[^:]*}}: tensor<4x4xf32>, %{{[^:]*}}: tensor<8xf32>) -> tensor<4x4xf32>
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<2x4xf32>
// CHECK:         %[[V:.*]] = tensor.extract_slice %[[E]][1, 0] [1, 4] [1, 1]
// CHECK:         %[[Z:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[V]] : tensor<4xf32>)
// CHECK:         linalg.generic {{.*}} outs(%[[Z]] : tensor<4xf32>)
#rows = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>
#col = affine_map<(i, j) -> (j)>
func.func @shared_fill_of_slice(%u0: tensor<8xf32> {zest.unit = @b0}, %u1: tensor<8xf32> {zest.unit = @b1},
                       %x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %zero = arith.constant 0.0 : f32
  %flat = tensor.empty() : tensor<2x4xf32>
  %e = tensor.extract_slice %flat[1, 0] [1, 4] [1, 1] : tensor<2x4xf32> to tensor<4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %e2 = tensor.empty() : tensor<4x4xf32>
  %w0 = tensor.extract_slice %u0[4] [4] [1] : tensor<8xf32> to tensor<4xf32>
  %s0 = linalg.generic {indexing_maps = [#rows, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x4xf32>) outs(%z : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.addf %a, %o : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  %y0 = linalg.generic {indexing_maps = [#row, #col, #rows], iterator_types = ["parallel", "parallel"]}
      ins(%s0, %w0 : tensor<4xf32>, tensor<4xf32>) outs(%e2 : tensor<4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4x4xf32>
  %w1 = tensor.extract_slice %u1[4] [4] [1] : tensor<8xf32> to tensor<4xf32>
  %s1 = linalg.generic {indexing_maps = [#rows, #row], iterator_types = ["parallel", "reduction"]}
      ins(%y0 : tensor<4x4xf32>) outs(%z : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.addf %a, %o : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  %y1 = linalg.generic {indexing_maps = [#row, #col, #rows], iterator_types = ["parallel", "parallel"]}
      ins(%s1, %w1 : tensor<4xf32>, tensor<4xf32>) outs(%e2 : tensor<4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4x4xf32>
  return %y1 : tensor<4x4xf32>
}

// -----

// A flag compared from a hyperparameter (no-sync's accumulate-or-overwrite),
// read by a region and after it: each region and the caller compute it
// again; no region returns it (returned, the flag would be a scalar read
// from device memory on the host under --target=cuda).
// CHECK-LABEL: func.func @step(
// CHECK-SAME:      %[[U:[^:]*]]: tensor<8xf32>, %[[H:[^:]*]]: tensor<10xf32>, %[[X:[^:]*]]: tensor<4xf32>)
// CHECK:         %[[E:.*]] = tensor.extract %[[H]]
// CHECK:         %[[FLAG:.*]] = arith.cmpf une, %[[E]]
// CHECK:         %[[Y:.*]] = call @zest_region(%[[X]], %[[U]], %[[H]]) : (tensor<4xf32>, tensor<8xf32>, tensor<10xf32>) -> tensor<4xf32>
// CHECK:         arith.select %[[FLAG]]
// CHECK-LABEL: func.func @accumulate(
// CHECK:         call @zest_region({{.*}}) : ({{.*}}) -> tensor<4xf32>
// CHECK:       func.func private @zest_region({{.*}}, %[[RH:[^:]*]]: tensor<10xf32>) -> tensor<4xf32>
// CHECK:         %[[RE:.*]] = tensor.extract %[[RH]]
// CHECK:         %[[RFLAG:.*]] = arith.cmpf une, %[[RE]]
// CHECK:         arith.select %[[RFLAG]]
#id = affine_map<(i) -> (i)>
func.func @step(%u0: tensor<8xf32> {zest.unit = @b0}, %hyper: tensor<10xf32>,
                %x: tensor<4xf32>) -> tensor<4xf32> {
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0.0 : f32
  %h = tensor.extract %hyper[%c8] : tensor<10xf32>
  %flag = arith.cmpf une, %h, %zero : f32
  %e = tensor.empty() : tensor<4xf32>
  %w0 = tensor.extract_slice %u0[4] [4] [1] : tensor<8xf32> to tensor<4xf32>
  %y0 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%x, %w0 : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.select %flag, %m, %a : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %y1 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%y0, %w0 : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.addf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  %t = func.call @opaque(%y1) : (tensor<4xf32>) -> tensor<4xf32>
  %y2 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%t : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.select %flag, %a, %o : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %y2 : tensor<4xf32>
}
func.func @accumulate(%u0: tensor<8xf32> {zest.unit = @b0}, %hyper: tensor<10xf32>,
                %x: tensor<4xf32>) -> tensor<4xf32> {
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0.0 : f32
  %h = tensor.extract %hyper[%c8] : tensor<10xf32>
  %flag = arith.cmpf une, %h, %zero : f32
  %e = tensor.empty() : tensor<4xf32>
  %w0 = tensor.extract_slice %u0[4] [4] [1] : tensor<8xf32> to tensor<4xf32>
  %y0 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%x, %w0 : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.select %flag, %m, %a : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %y1 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%y0, %w0 : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.addf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  %t = func.call @opaque(%y1) : (tensor<4xf32>) -> tensor<4xf32>
  %y2 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%t : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.select %flag, %a, %o : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %y2 : tensor<4xf32>
}
func.func private @opaque(tensor<4xf32>) -> tensor<4xf32>

// -----

// What a region clones (empty destinations, their fills, views) goes right
// before its first user, not to the region's start: there each empty would be
// a buffer allocated when the region starts, all of a block's destinations
// alive at once.
// CHECK-LABEL: func.func @sink(
// CHECK:       func.func private @zest_region(%[[X:[^:]*]]: tensor<4xf32>, %[[FLAT:[^:]*]]: tensor<8xf32>)
// CHECK-NEXT:    %[[E2:.*]] = tensor.empty() : tensor<2xf32>
// CHECK-NEXT:    %[[S:.*]] = linalg.generic {{.*}} ins(%[[X]] : tensor<4xf32>) outs(%[[E2]] : tensor<2xf32>)
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<4xf32>
// CHECK-NEXT:    %[[W:.*]] = tensor.extract_slice %[[FLAT]][4] [4] [1]
// CHECK-NEXT:    linalg.generic {{.*}} ins(%[[S]], %[[W]] : {{.*}}) outs(%[[E]] : tensor<4xf32>)
#id = affine_map<(i) -> (i)>
#bc = affine_map<(i) -> (0)>
func.func @sink(%u0: tensor<8xf32> {zest.unit = @b0}, %u1: tensor<8xf32> {zest.unit = @b1},
                %x: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %e2 = tensor.empty() : tensor<2xf32>
  %s0 = linalg.generic {indexing_maps = [#bc, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<4xf32>) outs(%e2 : tensor<2xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<2xf32>
  %w0 = tensor.extract_slice %u0[4] [4] [1] : tensor<8xf32> to tensor<4xf32>
  %y0 = linalg.generic {indexing_maps = [#bc, #id, #id], iterator_types = ["parallel"]}
      ins(%s0, %w0 : tensor<2xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  %s1 = linalg.generic {indexing_maps = [#bc, #id], iterator_types = ["parallel"]}
      ins(%y0 : tensor<4xf32>) outs(%e2 : tensor<2xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<2xf32>
  %w1 = tensor.extract_slice %u1[4] [4] [1] : tensor<8xf32> to tensor<4xf32>
  %y1 = linalg.generic {indexing_maps = [#bc, #id, #id], iterator_types = ["parallel"]}
      ins(%s1, %w1 : tensor<2xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  return %y1 : tensor<4xf32>
}

// -----

// A layer that reads only its weights rounded to bf16 (a cast of a view of
// its unit's buffer) works for that unit, like one that reads them as they
// are: each block's regions hold its norm, its cast and its layer, and the
// three blocks are one region (not the layer with the next block's norm).
// CHECK-LABEL: func.func @rounded_weights(
// CHECK-COUNT-3: call @zest_region(
// CHECK-NOT:     linalg.generic
// CHECK:         return
// CHECK:       func.func private @zest_region(
// CHECK:         arith.truncf
// CHECK:         arith.extf
// CHECK-NOT:   func.func private @zest_region_0
#id2 = affine_map<(i) -> (i)>
func.func @rounded_weights(%u0: tensor<8xf32> {zest.unit = @b0}, %u1: tensor<8xf32> {zest.unit = @b1},
                           %u2: tensor<8xf32> {zest.unit = @b2}, %x: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %e16 = tensor.empty() : tensor<4xbf16>
  %s0 = tensor.extract_slice %u0[0] [4] [1] : tensor<8xf32> to tensor<4xf32>
  %n0 = linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel"]}
      ins(%x, %s0 : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  %w0 = tensor.extract_slice %u0[4] [4] [1] : tensor<8xf32> to tensor<4xf32>
  %c0 = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel"]}
      ins(%w0 : tensor<4xf32>) outs(%e16 : tensor<4xbf16>) {
  ^bb0(%a: f32, %o: bf16):
    %t = arith.truncf %a : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<4xbf16>
  %h0 = linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel"]}
      ins(%n0, %c0 : tensor<4xf32>, tensor<4xbf16>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: bf16, %o: f32):
    %v = arith.extf %b : bf16 to f32
    %m = arith.mulf %a, %v : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  %s1 = tensor.extract_slice %u1[0] [4] [1] : tensor<8xf32> to tensor<4xf32>
  %n1 = linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel"]}
      ins(%h0, %s1 : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  %w1 = tensor.extract_slice %u1[4] [4] [1] : tensor<8xf32> to tensor<4xf32>
  %c1 = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel"]}
      ins(%w1 : tensor<4xf32>) outs(%e16 : tensor<4xbf16>) {
  ^bb0(%a: f32, %o: bf16):
    %t = arith.truncf %a : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<4xbf16>
  %h1 = linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel"]}
      ins(%n1, %c1 : tensor<4xf32>, tensor<4xbf16>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: bf16, %o: f32):
    %v = arith.extf %b : bf16 to f32
    %m = arith.mulf %a, %v : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  %s2 = tensor.extract_slice %u2[0] [4] [1] : tensor<8xf32> to tensor<4xf32>
  %n2 = linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel"]}
      ins(%h1, %s2 : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  %w2 = tensor.extract_slice %u2[4] [4] [1] : tensor<8xf32> to tensor<4xf32>
  %c2 = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel"]}
      ins(%w2 : tensor<4xf32>) outs(%e16 : tensor<4xbf16>) {
  ^bb0(%a: f32, %o: bf16):
    %t = arith.truncf %a : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<4xbf16>
  %h2 = linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel"]}
      ins(%n2, %c2 : tensor<4xf32>, tensor<4xbf16>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: bf16, %o: f32):
    %v = arith.extf %b : bf16 to f32
    %m = arith.mulf %a, %v : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  return %h2 : tensor<4xf32>
}

// -----

// A region's result read after it only through a view that covers less
// than half of it (Pythia's v, a third of its fused projection, read by
// the backward) is copied out at the end of the region: returned whole,
// the rest would live until that reader. A view covering half or more
// (GPT-2's q, k and v, all of its projection) is taken again by the
// caller from the whole result, as before.
#id2 = affine_map<(i, j) -> (i, j)>
// CHECK-LABEL: func.func @narrow_view(
// CHECK:         %[[R0:.*]]:3 = call @zest_region(
// CHECK:         %[[W0:.*]] = tensor.extract_slice %[[R0]]#1[0, 0] [4, 4] [1, 1]
// CHECK:         %[[R1:.*]]:3 = call @zest_region(%[[R0]]#0,
// CHECK:         %[[W1:.*]] = tensor.extract_slice %[[R1]]#1[0, 0] [4, 4] [1, 1]
// CHECK:         return %[[R1]]#0, %[[R0]]#2, %[[R1]]#2, %[[W0]], %[[W1]] :
// CHECK:       func.func private @zest_region({{.*}}) -> (tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x2xf32>)
// CHECK:         %[[V:.*]] = tensor.extract_slice %{{.*}}[0, 4] [4, 2] [1, 1]
// CHECK:         %[[C:.*]] = bufferization.alloc_tensor() copy(%[[V]]) : tensor<4x2xf32>
// CHECK:         return %{{.*}}, %{{.*}}, %[[C]] :
func.func @narrow_view(%u0: tensor<24xf32> {zest.unit = @b0}, %u1: tensor<24xf32> {zest.unit = @b1},
                       %x: tensor<4x6xf32>) -> (tensor<4x6xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
  %e = tensor.empty() : tensor<4x6xf32>
  %w0 = tensor.expand_shape %u0 [[0, 1]] output_shape [4, 6] : tensor<24xf32> into tensor<4x6xf32>
  %p0 = linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x, %w0 : tensor<4x6xf32>, tensor<4x6xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4x6xf32>
  %q0 = linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x, %w0 : tensor<4x6xf32>, tensor<4x6xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.subf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4x6xf32>
  %y0 = linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%p0, %w0 : tensor<4x6xf32>, tensor<4x6xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.addf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4x6xf32>
  %v0 = tensor.extract_slice %p0[0, 4] [4, 2] [1, 1] : tensor<4x6xf32> to tensor<4x2xf32>
  %s0 = tensor.extract_slice %q0[0, 0] [4, 4] [1, 1] : tensor<4x6xf32> to tensor<4x4xf32>
  %w1 = tensor.expand_shape %u1 [[0, 1]] output_shape [4, 6] : tensor<24xf32> into tensor<4x6xf32>
  %p1 = linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%y0, %w1 : tensor<4x6xf32>, tensor<4x6xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4x6xf32>
  %q1 = linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%y0, %w1 : tensor<4x6xf32>, tensor<4x6xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.subf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4x6xf32>
  %y1 = linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%p1, %w1 : tensor<4x6xf32>, tensor<4x6xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.addf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4x6xf32>
  %v1 = tensor.extract_slice %p1[0, 4] [4, 2] [1, 1] : tensor<4x6xf32> to tensor<4x2xf32>
  %s1 = tensor.extract_slice %q1[0, 0] [4, 4] [1, 1] : tensor<4x6xf32> to tensor<4x4xf32>
  return %y1, %v0, %v1, %s0, %s1 : tensor<4x6xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}
