// RUN: zest-opt %s -split-input-file -zest-split-owned-deallocs | FileCheck %s

// Owned allocations leave the block-end dealloc as plain deallocs; a view of
// a function argument with a runtime condition stays for the simplification.
// CHECK-LABEL: func.func @owned(
// CHECK-DAG:     memref.dealloc %[[A:.*]] : memref<4xf32>
// CHECK-DAG:     memref.dealloc %[[B:.*]] : memref<8xf32>
// CHECK:         bufferization.dealloc (%{{.*}} : memref<2xf32, strided<[1]>>) if (%{{.*}})
// CHECK-NOT:     bufferization.dealloc
func.func @owned(%arg: memref<4xf32>, %c: i1) {
  %true = arith.constant true
  %a = memref.alloc() : memref<4xf32>
  %b = memref.alloc() : memref<8xf32>
  %v = memref.subview %arg[0] [2] [1] : memref<4xf32> to memref<2xf32, strided<[1]>>
  bufferization.dealloc (%a, %b, %v : memref<4xf32>, memref<8xf32>, memref<2xf32, strided<[1]>>) if (%true, %true, %c)
  return
}

// -----

// An allocation another entry is a view of is freed once, by the op.
// CHECK-LABEL: func.func @aliased(
// CHECK-NOT:     memref.dealloc
// CHECK:         bufferization.dealloc (%{{.*}}, %{{.*}} : memref<4xf32>, memref<2xf32, strided<[1]>>)
func.func @aliased(%c: i1) {
  %true = arith.constant true
  %a = memref.alloc() : memref<4xf32>
  %v = memref.subview %a[0] [2] [1] : memref<4xf32> to memref<2xf32, strided<[1]>>
  bufferization.dealloc (%a, %v : memref<4xf32>, memref<2xf32, strided<[1]>>) if (%true, %c)
  return
}

// -----

// Retained values (ownership computed for them) and memrefs of unknown
// origin leave the op alone.
// CHECK-LABEL: func.func @untouched(
// CHECK-NOT:     memref.dealloc
// CHECK:         bufferization.dealloc (%{{.*}} : memref<4xf32>) if (%{{.*}}) retain (%{{.*}} : memref<4xf32>)
// CHECK:         bufferization.dealloc (%{{.*}}, %{{.*}} : memref<4xf32>, memref<4xf32>)
func.func @untouched(%r: memref<4xf32>, %c: i1) -> memref<4xf32> {
  %true = arith.constant true
  %a = memref.alloc() : memref<4xf32>
  %keep = bufferization.dealloc (%a : memref<4xf32>) if (%true) retain (%r : memref<4xf32>)
  %b = memref.alloc() : memref<4xf32>
  %u = scf.if %c -> memref<4xf32> {
    scf.yield %b : memref<4xf32>
  } else {
    scf.yield %r : memref<4xf32>
  }
  bufferization.dealloc (%b, %u : memref<4xf32>, memref<4xf32>) if (%true, %c)
  return %r : memref<4xf32>
}
