// RUN: zest-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(zest-split-entry-block))' | FileCheck %s

// The body moves behind a branch; the entry block keeps the arguments only.
// CHECK-LABEL: func.func @step(
// CHECK-SAME:      %[[X:.*]]: memref<4xf32>, %[[S:.*]]: f32) -> f32 {
// CHECK-NEXT:    cf.br ^[[BODY:.*]]
// CHECK-NEXT:  ^[[BODY]]:
// CHECK-NEXT:    %[[C:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[V:.*]] = memref.load %[[X]][%[[C]]]
// CHECK-NEXT:    %[[R:.*]] = arith.addf %[[V]], %[[S]]
// CHECK-NEXT:    return %[[R]]
func.func @step(%x: memref<4xf32>, %s: f32) -> f32 {
  %c0 = arith.constant 0 : index
  %v = memref.load %x[%c0] : memref<4xf32>
  %r = arith.addf %v, %s : f32
  return %r : f32
}

// -----

// Nothing to do without arguments, or without a body.
// CHECK-LABEL: func.func @no_arguments() -> f32 {
// CHECK-NEXT:    arith.constant
// CHECK-NEXT:    return
// CHECK:       func.func private @external(memref<4xf32>)
func.func @no_arguments() -> f32 {
  %c = arith.constant 1.0 : f32
  return %c : f32
}
func.func private @external(memref<4xf32>)
