// RUN: zest-opt %s -split-input-file -zest-plan-memory="report-json=-" -o /dev/null | FileCheck %s

// The pool's view of a step: an allocation with `alignment` asks for its
// bytes plus the alignment, rounded up to 64-byte buckets (a 4 x f32 buffer
// aligned to 64: 16 + 64 -> 128 bytes); a buffer marked gathered counts its
// own bytes (16) until freed. Branches that free what they allocate raise
// the peak from where they start: 128 + 64 (b) + 128 (the branch's 100
// bytes) = 320, reached inside the branch.
// CHECK:      "name": "step",
// CHECK-NEXT: "peak_gathered_at": "func.call at
// CHECK-NEXT: "peak_pool_at": "memref.alloc at {{.*}}plan-memory.mlir{{.}}":[[@LINE+19]]:10)",
// CHECK-NEXT: "predicted_peak_gathered_bytes": 16,
// CHECK-NEXT: "predicted_peak_pool_bytes": 320
// A function with a dynamic allocation cannot be replayed: no prediction,
// and none for the module either.
// CHECK:      "name": "dynamic",
// CHECK-NEXT: "predicted_peak_gathered_bytes": null,
// CHECK-NEXT: "predicted_peak_pool_bytes": null
// CHECK:      "predicted_peak_gathered_bytes": null,
// CHECK-NEXT: "predicted_peak_pool_bytes": null
func.func private @zest_pool_mark_gathered(!llvm.ptr)
func.func @step(%c: i1) {
  %a = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
  %i = memref.extract_aligned_pointer_as_index %a : memref<4xf32> -> index
  %i64 = arith.index_cast %i : index to i64
  %p = llvm.inttoptr %i64 : i64 to !llvm.ptr
  call @zest_pool_mark_gathered(%p) : (!llvm.ptr) -> ()
  %b = memref.alloc() : memref<2xf32>
  scf.if %c {
    %t = memref.alloc() : memref<25xf32>
    memref.dealloc %t : memref<25xf32>
  }
  memref.dealloc %a : memref<4xf32>
  memref.dealloc %b : memref<2xf32>
  return
}
func.func @dynamic(%n: index) {
  %a = memref.alloc(%n) : memref<?xf32>
  memref.dealloc %a : memref<?xf32>
  return
}
