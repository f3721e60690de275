// RUN: zest-opt %s -split-input-file -verify-diagnostics \
// RUN:   -zest-upload-constants | FileCheck %s

// A constant global read by the step: the step allocates a buffer of its
// type and copies the global into it (stream-ordered, from the host's
// copy); every other use reads the buffer.

// CHECK:       func.func private @zest_upload_constant(!llvm.ptr, !llvm.ptr, i64)
// CHECK-LABEL: func.func @step(
// CHECK:         %[[HOST:.*]] = memref.get_global @table : memref<4xf32>
// CHECK:         %[[DEVICE:.*]] = memref.alloc() : memref<4xf32>
// CHECK:         %[[TO:.*]] = memref.extract_aligned_pointer_as_index %[[DEVICE]]
// CHECK:         %[[TO64:.*]] = arith.index_cast %[[TO]] : index to i64
// CHECK:         %[[TOP:.*]] = llvm.inttoptr %[[TO64]] : i64 to !llvm.ptr
// CHECK:         %[[FROM:.*]] = memref.extract_aligned_pointer_as_index %[[HOST]]
// CHECK:         %[[FROM64:.*]] = arith.index_cast %[[FROM]] : index to i64
// CHECK:         %[[FROMP:.*]] = llvm.inttoptr %[[FROM64]] : i64 to !llvm.ptr
// CHECK:         %[[BYTES:.*]] = arith.constant 16 : i64
// CHECK:         call @zest_upload_constant(%[[TOP]], %[[FROMP]], %[[BYTES]])
// CHECK:         memref.copy %[[DEVICE]], %arg0
memref.global "private" constant @table : memref<4xf32> = dense<[0.5, -0.25, 0.125, 1.0]>
func.func @step(%out: memref<4xf32>) {
  %t = memref.get_global @table : memref<4xf32>
  memref.copy %t, %out : memref<4xf32> to memref<4xf32>
  return
}

// -----

memref.global "private" @state : memref<4xf32> = dense<0.0>
func.func @step(%out: memref<4xf32>) {
  // expected-error @+1 {{zest-upload-constants: 'state' is not a constant global; a device target keeps no mutable state on the host}}
  %t = memref.get_global @state : memref<4xf32>
  memref.copy %t, %out : memref<4xf32> to memref<4xf32>
  return
}
