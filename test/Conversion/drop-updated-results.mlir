// RUN: zest-opt %s -split-input-file -zest-drop-updated-results | FileCheck %s

// A result marked updated that is its argument (through casts) goes: the
// update happened in place. The loss stays.
// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[S:.*]]: memref<4xf32>, %{{.*}}: memref<4xf32>) -> memref<f32>
// CHECK:      return %{{.*}} : memref<f32>
func.func @step(%s: memref<4xf32>, %a: memref<4xf32>)
    -> (memref<4xf32> {zest.updated = 0 : i64},
        memref<?xf32> {zest.updated = 1 : i64}, memref<f32>) {
  %loss = memref.alloc() : memref<f32>
  %cast = memref.cast %a : memref<4xf32> to memref<?xf32>
  return %s, %cast, %loss : memref<4xf32>, memref<?xf32>, memref<f32>
}

// -----

// A marked result that is not its argument (the update could not be done in
// place) stays, for zest-verify-lowering to report; so does a mark naming
// an argument the function does not have.
// CHECK-LABEL: func.func @copy(
// CHECK-SAME: -> (memref<4xf32> {zest.updated = 0 : i64}, memref<4xf32> {zest.updated = 7 : i64})
// CHECK:      return %[[NEW:.*]], %{{.*}} : memref<4xf32>, memref<4xf32>
func.func @copy(%s: memref<4xf32>)
    -> (memref<4xf32> {zest.updated = 0 : i64},
        memref<4xf32> {zest.updated = 7 : i64}) {
  %new = memref.alloc() : memref<4xf32>
  return %new, %s : memref<4xf32>, memref<4xf32>
}

// -----

// Functions without a body are left alone.
// CHECK-LABEL: func.func private @external(
// CHECK-SAME: -> (memref<4xf32> {zest.updated = 0 : i64})
func.func private @external(memref<4xf32>) -> (memref<4xf32> {zest.updated = 0 : i64})
