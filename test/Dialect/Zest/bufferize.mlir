// RUN: zest-opt %s -split-input-file -one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" | FileCheck %s

// Destinations are only written: a fresh tensor becomes an allocation and is
// not initialized, and the op writes the buffers it is given, without a copy.
// CHECK-LABEL: func.func @linear(
// CHECK-SAME: %[[X:[^:]*]]: memref<4x8xf32{{.*}}>, %[[W:[^:]*]]: memref<6x8xf32{{.*}}>, %[[Y:[^:]*]]: memref<4x6xf32{{.*}}>
// CHECK: %[[PRE:.*]] = memref.alloc() {{.*}}: memref<4x6xf32>
// CHECK-NOT: memref.copy
// CHECK: zest.linear silu transpose_weight ins(%[[X]], %[[W]] : {{.*}}) outs(%[[Y]], %[[PRE]] : {{.*}})
// CHECK-NOT: memref.copy
// CHECK: return %[[Y]], %[[PRE]]
func.func @linear(%x: tensor<4x8xf32>, %w: tensor<6x8xf32>, %y: tensor<4x6xf32>) -> (tensor<4x6xf32>, tensor<4x6xf32>) {
  %e = tensor.empty() : tensor<4x6xf32>
  %r:2 = zest.linear silu transpose_weight ins(%x, %w : tensor<4x8xf32>, tensor<6x8xf32>) outs(%y, %e : tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>, tensor<4x6xf32>
  return %r#0, %r#1 : tensor<4x6xf32>, tensor<4x6xf32>
}

// -----

// A weight gradient written into a slice of a bigger buffer stays there.
// The bias gradient, a second slice of the same buffer, goes through a small
// copy: One-Shot Bufferize cannot tell that the weight gradient's
// insert_slice (between the op and the bias's insert_slice) writes elsewhere.
// CHECK-LABEL: func.func @backward_into_slice(
// CHECK-SAME: %[[DY:[^:]*]]: memref<4x6xf32{{.*}}>, %[[X:[^:]*]]: memref<4x8xf32{{.*}}>, %[[FLAT:[^:]*]]: memref<54xf32{{.*}}>
// CHECK: %[[SLICE:.*]] = memref.subview %[[FLAT]][0] [48] [1]
// CHECK: %[[DW:.*]] = memref.expand_shape %[[SLICE]]
// CHECK: %[[DB:.*]] = memref.alloc() {{.*}} : memref<6xf32>
// CHECK: zest.linear_backward none transpose_grad_weight grad_output(%[[DY]] : {{.*}}) input(%[[X]] : {{.*}}) outs( grad_weight %[[DW]] : {{.*}} grad_bias %[[DB]] : {{.*}})
// CHECK-NOT: memref.copy {{.*}} memref<6x8xf32
// CHECK: memref.copy %[[DB]]
func.func @backward_into_slice(%dy: tensor<4x6xf32>, %x: tensor<4x8xf32>, %flat: tensor<54xf32>) -> tensor<54xf32> {
  %s = tensor.extract_slice %flat[0] [48] [1] : tensor<54xf32> to tensor<48xf32>
  %dw0 = tensor.expand_shape %s [[0, 1]] output_shape [6, 8] : tensor<48xf32> into tensor<6x8xf32>
  %db0 = tensor.extract_slice %flat[48] [6] [1] : tensor<54xf32> to tensor<6xf32>
  %g:2 = zest.linear_backward none transpose_grad_weight grad_output(%dy : tensor<4x6xf32>) input(%x : tensor<4x8xf32>) outs(grad_weight %dw0 : tensor<6x8xf32> grad_bias %db0 : tensor<6xf32>) -> tensor<6x8xf32>, tensor<6xf32>
  %c = tensor.collapse_shape %g#0 [[0, 1]] : tensor<6x8xf32> into tensor<48xf32>
  %f1 = tensor.insert_slice %c into %flat[0] [48] [1] : tensor<48xf32> into tensor<54xf32>
  %f2 = tensor.insert_slice %g#1 into %f1[48] [6] [1] : tensor<6xf32> into tensor<54xf32>
  return %f2 : tensor<54xf32>
}

// -----

// A barrier is its operand's buffer: what reads it reads the argument,
// with no copy (the one allocation is the generic's destination).
// CHECK-LABEL: func.func @barrier(
// CHECK-SAME: %[[X:[^:]*]]: memref<4xf32{{.*}}>
// CHECK-NOT: zest.optimization_barrier
// CHECK-NOT: memref.copy
// CHECK: linalg.generic {{.*}} ins(%[[X]] :
// CHECK-NOT: memref.copy
func.func @barrier(%x: tensor<4xf32>) -> tensor<4xf32> {
  %b = zest.optimization_barrier %x : tensor<4xf32>
  %e = tensor.empty() : tensor<4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]} ins(%b : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %y = arith.mulf %in, %in : f32
    linalg.yield %y : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}
