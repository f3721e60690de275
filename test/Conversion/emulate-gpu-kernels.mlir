// RUN: zest-opt %s -split-input-file -verify-diagnostics \
// RUN:   -zest-emulate-gpu-kernels | FileCheck %s

// A block reduction (zest-map-kernels-to-gpu's sum to a scalar): each
// thread's strided partial sum runs in a loop over the block's threads and
// is kept per thread; the block then combines them in thread order, and a
// second loop over the threads runs what follows (thread 0's store), its
// thread index computed anew. The module becomes the binary the emulated
// device loads, and the launch is unchanged.

// CHECK-LABEL: func.func private @__zest_emulated_sum_kernel_sum_kernel(
// CHECK-SAME:      %[[IN:.*]]: memref<512xf32>, %[[OUT:.*]]: memref<f32>, %[[BX:.*]]: index, %[[BY:.*]]: index, %[[BZ:.*]]: index, %[[DX:.*]]: index, %[[DY:.*]]: index, %[[DZ:.*]]: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index)
// CHECK-SAME:      zest.emulated_kernel = {buffers = array<i32: 1, 6>, module = "sum_kernel", name = "sum_kernel"}
// CHECK:         %[[XY:.*]] = arith.muli %[[DX]], %[[DY]] : index
// CHECK:         %[[THREADS:.*]] = arith.muli %[[XY]], %[[DZ]] : index
// CHECK:         %[[PARTIALS:.*]] = memref.alloca(%[[THREADS]]) : memref<?xf32>
// CHECK:         scf.for %[[T:.*]] = %{{.*}} to %[[THREADS]] step %{{.*}} {
// CHECK:           %[[TX:.*]] = arith.remui %[[T]], %[[DX]] : index
// CHECK:           %[[PARTIAL:.*]] = scf.for %{{.*}} = %[[TX]] to %{{.*}} step %[[DX]]
// CHECK:           memref.store %[[PARTIAL]], %[[PARTIALS]][%[[T]]] : memref<?xf32>
// CHECK:         } {zest.emulated_threads}
// CHECK:         %[[FIRST:.*]] = memref.load %[[PARTIALS]][%{{.*}}] : memref<?xf32>
// CHECK:         %[[TOTAL:.*]] = scf.for %[[U:.*]] = %{{.*}} to %[[THREADS]] step %{{.*}} iter_args(%[[ACC:.*]] = %[[FIRST]]) -> (f32) {
// CHECK:           %[[NEXT:.*]] = memref.load %[[PARTIALS]][%[[U]]] : memref<?xf32>
// CHECK:           %[[SUM:.*]] = arith.addf %[[ACC]], %[[NEXT]] : f32
// CHECK:           scf.yield %[[SUM]] : f32
// CHECK:         scf.for %[[T2:.*]] = %{{.*}} to %[[THREADS]] step %{{.*}} {
// CHECK:           %[[TX2:.*]] = arith.remui %[[T2]], %[[DX]] : index
// CHECK:           %[[IS0:.*]] = arith.cmpi eq, %[[TX2]], %{{.*}} : index
// CHECK:           scf.if %[[IS0]] {
// CHECK:             memref.store %[[TOTAL]], %[[OUT]][] : memref<f32>
// CHECK:         } {zest.emulated_threads}
// CHECK:         return
// CHECK:       gpu.binary @sum_kernel [#gpu.object<#nvvm.target, bin = "zest-emulated-kernels:sum_kernel\00">]
// CHECK-LABEL: func.func @step(
// CHECK:         gpu.launch_func @sum_kernel::@sum_kernel
module attributes {gpu.container_module} {
  gpu.module @sum_kernel {
    gpu.func @sum_kernel(%in: memref<512xf32>, %out: memref<f32>) kernel {
      %c0 = arith.constant 0 : index
      %c512 = arith.constant 512 : index
      %zero = arith.constant 0.0 : f32
      %tid = gpu.thread_id x
      %bdim = gpu.block_dim x
      %partial = scf.for %i = %tid to %c512 step %bdim iter_args(%acc = %zero) -> f32 {
        %v = memref.load %in[%i] : memref<512xf32>
        %s = arith.addf %acc, %v : f32
        scf.yield %s : f32
      }
      %total = gpu.all_reduce add %partial uniform {} : (f32) -> f32
      %first = arith.cmpi eq, %tid, %c0 : index
      scf.if %first {
        memref.store %total, %out[] : memref<f32>
      }
      gpu.return
    }
  }
  func.func @step(%in: memref<512xf32>, %out: memref<f32>) {
    %c1 = arith.constant 1 : index
    %c256 = arith.constant 256 : index
    gpu.launch_func @sum_kernel::@sum_kernel blocks in (%c1, %c1, %c1) threads in (%c256, %c1, %c1) args(%in : memref<512xf32>, %out : memref<f32>)
    return
  }
}

// -----

// A reduction under a condition read from a buffer (zest-map-kernels-to-gpu
// predicates launches so): the block takes the branch once, on thread 0's
// condition, after checking that every thread computed the same; a
// barrier right after the reduction adds no loop; a block index is the
// function's argument.

// CHECK:       func.func private @zest_emulated_divergent_barrier()
// CHECK-LABEL: func.func private @__zest_emulated_guarded_guarded(
// CHECK-SAME:      %{{.*}}: memref<i1>, %{{.*}}: memref<4x64xf32>, %[[Y:[^:]*]]: memref<4xf32>, %[[BX:[^:]*]]: index,
// CHECK:         %[[FLAGS:.*]] = memref.alloca(%{{.*}}) : memref<?xi1>
// CHECK:         scf.for
// CHECK:           memref.store %{{.*}}, %[[FLAGS]][%{{.*}}] : memref<?xi1>
// CHECK:         } {zest.emulated_threads}
// CHECK:         %[[COND:.*]] = memref.load %[[FLAGS]][%{{.*}}] : memref<?xi1>
// CHECK:         scf.for
// CHECK:           %[[OTHER:.*]] = memref.load %[[FLAGS]]
// CHECK:           %[[DIFFERS:.*]] = arith.cmpi ne, %[[COND]], %[[OTHER]] : i1
// CHECK:           scf.if %[[DIFFERS]] {
// CHECK:             func.call @zest_emulated_divergent_barrier() : () -> ()
// CHECK:         scf.if %[[COND]] {
// CHECK:           scf.for
// CHECK:             memref.store %{{.*}}, %{{.*}}[%{{.*}}] : memref<?xf32>
// CHECK:           } {zest.emulated_threads}
// CHECK:           %[[MAX:.*]] = scf.for {{.*}} -> (f32)
// CHECK:             arith.maximumf
// CHECK:           scf.for
// CHECK:             memref.store %[[MAX]], %[[Y]][%[[BX]]] : memref<4xf32>
// CHECK:           } {zest.emulated_threads}
// CHECK-NOT:       scf.for
// CHECK:         return
module attributes {gpu.container_module} {
  gpu.module @guarded {
    gpu.func @guarded(%flag: memref<i1>, %x: memref<4x64xf32>, %y: memref<4xf32>) kernel {
      %c0 = arith.constant 0 : index
      %cond = memref.load %flag[] : memref<i1>
      scf.if %cond {
        %row = gpu.block_id x
        %tid = gpu.thread_id x
        %v = memref.load %x[%row, %tid] : memref<4x64xf32>
        %m = gpu.all_reduce maximumf %v uniform {} : (f32) -> f32
        gpu.barrier
        %first = arith.cmpi eq, %tid, %c0 : index
        scf.if %first {
          memref.store %m, %y[%row] : memref<4xf32>
        }
      }
      gpu.return
    }
  }
}

// -----

module attributes {gpu.container_module} {
  gpu.module @looped {
    gpu.func @looped(%x: memref<64xf32>) kernel {
      %c0 = arith.constant 0 : index
      %c4 = arith.constant 4 : index
      %c1 = arith.constant 1 : index
      // expected-error @+1 {{zest-emulate-gpu-kernels: threads synchronize inside this op, which is not emulated (only at a kernel's top level or in a branch without results)}}
      scf.for %i = %c0 to %c4 step %c1 {
        gpu.barrier
      }
      gpu.return
    }
  }
}

// -----

module attributes {gpu.container_module} {
  gpu.module @custom {
    gpu.func @custom(%x: memref<64xf32>) kernel {
      %tid = gpu.thread_id x
      %v = memref.load %x[%tid] : memref<64xf32>
      // expected-error @+1 {{zest-emulate-gpu-kernels: a gpu.all_reduce with a region is not emulated}}
      %r = gpu.all_reduce %v {
      ^bb(%a: f32, %b: f32):
        %s = arith.addf %a, %b : f32
        gpu.yield %s : f32
      } : (f32) -> f32
      memref.store %r, %x[%tid] : memref<64xf32>
      gpu.return
    }
  }
}

// -----

module attributes {gpu.container_module} {
  gpu.module @shuffled {
    gpu.func @shuffled(%x: memref<64xf32>) kernel {
      %tid = gpu.thread_id x
      %c1 = arith.constant 1 : i32
      %c32 = arith.constant 32 : i32
      %v = memref.load %x[%tid] : memref<64xf32>
      // expected-error @+1 {{zest-emulate-gpu-kernels: 'gpu.shuffle' is not emulated}}
      %s, %ok = gpu.shuffle xor %v, %c1, %c32 : f32
      memref.store %s, %x[%tid] : memref<64xf32>
      gpu.return
    }
  }
}

// -----

module attributes {gpu.container_module} {
  gpu.module @views {
    gpu.func @views(%x: memref<64xf32>) kernel {
      %c0 = arith.constant 0 : index
      // expected-error @+1 {{zest-emulate-gpu-kernels: a value of type 'memref<8xf32, strided<[1]>>' is used across a barrier, which is not emulated}}
      %view = memref.subview %x[0] [8] [1] : memref<64xf32> to memref<8xf32, strided<[1]>>
      gpu.barrier
      %v = memref.load %view[%c0] : memref<8xf32, strided<[1]>>
      memref.store %v, %x[%c0] : memref<64xf32>
      gpu.return
    }
  }
}
