// RUN: zest-opt %s -split-input-file -verify-diagnostics

func.func @weight_layout(%x: tensor<8x4xf32>, %w: tensor<2x4x6xf32>, %ends: tensor<2xi32>, %y: tensor<8x6xf32>) {
  // expected-error@+1 {{'zest.grouped_matmul' op weight ([groups, N, K]) has type 'tensor<2x4x6xf32>'; expected shape 2x6x4}}
  %r = zest.grouped_matmul transpose_weight ins(%x, %w, %ends : tensor<8x4xf32>, tensor<2x4x6xf32>, tensor<2xi32>) outs(%y : tensor<8x6xf32>) -> tensor<8x6xf32>
  return
}

// -----

func.func @output_rows(%x: tensor<8x4xf32>, %w: tensor<2x4x6xf32>, %ends: tensor<2xi32>, %y: tensor<7x6xf32>) {
  // expected-error@+1 {{'zest.grouped_matmul' op output has type 'tensor<7x6xf32>'; expected shape 8x?}}
  %r = zest.grouped_matmul ins(%x, %w, %ends : tensor<8x4xf32>, tensor<2x4x6xf32>, tensor<2xi32>) outs(%y : tensor<7x6xf32>) -> tensor<7x6xf32>
  return
}

// -----

func.func @one_offset_per_group(%x: tensor<8x4xf32>, %w: tensor<2x4x6xf32>, %ends: tensor<3xi32>, %y: tensor<8x6xf32>) {
  // expected-error@+1 {{'zest.grouped_matmul' op offsets has type 'tensor<3xi32>'; expected shape 2}}
  %r = zest.grouped_matmul ins(%x, %w, %ends : tensor<8x4xf32>, tensor<2x4x6xf32>, tensor<3xi32>) outs(%y : tensor<8x6xf32>) -> tensor<8x6xf32>
  return
}

// -----

func.func @mixed_types(%x: tensor<8x4xbf16>, %w: tensor<2x4x6xf32>, %ends: tensor<2xi32>, %y: tensor<8x6xbf16>) {
  // expected-error@+1 {{'zest.grouped_matmul' op mixes element types 'bf16' and 'f32'; the input, the matrices and the result share one type}}
  %r = zest.grouped_matmul ins(%x, %w, %ends : tensor<8x4xbf16>, tensor<2x4x6xf32>, tensor<2xi32>) outs(%y : tensor<8x6xbf16>) -> tensor<8x6xbf16>
  return
}

// -----

func.func @float_offsets(%x: tensor<8x4xf32>, %w: tensor<2x4x6xf32>, %ends: tensor<2xf32>, %y: tensor<8x6xf32>) {
  // expected-error@+1 {{'zest.grouped_matmul' op operand #2 must be 1-D i32 or i64 tensor or memref}}
  %r = zest.grouped_matmul ins(%x, %w, %ends : tensor<8x4xf32>, tensor<2x4x6xf32>, tensor<2xf32>) outs(%y : tensor<8x6xf32>) -> tensor<8x6xf32>
  return
}

// -----

func.func @mixed_tensors_memrefs(%x: tensor<8x4xf32>, %w: tensor<2x4x6xf32>, %ends: tensor<2xi32>, %y: memref<8x6xf32>) {
  // expected-error@+1 {{'zest.grouped_matmul' op mixes tensors and memrefs}}
  zest.grouped_matmul ins(%x, %w, %ends : tensor<8x4xf32>, tensor<2x4x6xf32>, tensor<2xi32>) outs(%y : memref<8x6xf32>)
  return
}

// -----

func.func @grad_rows(%x: tensor<8x4xf32>, %dy: tensor<6x6xf32>, %ends: tensor<2xi32>, %dw: tensor<2x4x6xf32>) {
  // expected-error@+1 {{'zest.grouped_matmul_weight_grad' op grad_output has type 'tensor<6x6xf32>'; expected shape 8x?}}
  %r = zest.grouped_matmul_weight_grad ins(%x, %dy, %ends : tensor<8x4xf32>, tensor<6x6xf32>, tensor<2xi32>) outs(%dw : tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  return
}

// -----

func.func @grad_layout(%x: tensor<8x4xf32>, %dy: tensor<8x6xf32>, %ends: tensor<2xi32>, %dw: tensor<2x4x6xf32>) {
  // expected-error@+1 {{'zest.grouped_matmul_weight_grad' op grad_weight ([groups, N, K]) has type 'tensor<2x4x6xf32>'; expected shape 2x6x4}}
  %r = zest.grouped_matmul_weight_grad transpose_weight ins(%x, %dy, %ends : tensor<8x4xf32>, tensor<8x6xf32>, tensor<2xi32>) outs(%dw : tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  return
}

// -----

func.func @grad_result(%x: tensor<8x4xf32>, %dy: tensor<8x6xf32>, %ends: tensor<2xi32>, %dw: tensor<2x4x6xf32>) {
  // expected-error@+1 {{'zest.grouped_matmul_weight_grad' op on tensors returns one tensor per destination (1), not 0}}
  zest.grouped_matmul_weight_grad ins(%x, %dy, %ends : tensor<8x4xf32>, tensor<8x6xf32>, tensor<2xi32>) outs(%dw : tensor<2x4x6xf32>)
  return
}
