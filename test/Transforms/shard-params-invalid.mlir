// RUN: zest-opt %s -split-input-file -zest-shard-params="world-size=4" -verify-diagnostics

// expected-error@+1 {{conflicting world size: unit @u is laid out for 2 ranks but world-size=4; group again with world-size=4}}
zest.unit @u sharded : f32, world_size = 2, padded_size = 4, shard_size = 2 [
  "u.w" : tensor<4xf32> at 0
]
func.func @f(%w: tensor<4xf32> {zest.param = "u.w"}) {
  return
}

// -----

zest.unit @u sharded : f32, world_size = 4, padded_size = 4, shard_size = 1 [
  "u.w" : tensor<4xf32> at 0
]
// expected-error@+1 {{parameter 'v.w' belongs to no zest.unit; run --zest-group-units first}}
func.func @f(%w: tensor<4xf32> {zest.param = "u.w"}, %v: tensor<4xf32> {zest.param = "v.w"}) {
  return
}

// -----

zest.unit @u sharded : f32, world_size = 4, padded_size = 4, shard_size = 1 [
  "u.w" : tensor<2x2xf32> at 0
]
// expected-error@+1 {{parameter 'u.w' has type 'tensor<4xf32>' but unit @u declares 'tensor<2x2xf32>'}}
func.func @f(%w: tensor<4xf32> {zest.param = "u.w"}) {
  return
}

// -----

// The input contract is checked first.
// expected-error@+1 {{@f returns gradients but no result carries 'zest.loss'}}
func.func @f(%w: tensor<4xf32> {zest.param = "u.w"}) -> (tensor<4xf32> {zest.grad = "u.w"}) {
  return %w : tensor<4xf32>
}
