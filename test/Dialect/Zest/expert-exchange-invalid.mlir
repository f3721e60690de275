// RUN: zest-opt %s -split-input-file -verify-diagnostics

func.func @group_does_not_divide(%ends: tensor<6xi32>) {
  %r0 = tensor.empty() : tensor<6xi64>
  %l0 = tensor.empty() : tensor<1xi32>
  // expected-error @+1 {{splits 6 experts over expert groups of 4 ranks; the group size must divide the experts}}
  %r, %l = zest.expert_routing group_size = 4 ins(%ends : tensor<6xi32>) outs(%r0, %l0 : tensor<6xi64>, tensor<1xi32>) -> tensor<6xi64>, tensor<1xi32>
  return
}

// -----

func.func @wrong_local_ends(%ends: tensor<8xi32>) {
  %r0 = tensor.empty() : tensor<8xi64>
  %l0 = tensor.empty() : tensor<8xi32>
  // expected-error @+1 {{local_ends}}
  %r, %l = zest.expert_routing group_size = 2 ins(%ends : tensor<8xi32>) outs(%r0, %l0 : tensor<8xi64>, tensor<8xi32>) -> tensor<8xi64>, tensor<8xi32>
  return
}

// -----

func.func @local_ends_type(%ends: tensor<8xi32>) {
  %r0 = tensor.empty() : tensor<8xi64>
  %l0 = tensor.empty() : tensor<4xi64>
  // expected-error @+1 {{writes local_ends of another type than ends}}
  %r, %l = zest.expert_routing group_size = 2 ins(%ends : tensor<8xi32>) outs(%r0, %l0 : tensor<8xi64>, tensor<4xi64>) -> tensor<8xi64>, tensor<4xi64>
  return
}

// -----

func.func @routing_size(%x: tensor<8x4xf32>, %ends: tensor<8xi32>, %routing: tensor<4xi64>) {
  %e = tensor.empty() : tensor<16x4xf32>
  // expected-error @+1 {{routing}}
  %y = zest.expert_dispatch group_size = 2 ins(%x, %ends, %routing : tensor<8x4xf32>, tensor<8xi32>, tensor<4xi64>) outs(%e : tensor<16x4xf32>) -> tensor<16x4xf32>
  return
}

// -----

func.func @row_type(%x: tensor<8x4xf32>, %ends: tensor<8xi32>, %routing: tensor<8xi64>) {
  %e = tensor.empty() : tensor<16x4xbf16>
  // expected-error @+1 {{moves rows of 'f32' into 'tensor<16x4xbf16>'}}
  %y = zest.expert_dispatch group_size = 2 ins(%x, %ends, %routing : tensor<8x4xf32>, tensor<8xi32>, tensor<8xi64>) outs(%e : tensor<16x4xbf16>) -> tensor<16x4xbf16>
  return
}

// -----

func.func @row_width(%x: tensor<8x4xf32>, %ends: tensor<8xi32>, %routing: tensor<8xi64>) {
  %e = tensor.empty() : tensor<16x8xf32>
  // expected-error @+1 {{the received rows}}
  %y = zest.expert_dispatch group_size = 2 ins(%x, %ends, %routing : tensor<8x4xf32>, tensor<8xi32>, tensor<8xi64>) outs(%e : tensor<16x8xf32>) -> tensor<16x8xf32>
  return
}

// -----

// Over one rank nothing moves: the rows it receives are the rows it sends.
func.func @one_rank_rows(%y: tensor<16x4xf32>, %ends: tensor<8xi32>, %routing: tensor<8xi64>) {
  %e = tensor.empty() : tensor<8x4xf32>
  // expected-error @+1 {{the received rows}}
  %x = zest.expert_combine group_size = 1 ins(%y, %ends, %routing : tensor<16x4xf32>, tensor<8xi32>, tensor<8xi64>) outs(%e : tensor<8x4xf32>) -> tensor<8x4xf32>
  return
}
