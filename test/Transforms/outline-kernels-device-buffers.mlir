// RUN: zest-opt %s -split-input-file -zest-outline-kernels=device-buffers | FileCheck %s

// With buffers on a device (zestc --target=cuda) the host cannot read the
// optimizer's hyperparameters: the kernel takes the hyperparameter buffer
// and computes the learning rate and the apply flag itself. A contiguous
// copy becomes a kernel too. The module records each kernel's bytes read,
// bytes written and operations per launch for the GPU profile
// (ZEST_KERNEL_TIMES): the update reads the gradient and the parameter,
// writes the parameter, two operations per element.
// CHECK:       module attributes {zest.kernel_work = {zest_kernel_0_guarded_map_mul_sub_f32 = array<i64: 512, 256, 128>, zest_kernel_1_copy_f32 = array<i64: 256, 256, 64>}}
// CHECK-LABEL: func.func @step(
// CHECK-SAME:      %[[HYPER:.*]]: memref<10xf32>, %[[P:.*]]: memref<64xf32>, %[[G:.*]]: memref<64xf32>, %[[C:.*]]: memref<64xf32>)
// CHECK-NOT:     memref.load
// CHECK:         %[[HC:.*]] = memref.cast %[[HYPER]] : memref<10xf32> to memref<10xf32, strided<[1], offset: ?>>
// CHECK:         call @zest_kernel_0_guarded_map_mul_sub_f32(%[[HC]], %{{.*}}, %{{.*}})
// CHECK-NOT:     memref.copy
// CHECK:         call @zest_kernel_1_copy_f32(
// CHECK:       func.func private @zest_kernel_0_guarded_map_mul_sub_f32(%[[KH:.*]]: memref<10xf32, strided<[1], offset: ?>>, %[[KP:.*]]: memref<64xf32, strided<[1], offset: ?>>, %[[KG:.*]]: memref<64xf32, strided<[1], offset: ?>>)
// CHECK-SAME:      zest.kernel
// CHECK:         %[[FLAG:.*]] = memref.load %[[KH]][%{{.*}}]
// CHECK:         %[[APPLY:.*]] = arith.cmpf une, %[[FLAG]], %{{.*}} : f32
// CHECK:         %[[LR:.*]] = memref.load %[[KH]][%{{.*}}]
// CHECK:         scf.if %[[APPLY]] {
// CHECK:           linalg.generic
// CHECK:             arith.mulf %[[LR]]
// CHECK:       func.func private @zest_kernel_1_copy_f32(
// CHECK:         linalg.copy
#map = affine_map<(d0) -> (d0)>
func.func @step(%hyper: memref<10xf32>, %p: memref<64xf32>, %g: memref<64xf32>, %c: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c9 = arith.constant 9 : index
  %zero = arith.constant 0.0 : f32
  %lr = memref.load %hyper[%c0] : memref<10xf32>
  %flag = memref.load %hyper[%c9] : memref<10xf32>
  %apply = arith.cmpf une, %flag, %zero : f32
  scf.if %apply {
    linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%g : memref<64xf32>) outs(%p : memref<64xf32>) {
    ^bb0(%gi: f32, %pi: f32):
      %step = arith.mulf %lr, %gi : f32
      %new = arith.subf %pi, %step : f32
      linalg.yield %new : f32
    }
  }
  memref.copy %p, %c : memref<64xf32> to memref<64xf32>
  return
}

// -----

// A scalar the glue stores into a buffer (a clipping scale computed from a
// reduced norm) is stored by a kernel that reads the norm itself.
// CHECK-LABEL: func.func @scale(
// CHECK-NOT:     memref.load
// CHECK:         call @zest_kernel_0_store(
// CHECK:       func.func private @zest_kernel_0_store(%[[N:.*]]: memref<f32, strided<[], offset: ?>>, %[[S:.*]]: memref<f32, strided<[], offset: ?>>)
// CHECK:         %[[NORM:.*]] = memref.load %[[N]][]
// CHECK:         %[[Q:.*]] = arith.divf %{{.*}}, %[[NORM]] : f32
// CHECK:         memref.store %[[Q]], %[[S]][]
func.func @scale(%norm: memref<f32>, %scale: memref<f32>) {
  %one = arith.constant 1.0 : f32
  %n = memref.load %norm[] : memref<f32>
  %s = arith.divf %one, %n : f32
  memref.store %s, %scale[] : memref<f32>
  return
}

// -----

// An embedding's backward (torch-mlir's index_put with accumulate): each
// position's gradient row is added to the row its token id selects. The
// host cannot read the ids from the device, so the whole loop becomes one
// kernel, marked to run a thread per position of the rows: its iterations
// touch each position in one thread only (whole rows of distinct buffers;
// the ids are not written).
// Its work is the row's times the loop's 8 trips.
// CHECK:       module attributes {zest.kernel_work = {zest_kernel_0_rows_add_f32 = array<i64: 2048, 1024, 256>}}
// CHECK-LABEL: func.func @scatter_rows(
// CHECK-SAME:      %[[IDS:[^:]*]]: memref<8xi64>, %[[SRC:[^:]*]]: memref<8x32xf32>, %[[GRAD:[^:]*]]: memref<64x32xf32>)
// CHECK-NOT:     scf.for
// CHECK-NOT:     memref.load
// CHECK-DAG:     %[[IC:.*]] = memref.cast %[[IDS]]
// CHECK-DAG:     %[[GC:.*]] = memref.cast %[[GRAD]]
// CHECK-DAG:     %[[SC:.*]] = memref.cast %[[SRC]]
// CHECK:         call @zest_kernel_0_rows_add_f32(%[[IC]], %[[GC]], %[[SC]])
// CHECK:       func.func private @zest_kernel_0_rows_add_f32(%[[KIDS:[^:]*]]: memref<8xi64, strided<[1], offset: ?>>, %[[KGRAD:[^:]*]]: memref<64x32xf32, strided<[32, 1], offset: ?>>, %[[KSRC:[^:]*]]: memref<8x32xf32, strided<[32, 1], offset: ?>>)
// CHECK:         scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:           %[[ID:.*]] = memref.load %[[KIDS]][%[[I]]]
// CHECK:           %[[AT:.*]] = arith.index_cast %[[ID]] : i64 to index
// CHECK:           %[[DST:.*]] = memref.subview %[[KGRAD]][%[[AT]], 0] [1, 32] [1, 1]
// CHECK:           %[[ROW:.*]] = memref.subview %[[KSRC]][%[[I]], 0] [1, 32] [1, 1]
// CHECK:           linalg.add ins(%[[DST]], %[[ROW]] : {{.*}}) outs(%[[DST]] :
// CHECK:         } {zest.per_position_loop}
func.func @scatter_rows(%ids: memref<8xi64>, %src: memref<8x32xf32>, %grad: memref<64x32xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c8 step %c1 {
    %id = memref.load %ids[%i] : memref<8xi64>
    %at = arith.index_cast %id : i64 to index
    %dst = memref.subview %grad[%at, 0] [1, 32] [1, 1] : memref<64x32xf32> to memref<32xf32, strided<[1], offset: ?>>
    %row = memref.subview %src[%i, 0] [1, 32] [1, 1] : memref<8x32xf32> to memref<32xf32, strided<[1], offset: ?>>
    linalg.add ins(%dst, %row : memref<32xf32, strided<[1], offset: ?>>, memref<32xf32, strided<[1], offset: ?>>) outs(%dst : memref<32xf32, strided<[1], offset: ?>>)
  }
  return
}

// -----

// Where a thread per position could race, the loop stays on the host and
// each iteration's kernel places its row itself: half rows (a position of
// one row is another position of the next), a row and a column of one
// buffer, and a row placed by a value loaded from the buffer it writes.
// CHECK-LABEL: func.func @half_rows(
// CHECK:         scf.for %[[I:.*]] =
// CHECK-NOT:       memref.load
// CHECK:           call @zest_kernel_0_add_f32({{.*}}%[[I]]
// CHECK-LABEL: func.func @row_and_column(
// CHECK:         scf.for
// CHECK:           call @zest_kernel_
// CHECK-LABEL: func.func @reads_written(
// CHECK:         scf.for
// CHECK:           call @zest_kernel_
// CHECK-NOT:     zest.per_position_loop
func.func @half_rows(%ids: memref<8xi64>, %src: memref<8x16xf32>, %grad: memref<64x32xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c8 step %c1 {
    %id = memref.load %ids[%i] : memref<8xi64>
    %at = arith.index_cast %id : i64 to index
    %dst = memref.subview %grad[%at, 8] [1, 16] [1, 1] : memref<64x32xf32> to memref<16xf32, strided<[1], offset: ?>>
    %row = memref.subview %src[%i, 0] [1, 16] [1, 1] : memref<8x16xf32> to memref<16xf32, strided<[1], offset: ?>>
    linalg.add ins(%dst, %row : memref<16xf32, strided<[1], offset: ?>>, memref<16xf32, strided<[1], offset: ?>>) outs(%dst : memref<16xf32, strided<[1], offset: ?>>)
  }
  return
}
func.func @row_and_column(%ids: memref<8xi64>, %grad: memref<32x32xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c8 step %c1 {
    %id = memref.load %ids[%i] : memref<8xi64>
    %at = arith.index_cast %id : i64 to index
    %dst = memref.subview %grad[%at, 0] [1, 32] [1, 1] : memref<32x32xf32> to memref<32xf32, strided<[1], offset: ?>>
    %col = memref.subview %grad[0, %i] [32, 1] [1, 1] : memref<32x32xf32> to memref<32xf32, strided<[32], offset: ?>>
    linalg.add ins(%dst, %col : memref<32xf32, strided<[1], offset: ?>>, memref<32xf32, strided<[32], offset: ?>>) outs(%dst : memref<32xf32, strided<[1], offset: ?>>)
  }
  return
}
func.func @reads_written(%src: memref<8x32xf32>, %grad: memref<64x32xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c8 step %c1 {
    %v = memref.load %grad[%i, %c0] : memref<64x32xf32>
    %id = arith.fptoui %v : f32 to i64
    %at = arith.index_cast %id : i64 to index
    %dst = memref.subview %grad[%at, 0] [1, 32] [1, 1] : memref<64x32xf32> to memref<32xf32, strided<[1], offset: ?>>
    %row = memref.subview %src[%i, 0] [1, 32] [1, 1] : memref<8x32xf32> to memref<32xf32, strided<[1], offset: ?>>
    linalg.add ins(%dst, %row : memref<32xf32, strided<[1], offset: ?>>, memref<32xf32, strided<[1], offset: ?>>) outs(%dst : memref<32xf32, strided<[1], offset: ?>>)
  }
  return
}

// -----

// A branch runs one of its alternatives: a kernel's work is the costlier
// one's (the update reads the gradient and the parameter and writes the
// parameter, 3 x 256 bytes; the copy reads 256 and writes 256), not their
// sum (768, 512, 192).
// CHECK: module attributes {zest.kernel_work = {zest_kernel_0_guarded_map_mul_sub_f32 = array<i64: 512, 256, 128>}}
#map = affine_map<(d0) -> (d0)>
func.func @branches(%hyper: memref<10xf32>, %p: memref<64xf32>, %g: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c9 = arith.constant 9 : index
  %zero = arith.constant 0.0 : f32
  %lr = memref.load %hyper[%c0] : memref<10xf32>
  %flag = memref.load %hyper[%c9] : memref<10xf32>
  %apply = arith.cmpf une, %flag, %zero : f32
  scf.if %apply {
    linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%g : memref<64xf32>) outs(%p : memref<64xf32>) {
    ^bb0(%gi: f32, %pi: f32):
      %step = arith.mulf %lr, %gi : f32
      %new = arith.subf %pi, %step : f32
      linalg.yield %new : f32
    }
  } else {
    linalg.copy ins(%g : memref<64xf32>) outs(%p : memref<64xf32>)
  }
  return
}
