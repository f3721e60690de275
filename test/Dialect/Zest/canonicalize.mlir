// RUN: zest-opt %s -split-input-file -canonicalize | FileCheck %s

// Packing every result of an unpack, in order and with the same pieces, is
// the unpacked buffer.
// CHECK-LABEL: func.func @repack(
// CHECK-SAME:      %[[X:.*]]: tensor<6xf32>)
// CHECK-NEXT:    return %[[X]]
func.func @repack(%x: tensor<6xf32>) -> tensor<6xf32> {
  %a, %b = zest.unpack %x pieces 2 : tensor<6xf32> -> tensor<2xf32>, tensor<4xf32>
  %y = zest.pack %a, %b pieces 2 : tensor<2xf32>, tensor<4xf32> -> tensor<6xf32>
  return %y : tensor<6xf32>
}

// -----

// Another order, other pieces, or a part missing: a real packing.
// CHECK-LABEL: func.func @not_a_repack(
// CHECK-COUNT-3: zest.pack
func.func @not_a_repack(%x: tensor<6xf32>, %z: tensor<2xf32>) -> (tensor<6xf32>, tensor<6xf32>, tensor<6xf32>) {
  %a, %b = zest.unpack %x pieces 2 : tensor<6xf32> -> tensor<2xf32>, tensor<4xf32>
  %swapped = zest.pack %b, %a pieces 2 : tensor<4xf32>, tensor<2xf32> -> tensor<6xf32>
  %pieces = zest.pack %a, %b pieces 1 : tensor<2xf32>, tensor<4xf32> -> tensor<6xf32>
  %other = zest.pack %z, %b pieces 2 : tensor<2xf32>, tensor<4xf32> -> tensor<6xf32>
  return %swapped, %pieces, %other : tensor<6xf32>, tensor<6xf32>, tensor<6xf32>
}
