// RUN: zest-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(zest-drop-overwritten-fills))' | FileCheck %s

// The qkv gradient: three [8, 16] pieces inserted side by side into a
// zero-filled [8, 48]: the slices cover it, the fill goes.
// CHECK-LABEL: func.func @concat(
// CHECK-SAME:      %[[A:[^:]*]]: tensor<8x16xf32>, %[[B:[^:]*]]: tensor<8x16xf32>, %[[C:[^:]*]]: tensor<8x16xf32>)
// CHECK-NEXT:    %[[E:.*]] = tensor.empty() : tensor<8x48xf32>
// CHECK-NEXT:    %[[I0:.*]] = tensor.insert_slice %[[A]] into %[[E]][0, 0] [8, 16] [1, 1]
// CHECK-NEXT:    %[[I1:.*]] = tensor.insert_slice %[[B]] into %[[I0]][0, 16] [8, 16] [1, 1]
// CHECK-NEXT:    %[[I2:.*]] = tensor.insert_slice %[[C]] into %[[I1]][0, 32] [8, 16] [1, 1]
// CHECK-NEXT:    return %[[I2]]
func.func @concat(%a: tensor<8x16xf32>, %b: tensor<8x16xf32>, %c: tensor<8x16xf32>) -> tensor<8x48xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x48xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<8x48xf32>) -> tensor<8x48xf32>
  %0 = tensor.insert_slice %a into %z[0, 0] [8, 16] [1, 1] : tensor<8x16xf32> into tensor<8x48xf32>
  %1 = tensor.insert_slice %b into %0[0, 16] [8, 16] [1, 1] : tensor<8x16xf32> into tensor<8x48xf32>
  %2 = tensor.insert_slice %c into %1[0, 32] [8, 16] [1, 1] : tensor<8x16xf32> into tensor<8x48xf32>
  return %2 : tensor<8x48xf32>
}

// -----

// Near misses. Two slices that leave a gap: the fill stays (its zeros are
// read).
// CHECK-LABEL: func.func @gap(
// CHECK:         linalg.fill
func.func @gap(%a: tensor<8x16xf32>, %b: tensor<8x16xf32>) -> tensor<8x48xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x48xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<8x48xf32>) -> tensor<8x48xf32>
  %0 = tensor.insert_slice %a into %z[0, 0] [8, 16] [1, 1] : tensor<8x16xf32> into tensor<8x48xf32>
  %1 = tensor.insert_slice %b into %0[0, 32] [8, 16] [1, 1] : tensor<8x16xf32> into tensor<8x48xf32>
  return %1 : tensor<8x48xf32>
}

// Overlapping slices whose sizes add up to the whole: the fill stays.
// CHECK-LABEL: func.func @overlap(
// CHECK:         linalg.fill
func.func @overlap(%a: tensor<8x16xf32>, %b: tensor<8x32xf32>) -> tensor<8x48xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x48xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<8x48xf32>) -> tensor<8x48xf32>
  %0 = tensor.insert_slice %a into %z[0, 8] [8, 16] [1, 1] : tensor<8x16xf32> into tensor<8x48xf32>
  %1 = tensor.insert_slice %b into %0[0, 0] [8, 32] [1, 1] : tensor<8x32xf32> into tensor<8x48xf32>
  return %1 : tensor<8x48xf32>
}

// The filled tensor is also read elsewhere: the fill stays.
// CHECK-LABEL: func.func @read(
// CHECK:         linalg.fill
func.func @read(%a: tensor<8x48xf32>) -> (tensor<8x48xf32>, tensor<8x48xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x48xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<8x48xf32>) -> tensor<8x48xf32>
  %0 = tensor.insert_slice %a into %z[0, 0] [8, 48] [1, 1] : tensor<8x48xf32> into tensor<8x48xf32>
  return %0, %z : tensor<8x48xf32>, tensor<8x48xf32>
}
