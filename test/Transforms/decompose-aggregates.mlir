// RUN: zest-opt %s -zest-decompose-aggregates | FileCheck %s

// linalg.softmax becomes max-reduce, exp(x - max), sum-reduce and divide.
// CHECK-LABEL: func.func @softmax(
// CHECK-NOT:   linalg.softmax
// CHECK:       linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]
// CHECK:         arith.maxnumf
// CHECK:       linalg.generic
// CHECK:         arith.subf
// CHECK:         math.exp
// CHECK:       linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]
// CHECK:         arith.addf
// CHECK:       linalg.generic
// CHECK:         arith.divf
func.func @softmax(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %e = tensor.empty() : tensor<2x8xf32>
  %s = linalg.softmax dimension(1) ins(%x : tensor<2x8xf32>) outs(%e : tensor<2x8xf32>) -> tensor<2x8xf32>
  return %s : tensor<2x8xf32>
}
