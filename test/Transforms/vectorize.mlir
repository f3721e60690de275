// RUN: zest-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(zest-vectorize))' | FileCheck %s
// RUN: zest-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(zest-vectorize{vector-bits=128 unroll=1}))' | FileCheck %s --check-prefix=SSE

// Elementwise, with a per-row operand read through a broadcast: tiles of 32
// lanes (4 AVX2 registers) along the rows; 100 = 3 x 32 + 4, so the op is
// split and the last 4 columns are one vector<4xf32> tile. The per-row
// value is loaded and splat once per row.
// CHECK-LABEL: func.func @elementwise(
// CHECK-SAME:      %[[A:.*]]: memref<8x100xf32, strided<[100, 1], offset: ?>>, %[[B:.*]]: memref<8xf32>, %[[O:.*]]: memref<8x100xf32>)
// CHECK:         scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:           %[[S:.*]] = vector.load %[[B]][%[[I]]] : memref<8xf32>, vector<f32>
// CHECK:           %[[BS:.*]] = vector.broadcast %[[S]] : vector<f32> to vector<32xf32>
// CHECK:           scf.for %[[J:.*]] = %{{.*}} to %[[C96:.*]] step %[[C32:.*]] {
// CHECK:             %[[X:.*]] = vector.load %[[A]][%[[I]], %[[J]]] : {{.*}}, vector<32xf32>
// CHECK:             %[[D:.*]] = arith.subf %[[X]], %[[BS]] : vector<32xf32>
// CHECK:             %[[F:.*]] = math.fma %[[D]], %[[D]], %[[BS]] : vector<32xf32>
// CHECK:             vector.store %[[F]], %[[O]][%[[I]], %[[J]]] : memref<8x100xf32>, vector<32xf32>
// CHECK:         scf.for
// CHECK:           vector.load %[[A]][%{{.*}}, %[[C96]]] : {{.*}}, vector<4xf32>
// CHECK:           vector.store %{{.*}}, %[[O]][%{{.*}}, %[[C96]]] : memref<8x100xf32>, vector<4xf32>
// CHECK-NOT:     linalg.
// SSE-LABEL: func.func @elementwise(
// SSE:         vector.load {{.*}} vector<4xf32>
// SSE-NOT:     vector<32xf32>
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @elementwise(%a: memref<8x100xf32, strided<[100, 1], offset: ?>>, %b: memref<8xf32>, %o: memref<8x100xf32>) {
  linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : memref<8x100xf32, strided<[100, 1], offset: ?>>, memref<8xf32>) outs(%o : memref<8x100xf32>) {
  ^bb0(%x: f32, %y: f32, %z: f32):
    %0 = arith.subf %x, %y : f32
    %1 = math.fma %0, %0, %y : f32
    linalg.yield %1 : f32
  }
  return
}

// -----

// A reassociable row sum: the loop over the row carries 32 partial sums in
// registers and the lanes are combined once per row, after it, into the
// output's initial value.
// CHECK-LABEL: func.func @row_sum(
// CHECK-SAME:      %[[A:.*]]: memref<8x256xf32>, %[[O:.*]]: memref<8xf32>)
// CHECK:         %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : vector<32xf32>
// CHECK:         scf.for %[[I:.*]] =
// CHECK:           %[[INIT:.*]] = vector.load %[[O]][%[[I]]] : memref<8xf32>, vector<1xf32>
// CHECK:           %[[LANES:.*]] = scf.for %[[J:.*]] = {{.*}} iter_args(%[[ACC:.*]] = %[[ZERO]]) -> (vector<32xf32>) {
// CHECK:             %[[X:.*]] = vector.load %[[A]][%[[I]], %[[J]]] : memref<8x256xf32>, vector<32xf32>
// CHECK:             %[[SUM:.*]] = arith.addf %[[X]], %[[ACC]] : vector<32xf32>
// CHECK:             scf.yield %[[SUM]] : vector<32xf32>
// CHECK:           %[[START:.*]] = vector.extract %[[INIT]][0]
// CHECK:           %[[TOTAL:.*]] = vector.reduction <add>, %[[LANES]], %[[START]] : vector<32xf32> into f32
// CHECK:           %[[OUT:.*]] = vector.broadcast %[[TOTAL]] : f32 to vector<1xf32>
// CHECK:           vector.store %[[OUT]], %[[O]][%[[I]]]
func.func @row_sum(%a: memref<8x256xf32>, %o: memref<8xf32>) {
  linalg.reduce ins(%a : memref<8x256xf32>) outs(%o : memref<8xf32>) dimensions = [1]
    (%in: f32, %init: f32) {
      %0 = arith.addf %in, %init fastmath<reassoc> : f32
      linalg.yield %0 : f32
    }
  return
}

// -----

// A sum over rows (a bias gradient): the vector loop runs along the
// columns, outside the reduction loop, so each tile of the output is loaded
// once, accumulated in registers over all rows, and stored once. The order
// of each column's sum is unchanged (no reassociation needed).
// CHECK-LABEL: func.func @column_sum(
// CHECK-SAME:      %[[A:.*]]: memref<64x256xf32>, %[[O:.*]]: memref<256xf32>)
// CHECK:         scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:           %[[INIT:.*]] = vector.load %[[O]][%[[J]]] : memref<256xf32>, vector<32xf32>
// CHECK:           %[[SUM:.*]] = scf.for %[[I:.*]] = {{.*}} iter_args(%[[ACC:.*]] = %[[INIT]]) -> (vector<32xf32>) {
// CHECK:             %[[X:.*]] = vector.load %[[A]][%[[I]], %[[J]]]
// CHECK:             %[[ADD:.*]] = arith.addf %[[ACC]], %[[X]] : vector<32xf32>
// CHECK:             scf.yield %[[ADD]]
// CHECK:           vector.store %[[SUM]], %[[O]][%[[J]]]
func.func @column_sum(%a: memref<64x256xf32>, %o: memref<256xf32>) {
  linalg.reduce ins(%a : memref<64x256xf32>) outs(%o : memref<256xf32>) dimensions = [0]
    (%in: f32, %init: f32) {
      %0 = arith.addf %in, %init : f32
      linalg.yield %0 : f32
    }
  return
}

// -----

// A sum of squares over a whole matrix into a scalar (a loss): the partial
// sums are carried through both loops; one lane reduction in all.
// CHECK-LABEL: func.func @sum_of_squares(
// CHECK:         %[[OUTER:.*]] = scf.for {{.*}} -> (vector<32xf32>) {
// CHECK:           %[[INNER:.*]] = scf.for {{.*}} -> (vector<32xf32>) {
// CHECK:             arith.mulf {{.*}} : vector<32xf32>
// CHECK:             arith.addf {{.*}} : vector<32xf32>
// CHECK:           arith.addf %[[INNER]], {{.*}} : vector<32xf32>
// CHECK:         vector.reduction <add>, %[[OUTER]]
// CHECK-NOT:     vector.reduction
// CHECK:         vector.store
#id = affine_map<(d0, d1) -> (d0, d1)>
#scalar = affine_map<(d0, d1) -> ()>
func.func @sum_of_squares(%a: memref<8x256xf32>, %o: memref<f32>) {
  linalg.generic {indexing_maps = [#id, #scalar], iterator_types = ["reduction", "reduction"]}
      ins(%a : memref<8x256xf32>) outs(%o : memref<f32>) {
  ^bb0(%x: f32, %acc: f32):
    %0 = arith.mulf %x, %x : f32
    %1 = arith.addf %0, %acc fastmath<reassoc> : f32
    linalg.yield %1 : f32
  }
  return
}

// -----

// A row maximum (softmax) is exact in any order: vectorized without a flag.
// 40 = 32 + 8: two tiles per row.
// CHECK-LABEL: func.func @row_max(
// CHECK:         vector.reduction <maximumf>, %{{.*}}, %{{.*}} : vector<32xf32> into f32
// CHECK:         vector.reduction <maximumf>, %{{.*}}, %{{.*}} : vector<8xf32> into f32
// CHECK-NOT:     linalg.
func.func @row_max(%a: memref<4x16x40xf32>, %o: memref<4x16xf32>) {
  linalg.reduce ins(%a : memref<4x16x40xf32>) outs(%o : memref<4x16xf32>) dimensions = [2]
    (%in: f32, %init: f32) {
      %0 = arith.maximumf %in, %init : f32
      linalg.yield %0 : f32
    }
  return
}

// -----

// bf16 data computed in f32: tiles hold 32 lanes, as many as f32 registers
// do, not 64.
// CHECK-LABEL: func.func @bf16_square(
// CHECK:         %[[X:.*]] = vector.load {{.*}} vector<32xbf16>
// CHECK:         %[[E:.*]] = arith.extf %[[X]] : vector<32xbf16> to vector<32xf32>
// CHECK:         %[[M:.*]] = arith.mulf %[[E]], %[[E]] : vector<32xf32>
// CHECK:         %[[T:.*]] = arith.truncf %[[M]] : vector<32xf32> to vector<32xbf16>
// CHECK:         vector.store %[[T]]
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @bf16_square(%a: memref<16x64xbf16>, %o: memref<16x64xbf16>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<16x64xbf16>) outs(%o : memref<16x64xbf16>) {
  ^bb0(%x: bf16, %out: bf16):
    %e = arith.extf %x : bf16 to f32
    %m = arith.mulf %e, %e : f32
    %t = arith.truncf %m : f32 to bf16
    linalg.yield %t : bf16
  }
  return
}

// -----

// A transpose: contiguous stores, strided reads (a transfer along the input's
// outer dimension, unrolled to scalar loads by convert-vector-to-scf).
// CHECK-LABEL: func.func @transpose(
// CHECK-SAME:      %[[A:.*]]: memref<64x48xf32>, %[[O:.*]]: memref<48x64xf32>)
// CHECK:         scf.for %[[I:.*]] =
// CHECK:           scf.for %[[J:.*]] =
// CHECK:             %[[T:.*]] = vector.transfer_read %[[A]][%[[J]], %[[I]]], {{.*}} {in_bounds = [true], permutation_map = #{{.*}}} : memref<64x48xf32>, vector<32xf32>
// CHECK:             vector.store %[[T]], %[[O]][%[[I]], %[[J]]]
func.func @transpose(%a: memref<64x48xf32>, %o: memref<48x64xf32>) {
  linalg.transpose ins(%a : memref<64x48xf32>) outs(%o : memref<48x64xf32>) permutation = [1, 0]
  return
}

// -----

// Near misses, left to scalar loops: a float sum whose order is fixed (no
// `reassoc`), dynamic shapes, a body that loads from memory (an embedding
// lookup), and a 0-d op with nothing to vectorize.
// CHECK-LABEL: func.func @strict_sum(
// CHECK:         linalg.reduce
// CHECK-NOT:     vector.
func.func @strict_sum(%a: memref<8x256xf32>, %o: memref<8xf32>) {
  linalg.reduce ins(%a : memref<8x256xf32>) outs(%o : memref<8xf32>) dimensions = [1]
    (%in: f32, %init: f32) {
      %0 = arith.addf %in, %init : f32
      linalg.yield %0 : f32
    }
  return
}

// CHECK-LABEL: func.func @dynamic(
// CHECK:         linalg.copy
// CHECK-NOT:     vector.
func.func @dynamic(%a: memref<?x64xf32>, %o: memref<?x64xf32>) {
  linalg.copy ins(%a : memref<?x64xf32>) outs(%o : memref<?x64xf32>)
  return
}

// CHECK-LABEL: func.func @lookup(
// CHECK:         linalg.generic
// CHECK:           memref.load
// CHECK-NOT:     vector.
#rows = affine_map<(d0, d1) -> (d0)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @lookup(%idx: memref<16xindex>, %table: memref<100x64xf32>, %o: memref<16x64xf32>) {
  linalg.generic {indexing_maps = [#rows, #id], iterator_types = ["parallel", "parallel"]}
      ins(%idx : memref<16xindex>) outs(%o : memref<16x64xf32>) {
  ^bb0(%i: index, %out: f32):
    %j = linalg.index 1 : index
    %v = memref.load %table[%i, %j] : memref<100x64xf32>
    linalg.yield %v : f32
  }
  return
}

// CHECK-LABEL: func.func @scalar(
// CHECK:         linalg.generic
// CHECK-NOT:     vector.
#none = affine_map<() -> ()>
func.func @scalar(%a: memref<f32>, %o: memref<f32>) {
  linalg.generic {indexing_maps = [#none, #none], iterator_types = []}
      ins(%a : memref<f32>) outs(%o : memref<f32>) {
  ^bb0(%x: f32, %out: f32):
    %0 = arith.mulf %x, %x : f32
    linalg.yield %0 : f32
  }
  return
}

// -----

// A mask of i1 (masked_fill, a causal mask) is left to scalar loops: in
// memory each i1 takes a byte, in a vector register a bit, so a vector
// load would read the mask packed (a miscompile found importing a GPT).
// CHECK-LABEL: func.func @i1_mask(
// CHECK-NOT:     vector.
// CHECK:         linalg.generic
// CHECK-NOT:     vector.
// CHECK:         return
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @i1_mask(%m: memref<8x64xi1>, %a: memref<8x64xf32>, %o: memref<8x64xf32>) {
  %ninf = arith.constant 0xFF800000 : f32
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m, %a : memref<8x64xi1>, memref<8x64xf32>) outs(%o : memref<8x64xf32>) {
  ^bb0(%c: i1, %x: f32, %y: f32):
    %r = arith.select %c, %ninf, %x : f32
    linalg.yield %r : f32
  }
  return
}
