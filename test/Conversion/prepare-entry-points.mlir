// RUN: zest-opt %s -zest-prepare-entry-points | FileCheck %s

// Public functions with bodies are entry points: C interface, and the host's
// buffers are never written by bufferization.
// CHECK-LABEL: func.func @step(
// CHECK-SAME: %{{.*}}: tensor<4xf32> {bufferization.writable = false, zest.unit = @u}, %{{.*}}: tensor<2xf32> {bufferization.writable = false}, %{{.*}}: i32)
// CHECK-SAME: attributes {llvm.emit_c_interface}
func.func @step(%s: tensor<4xf32> {zest.unit = @u}, %x: tensor<2xf32>, %n: i32) -> tensor<2xf32> {
  return %x : tensor<2xf32>
}
// CHECK-LABEL: func.func private @helper(
// CHECK-NOT: bufferization.writable
// CHECK-NOT: llvm.emit_c_interface
func.func private @helper(%x: tensor<2xf32>) -> tensor<2xf32> {
  return %x : tensor<2xf32>
}
