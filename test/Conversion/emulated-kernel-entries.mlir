// RUN: zest-opt %s -zest-emulated-kernel-entries | FileCheck %s

// A lowered emulated kernel taking one 1-D buffer (five LLVM parameters,
// its aligned pointer second) and a float, then the nine launch values.
// Its entry loads each parameter through the launch's pointer array and
// each launch value from the launch array; one constructor registers it
// with its parameters' sizes and its buffer's position.

// CHECK-DAG:   llvm.mlir.global internal constant @__zest_emulated_m_k_entry.params(dense<[8, 8, 8, 8, 8, 4]> : tensor<6xi32>)
// CHECK-DAG:   llvm.mlir.global internal constant @__zest_emulated_m_k_entry.buffers(dense<1> : tensor<1xi32>)
// CHECK-DAG:   llvm.mlir.global internal constant @__zest_emulated_m_k_entry.module("m\00")
// CHECK-DAG:   llvm.mlir.global internal constant @__zest_emulated_m_k_entry.name("k\00")
// CHECK-LABEL: llvm.func @__zest_emulated_m_k(
// CHECK-NOT:     zest.emulated_kernel
// CHECK:       llvm.func @zest_emulated_register_kernel(!llvm.ptr, !llvm.ptr, !llvm.ptr, i32, !llvm.ptr, !llvm.ptr, i32)
// CHECK:       llvm.func internal @__zest_emulated_register_kernels() {
// CHECK:         %[[ENTRY:.*]] = llvm.mlir.addressof @__zest_emulated_m_k_entry : !llvm.ptr
// CHECK:         %[[COUNT:.*]] = llvm.mlir.constant(6 : i32) : i32
// CHECK:         %[[ONE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK:         llvm.call @zest_emulated_register_kernel(%{{.*}}, %{{.*}}, %[[ENTRY]], %[[COUNT]], %{{.*}}, %{{.*}}, %[[ONE]])
// CHECK-LABEL: llvm.func @__zest_emulated_m_k_entry(
// CHECK-SAME:      %[[PARAMS:.*]]: !llvm.ptr, %[[LAUNCH:.*]]: !llvm.ptr) {
// CHECK:         %[[SLOT0:.*]] = llvm.getelementptr %[[PARAMS]][0] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK:         %[[P0:.*]] = llvm.load %[[SLOT0]] : !llvm.ptr -> !llvm.ptr
// CHECK:         llvm.load %[[P0]] : !llvm.ptr -> !llvm.ptr
// CHECK:         %[[SLOT5:.*]] = llvm.getelementptr %[[PARAMS]][5] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK:         %[[P5:.*]] = llvm.load %[[SLOT5]] : !llvm.ptr -> !llvm.ptr
// CHECK:         llvm.load %[[P5]] : !llvm.ptr -> f32
// CHECK:         %[[L0:.*]] = llvm.getelementptr %[[LAUNCH]][0] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK:         llvm.load %[[L0]] : !llvm.ptr -> i64
// CHECK:         %[[L8:.*]] = llvm.getelementptr %[[LAUNCH]][8] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK:         llvm.load %[[L8]] : !llvm.ptr -> i64
// CHECK:         llvm.call @__zest_emulated_m_k(
// CHECK:       llvm.mlir.global_ctors ctors = [@__zest_emulated_register_kernels], priorities = [65535 : i32], data = [#llvm.zero]
module {
  llvm.func @__zest_emulated_m_k(%alloc: !llvm.ptr, %aligned: !llvm.ptr, %offset: i64, %size: i64, %stride: i64, %x: f32, %bx: i64, %by: i64, %bz: i64, %dx: i64, %dy: i64, %dz: i64, %gx: i64, %gy: i64, %gz: i64) attributes {zest.emulated_kernel = {buffers = array<i32: 1>, module = "m", name = "k"}} {
    llvm.return
  }
}
