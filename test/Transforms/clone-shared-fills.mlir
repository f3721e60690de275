// RUN: zest-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(zest-clone-shared-fills))' | FileCheck %s

// One zero fill that two products and a reduction start from (as CSE leaves
// torch-mlir's zeros): each gets its own fill right before it, and the
// shared one goes.
// CHECK-LABEL: func.func @shared
// CHECK-SAME:    (%[[A:.+]]: tensor<8x8xf32>, %[[B:.+]]: tensor<8x8xf32>)
// CHECK:         %[[E:.+]] = tensor.empty() : tensor<8x8xf32>
// CHECK-NEXT:    %[[F1:.+]] = linalg.fill ins(%{{.+}} : f32) outs(%[[E]] : tensor<8x8xf32>)
// CHECK-NEXT:    %[[P1:.+]] = linalg.matmul ins(%[[A]], %[[B]] : {{.*}}) outs(%[[F1]] : tensor<8x8xf32>)
// CHECK-NEXT:    %[[F2:.+]] = linalg.fill ins(%{{.+}} : f32) outs(%[[E]] : tensor<8x8xf32>)
// CHECK-NEXT:    %[[P2:.+]] = linalg.matmul ins(%[[P1]], %[[B]] : {{.*}}) outs(%[[F2]] : tensor<8x8xf32>)
// CHECK-NEXT:    %[[F3:.+]] = linalg.fill ins(%{{.+}} : f32) outs(%[[E]] : tensor<8x8xf32>)
// CHECK-NEXT:    linalg.add ins(%[[P2]], %[[A]] : {{.*}}) outs(%[[F3]] : tensor<8x8xf32>)
// CHECK-NOT:     linalg.fill
func.func @shared(%a: tensor<8x8xf32>, %b: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
  %p1 = linalg.matmul ins(%a, %b : tensor<8x8xf32>, tensor<8x8xf32>) outs(%z : tensor<8x8xf32>) -> tensor<8x8xf32>
  %p2 = linalg.matmul ins(%p1, %b : tensor<8x8xf32>, tensor<8x8xf32>) outs(%z : tensor<8x8xf32>) -> tensor<8x8xf32>
  %s = linalg.add ins(%p2, %a : tensor<8x8xf32>, tensor<8x8xf32>) outs(%z : tensor<8x8xf32>) -> tensor<8x8xf32>
  return %s : tensor<8x8xf32>
}

// -----

// A fill also read as an input stays for that read; the op writing it gets
// a fill of its own. A fill with one user is left alone.
// CHECK-LABEL: func.func @read_and_written
// CHECK:         %[[Z:.+]] = linalg.fill
// CHECK-NEXT:    %[[F:.+]] = linalg.fill
// CHECK-NEXT:    linalg.add ins(%[[Z]], %{{.+}} : {{.*}}) outs(%[[F]] : tensor<4xf32>)
// CHECK-NEXT:    %[[O:.+]] = linalg.fill
// CHECK-NEXT:    linalg.exp ins(%{{.+}} : tensor<4xf32>) outs(%[[O]] : tensor<4xf32>)
// CHECK-NOT:     linalg.fill
func.func @read_and_written(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %one = arith.constant 1.0 : f32
  %e = tensor.empty() : tensor<4xf32>
  %z = linalg.fill ins(%one : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %s = linalg.add ins(%z, %x : tensor<4xf32>, tensor<4xf32>) outs(%z : tensor<4xf32>) -> tensor<4xf32>
  %o = linalg.fill ins(%one : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %x2 = linalg.exp ins(%x : tensor<4xf32>) outs(%o : tensor<4xf32>) -> tensor<4xf32>
  return %s, %x2 : tensor<4xf32>, tensor<4xf32>
}

// -----

// A loop that scatters into a splat constant (the cross-entropy backward's
// one-hot gradient) starts from a fill of an empty tensor instead: the
// constant would be a global copied into a new buffer every step. A
// constant the loop only reads stays.
// CHECK-LABEL: func.func @splat_loop_init
// CHECK-NOT:     dense<0.0
// CHECK:         %[[TABLE:.+]] = arith.constant dense<2.5{{.*}}> : tensor<4xf32>
// CHECK:         %[[E:.+]] = tensor.empty() : tensor<4x8xf32>
// CHECK-NEXT:    %[[F:.+]] = linalg.fill ins(%{{.+}} : f32) outs(%[[E]] : tensor<4x8xf32>)
// CHECK-NEXT:    scf.for {{.*}} iter_args(%{{.+}} = %[[F]]) -> (tensor<4x8xf32>)
// CHECK:           tensor.extract %[[TABLE]][
func.func @splat_loop_init(%ids: tensor<4xindex>) -> tensor<4x8xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %zeros = arith.constant dense<0.0> : tensor<4x8xf32>
  %table = arith.constant dense<2.5> : tensor<4xf32>
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %zeros) -> (tensor<4x8xf32>) {
    %id = tensor.extract %ids[%i] : tensor<4xindex>
    %v = tensor.extract %table[%i] : tensor<4xf32>
    %next = tensor.insert %v into %acc[%i, %id] : tensor<4x8xf32>
    scf.yield %next : tensor<4x8xf32>
  }
  return %r : tensor<4x8xf32>
}
