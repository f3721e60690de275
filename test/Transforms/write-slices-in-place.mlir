// RUN: zest-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(zest-write-slices-in-place))' | FileCheck %s

// The qkv gradient: three [2, 4, 16] products, collapsed to [8, 16] and
// inserted side by side into a zero-filled [8, 48]. The fill goes (the
// slices cover it), and the products are inserted uncollapsed into the
// [2, 4, 48] view of the destination, so empty-tensor elimination can have
// each product write into its slice.
// CHECK-LABEL: func.func @concat(
// CHECK-SAME:      %[[A:[^:]*]]: tensor<2x4x16xf32>, %[[B:[^:]*]]: tensor<2x4x16xf32>, %[[C:[^:]*]]: tensor<2x4x16xf32>)
// CHECK-NEXT:    %[[E:.*]] = tensor.empty() : tensor<2x4x48xf32>
// CHECK-NEXT:    %[[I0:.*]] = tensor.insert_slice %[[A]] into %[[E]][0, 0, 0] [2, 4, 16] [1, 1, 1]
// CHECK-NEXT:    %[[I1:.*]] = tensor.insert_slice %[[B]] into %[[I0]][0, 0, 16] [2, 4, 16] [1, 1, 1]
// CHECK-NEXT:    %[[I2:.*]] = tensor.insert_slice %[[C]] into %[[I1]][0, 0, 32] [2, 4, 16] [1, 1, 1]
// CHECK-NEXT:    %[[R:.*]] = tensor.collapse_shape %[[I2]] {{\[}}[0, 1], [2]] : tensor<2x4x48xf32> into tensor<8x48xf32>
// CHECK-NEXT:    return %[[R]]
func.func @concat(%a: tensor<2x4x16xf32>, %b: tensor<2x4x16xf32>, %c: tensor<2x4x16xf32>) -> tensor<8x48xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x48xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<8x48xf32>) -> tensor<8x48xf32>
  %ca = tensor.collapse_shape %a [[0, 1], [2]] : tensor<2x4x16xf32> into tensor<8x16xf32>
  %0 = tensor.insert_slice %ca into %z[0, 0] [8, 16] [1, 1] : tensor<8x16xf32> into tensor<8x48xf32>
  %cb = tensor.collapse_shape %b [[0, 1], [2]] : tensor<2x4x16xf32> into tensor<8x16xf32>
  %1 = tensor.insert_slice %cb into %0[0, 16] [8, 16] [1, 1] : tensor<8x16xf32> into tensor<8x48xf32>
  %cc = tensor.collapse_shape %c [[0, 1], [2]] : tensor<2x4x16xf32> into tensor<8x16xf32>
  %2 = tensor.insert_slice %cc into %1[0, 32] [8, 16] [1, 1] : tensor<8x16xf32> into tensor<8x48xf32>
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

// A slice that cuts a collapsed group (rows 0-3 of the 8 = 2 x 4): the
// collapse stays.
// CHECK-LABEL: func.func @cut_group(
// CHECK:         tensor.collapse_shape %{{.*}} {{\[}}[0, 1], [2]] : tensor<1x4x16xf32> into tensor<4x16xf32>
// CHECK-NEXT:    tensor.insert_slice %{{.*}}[0, 0] [4, 16]
func.func @cut_group(%a: tensor<1x4x16xf32>, %d: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %ca = tensor.collapse_shape %a [[0, 1], [2]] : tensor<1x4x16xf32> into tensor<4x16xf32>
  %0 = tensor.insert_slice %ca into %d[0, 0] [4, 16] [1, 1] : tensor<4x16xf32> into tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}
