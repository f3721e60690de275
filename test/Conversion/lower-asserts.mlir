// RUN: zest-opt %s -split-input-file -zest-lower-asserts | FileCheck %s

// torch-mlir's index check in a loop: the runtime's error when it fails,
// its message a string global; the declaration added once.
// CHECK:       llvm.mlir.global internal constant @zest.check.0("index must be smaller than dim size\00")
// CHECK-LABEL: func.func @embedding_ids(
// CHECK:         %[[OK:.*]] = arith.cmpi slt
// CHECK:         %[[TRUE:.*]] = arith.constant true
// CHECK:         %[[FAILED:.*]] = arith.xori %[[OK]], %[[TRUE]] : i1
// CHECK:         scf.if %[[FAILED]] {
// CHECK:           %[[GLOBAL:.*]] = llvm.mlir.addressof @zest.check.0 : !llvm.ptr
// CHECK:           %[[MSG:.*]] = llvm.getelementptr %[[GLOBAL]][0, 0]
// CHECK:           func.call @zest_check_failed(%[[MSG]]) : (!llvm.ptr) -> ()
// CHECK-NOT:     cf.assert
// CHECK:         func.func private @zest_check_failed(!llvm.ptr)
func.func @embedding_ids(%ids: memref<8xi64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : i64
  scf.for %i = %c0 to %c8 step %c1 {
    %id = memref.load %ids[%i] : memref<8xi64>
    %ok = arith.cmpi slt, %id, %c64 : i64
    cf.assert %ok, "index must be smaller than dim size"
  }
  return
}

// -----

// A GPU kernel keeps its assert: device code cannot call the host.
// CHECK-LABEL: gpu.module @kernels
// CHECK:         cf.assert
// CHECK-NOT:     zest_check_failed
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @check(%ok: i1) kernel {
      cf.assert %ok, "index must be larger or equal to 0"
      gpu.return
    }
  }
}
