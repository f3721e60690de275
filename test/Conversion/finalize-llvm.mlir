// RUN: zest-opt %s -zest-finalize-llvm | FileCheck %s

// Kernels' no-alias facts land on their LLVM pointer arguments; units and
// the kernel mark are compile-time metadata, dropped.
// CHECK-NOT: zest.unit
// CHECK-LABEL: llvm.func @zest_kernel_0(
// CHECK-SAME: %{{.*}}: !llvm.ptr {llvm.noalias}, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr {llvm.noalias})
// CHECK-NOT: zest.
// CHECK-LABEL: llvm.func @plain(
// CHECK-SAME: %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr)
// CHECK-NOT: zest.
zest.unit @u sharded : f32, world_size = 2, padded_size = 8, shard_size = 4 ["u.w" : tensor<6xf32> at 0]
llvm.func @zest_kernel_0(%a: !llvm.ptr, %b: !llvm.ptr, %c: !llvm.ptr) attributes {zest.kernel, zest.noalias_pointers = array<i64: 0, 2>} {
  llvm.return
}
llvm.func @plain(%a: !llvm.ptr, %b: !llvm.ptr) attributes {zest.kernel} {
  llvm.return
}
