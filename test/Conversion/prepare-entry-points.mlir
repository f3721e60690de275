// RUN: zest-opt %s -zest-prepare-entry-points | FileCheck %s

// Public functions with bodies are entry points: C interface, the host's
// buffers are never written by bufferization, scalars become 0-d tensors.
// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[S:.*]]: tensor<4xf32> {bufferization.writable = false, zest.unit = @u}, %{{.*}}: tensor<2xf32> {bufferization.writable = false}, %[[N:.*]]: tensor<i32> {bufferization.writable = false})
// CHECK-SAME: -> (tensor<2xf32>, tensor<f32> {zest.loss})
// CHECK-SAME: attributes {llvm.emit_c_interface}
// CHECK:      %[[NS:.*]] = tensor.extract %[[N]][] : tensor<i32>
// CHECK:      arith.sitofp %[[NS]]
// CHECK:      %[[L:.*]] = tensor.from_elements %{{.*}} : tensor<f32>
// CHECK:      return %{{.*}}, %[[L]] : tensor<2xf32>, tensor<f32>
func.func @step(%s: tensor<4xf32> {zest.unit = @u}, %x: tensor<2xf32>, %n: i32) -> (tensor<2xf32>, f32 {zest.loss}) {
  %f = arith.sitofp %n : i32 to f32
  return %x, %f : tensor<2xf32>, f32
}
// CHECK-LABEL: func.func private @helper(
// CHECK-SAME: %{{.*}}: f32) -> f32
// CHECK-NOT: bufferization.writable
// CHECK-NOT: llvm.emit_c_interface
func.func private @helper(%x: f32) -> f32 {
  return %x : f32
}
