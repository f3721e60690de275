// RUN: zest-opt %s -split-input-file -zest-expert-parallel=group-size=2 -verify-diagnostics

// 3 experts cannot be split over 2 ranks.
func.func @indivisible(%ends: tensor<3xi32>) -> tensor<3xi32> {
  %r0 = tensor.empty() : tensor<3xi64>
  %l0 = tensor.empty() : tensor<3xi32>
  // expected-error @+1 {{routes to 3 experts, which expert groups of 2 ranks cannot split}}
  %r:2 = zest.expert_routing group_size = 1 ins(%ends : tensor<3xi32>) outs(%r0, %l0 : tensor<3xi64>, tensor<3xi32>) -> tensor<3xi64>, tensor<3xi32>
  return %r#1 : tensor<3xi32>
}

// -----

// A per-expert bias gathered by expert id: not split (yet).
func.func @bias(%w: tensor<4x3x3xf32> {zest.param = "experts.w"}, %x: tensor<8x3xf32>, %ends: tensor<4xi32>)
    -> (f32 {zest.loss}) {
  %r0 = tensor.empty() : tensor<4xi64>
  %l0 = tensor.empty() : tensor<4xi32>
  %r:2 = zest.expert_routing group_size = 1 ins(%ends : tensor<4xi32>) outs(%r0, %l0 : tensor<4xi64>, tensor<4xi32>) -> tensor<4xi64>, tensor<4xi32>
  %e0 = tensor.empty() : tensor<8x3xf32>
  %in = zest.expert_dispatch group_size = 1 ins(%x, %ends, %r#0 : tensor<8x3xf32>, tensor<4xi32>, tensor<4xi64>) outs(%e0 : tensor<8x3xf32>) -> tensor<8x3xf32>
  %y = zest.grouped_matmul transpose_weight ins(%in, %w, %r#1 : tensor<8x3xf32>, tensor<4x3x3xf32>, tensor<4xi32>) outs(%e0 : tensor<8x3xf32>) -> tensor<8x3xf32>
  %out = zest.expert_combine group_size = 1 ins(%y, %ends, %r#0 : tensor<8x3xf32>, tensor<4xi32>, tensor<4xi64>) outs(%e0 : tensor<8x3xf32>) -> tensor<8x3xf32>
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{uses experts' parameter "experts.w" other than as a grouped product's weights}}
  %b = tensor.extract %w[%c0, %c0, %c0] : tensor<4x3x3xf32>
  %v = tensor.extract %out[%c0, %c0] : tensor<8x3xf32>
  %s = arith.addf %b, %v : f32
  return %s : f32
}

// -----

// A row-mixing op between dispatch and combine (a sum over rows) cannot run
// on the received rows.
func.func @reduction(%x: tensor<8x3xf32>, %ends: tensor<4xi32>) -> tensor<3xf32> {
  %r0 = tensor.empty() : tensor<4xi64>
  %l0 = tensor.empty() : tensor<4xi32>
  %r:2 = zest.expert_routing group_size = 1 ins(%ends : tensor<4xi32>) outs(%r0, %l0 : tensor<4xi64>, tensor<4xi32>) -> tensor<4xi64>, tensor<4xi32>
  %e0 = tensor.empty() : tensor<8x3xf32>
  %in = zest.expert_dispatch group_size = 1 ins(%x, %ends, %r#0 : tensor<8x3xf32>, tensor<4xi32>, tensor<4xi64>) outs(%e0 : tensor<8x3xf32>) -> tensor<8x3xf32>
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{cannot run on an expert group's received rows}}
  %t = tensor.extract_slice %in[0, 0] [1, 3] [1, 1] : tensor<8x3xf32> to tensor<3xf32>
  return %t : tensor<3xf32>
}
