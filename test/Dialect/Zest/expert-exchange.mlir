// RUN: zest-opt %s -split-input-file | FileCheck %s
// Round trip: printed IR parses back to the same text, in custom and generic form.
// RUN: zest-opt %s -split-input-file | zest-opt -split-input-file | FileCheck %s
// RUN: zest-opt %s -split-input-file -mlir-print-op-generic | zest-opt -split-input-file | FileCheck %s
// Over one rank the exchanges move nothing and fold away.
// RUN: zest-opt %s -split-input-file -canonicalize | FileCheck %s --check-prefix=FOLD

// An experts computation over expert groups of 2 ranks: 8 experts, 4 per
// rank; 64 rows sent, at most 128 received.
// CHECK-LABEL: func.func @group_of_two(
// CHECK: zest.expert_routing group_size = 2 ins(%{{.*}} : tensor<8xi32>) outs(%{{.*}}, %{{.*}} : tensor<8xi64>, tensor<4xi32>) -> tensor<8xi64>, tensor<4xi32>
// CHECK: zest.expert_dispatch group_size = 2 ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<64x16xf32>, tensor<8xi32>, tensor<8xi64>) outs(%{{.*}} : tensor<128x16xf32>) -> tensor<128x16xf32>
// CHECK: zest.grouped_matmul
// CHECK: zest.expert_combine group_size = 2 ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<128x16xf32>, tensor<8xi32>, tensor<8xi64>) outs(%{{.*}} : tensor<64x16xf32>) -> tensor<64x16xf32>
// The exchanges communicate: canonicalization keeps them.
// FOLD-LABEL: func.func @group_of_two(
// FOLD: zest.expert_routing group_size = 2
// FOLD: zest.expert_dispatch group_size = 2
// FOLD: zest.expert_combine group_size = 2
func.func @group_of_two(%x: tensor<64x16xf32>, %ends: tensor<8xi32>, %w: tensor<4x16x16xf32>) -> tensor<64x16xf32> {
  %r0 = tensor.empty() : tensor<8xi64>
  %l0 = tensor.empty() : tensor<4xi32>
  %routing, %local = zest.expert_routing group_size = 2 ins(%ends : tensor<8xi32>) outs(%r0, %l0 : tensor<8xi64>, tensor<4xi32>) -> tensor<8xi64>, tensor<4xi32>
  %e0 = tensor.empty() : tensor<128x16xf32>
  %rows = zest.expert_dispatch group_size = 2 ins(%x, %ends, %routing : tensor<64x16xf32>, tensor<8xi32>, tensor<8xi64>) outs(%e0 : tensor<128x16xf32>) -> tensor<128x16xf32>
  %e1 = tensor.empty() : tensor<128x16xf32>
  %y = zest.grouped_matmul ins(%rows, %w, %local : tensor<128x16xf32>, tensor<4x16x16xf32>, tensor<4xi32>) outs(%e1 : tensor<128x16xf32>) -> tensor<128x16xf32>
  %e2 = tensor.empty() : tensor<64x16xf32>
  %back = zest.expert_combine group_size = 2 ins(%y, %ends, %routing : tensor<128x16xf32>, tensor<8xi32>, tensor<8xi64>) outs(%e2 : tensor<64x16xf32>) -> tensor<64x16xf32>
  return %back : tensor<64x16xf32>
}

// -----

// What zest-import writes: a group of one rank, where the rows stay put.
// CHECK-LABEL: func.func @one_rank(
// CHECK: zest.expert_routing group_size = 1
// FOLD-LABEL: func.func @one_rank(
// FOLD-SAME: %[[X:[^:]*]]: tensor<64x16xbf16>, %[[ENDS:[^:]*]]: tensor<8xi64>
// FOLD-NOT: zest.expert_
// FOLD: %[[Y:.*]] = zest.grouped_matmul ins(%[[X]], %{{.*}}, %[[ENDS]] :
// FOLD-NOT: zest.expert_
// FOLD: return %[[Y]]
func.func @one_rank(%x: tensor<64x16xbf16>, %ends: tensor<8xi64>, %w: tensor<8x16x16xbf16>) -> tensor<64x16xbf16> {
  %r0 = tensor.empty() : tensor<8xi64>
  %l0 = tensor.empty() : tensor<8xi64>
  %routing, %local = zest.expert_routing group_size = 1 ins(%ends : tensor<8xi64>) outs(%r0, %l0 : tensor<8xi64>, tensor<8xi64>) -> tensor<8xi64>, tensor<8xi64>
  %e0 = tensor.empty() : tensor<64x16xbf16>
  %rows = zest.expert_dispatch group_size = 1 ins(%x, %ends, %routing : tensor<64x16xbf16>, tensor<8xi64>, tensor<8xi64>) outs(%e0 : tensor<64x16xbf16>) -> tensor<64x16xbf16>
  %e1 = tensor.empty() : tensor<64x16xbf16>
  %y = zest.grouped_matmul ins(%rows, %w, %local : tensor<64x16xbf16>, tensor<8x16x16xbf16>, tensor<8xi64>) outs(%e1 : tensor<64x16xbf16>) -> tensor<64x16xbf16>
  %e2 = tensor.empty() : tensor<64x16xbf16>
  %back = zest.expert_combine group_size = 1 ins(%y, %ends, %routing : tensor<64x16xbf16>, tensor<8xi64>, tensor<8xi64>) outs(%e2 : tensor<64x16xbf16>) -> tensor<64x16xbf16>
  return %back : tensor<64x16xbf16>
}

// -----

// On memrefs, as the runtime lowering sees them.
// CHECK-LABEL: func.func @memrefs(
// CHECK: zest.expert_routing group_size = 4 ins(%{{.*}} : memref<8xi32>) outs(%{{.*}}, %{{.*}} : memref<8xi64>, memref<2xi32>)
// CHECK: zest.expert_dispatch group_size = 4 ins(%{{.*}}, %{{.*}}, %{{.*}} : memref<16x4xf16>, memref<8xi32>, memref<8xi64>) outs(%{{.*}} : memref<64x4xf16>)
// CHECK: zest.expert_combine group_size = 4 ins(%{{.*}}, %{{.*}}, %{{.*}} : memref<64x4xf16>, memref<8xi32>, memref<8xi64>) outs(%{{.*}} : memref<16x4xf16>)
func.func @memrefs(%x: memref<16x4xf16>, %ends: memref<8xi32>, %routing: memref<8xi64>, %local: memref<2xi32>, %rows: memref<64x4xf16>) {
  zest.expert_routing group_size = 4 ins(%ends : memref<8xi32>) outs(%routing, %local : memref<8xi64>, memref<2xi32>)
  zest.expert_dispatch group_size = 4 ins(%x, %ends, %routing : memref<16x4xf16>, memref<8xi32>, memref<8xi64>) outs(%rows : memref<64x4xf16>)
  zest.expert_combine group_size = 4 ins(%rows, %ends, %routing : memref<64x4xf16>, memref<8xi32>, memref<8xi64>) outs(%x : memref<16x4xf16>)
  return
}
