// RUN: zest-opt %s -split-input-file -zest-free-after-last-use | FileCheck %s

func.func private @use(!llvm.ptr)
func.func private @start(!llvm.ptr) -> i64
func.func private @wait(i64)

// Each dealloc moves right after the last use of its buffer or anything
// derived from it: a view, an extracted pointer, a request handle.
// CHECK-LABEL: func.func @hoist(
// CHECK:       %[[A:.*]] = memref.alloc() : memref<8xf32>
// CHECK:       %[[B:.*]] = memref.alloc() : memref<8xf32>
// CHECK:       %[[V:.*]] = memref.subview %[[A]]
// CHECK:       memref.copy %[[V]], %{{.*}}
// CHECK-NEXT:  memref.dealloc %[[A]]
// CHECK:       %[[REQ:.*]] = call @start
// CHECK-NEXT:  arith.addf
// CHECK-NEXT:  call @wait(%[[REQ]])
// CHECK-NEXT:  memref.dealloc %[[B]]
// CHECK-NEXT:  return
func.func @hoist(%out: memref<4xf32>, %x: f32) -> f32 {
  %a = memref.alloc() : memref<8xf32>
  %b = memref.alloc() : memref<8xf32>
  %v = memref.subview %a[0] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1]>>
  memref.copy %v, %out : memref<4xf32, strided<[1]>> to memref<4xf32>
  %p = memref.extract_aligned_pointer_as_index %b : memref<8xf32> -> index
  %i = arith.index_cast %p : index to i64
  %ptr = llvm.inttoptr %i : i64 to !llvm.ptr
  %req = func.call @start(%ptr) : (!llvm.ptr) -> i64
  %y = arith.addf %x, %x : f32
  func.call @wait(%req) : (i64) -> ()
  memref.dealloc %a : memref<8xf32>
  memref.dealloc %b : memref<8xf32>
  return %y : f32
}

// A buffer that escapes through a terminator keeps its dealloc in place.
// CHECK-LABEL: func.func @escapes(
// CHECK:       scf.if
// CHECK:       }
// CHECK-NEXT:  memref.dealloc
func.func @escapes(%c: i1) {
  %a = memref.alloc() : memref<8xf32>
  scf.if %c {
    %v = memref.subview %a[0] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1]>>
    scf.yield
  }
  %x = arith.constant 0 : index
  memref.dealloc %a : memref<8xf32>
  return
}
