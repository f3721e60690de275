// RUN: zest-opt %s -split-input-file -verify-diagnostics \
// RUN:   -zest-map-kernels-to-gpu -canonicalize | FileCheck %s
// A block is 1 to 1024 threads.
// RUN: not zest-opt %s -split-input-file -zest-map-kernels-to-gpu=block-size=0 \
// RUN:   2>&1 | FileCheck %s --check-prefix=BLOCKSIZE
// BLOCKSIZE: error: zest-map-kernels-to-gpu: block-size 0 is not between 1 and 1024 threads
// A thread's accesses are 4, 8 or 16 bytes, or one element.
// RUN: not zest-opt %s -split-input-file -zest-map-kernels-to-gpu=vector-bytes=12 \
// RUN:   2>&1 | FileCheck %s --check-prefix=VECTORBYTES
// VECTORBYTES: error: zest-map-kernels-to-gpu: vector-bytes 12 is none of 0 (one element), 4, 8 and 16

// An elementwise op: one thread per element, 256 per block; 8 x 99 = 792
// elements need 4 blocks, the last one partly idle. Each thread recovers
// (row, column) from its linear index, the column fastest. (Rows of 99 f32
// take no 16-byte vectors: see the end of this file.)

// CHECK-LABEL: func.func private @zest_kernel_0(
// CHECK-DAG:     %[[C1:.*]] = arith.constant 1 : index
// CHECK-DAG:     %[[GRID:.*]] = arith.constant 4 : index
// CHECK-DAG:     %[[BLOCK:.*]] = arith.constant 256 : index
// CHECK:         gpu.launch blocks(%[[BX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[GRID]], %{{.*}} = %[[C1]], %{{.*}} = %[[C1]]) threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[BLOCK]], %{{.*}} = %[[C1]], %{{.*}} = %[[C1]])
// CHECK:           %[[SCALED:.*]] = arith.muli %[[BX]], %{{.*}} : index
// CHECK:           %[[ID:.*]] = arith.addi %[[SCALED]], %[[TX]] : index
// CHECK:           %[[IN:.*]] = arith.cmpi ult, %[[ID]], %{{.*}} : index
// CHECK:           scf.if %[[IN]] {
// CHECK:             %[[COL:.*]] = arith.remui %[[ID]], %{{.*}} : index
// CHECK:             %[[ROW:.*]] = arith.divui %[[ID]], %{{.*}} : index
// CHECK:             %[[A:.*]] = memref.load %arg0[%[[ROW]], %[[COL]]]
// CHECK:             %[[B:.*]] = memref.load %arg1[%[[ROW]], %[[COL]]]
// CHECK:             %[[D:.*]] = arith.subf %[[A]], %[[B]] : f32
// CHECK:             memref.store %[[D]], %arg2[%[[ROW]], %[[COL]]]
// CHECK:           gpu.terminator
// CHECK-NOT:     gpu.launch
// CHECK:         return
func.func private @zest_kernel_0(%arg0: memref<8x99xf32, strided<[99, 1], offset: ?>>, %arg1: memref<8x99xf32, strided<[99, 1], offset: ?>>, %arg2: memref<8x99xf32, strided<[99, 1], offset: ?>>) attributes {zest.kernel} {
  linalg.sub ins(%arg0, %arg1 : memref<8x99xf32, strided<[99, 1], offset: ?>>, memref<8x99xf32, strided<[99, 1], offset: ?>>) outs(%arg2 : memref<8x99xf32, strided<[99, 1], offset: ?>>)
  return
}

// A function that is not a kernel (the step's glue) is left alone.
// CHECK-LABEL: func.func @glue(
// CHECK-NOT:     gpu.launch
// CHECK:         call @zest_kernel_0(
func.func @glue(%a: memref<8x99xf32, strided<[99, 1], offset: ?>>, %b: memref<8x99xf32, strided<[99, 1], offset: ?>>, %c: memref<8x99xf32, strided<[99, 1], offset: ?>>) {
  call @zest_kernel_0(%a, %b, %c) : (memref<8x99xf32, strided<[99, 1], offset: ?>>, memref<8x99xf32, strided<[99, 1], offset: ?>>, memref<8x99xf32, strided<[99, 1], offset: ?>>) -> ()
  return
}

// -----

// A column sum written with the reduction loop first: the parallel column
// loop is moved in front, so 64 threads (one block, no guard) each sum their
// column over the 512 rows sequentially in a register (the thread index is
// the column) and add it to the buffer's element once.

#in = affine_map<(r, c) -> (r, c)>
#out = affine_map<(r, c) -> (c)>
// CHECK-LABEL: func.func private @zest_kernel_0(
// CHECK-DAG:     %[[C1:.*]] = arith.constant 1 : index
// CHECK-DAG:     %[[C64:.*]] = arith.constant 64 : index
// CHECK:         gpu.launch blocks(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %[[C1]], %{{.*}} = %[[C1]], %{{.*}} = %[[C1]]) threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[C64]], %{{.*}} = %[[C1]], %{{.*}} = %[[C1]])
// CHECK-NOT:       scf.if
// CHECK:           %[[SUM:.*]] = scf.for %[[ROW:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[ACC:.*]] = %{{.*}}) -> (f32)
// CHECK:             %[[X:.*]] = memref.load %arg0[%[[ROW]], %[[TX]]]
// CHECK:             %[[NEXT:.*]] = arith.addf %[[ACC]], %[[X]] : f32
// CHECK:             scf.yield %[[NEXT]]
// CHECK:           %[[OLD:.*]] = memref.load %arg1[%[[TX]]]
// CHECK:           %[[NEW:.*]] = arith.addf %[[OLD]], %[[SUM]] : f32
// CHECK:           memref.store %[[NEW]], %arg1[%[[TX]]]
// CHECK:           gpu.terminator
func.func private @zest_kernel_0(%x: memref<512x64xf32>, %y: memref<64xf32>) attributes {zest.kernel} {
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["reduction", "parallel"]} ins(%x : memref<512x64xf32>) outs(%y : memref<64xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.addf %in, %out : f32
    linalg.yield %0 : f32
  }
  return
}

// -----

// Without a parallel dimension a fill of a 0-d buffer runs on one thread,
// and a sum to a scalar on one block: each of its 256 threads sums every
// 256th element in a register, gpu.all_reduce combines the partial sums in
// a tree, and thread 0 adds the total to the buffer. A kernel's scf.if (the
// optimizer's apply branch) stays on the host around its launches: its
// condition is a scalar argument.

// CHECK-LABEL: func.func private @zest_kernel_0(
// CHECK-SAME:      %[[APPLY:.*]]: i1, %[[SUM:.*]]: memref<f32>, %[[X:.*]]: memref<1000xf32>
// CHECK-DAG:     %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG:     %[[C1:.*]] = arith.constant 1 : index
// CHECK-DAG:     %[[C256:.*]] = arith.constant 256 : index
// CHECK-DAG:     %[[C1000:.*]] = arith.constant 1000 : index
// CHECK-DAG:     %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK:         scf.if %[[APPLY]] {
// CHECK:           gpu.launch blocks(%{{.*}}) in (%{{.*}} = %[[C1]], %{{.*}} = %[[C1]], %{{.*}} = %[[C1]]) threads(%{{.*}}) in (%{{.*}} = %[[C1]], %{{.*}} = %[[C1]], %{{.*}} = %[[C1]])
// CHECK:             memref.store %{{.*}}, %[[SUM]][]
// CHECK:             gpu.terminator
// CHECK:           gpu.launch blocks(%{{.*}}) in (%{{.*}} = %[[C1]], %{{.*}} = %[[C1]], %{{.*}} = %[[C1]]) threads(%[[T:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[C256]], %{{.*}} = %[[C1]], %{{.*}} = %[[C1]])
// CHECK:             %[[PART:.*]] = scf.for %[[I:.*]] = %[[T]] to %[[C1000]] step %[[C256]] iter_args(%[[ACC:.*]] = %[[ZERO]]) -> (f32) {
// CHECK:               %[[V:.*]] = memref.load %[[X]][%[[I]]]
// CHECK:               %[[NEXT:.*]] = arith.addf %[[ACC]], %[[V]] : f32
// CHECK:               scf.yield %[[NEXT]]
// CHECK:             %[[TOTAL:.*]] = gpu.all_reduce add %[[PART]] uniform
// CHECK:             %[[FIRST:.*]] = arith.cmpi eq, %[[T]], %[[C0]]
// CHECK:             scf.if %[[FIRST]] {
// CHECK:               %[[OLD:.*]] = memref.load %[[SUM]][]
// CHECK:               %[[NEW:.*]] = arith.addf %[[OLD]], %[[TOTAL]]
// CHECK:               memref.store %[[NEW]], %[[SUM]][]
// CHECK:             gpu.terminator
// CHECK:         }
func.func private @zest_kernel_0(%apply: i1, %sum: memref<f32>, %x: memref<1000xf32>) attributes {zest.kernel} {
  scf.if %apply {
    %zero = arith.constant 0.0 : f32
    linalg.fill ins(%zero : f32) outs(%sum : memref<f32>)
    linalg.reduce ins(%x : memref<1000xf32>) outs(%sum : memref<f32>) dimensions = [0]
      (%in: f32, %acc: f32) {
        %0 = arith.addf %in, %acc : f32
        linalg.yield %0 : f32
      }
  }
  return
}

// -----

// A sum of squares over a matrix read transposed (the body's other ops are
// computed per element, the indices come from the linearized iteration,
// innermost fastest); a maximum is shared the same way (from -inf, combined
// by maximumf); a product keeps the one-thread loop.
#t = affine_map<(i, j) -> (j, i)>
#s = affine_map<(i, j) -> ()>
// CHECK-LABEL: func.func private @zest_kernel_1(
// CHECK:         gpu.launch
// CHECK:           scf.for %[[I:.*]] = {{.*}} iter_args(%[[ACC:.*]] = %{{.*}}) -> (f32) {
// CHECK-DAG:         %[[COL:.*]] = arith.remui %[[I]], %{{.*}} : index
// CHECK-DAG:         %[[ROW:.*]] = arith.divui %[[I]], %{{.*}} : index
// CHECK:             %[[V:.*]] = memref.load %arg1[%[[COL]], %[[ROW]]] : memref<30x20xf32>
// CHECK:             %[[SQ:.*]] = arith.mulf %[[V]], %[[V]] : f32
// CHECK:             arith.addf %[[ACC]], %[[SQ]] : f32
// CHECK:           gpu.all_reduce add
// CHECK:         gpu.launch
// CHECK:           scf.for {{.*}} iter_args(%{{.*}} = %cst{{.*}}) -> (f32) {
// CHECK:             arith.maximumf
// CHECK:           %[[MAX:.*]] = gpu.all_reduce maximumf
// CHECK:           arith.maximumf %{{.*}}, %[[MAX]]
// CHECK:         gpu.launch blocks(%{{.*}}) in (%{{.*}} = %[[ONE:.*]], %{{.*}} = %[[ONE]], %{{.*}} = %[[ONE]]) threads(%{{.*}}) in (%{{.*}} = %[[ONE]], %{{.*}} = %[[ONE]], %{{.*}} = %[[ONE]])
// CHECK:           scf.for
// CHECK:             arith.mulf
// CHECK-NOT:       gpu.all_reduce
// CHECK:         return
func.func private @zest_kernel_1(%sum: memref<f32>, %x: memref<30x20xf32>, %max: memref<f32>, %prod: memref<f32>) attributes {zest.kernel} {
  linalg.generic {indexing_maps = [#t, #s], iterator_types = ["reduction", "reduction"]}
      ins(%x : memref<30x20xf32>) outs(%sum : memref<f32>) {
  ^bb0(%in: f32, %acc: f32):
    %sq = arith.mulf %in, %in : f32
    %r = arith.addf %acc, %sq : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#t, #s], iterator_types = ["reduction", "reduction"]}
      ins(%x : memref<30x20xf32>) outs(%max : memref<f32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.maximumf %acc, %in : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#t, #s], iterator_types = ["reduction", "reduction"]}
      ins(%x : memref<30x20xf32>) outs(%prod : memref<f32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.mulf %acc, %in : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// Row sums along the contiguous dimension (a LayerNorm's mean): one block
// of 256 threads per row, reading the row coalesced; a row of fewer than a
// warp's 32 elements keeps one thread per row.
// CHECK-LABEL: func.func private @zest_kernel_2(
// CHECK-DAG:     %[[C1:.*]] = arith.constant 1 : index
// CHECK-DAG:     %[[C16:.*]] = arith.constant 16 : index
// CHECK-DAG:     %[[C256:.*]] = arith.constant 256 : index
// CHECK-DAG:     %[[C300:.*]] = arith.constant 300 : index
// CHECK:         gpu.launch blocks(%[[B:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[C16]], %{{.*}} = %[[C1]], %{{.*}} = %[[C1]]) threads(%[[T:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[C256]], %{{.*}} = %[[C1]], %{{.*}} = %[[C1]])
// CHECK:           scf.for %[[J:.*]] = %[[T]] to %[[C300]] step %[[C256]]
// CHECK:             memref.load %arg1[%[[B]], %[[J]]] : memref<16x300xf32>
// CHECK:           gpu.all_reduce add
// CHECK:           memref.store %{{.*}}, %arg0[%[[B]]] : memref<16xf32>
// CHECK:         gpu.launch
// CHECK-NOT:       gpu.all_reduce
// CHECK:         return
#row = affine_map<(i, j) -> (i, j)>
#out = affine_map<(i, j) -> (i)>
func.func private @zest_kernel_2(%sums: memref<16xf32>, %x: memref<16x300xf32>, %short: memref<16xf32>, %y: memref<16x8xf32>) attributes {zest.kernel} {
  linalg.reduce ins(%x : memref<16x300xf32>) outs(%sums : memref<16xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %0 = arith.addf %in, %acc : f32
      linalg.yield %0 : f32
    }
  linalg.reduce ins(%y : memref<16x8xf32>) outs(%short : memref<16xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %0 = arith.addf %in, %acc : f32
      linalg.yield %0 : f32
    }
  return
}

// -----

// torch-mlir's variance (a LayerNorm's) is summed in f64: one block per row
// too, its partial sums combined in f64 from an f64 zero.
// CHECK-LABEL: func.func private @zest_kernel_3(
// CHECK-DAG:     %[[ZERO:.*]] = arith.constant 0.000000e+00 : f64
// CHECK-DAG:     %[[C16:.*]] = arith.constant 16 : index
// CHECK-DAG:     %[[C256:.*]] = arith.constant 256 : index
// CHECK:         gpu.launch blocks(%[[B:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[C16]], %{{.*}}, %{{.*}}) threads(%[[T:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[C256]], %{{.*}}, %{{.*}})
// CHECK:           %[[PART:.*]] = scf.for %{{.*}} = %[[T]] to %{{.*}} step %[[C256]] iter_args(%[[ACC:.*]] = %[[ZERO]]) -> (f64)
// CHECK:             %[[X:.*]] = memref.load %arg1[%[[B]], %{{.*}}] : memref<16x768xf64>
// CHECK:             %[[M:.*]] = memref.load %arg2[%[[B]]] : memref<16xf64>
// CHECK:             %[[D:.*]] = arith.subf %[[X]], %[[M]] : f64
// CHECK:             %[[SQ:.*]] = arith.mulf %[[D]], %[[D]] : f64
// CHECK:             arith.addf %[[ACC]], %[[SQ]] : f64
// CHECK:           gpu.all_reduce add %[[PART]] uniform
// CHECK:           memref.store %{{.*}}, %arg0[%[[B]]] : memref<16xf64>
#x2 = affine_map<(i, j) -> (i, j)>
#r2 = affine_map<(i, j) -> (i)>
func.func private @zest_kernel_3(%var: memref<16xf64>, %x: memref<16x768xf64>, %mean: memref<16xf64>) attributes {zest.kernel} {
  linalg.generic {indexing_maps = [#x2, #r2, #r2], iterator_types = ["parallel", "reduction"]} ins(%x, %mean : memref<16x768xf64>, memref<16xf64>) outs(%var : memref<16xf64>) {
  ^bb0(%in: f64, %m: f64, %acc: f64):
    %d = arith.subf %in, %m : f64
    %sq = arith.mulf %d, %d : f64
    %sum = arith.addf %acc, %sq : f64
    linalg.yield %sum : f64
  }
  return
}

// -----

// The host must not read buffer elements: they are in device memory.
func.func @glue(%hyper: memref<10xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  // expected-error @below {{'memref.load' accesses buffer elements on the host, but --target=cuda keeps buffers in device memory, so this step cannot be compiled for the GPU yet (a scalar of the step is combined on the host; compile for the CPU, and report the model)}}
  %lr = memref.load %hyper[%c0] : memref<10xf32>
  return %lr : f32
}

// -----

// The optimizer's kernel with device buffers: the learning rate and the
// apply flag are read from the hyperparameter buffer, so the host neither
// reads them nor branches on them. The branch's alternatives are one launch
// each of the same shape: they become one launch of the branch, which
// recomputes the flag and the learning rate.

#map = affine_map<(d0) -> (d0)>
// CHECK-LABEL: func.func private @zest_kernel_0(
// CHECK-SAME:      %[[H:.*]]: memref<10xf32>, %[[P:.*]]: memref<64xf32>, %[[G:.*]]: memref<64xf32>)
// CHECK-NOT:     memref.load
// CHECK-NOT:     scf.if
// CHECK:         gpu.launch
// CHECK-DAG:       %[[LR:.*]] = memref.load %[[H]][%{{.*}}] : memref<10xf32>
// CHECK-DAG:       %[[FLAG:.*]] = memref.load %[[H]][%{{.*}}] : memref<10xf32>
// CHECK:           %[[APPLY:.*]] = arith.cmpf une, %[[FLAG]], %{{.*}} : f32
// CHECK:           scf.if %[[APPLY]] {
// CHECK:             %[[GI:.*]] = memref.load %[[G]][%{{.*}}]
// CHECK:             arith.mulf %[[LR]], %[[GI]] : f32
// CHECK:             memref.store %{{.*}}, %[[P]][%{{.*}}]
// CHECK:           } else {
// CHECK:             memref.store %{{.*}}, %[[G]][%{{.*}}]
// CHECK:           }
// CHECK:           gpu.terminator
// CHECK-NOT:     gpu.launch
// CHECK-NOT:     memref.load
// CHECK:         return
func.func private @zest_kernel_0(%hyper: memref<10xf32>, %p: memref<64xf32>, %g: memref<64xf32>) attributes {zest.kernel} {
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
    linalg.fill ins(%zero : f32) outs(%g : memref<64xf32>)
  }
  return
}

// -----

// A scalar stored into a buffer by the host part of a kernel is stored by
// one thread, which reads what it needs itself.
// CHECK-LABEL: func.func private @zest_kernel_0(
// CHECK-SAME:      %[[N:.*]]: memref<f32>, %[[S:.*]]: memref<f32>)
// CHECK-DAG:     %[[C1:.*]] = arith.constant 1 : index
// CHECK-NOT:     memref.load
// CHECK:         gpu.launch blocks(%{{.*}}) in (%{{.*}} = %[[C1]], %{{.*}} = %[[C1]], %{{.*}} = %[[C1]]) threads(%{{.*}}) in (%{{.*}} = %[[C1]], %{{.*}} = %[[C1]], %{{.*}} = %[[C1]])
// CHECK:           %[[NORM:.*]] = memref.load %[[N]][]
// CHECK:           %[[Q:.*]] = arith.divf %{{.*}}, %[[NORM]] : f32
// CHECK:           memref.store %[[Q]], %[[S]][]
// CHECK:           gpu.terminator
func.func private @zest_kernel_0(%norm: memref<f32>, %scale: memref<f32>) attributes {zest.kernel} {
  %one = arith.constant 1.0 : f32
  %n = memref.load %norm[] : memref<f32>
  %s = arith.divf %one, %n : f32
  memref.store %s, %scale[] : memref<f32>
  return
}

// -----

// A row added where a token id says (an embedding's backward): the id's
// load and the view it places are computed by the launch, not the host,
// which cannot read device memory; 8 threads take 4 floats each, as
// vectors where the row and the added values start 16-byte aligned.

// CHECK-LABEL: func.func private @zest_kernel_0(
// CHECK-SAME:      %[[GRAD:[^:]*]]: memref<64x32xf32, strided<[32, 1], offset: ?>>, %[[IDS:[^:]*]]: memref<8xi64, strided<[1], offset: ?>>, %[[I:[^:]*]]: index, %[[ROW:[^:]*]]: memref<32xf32, strided<[1], offset: ?>>)
// CHECK-NOT:     memref.load
// CHECK:         gpu.launch
// CHECK-SAME:      threads(%[[TX:[^,]*]],
// CHECK:           %[[ID:.*]] = memref.load %[[IDS]][%[[I]]]
// CHECK:           %[[AT:.*]] = arith.index_cast %[[ID]] : i64 to index
// CHECK:           %[[DST:.*]] = memref.subview %[[GRAD]][%[[AT]], 0] [1, 32] [1, 1]
// CHECK:           %[[FIRST:.*]] = arith.muli %[[TX]], %{{.*}} : index
// CHECK:           scf.if
// CHECK:             %[[OLD:.*]] = vector.load %[[DST]][%[[FIRST]]]
// CHECK:             %[[ADD:.*]] = vector.load %[[ROW]][%[[FIRST]]]
// CHECK:             %[[SUM:.*]] = arith.addf %[[OLD]], %[[ADD]] : vector<4xf32>
// CHECK:             vector.store %[[SUM]], %[[DST]][%[[FIRST]]]
// CHECK:           } else {
// CHECK:           gpu.terminator
// CHECK-NOT:     memref.load
// CHECK:         return
func.func private @zest_kernel_0(%grad: memref<64x32xf32, strided<[32, 1], offset: ?>>, %ids: memref<8xi64, strided<[1], offset: ?>>, %i: index, %row: memref<32xf32, strided<[1], offset: ?>>) attributes {zest.kernel} {
  %id = memref.load %ids[%i] : memref<8xi64, strided<[1], offset: ?>>
  %at = arith.index_cast %id : i64 to index
  %dst = memref.subview %grad[%at, 0] [1, 32] [1, 1] : memref<64x32xf32, strided<[32, 1], offset: ?>> to memref<32xf32, strided<[1], offset: ?>>
  linalg.add ins(%dst, %row : memref<32xf32, strided<[1], offset: ?>>, memref<32xf32, strided<[1], offset: ?>>) outs(%dst : memref<32xf32, strided<[1], offset: ?>>)
  return
}

// -----

// A loop zest-outline-kernels marked per-position (an embedding's backward
// over 8 positions): one launch of a thread per position of the 32-float
// rows, each running the 8 iterations for its position (loading the token
// id itself), instead of a launch per iteration.

// CHECK-LABEL: func.func private @zest_kernel_0(
// CHECK-SAME:      %[[IDS:[^:]*]]: memref<8xi64, strided<[1], offset: ?>>, %[[GRAD:[^:]*]]: memref<64x32xf32, strided<[32, 1], offset: ?>>, %[[SRC:[^:]*]]: memref<8x32xf32, strided<[32, 1], offset: ?>>)
// CHECK-NOT:     memref.load
// CHECK:         gpu.launch
// CHECK-SAME:      threads(%[[TX:[^,]*]],
// CHECK:           scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:             %[[ID:.*]] = memref.load %[[IDS]][%[[I]]]
// CHECK:             %[[AT:.*]] = arith.index_cast %[[ID]] : i64 to index
// CHECK:             %[[DST:.*]] = memref.subview %[[GRAD]][%[[AT]], 0] [1, 32] [1, 1]
// CHECK:             %[[ROW:.*]] = memref.subview %[[SRC]][%[[I]], 0] [1, 32] [1, 1]
// CHECK:             %[[OLD:.*]] = memref.load %[[DST]][%[[TX]]]
// CHECK:             %[[ADD:.*]] = memref.load %[[ROW]][%[[TX]]]
// CHECK:             %[[SUM:.*]] = arith.addf %[[OLD]], %[[ADD]] : f32
// CHECK:             memref.store %[[SUM]], %[[DST]][%[[TX]]]
// CHECK:           }
// CHECK-NOT:       zest.per_position_loop
// CHECK:           gpu.terminator
// CHECK-NOT:     gpu.launch
// CHECK:         return
func.func private @zest_kernel_0(%ids: memref<8xi64, strided<[1], offset: ?>>, %grad: memref<64x32xf32, strided<[32, 1], offset: ?>>, %src: memref<8x32xf32, strided<[32, 1], offset: ?>>) attributes {zest.kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c8 step %c1 {
    %id = memref.load %ids[%i] : memref<8xi64, strided<[1], offset: ?>>
    %at = arith.index_cast %id : i64 to index
    %dst = memref.subview %grad[%at, 0] [1, 32] [1, 1] : memref<64x32xf32, strided<[32, 1], offset: ?>> to memref<32xf32, strided<[1], offset: ?>>
    %row = memref.subview %src[%i, 0] [1, 32] [1, 1] : memref<8x32xf32, strided<[32, 1], offset: ?>> to memref<32xf32, strided<[1], offset: ?>>
    linalg.add ins(%dst, %row : memref<32xf32, strided<[1], offset: ?>>, memref<32xf32, strided<[1], offset: ?>>) outs(%dst : memref<32xf32, strided<[1], offset: ?>>)
  } {zest.per_position_loop}
  return
}

// -----

// A kernel whose call makes two launches (a branch's alternatives of
// different shapes, each launch testing the condition) gets its launch
// count appended to its zest.kernel_work entry, so that the profile
// predicts per launch; entries of kernels the module no longer holds stay
// as they were.
// CHECK: module attributes {zest.kernel_work = {zest_kernel_0_branch = array<i64: 512, 256, 64, 2>, zest_kernel_9_gone = array<i64: 1, 2, 3>}}
// CHECK-LABEL: func.func private @zest_kernel_0_branch(
// CHECK-COUNT-2: gpu.launch
#map = affine_map<(d0) -> (d0)>
module attributes {zest.kernel_work = {zest_kernel_0_branch = array<i64: 512, 256, 64>, zest_kernel_9_gone = array<i64: 1, 2, 3>}} {
  func.func private @zest_kernel_0_branch(%flag: memref<1xf32, strided<[1], offset: ?>>, %a: memref<64xf32, strided<[1], offset: ?>>, %b: memref<64xf32, strided<[1], offset: ?>>, %c: memref<32xf32, strided<[1], offset: ?>>) attributes {zest.kernel} {
    %c0 = arith.constant 0 : index
    %zero = arith.constant 0.0 : f32
    %f = memref.load %flag[%c0] : memref<1xf32, strided<[1], offset: ?>>
    %apply = arith.cmpf une, %f, %zero : f32
    scf.if %apply {
      linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%a : memref<64xf32, strided<[1], offset: ?>>) outs(%b : memref<64xf32, strided<[1], offset: ?>>) {
      ^bb0(%x: f32, %y: f32):
        %s = arith.addf %x, %y : f32
        linalg.yield %s : f32
      }
    } else {
      linalg.generic {indexing_maps = [#map], iterator_types = ["parallel"]} outs(%c : memref<32xf32, strided<[1], offset: ?>>) {
      ^bb0(%y: f32):
        linalg.yield %zero : f32
      }
    }
    return
  }
}

// -----

// Nested branches (the optimizer's apply-or-accumulate inside a branch on a
// second flag): the inner ones merge first, then the outer one, so a call
// is one launch, not one per alternative (4).
// CHECK-LABEL: func.func private @zest_kernel_0_nested(
// CHECK-COUNT-1: gpu.launch
// CHECK-NOT:     gpu.launch
// CHECK:         return
#map = affine_map<(d0) -> (d0)>
func.func private @zest_kernel_0_nested(%hyper: memref<10xf32>, %p: memref<64xf32>, %g: memref<64xf32>) attributes {zest.kernel} {
  %c8 = arith.constant 8 : index
  %c9 = arith.constant 9 : index
  %zero = arith.constant 0.0 : f32
  %f1 = memref.load %hyper[%c9] : memref<10xf32>
  %outer = arith.cmpf une, %f1, %zero : f32
  %f2 = memref.load %hyper[%c8] : memref<10xf32>
  %inner = arith.cmpf une, %f2, %zero : f32
  scf.if %outer {
    scf.if %inner {
      linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%g : memref<64xf32>) outs(%p : memref<64xf32>) {
      ^bb0(%gi: f32, %pi: f32):
        %new = arith.subf %pi, %gi : f32
        linalg.yield %new : f32
      }
    } else {
      linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%g : memref<64xf32>) outs(%p : memref<64xf32>) {
      ^bb0(%gi: f32, %pi: f32):
        %new = arith.addf %pi, %gi : f32
        linalg.yield %new : f32
      }
    }
  } else {
    scf.if %inner {
      linalg.fill ins(%zero : f32) outs(%g : memref<64xf32>)
    } else {
      linalg.copy ins(%p : memref<64xf32>) outs(%g : memref<64xf32>)
    }
  }
  return
}

// -----

// A row sum into a buffer the glue just filled with zeros (a LayerNorm's
// mean): the fill's call goes, and the sum calls a copy of its kernel that
// stores each block's total without reading the buffer. A sum into a buffer
// filled with ones keeps its fill and its kernel. The copy's work is the
// kernel's.
// CHECK: module attributes {zest.kernel_work = {{.*}}zest_kernel_1_reduce_add_f32_from_identity = array<i64: 1040, 16, 256, 1>
// CHECK-LABEL: func.func @rows(
// CHECK-NOT:     call @zest_kernel_0_fill_f32
// CHECK:         call @zest_kernel_1_reduce_add_f32_from_identity(
// CHECK:         call @zest_kernel_2_fill_f32(
// CHECK:         call @zest_kernel_1_reduce_add_f32(
// CHECK-LABEL: func.func private @zest_kernel_1_reduce_add_f32(
// CHECK:         gpu.all_reduce add
// CHECK:         memref.load %arg1
// CHECK:         arith.addf
// CHECK:         memref.store
// CHECK-LABEL: func.func private @zest_kernel_1_reduce_add_f32_from_identity(
// CHECK:         %[[TOTAL:.*]] = gpu.all_reduce add
// CHECK-NOT:     memref.load %arg1
// CHECK:         memref.store %[[TOTAL]], %arg1
#rows = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
module attributes {zest.kernel_work = {zest_kernel_0_fill_f32 = array<i64: 0, 16, 4>, zest_kernel_1_reduce_add_f32 = array<i64: 1040, 16, 256>, zest_kernel_2_fill_f32 = array<i64: 0, 16, 4>}} {
  func.func @rows(%x: memref<4x64xf32>, %sum: memref<4xf32>, %other: memref<4xf32>) {
    %xc = memref.cast %x : memref<4x64xf32> to memref<4x64xf32, strided<[64, 1], offset: ?>>
    %sc = memref.cast %sum : memref<4xf32> to memref<4xf32, strided<[1], offset: ?>>
    call @zest_kernel_0_fill_f32(%sc) : (memref<4xf32, strided<[1], offset: ?>>) -> ()
    %sc2 = memref.cast %sum : memref<4xf32> to memref<4xf32, strided<[1], offset: ?>>
    call @zest_kernel_1_reduce_add_f32(%xc, %sc2) : (memref<4x64xf32, strided<[64, 1], offset: ?>>, memref<4xf32, strided<[1], offset: ?>>) -> ()
    %oc = memref.cast %other : memref<4xf32> to memref<4xf32, strided<[1], offset: ?>>
    call @zest_kernel_2_fill_f32(%oc) : (memref<4xf32, strided<[1], offset: ?>>) -> ()
    call @zest_kernel_1_reduce_add_f32(%xc, %oc) : (memref<4x64xf32, strided<[64, 1], offset: ?>>, memref<4xf32, strided<[1], offset: ?>>) -> ()
    return
  }
  func.func private @zest_kernel_0_fill_f32(%out: memref<4xf32, strided<[1], offset: ?>>) attributes {zest.kernel} {
    %zero = arith.constant 0.0 : f32
    linalg.fill ins(%zero : f32) outs(%out : memref<4xf32, strided<[1], offset: ?>>)
    return
  }
  func.func private @zest_kernel_2_fill_f32(%out: memref<4xf32, strided<[1], offset: ?>>) attributes {zest.kernel} {
    %one = arith.constant 1.0 : f32
    linalg.fill ins(%one : f32) outs(%out : memref<4xf32, strided<[1], offset: ?>>)
    return
  }
  func.func private @zest_kernel_1_reduce_add_f32(%in: memref<4x64xf32, strided<[64, 1], offset: ?>>, %out: memref<4xf32, strided<[1], offset: ?>>) attributes {zest.kernel} {
    linalg.generic {indexing_maps = [#rows, #row], iterator_types = ["parallel", "reduction"]} ins(%in : memref<4x64xf32, strided<[64, 1], offset: ?>>) outs(%out : memref<4xf32, strided<[1], offset: ?>>) {
    ^bb0(%v: f32, %acc: f32):
      %s = arith.addf %acc, %v : f32
      linalg.yield %s : f32
    }
    return
  }
}

// -----

// A column sum split in two (zest-split-reductions) fills its partial sums
// and its result first, then sums twice: each fill goes, past the other fill
// and the partial sum, whose buffers are apart from the filled one, and
// both sums run as a thread per column from a register that starts at zero.
// A call between a fill and its sum that touches the filled buffer keeps
// both as they are.
// CHECK-LABEL: func.func @split_column_sum(
// CHECK-NOT:     call @zest_kernel_0_fill_f32
// CHECK-NOT:     call @zest_kernel_1_fill_f32
// CHECK:         call @zest_kernel_2_reduce_add_f32_from_identity(%{{.*}}, %[[P:.*]]) :
// CHECK:         call @zest_kernel_3_reduce_add_f32_from_identity(%[[P]], %arg1) :
// CHECK:         call @zest_kernel_1_fill_f32(%arg2)
// CHECK:         call @zest_kernel_4_scale_f32(%arg2)
// CHECK:         call @zest_kernel_3_reduce_add_f32(%[[P]], %arg2) :
// CHECK-NOT:     func.func private @zest_kernel_0_fill_f32
// CHECK-LABEL: func.func private @zest_kernel_2_reduce_add_f32_from_identity(
// CHECK:         %[[SUM:.*]] = scf.for {{.*}} iter_args
// CHECK-NOT:     memref.load %arg1
// CHECK:         memref.store %[[SUM]], %arg1
#x3 = affine_map<(c, r, j) -> (c, r, j)>
#p3 = affine_map<(c, r, j) -> (c, j)>
#rows = affine_map<(r, j) -> (r, j)>
#col = affine_map<(r, j) -> (j)>
#vec = affine_map<(j) -> (j)>
module {
  func.func @split_column_sum(%x: memref<8x16x64xf32>, %sum: memref<64xf32>, %other: memref<64xf32>) {
    %p = memref.alloc() : memref<8x64xf32>
    call @zest_kernel_0_fill_f32(%p) : (memref<8x64xf32>) -> ()
    call @zest_kernel_1_fill_f32(%sum) : (memref<64xf32>) -> ()
    call @zest_kernel_2_reduce_add_f32(%x, %p) : (memref<8x16x64xf32>, memref<8x64xf32>) -> ()
    call @zest_kernel_3_reduce_add_f32(%p, %sum) : (memref<8x64xf32>, memref<64xf32>) -> ()
    call @zest_kernel_1_fill_f32(%other) : (memref<64xf32>) -> ()
    call @zest_kernel_4_scale_f32(%other) : (memref<64xf32>) -> ()
    call @zest_kernel_3_reduce_add_f32(%p, %other) : (memref<8x64xf32>, memref<64xf32>) -> ()
    memref.dealloc %p : memref<8x64xf32>
    return
  }
  func.func private @zest_kernel_0_fill_f32(%out: memref<8x64xf32>) attributes {zest.kernel} {
    %zero = arith.constant 0.0 : f32
    linalg.fill ins(%zero : f32) outs(%out : memref<8x64xf32>)
    return
  }
  func.func private @zest_kernel_1_fill_f32(%out: memref<64xf32>) attributes {zest.kernel} {
    %zero = arith.constant 0.0 : f32
    linalg.fill ins(%zero : f32) outs(%out : memref<64xf32>)
    return
  }
  func.func private @zest_kernel_2_reduce_add_f32(%in: memref<8x16x64xf32>, %out: memref<8x64xf32>) attributes {zest.kernel} {
    linalg.generic {indexing_maps = [#x3, #p3], iterator_types = ["parallel", "reduction", "parallel"]} ins(%in : memref<8x16x64xf32>) outs(%out : memref<8x64xf32>) {
    ^bb0(%v: f32, %acc: f32):
      %s = arith.addf %v, %acc : f32
      linalg.yield %s : f32
    }
    return
  }
  func.func private @zest_kernel_3_reduce_add_f32(%in: memref<8x64xf32>, %out: memref<64xf32>) attributes {zest.kernel} {
    linalg.generic {indexing_maps = [#rows, #col], iterator_types = ["reduction", "parallel"]} ins(%in : memref<8x64xf32>) outs(%out : memref<64xf32>) {
    ^bb0(%v: f32, %acc: f32):
      %s = arith.addf %v, %acc : f32
      linalg.yield %s : f32
    }
    return
  }
  func.func private @zest_kernel_4_scale_f32(%io: memref<64xf32>) attributes {zest.kernel} {
    linalg.generic {indexing_maps = [#vec], iterator_types = ["parallel"]} outs(%io : memref<64xf32>) {
    ^bb0(%v: f32):
      %s = arith.mulf %v, %v : f32
      linalg.yield %s : f32
    }
    return
  }
}

// -----

// A row group (zest-fuse-rows): one launch of a block per row, 8 blocks of
// 64 threads (the rows' 64 elements, rounded to warps), running the group's
// ops in order with a barrier between them. The threads share a row's
// elements in strides, 4 f32 at a time in the elementwise ops (16-byte
// vectors where the buffers start aligned); the sum is a block reduction
// whose result thread 0 stores without reading the buffer (its fill was
// folded), a value per row is thread 0's.

#id = affine_map<(r, c) -> (r, c)>
#row = affine_map<(r, c) -> (r)>
#col = affine_map<(r, c) -> (c)>
#one = affine_map<(r) -> (r)>
// CHECK-LABEL: func.func private @zest_kernel_0(
// CHECK-DAG:     %[[C1:.*]] = arith.constant 1 : index
// CHECK-DAG:     %[[C8:.*]] = arith.constant 8 : index
// CHECK-DAG:     %[[C64:.*]] = arith.constant 64 : index
// CHECK:         gpu.launch blocks(%[[BX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[C8]], %{{.*}} = %[[C1]], %{{.*}} = %[[C1]]) threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[C64]], %{{.*}} = %[[C1]], %{{.*}} = %[[C1]])
// CHECK:           scf.for %[[COL:.*]] = %[[TX]] to %[[C16:.*]] step %[[C64]] {
// CHECK:             %[[FIRST:.*]] = arith.muli %[[COL]], %{{.*}} : index
// CHECK:             scf.if
// CHECK:               %[[X:.*]] = vector.load %arg0[%[[BX]], %[[FIRST]]] {alignment = 16 : i64} : memref<8x64xf32>, vector<4xf32>
// CHECK:               vector.store %[[X]], %arg1[%[[BX]], %[[FIRST]]]
// CHECK:             } else {
// CHECK:               memref.load %arg0
// CHECK:           gpu.barrier
// CHECK:           %[[PART:.*]] = scf.for %[[I:.*]] = %[[TX]] to %[[C64]] step %[[C64]] iter_args
// CHECK:             memref.load %arg1[%[[BX]], %[[I]]]
// CHECK:           %[[SUM:.*]] = gpu.all_reduce add %[[PART]] uniform
// CHECK:           scf.if %{{.*}} {
// CHECK-NEXT:        memref.store %[[SUM]], %arg2[%[[BX]]]
// CHECK:           gpu.barrier
// CHECK:           scf.if %{{.*}} {
// CHECK:             memref.load %arg2[%[[BX]]]
// CHECK:             arith.divf
// CHECK:             memref.store %{{.*}}, %arg3[%[[BX]]]
// CHECK:           gpu.barrier
// CHECK:           scf.for %[[COL2:.*]] = %[[TX]] to %[[C16]] step %[[C64]] {
// CHECK:             %[[FIRST2:.*]] = arith.muli %[[COL2]], %{{.*}} : index
// CHECK:             scf.if
// CHECK-DAG:           vector.load %arg1[%[[BX]], %[[FIRST2]]]
// CHECK-DAG:           memref.load %arg3[%[[BX]]]
// CHECK-DAG:           vector.load %arg4[%[[FIRST2]]]
// CHECK:               vector.store %{{.*}}, %arg5[%[[BX]], %[[FIRST2]]]
// CHECK:           gpu.terminator
// CHECK-NOT:     gpu.launch
// CHECK-NOT:     scf.execute_region
func.func private @zest_kernel_0(%x: memref<8x64xf32>, %h: memref<8x64xf32>,
                                 %s: memref<8xf32>, %inv: memref<8xf32>,
                                 %w: memref<64xf32>, %y: memref<8x64xf32>)
    attributes {zest.kernel} {
  %n = arith.constant 64.0 : f32
  scf.execute_region {
    linalg.copy ins(%x : memref<8x64xf32>) outs(%h : memref<8x64xf32>)
    linalg.generic {indexing_maps = [#id, #row],
                    iterator_types = ["parallel", "reduction"]}
        ins(%h : memref<8x64xf32>) outs(%s : memref<8xf32>)
        attrs = {zest.init_is_identity} {
    ^bb0(%a: f32, %acc: f32):
      %v = arith.addf %acc, %a : f32
      linalg.yield %v : f32
    }
    linalg.generic {indexing_maps = [#one, #one],
                    iterator_types = ["parallel"]}
        ins(%s : memref<8xf32>) outs(%inv : memref<8xf32>) {
    ^bb0(%a: f32, %o: f32):
      %m = arith.divf %n, %a : f32
      linalg.yield %m : f32
    }
    linalg.generic {indexing_maps = [#id, #row, #col, #id],
                    iterator_types = ["parallel", "parallel"]}
        ins(%h, %inv, %w : memref<8x64xf32>, memref<8xf32>, memref<64xf32>)
        outs(%y : memref<8x64xf32>) {
    ^bb0(%a: f32, %b: f32, %g: f32, %o: f32):
      %c = arith.mulf %a, %b : f32
      %v = arith.mulf %c, %g : f32
      linalg.yield %v : f32
    }
    scf.yield
  } {zest.row_kernel = 8 : i64}
  return
}

// -----

// Rows over two loops (a [2, 8, 32] activation's 16 rows) and values per row
// kept as [2, 8, 1] (torch-mlir's keepdim sums): the block recovers both row
// indices from its index, and the row of one element takes the trailing
// loop's index 0.

#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#r = affine_map<(d0, d1, d2) -> (d0, d1, 0)>
// CHECK-LABEL: func.func private @zest_kernel_0(
// CHECK-DAG:     %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG:     %[[C8:.*]] = arith.constant 8 : index
// CHECK-DAG:     %[[C16:.*]] = arith.constant 16 : index
// CHECK-DAG:     %[[C32:.*]] = arith.constant 32 : index
// CHECK:         gpu.launch blocks(%[[BX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[C16]], {{.*}} threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[C32]],
// CHECK:           %[[S:.*]] = arith.remui %[[BX]], %[[C8]] : index
// CHECK:           %[[B:.*]] = arith.divui %[[BX]], %[[C8]] : index
// CHECK:           memref.load %arg0[%[[B]], %[[S]], %{{.*}}]
// CHECK:           gpu.all_reduce add
// CHECK:           memref.store %{{.*}}, %arg1[%[[B]], %[[S]], %[[C0]]]
// CHECK:           gpu.barrier
// CHECK:           %[[S2:.*]] = arith.remui %[[BX]], %[[C8]] : index
// CHECK:           %[[B2:.*]] = arith.divui %[[BX]], %[[C8]] : index
// CHECK:           %[[FIRST:.*]] = arith.cmpi eq, %[[TX]], %[[C0]] : index
// CHECK:           scf.if %[[FIRST]] {
// CHECK:             memref.load %arg1[%[[B2]], %[[S2]], %[[C0]]]
// CHECK:             memref.store %{{.*}}, %arg2[%[[B2]], %[[S2]], %[[C0]]]
func.func private @zest_kernel_0(%x: memref<2x8x32xf32>, %s: memref<2x8x1xf32>,
                                 %t: memref<2x8x1xf32>)
    attributes {zest.kernel} {
  %n = arith.constant 32.0 : f32
  scf.execute_region {
    linalg.generic {indexing_maps = [#id, #r],
                    iterator_types = ["parallel", "parallel", "reduction"]}
        ins(%x : memref<2x8x32xf32>) outs(%s : memref<2x8x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %v = arith.addf %in, %out : f32
      linalg.yield %v : f32
    }
    linalg.generic {indexing_maps = [#id, #id],
                    iterator_types = ["parallel", "parallel", "parallel"]}
        ins(%s : memref<2x8x1xf32>) outs(%t : memref<2x8x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %v = arith.divf %in, %n : f32
      linalg.yield %v : f32
    }
    scf.yield
  } {zest.row_kernel = 16 : i64}
  return
}

// -----

// A row group whose ops do not split over its row count (only
// zest-fuse-rows makes them, so this is a malformed input) is an error.

func.func private @zest_kernel_0(%x: memref<8x64xf32>, %y: memref<8x64xf32>)
    attributes {zest.kernel} {
  scf.execute_region {
    // expected-error @+1 {{zest-map-kernels-to-gpu: an op of a row kernel does not split over its 5 rows}}
    linalg.copy ins(%x : memref<8x64xf32>) outs(%y : memref<8x64xf32>)
    scf.yield
  } {zest.row_kernel = 5 : i64}
  return
}

// -----

// A widening over rows of 64 elements: its widest element (f32) takes 4 to
// 16 bytes, so each of 64 threads (one block) takes 4 consecutive elements
// of a row: one 8-byte bf16 load and one 16-byte f32 store, aligned to 4
// elements, when both buffers start aligned at run time; otherwise the
// thread converts its 4 elements one by one.

#id = affine_map<(i, j) -> (i, j)>
// CHECK-LABEL: func.func private @zest_kernel_0(
// CHECK-SAME:      %[[X:[^:]*]]: memref<4x64xbf16, strided<[64, 1], offset: ?>>, %[[Y:[^:]*]]: memref<4x64xf32, strided<[64, 1], offset: ?>>
// CHECK-DAG:     %[[C64:.*]] = arith.constant 64 : index
// CHECK:         gpu.launch {{.*}} threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[C64]],
// CHECK:           %[[J:.*]] = arith.remui %[[TX]], %{{.*}}
// CHECK:           %[[ROW:.*]] = arith.divui %[[TX]], %{{.*}}
// CHECK:           %[[FIRST:.*]] = arith.muli %[[J]], %{{.*}}
// CHECK:           memref.extract_aligned_pointer_as_index %[[X]]
// CHECK:           memref.extract_aligned_pointer_as_index %[[Y]]
// CHECK:           scf.if %{{.*}} {
// CHECK:             %[[V:.*]] = vector.load %[[X]][%[[ROW]], %[[FIRST]]] {alignment = 8 : i64} : memref<4x64xbf16, strided<[64, 1], offset: ?>>, vector<4xbf16>
// CHECK:             %[[W:.*]] = arith.extf %[[V]] : vector<4xbf16> to vector<4xf32>
// CHECK:             vector.store %[[W]], %[[Y]][%[[ROW]], %[[FIRST]]] {alignment = 16 : i64} : memref<4x64xf32, strided<[64, 1], offset: ?>>, vector<4xf32>
// CHECK:           } else {
// CHECK:             scf.for %[[K:.*]] = %{{.*}} to %{{.*}} step
// CHECK:               %[[COL:.*]] = arith.addi %[[FIRST]], %[[K]]
// CHECK:               memref.load %[[X]][%[[ROW]], %[[COL]]]
// CHECK:               arith.extf %{{.*}} : bf16 to f32
// CHECK:               memref.store %{{.*}}, %[[Y]][%[[ROW]], %[[COL]]]
func.func private @zest_kernel_0(%x: memref<4x64xbf16, strided<[64, 1], offset: ?>>, %y: memref<4x64xf32, strided<[64, 1], offset: ?>>) attributes {zest.kernel} {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x64xbf16, strided<[64, 1], offset: ?>>) outs(%y : memref<4x64xf32, strided<[64, 1], offset: ?>>) {
  ^bb0(%in: bf16, %out: f32):
    %w = arith.extf %in : bf16 to f32
    linalg.yield %w : f32
  }
  return
}

// -----

// A bias along the row (read at the column: a vector) and a scale per row
// (read at the row: a scalar, broadcast where it meets the vectors), all
// bf16: 8 elements (16 bytes) per thread.

#id = affine_map<(i, j) -> (i, j)>
#col = affine_map<(i, j) -> (j)>
#row = affine_map<(i, j) -> (i)>
// CHECK-LABEL: func.func private @zest_kernel_0(
// CHECK:         scf.if
// CHECK-DAG:       %[[X:.*]] = vector.load %arg0[%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<8x64xbf16>, vector<8xbf16>
// CHECK-DAG:       %[[B:.*]] = vector.load %arg1[%{{.*}}] {alignment = 16 : i64} : memref<64xbf16>, vector<8xbf16>
// CHECK-DAG:       %[[S:.*]] = memref.load %arg2[%{{.*}}] : memref<8xbf16>
// CHECK:           %[[SUM:.*]] = arith.addf %[[X]], %[[B]] : vector<8xbf16>
// CHECK:           %[[SPLAT:.*]] = vector.broadcast %[[S]] : bf16 to vector<8xbf16>
// CHECK:           %[[P:.*]] = arith.mulf %[[SUM]], %[[SPLAT]] : vector<8xbf16>
// CHECK:           vector.store %[[P]], %arg3[%{{.*}}, %{{.*}}] {alignment = 16 : i64}
// CHECK:         } else {
func.func private @zest_kernel_0(%x: memref<8x64xbf16>, %b: memref<64xbf16>, %s: memref<8xbf16>, %y: memref<8x64xbf16>) attributes {zest.kernel} {
  linalg.generic {indexing_maps = [#id, #col, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %b, %s : memref<8x64xbf16>, memref<64xbf16>, memref<8xbf16>) outs(%y : memref<8x64xbf16>) {
  ^bb0(%in: bf16, %bias: bf16, %scale: bf16, %out: bf16):
    %a = arith.addf %in, %bias : bf16
    %m = arith.mulf %a, %scale : bf16
    linalg.yield %m : bf16
  }
  return
}

// -----

// One element per thread where vectors do not fit: rows of 6 f32 (not a
// multiple of 4), a transposed read (the innermost loop is not the read's
// last dimension), and rows 36 elements apart that a 16-byte vector of 8
// bf16 would not keep aligned.

#id = affine_map<(i, j) -> (i, j)>
#t = affine_map<(i, j) -> (j, i)>
// CHECK-LABEL: func.func private @zest_kernel_0(
// CHECK-NOT:     vector.
// CHECK:         return
func.func private @zest_kernel_0(%x: memref<4x6xf32>, %y: memref<4x6xf32>,
                                 %a: memref<64x8xf32>, %b: memref<8x64xf32>,
                                 %c: memref<4x32xbf16, strided<[36, 1]>>, %d: memref<4x32xbf16>) attributes {zest.kernel} {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x6xf32>) outs(%y : memref<4x6xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.negf %in : f32
    linalg.yield %n : f32
  }
  linalg.generic {indexing_maps = [#t, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<64x8xf32>) outs(%b : memref<8x64xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.negf %in : f32
    linalg.yield %n : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<4x32xbf16, strided<[36, 1]>>) outs(%d : memref<4x32xbf16>) {
  ^bb0(%in: bf16, %out: bf16):
    %n = arith.negf %in : bf16
    linalg.yield %n : bf16
  }
  return
}
