// RUN: zest-opt %s -split-input-file -zest-reserve-pool | FileCheck %s
// An alignment the pool cannot give is refused.
// RUN: not zest-opt %s -split-input-file -zest-reserve-pool="arena-alignment=0" 2>&1 | FileCheck %s --check-prefix=ALIGN
// ALIGN: error: arena-alignment must be a positive multiple of 64 (the pool's buckets), got 0

// With 256-byte alignment (GPU targets) the 64-byte buffers of the step
// below take 256 bytes each in the arena.
// RUN: zest-opt %s -split-input-file -zest-reserve-pool="arena-alignment=256" | FileCheck %s --check-prefix=GPU
// GPU: memref.global "private" constant @__zest_pool_placement_step : memref<6xi64> = dense<[0, 64, 256, 64, 0, 128]>

// Each entry point starts by handing the pool its arena and where each
// allocation goes, in the order the step makes them: (offset, bytes) for
// %a, %b, %c. Placed by size, the 128-byte %c goes first at 0 and %a shares
// its offset (their lifetimes do not meet), so the arena is the live peak,
// 192 bytes; placed in allocation order (%a at 0, %b at 64) %c would start
// at 128 and the arena would need 256.
// CHECK:      memref.global "private" constant @__zest_pool_placement_step : memref<6xi64> = dense<[0, 64, 128, 64, 0, 128]>
// CHECK-LABEL: func.func @step()
// CHECK-NEXT:   %[[TABLE:.*]] = memref.get_global @__zest_pool_placement_step
// CHECK-DAG:    %[[BYTES:.*]] = arith.constant 192 : i64
// CHECK-DAG:    %[[COUNT:.*]] = arith.constant 3 : i64
// CHECK-DAG:    memref.extract_aligned_pointer_as_index %[[TABLE]]
// CHECK-DAG:    %[[PTR:.*]] = llvm.inttoptr
// CHECK:        call @zest_pool_reserve(%[[BYTES]], %[[PTR]], %[[COUNT]]) : (i64, !llvm.ptr, i64) -> ()
// CHECK-NEXT:   memref.alloc() : memref<16xf32>
func.func @step() {
  %a = memref.alloc() : memref<16xf32>
  %b = memref.alloc() : memref<16xf32>
  memref.dealloc %a : memref<16xf32>
  %c = memref.alloc() : memref<32xf32>
  memref.dealloc %b : memref<16xf32>
  memref.dealloc %c : memref<32xf32>
  return
}

// -----

// A region called twice allocates at each call: one placement per call,
// the second call's buffer where the first one's was (64 bytes at 0), above
// the caller's buffer that lives across both (at 64). Private functions
// reserve nothing themselves.
// CHECK-LABEL: func.func private @region()
// CHECK-NOT:    zest_pool_reserve
// CHECK:      memref.global "private" constant @__zest_pool_placement_step : memref<6xi64> = dense<[0, 64, 64, 64, 64, 64]>
// CHECK-LABEL: func.func @step()
// CHECK:        call @zest_pool_reserve
func.func private @region() {
  %t = memref.alloc() : memref<16xf32>
  memref.dealloc %t : memref<16xf32>
  return
}
func.func @step() {
  %a = memref.alloc() : memref<16xf32>
  call @region() : () -> ()
  call @region() : () -> ()
  memref.dealloc %a : memref<16xf32>
  return
}

// -----

// No placement where the order of allocations is not static (one in a
// branch) or a buffer outlives the step: the pool's free lists serve them.
// CHECK-LABEL: func.func @branch
// CHECK-NOT:     zest_pool_reserve
// CHECK-LABEL: func.func @unfreed
// CHECK-NOT:     zest_pool_reserve
// CHECK-NOT:   memref.global
func.func @branch(%c: i1) {
  scf.if %c {
    %t = memref.alloc() : memref<16xf32>
    memref.dealloc %t : memref<16xf32>
  }
  return
}
func.func @unfreed() {
  %t = memref.alloc() : memref<16xf32>
  return
}
