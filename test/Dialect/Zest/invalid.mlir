// RUN: zest-opt %s -split-input-file -verify-diagnostics

// expected-error@+1 {{padded_size (10) must equal shard_size (3) times world_size (4)}}
zest.unit @u sharded : f32, world_size = 4, padded_size = 10, shard_size = 3 [
  "a" : tensor<10xf32> at 0
]

// -----

// expected-error@+1 {{replicated unit must have shard_size (2) equal to padded_size (4)}}
zest.unit @u replicated : f32, world_size = 2, padded_size = 4, shard_size = 2 [
  "a" : tensor<4xf32> at 0
]

// -----

// expected-error@+1 {{parameter 'a' is listed twice}}
zest.unit @u sharded : f32, world_size = 1, padded_size = 8, shard_size = 8 [
  "a" : tensor<4xf32> at 0,
  "a" : tensor<4xf32> at 4
]

// -----

// expected-error@+1 {{parameter 'b' has element type 'f16' but the unit holds 'f32'}}
zest.unit @u sharded : f32, world_size = 1, padded_size = 8, shard_size = 8 [
  "a" : tensor<4xf32> at 0,
  "b" : tensor<4xf16> at 4
]

// -----

// expected-error@+1 {{parameter 'b' at offset 2 overlaps the previous parameter, which ends at 4}}
zest.unit @u sharded : f32, world_size = 1, padded_size = 8, shard_size = 8 [
  "a" : tensor<4xf32> at 0,
  "b" : tensor<4xf32> at 2
]

// -----

// expected-error@+1 {{parameters end at element 8, past padded_size (6)}}
zest.unit @u sharded : f32, world_size = 2, padded_size = 6, shard_size = 3 [
  "a" : tensor<8xf32> at 0
]

// -----

// expected-error@+1 {{element type must be an integer or float type, got 'index'}}
zest.unit @u sharded : index, world_size = 1, padded_size = 0, shard_size = 0 []

// -----

// expected-error@+1 {{'zest.unit' op attribute 'world_size' failed to satisfy constraint}}
zest.unit @u sharded : f32, world_size = 0, padded_size = 0, shard_size = 0 []

// -----

zest.unit @u sharded : f32, world_size = 1, padded_size = 4, shard_size = 4 [
  // expected-error@+1 {{parameter 'a' must have a static shape, got 'tensor<?xf32>'}}
  "a" : tensor<?xf32> at 0
]

// -----

zest.unit @u sharded : f32, world_size = 1, padded_size = 4, shard_size = 4 [
  // expected-error@+1 {{parameter 'a' has negative offset -1}}
  "a" : tensor<4xf32> at -1
]

// -----

func.func @f() {
  // expected-error@+1 {{'zest.unit' op expects parent op 'builtin.module'}}
  zest.unit @u sharded : f32, world_size = 1, padded_size = 0, shard_size = 0 []
  return
}

// -----

zest.unit @u sharded : f32, world_size = 2, padded_size = 8, shard_size = 4 [
  "a" : tensor<8xf32> at 0
]
func.func @f(%s: tensor<3xf32>) -> tensor<8xf32> {
  // expected-error@+1 {{operand must be 'tensor<4xf32>' for unit @u (sharded, world_size = 2), got 'tensor<3xf32>'}}
  %0 = zest.all_gather %s for @u : tensor<3xf32> -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

zest.unit @u sharded : f32, world_size = 2, padded_size = 8, shard_size = 4 [
  "a" : tensor<8xf32> at 0
]
func.func @f(%s: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{result must be 'tensor<8xf32>' for unit @u (sharded, world_size = 2), got 'tensor<4xf32>'}}
  %0 = zest.all_gather %s for @u : tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @f(%s: tensor<4xf32>) -> tensor<8xf32> {
  // expected-error@+1 {{refers to @missing, which is not a zest.unit or a valid zest.bucket declaration}}
  %0 = zest.all_gather %s for @missing : tensor<4xf32> -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @f(%s: tensor<4xf32>) -> tensor<8xf16> {
  // expected-error@+1 {{element type changes from 'f32' to 'f16'}}
  %0 = zest.all_gather %s for @u : tensor<4xf32> -> tensor<8xf16>
  return %0 : tensor<8xf16>
}

// -----

func.func @f(%s: tensor<?xf32>) -> tensor<8xf32> {
  // expected-error@+1 {{operand #0 must be statically shaped 1-D tensor}}
  %0 = zest.all_gather %s for @u : tensor<?xf32> -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

zest.unit @r replicated : f32, world_size = 2, padded_size = 8, shard_size = 8 [
  "a" : tensor<8xf32> at 0
]
func.func @f(%s: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error@+1 {{requires a sharded unit, but @r is replicated}}
  %0 = zest.reduce_scatter avg %s for @r : tensor<8xf32> -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

zest.unit @u sharded : f32, world_size = 2, padded_size = 8, shard_size = 4 [
  "a" : tensor<8xf32> at 0
]
func.func @f(%s: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error@+1 {{requires a replicated unit, but @u is sharded}}
  %0 = zest.all_reduce sum %s for @u : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

zest.unit @u sharded : f32, world_size = 2, padded_size = 8, shard_size = 4 [
  "a" : tensor<8xf32> at 0
]
func.func @f(%g: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error@+1 {{result must be 'tensor<4xf32>' for unit @u (sharded, world_size = 2), got 'tensor<8xf32>'}}
  %0 = zest.reduce_scatter_start avg %g for @u : tensor<8xf32> -> !zest.future<tensor<8xf32>>
  %1 = zest.wait %0 : !zest.future<tensor<8xf32>>
  return %1 : tensor<8xf32>
}

// -----

zest.unit @u sharded : f32, world_size = 2, padded_size = 8, shard_size = 4 [
  "a" : tensor<8xf32> at 0
]
func.func @f(%s: tensor<4xf32>) {
  // expected-error@+1 {{future must be consumed by exactly one zest.wait}}
  %0 = zest.all_gather_start %s for @u : tensor<4xf32> -> !zest.future<tensor<8xf32>>
  return
}

// -----

zest.unit @u sharded : f32, world_size = 2, padded_size = 8, shard_size = 4 [
  "a" : tensor<8xf32> at 0
]
func.func @f(%s: tensor<4xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  // expected-error@+1 {{future must be consumed by exactly one zest.wait}}
  %0 = zest.all_gather_start %s for @u : tensor<4xf32> -> !zest.future<tensor<8xf32>>
  %1 = zest.wait %0 : !zest.future<tensor<8xf32>>
  %2 = zest.wait %0 : !zest.future<tensor<8xf32>>
  return %1, %2 : tensor<8xf32>, tensor<8xf32>
}

// -----

func.func @f(%f: !zest.future<tensor<8xf32>>) -> tensor<4xf32> {
  // expected-error@+1 {{'zest.wait' op failed to verify that result type is the future's value type}}
  %0 = "zest.wait"(%f) : (!zest.future<tensor<8xf32>>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

zest.unit @u sharded : f32, world_size = 2, padded_size = 8, shard_size = 4 [
  "a" : tensor<2x3xf32> at 0
]
func.func @f(%full: tensor<8xf32>) -> tensor<3x2xf32> {
  // expected-error@+1 {{result must be 'tensor<2x3xf32>', the type of parameter 'a', got 'tensor<3x2xf32>'}}
  %0 = zest.unflatten %full, @u, "a" : tensor<8xf32> -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

zest.unit @u sharded : f32, world_size = 2, padded_size = 8, shard_size = 4 [
  "a" : tensor<2x3xf32> at 0
]
func.func @f(%full: tensor<8xf32>) -> tensor<2x3xf32> {
  // expected-error@+1 {{unit @u has no parameter 'b'}}
  %0 = zest.unflatten %full, @u, "b" : tensor<8xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

zest.unit @u sharded : f32, world_size = 2, padded_size = 8, shard_size = 4 [
  "a" : tensor<2x3xf32> at 0
]
func.func @f(%shard: tensor<4xf32>) -> tensor<2x3xf32> {
  // expected-error@+1 {{operand must be 'tensor<8xf32>' for unit @u (sharded, world_size = 2), got 'tensor<4xf32>'}}
  %0 = zest.unflatten %shard, @u, "a" : tensor<4xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

zest.unit @u sharded : f32, world_size = 1, padded_size = 8, shard_size = 8 [
  "a" : tensor<4xf32> at 0,
  "b" : tensor<4xf32> at 4
]
func.func @f(%a: tensor<4xf32>) -> tensor<8xf32> {
  // expected-error@+1 {{parameter 'a' is named twice}}
  %0 = zest.flatten @u ["a", "a"] (%a, %a) : tensor<4xf32>, tensor<4xf32> -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

zest.unit @u sharded : f32, world_size = 1, padded_size = 8, shard_size = 8 [
  "a" : tensor<4xf32> at 0,
  "b" : tensor<4xf32> at 4
]
func.func @f(%a: tensor<4xf32>) -> tensor<8xf32> {
  // expected-error@+1 {{names 2 parameters but has 1 operands}}
  %0 = zest.flatten @u ["a", "b"] (%a) : tensor<4xf32> -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

zest.unit @u sharded : f32, world_size = 1, padded_size = 8, shard_size = 8 [
  "a" : tensor<4xf32> at 0,
  "b" : tensor<4xf32> at 4
]
func.func @f(%a: tensor<2x2xf32>) -> tensor<8xf32> {
  // expected-error@+1 {{operand for 'a' must be 'tensor<4xf32>', got 'tensor<2x2xf32>'}}
  %0 = zest.flatten @u ["a"] (%a) : tensor<2x2xf32> -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @f(%a: tensor<8xf32>) {
  // expected-error@+1 {{operand must be a gathered buffer}}
  zest.release %a : tensor<8xf32>
  return
}

// -----

zest.unit @u sharded : f32, world_size = 2, padded_size = 8, shard_size = 4 [
  "a" : tensor<8xf32> at 0
]
func.func @f(%s: tensor<4xf32>) -> tensor<8xf32> {
  %full = zest.all_gather %s for @u : tensor<4xf32> -> tensor<8xf32>
  %a = zest.unflatten %full, @u, "a" : tensor<8xf32> -> tensor<8xf32>
  // expected-error@+1 {{releases a buffer that is used later}}
  zest.release %full : tensor<8xf32>
  // expected-note@+1 {{used here}}
  %b = arith.addf %a, %a : tensor<8xf32>
  return %b : tensor<8xf32>
}

// -----

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+2 {{future must come from a zest.*_start collective, got 'builtin.unrealized_conversion_cast'}}
  %f = builtin.unrealized_conversion_cast %x : tensor<4xf32> to !zest.future<tensor<4xf32>>
  %0 = zest.wait %f : !zest.future<tensor<4xf32>>
  return %0 : tensor<4xf32>
}

// -----

zest.unit @o sharded : f32, world_size = 2, padded_size = 8, shard_size = 4 [
  "o.w" : tensor<6xf32> at 0
]
func.func @adamw_states(%p: tensor<4xf32>, %h: tensor<10xf32>) {
  // expected-error@+1 {{adamw takes 2 state buffers, got 1}}
  %p1, %s1, %a1 = zest.update adamw @o %p, %p state(%p) accum(%p) hyper(%h) : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<10xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

zest.unit @o sharded : f32, world_size = 2, padded_size = 8, shard_size = 4 [
  "o.w" : tensor<6xf32> at 0
]
func.func @nesterov_without_momentum(%p: tensor<4xf32>, %h: tensor<10xf32>) {
  // expected-error@+1 {{nesterov requires sgd with a momentum buffer}}
  %p1, %a1 = zest.update sgd @o %p, %p accum(%p) hyper(%h) {nesterov} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<10xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

zest.unit @o sharded : f32, world_size = 2, padded_size = 8, shard_size = 4 [
  "o.w" : tensor<6xf32> at 0
]
func.func @hyper_size(%p: tensor<4xf32>, %h: tensor<9xf32>) {
  // expected-error@+1 {{hyperparameters must be tensor<10xf32>, got 'tensor<9xf32>'}}
  %p1, %a1 = zest.update sgd @o %p, %p accum(%p) hyper(%h) : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<9xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

zest.unit @o sharded : f32, world_size = 2, padded_size = 8, shard_size = 4 [
  "o.w" : tensor<6xf32> at 0
]
func.func @mixed_types(%p: tensor<4xf32>, %g: tensor<8xf32>, %h: tensor<10xf32>) {
  // expected-error@+1 {{operands and results must all have the parameter's type 'tensor<4xf32>', got 'tensor<8xf32>'}}
  %p1, %a1 = zest.update sgd @o %p, %g accum(%p) hyper(%h) : (tensor<4xf32>, tensor<8xf32>, tensor<4xf32>, tensor<10xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

zest.unit @o sharded : f32, world_size = 2, padded_size = 8, shard_size = 4 [
  "o.w" : tensor<6xf32> at 0
]
func.func @full_buffer(%p: tensor<8xf32>, %h: tensor<10xf32>) {
  // expected-error@+1 {{parameter operand must be 'tensor<4xf32>' for unit @o (sharded, world_size = 2), got 'tensor<8xf32>'}}
  %p1, %a1 = zest.update sgd @o %p, %p accum(%p) hyper(%h) : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<10xf32>) -> (tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

zest.unit @o sharded : f32, world_size = 2, padded_size = 8, shard_size = 4 [
  "o.w" : tensor<6xf32> at 0
]
func.func @frozen_unknown(%p: tensor<4xf32>, %h: tensor<10xf32>) {
  // expected-error@+1 {{frozen parameter 'o.v' is not in unit @o}}
  %p1, %a1 = zest.update sgd @o %p, %p accum(%p) hyper(%h) {frozen = ["o.v"]} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<10xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @f64_update(%p: tensor<4xf64>, %h: tensor<10xf32>) {
  // expected-error@+1 {{updates f32 parameters only, got 'f64'}}
  %p1, %a1 = zest.update sgd @o %p, %p accum(%p) hyper(%h) : (tensor<4xf64>, tensor<4xf64>, tensor<4xf64>, tensor<10xf32>) -> (tensor<4xf64>, tensor<4xf64>)
  return
}

// -----

zest.unit @o sharded : f32, world_size = 2, padded_size = 8, shard_size = 4 [
  "o.w" : tensor<6xf32> at 0
]
func.func @norm_counts(%g: tensor<4xf32>, %h: tensor<10xf32>) {
  // expected-error@+1 {{takes one gradient and one accumulator (or none) per unit: 1 units, 2 gradients, 1 accumulators}}
  %n = zest.global_grad_norm(%g, %g) accum(%g) hyper(%h) units [@o] : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<10xf32>) -> tensor<f32>
  return
}

// -----

zest.unit @o sharded : f32, world_size = 2, padded_size = 8, shard_size = 4 [
  "o.w" : tensor<6xf32> at 0
]
func.func @norm_shape(%g: tensor<8xf32>, %h: tensor<10xf32>) {
  // expected-error@+1 {{gradient operand must be 'tensor<4xf32>' for unit @o (sharded, world_size = 2), got 'tensor<8xf32>'}}
  %n = zest.global_grad_norm(%g) accum(%g) hyper(%h) units [@o] : (tensor<8xf32>, tensor<8xf32>, tensor<10xf32>) -> tensor<f32>
  return
}

// -----

func.func @norm_hyper(%g: tensor<4xf32>, %h: tensor<3xf32>) {
  // expected-error@+1 {{hyperparameters must be tensor<10xf32>, got 'tensor<3xf32>'}}
  %n = zest.global_grad_norm(%g) accum(%g) hyper(%h) units [@o] : (tensor<4xf32>, tensor<4xf32>, tensor<3xf32>) -> tensor<f32>
  return
}

// -----

func.func @norm_unit(%g: tensor<4xf32>, %h: tensor<10xf32>) {
  // expected-error@+1 {{refers to @missing, which is not a zest.unit declaration}}
  %n = zest.global_grad_norm(%g) accum(%g) hyper(%h) units [@missing] : (tensor<4xf32>, tensor<4xf32>, tensor<10xf32>) -> tensor<f32>
  return
}

// -----

func.func @linear_mixed_types(%x: tensor<4x8xbf16>, %w: tensor<6x8xf32>, %y: tensor<4x6xbf16>) {
  // expected-error@+1 {{'zest.linear' op mixes element types 'bf16' and 'f32'; a fused linear layer stores all its operands in one type}}
  %r = zest.linear relu transpose_weight ins(%x, %w : tensor<4x8xbf16>, tensor<6x8xf32>) outs(%y : tensor<4x6xbf16>) -> tensor<4x6xbf16>
  return
}

// -----

func.func @linear_weight_shape(%x: tensor<4x8xf32>, %w: tensor<6x7xf32>, %y: tensor<4x6xf32>) {
  // expected-error@+1 {{'zest.linear' op weight ([out, in]) has type 'tensor<6x7xf32>'; expected shape 6x8}}
  %r = zest.linear relu transpose_weight ins(%x, %w : tensor<4x8xf32>, tensor<6x7xf32>) outs(%y : tensor<4x6xf32>) -> tensor<4x6xf32>
  return
}

// -----

func.func @linear_bias_shape(%x: tensor<4x8xf32>, %w: tensor<8x6xf32>, %b: tensor<4xf32>, %y: tensor<4x6xf32>) {
  // expected-error@+1 {{'zest.linear' op bias has type 'tensor<4xf32>'; expected shape 6}}
  %r = zest.linear none ins(%x, %w, %b : tensor<4x8xf32>, tensor<8x6xf32>, tensor<4xf32>) outs(%y : tensor<4x6xf32>) -> tensor<4x6xf32>
  return
}

// -----

func.func @linear_pre_without_activation(%x: tensor<4x8xf32>, %w: tensor<8x6xf32>, %y: tensor<4x6xf32>) {
  // expected-error@+1 {{keeps a pre-activation without an activation}}
  %r:2 = zest.linear none ins(%x, %w : tensor<4x8xf32>, tensor<8x6xf32>) outs(%y, %y : tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>, tensor<4x6xf32>
  return
}

// -----

func.func @linear_mixed(%x: tensor<4x8xf32>, %w: tensor<8x6xf32>, %y: memref<4x6xf32>) {
  // expected-error@+1 {{mixes tensors and memrefs}}
  zest.linear none ins(%x, %w : tensor<4x8xf32>, tensor<8x6xf32>) outs(%y : memref<4x6xf32>)
  return
}

// -----

func.func @linear_missing_result(%x: tensor<4x8xf32>, %w: tensor<8x6xf32>, %y: tensor<4x6xf32>) {
  // expected-error@+1 {{on tensors returns one tensor per destination (1), not 0}}
  zest.linear none ins(%x, %w : tensor<4x8xf32>, tensor<8x6xf32>) outs(%y : tensor<4x6xf32>)
  return
}

// -----

func.func @linear_f64(%x: tensor<4x8xf64>, %w: tensor<8x6xf64>, %y: tensor<4x6xf64>) {
  // expected-error@+1 {{operand #0 must be 2-D f32, bf16 or f16 tensor or memref}}
  %r = zest.linear none ins(%x, %w : tensor<4x8xf64>, tensor<8x6xf64>) outs(%y : tensor<4x6xf64>) -> tensor<4x6xf64>
  return
}

// -----

func.func @backward_nothing(%dy: tensor<4x6xf32>) {
  // expected-error@+1 {{computes no gradient}}
  zest.linear_backward none grad_output(%dy : tensor<4x6xf32>) outs()
  return
}

// -----

func.func @backward_needs_pre(%dy: tensor<4x6xf32>, %db: tensor<6xf32>) {
  // expected-error@+1 {{takes a preactivation exactly when its activation is not 'none'}}
  %r = zest.linear_backward gelu_erf grad_output(%dy : tensor<4x6xf32>) outs(grad_bias %db : tensor<6xf32>) -> tensor<6xf32>
  return
}

// -----

func.func @backward_needs_input(%dy: tensor<4x6xf32>, %dw: tensor<6x8xf32>) {
  // expected-error@+1 {{takes the layer's input exactly when it computes grad_weight}}
  %r = zest.linear_backward none transpose_grad_weight grad_output(%dy : tensor<4x6xf32>) outs(grad_weight %dw : tensor<6x8xf32>) -> tensor<6x8xf32>
  return
}

// -----

func.func @backward_grad_weight_shape(%dy: tensor<4x6xf32>, %x: tensor<4x8xf32>, %dw: tensor<6x8xf32>) {
  // expected-error@+1 {{grad_weight has type 'tensor<6x8xf32>'; expected shape 8x6}}
  %r = zest.linear_backward none grad_output(%dy : tensor<4x6xf32>) input(%x : tensor<4x8xf32>) outs(grad_weight %dw : tensor<6x8xf32>) -> tensor<6x8xf32>
  return
}

// -----

// expected-error@+1 {{'zest.unit' op attribute 'replicas' failed to satisfy constraint}}
zest.unit @u sharded : f32, world_size = 2, replicas = 0, padded_size = 8, shard_size = 4 [
  "a" : tensor<8xf32> at 0
]

// -----

zest.unit @u sharded : f32, world_size = 2, padded_size = 8, shard_size = 4 [
  "a" : tensor<8xf32> at 0
]
func.func @f(%s: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{across_replicas requires a unit with replicas > 1, but @u has one copy}}
  %0 = zest.all_reduce avg %s for @u across_replicas : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

zest.unit @r replicated : f32, world_size = 2, replicas = 2, padded_size = 8, shard_size = 8 [
  "a" : tensor<8xf32> at 0
]
func.func @f(%s: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error@+1 {{requires a sharded unit, but @r is replicated}}
  %0 = zest.all_reduce avg %s for @r across_replicas : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

zest.unit @u sharded : f32, world_size = 2, replicas = 2, padded_size = 8, shard_size = 4 [
  "a" : tensor<8xf32> at 0
]
func.func @f(%g: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error@+1 {{operand must be 'tensor<4xf32>' for unit @u (sharded, world_size = 2), got 'tensor<8xf32>'}}
  %0 = zest.all_reduce_start avg %g for @u across_replicas : tensor<8xf32> -> !zest.future<tensor<8xf32>>
  %1 = zest.wait %0 : !zest.future<tensor<8xf32>>
  return %1 : tensor<8xf32>
}

// -----

zest.unit @u sharded : f32, world_size = 2, padded_size = 8, shard_size = 4 [
  "a" : tensor<8xf32> at 0
]
// expected-error@+1 {{cannot pack its units: @v is not a zest.unit declaration}}
zest.bucket @b [@u, @v]

// -----

zest.unit @u sharded : f32, world_size = 2, padded_size = 8, shard_size = 4 [
  "a" : tensor<8xf32> at 0
]
// expected-error@+1 {{cannot pack its units: a bucket holds at least two units}}
zest.bucket @b [@u]

// -----

zest.unit @u sharded : f32, world_size = 2, padded_size = 8, shard_size = 4 [
  "a" : tensor<8xf32> at 0
]
// expected-error@+1 {{cannot pack its units: @u is listed twice}}
zest.bucket @b [@u, @u]

// -----

zest.unit @u sharded : f32, world_size = 2, padded_size = 8, shard_size = 4 [
  "a" : tensor<8xf32> at 0
]
zest.unit @v sharded : f32, world_size = 4, padded_size = 8, shard_size = 2 [
  "b" : tensor<8xf32> at 0
]
// expected-error@+1 {{cannot pack its units: @v differs from @u in kind, element type, world_size, replicas or communication types}}
zest.bucket @b [@u, @v]

// -----

zest.unit @u sharded : f32, world_size = 2, padded_size = 8, shard_size = 4 [
  "a" : tensor<8xf32> at 0
]
zest.unit @v sharded : f32, world_size = 2, padded_size = 4, shard_size = 2 [
  "b" : tensor<4xf32> at 0
]
zest.bucket @b [@u, @v]
func.func @f(%s: tensor<4xf32>) -> tensor<12xf32> {
  // expected-error@+1 {{operand must be 'tensor<6xf32>' for bucket @b (sharded, world_size = 2), got 'tensor<4xf32>'}}
  %0 = zest.all_gather %s for @b : tensor<4xf32> -> tensor<12xf32>
  return %0 : tensor<12xf32>
}

// -----

zest.unit @u sharded : f32, world_size = 2, padded_size = 8, shard_size = 4 [
  "a" : tensor<8xf32> at 0
]
func.func @f(%s: tensor<4xf32>) -> tensor<8xf32> {
  // expected-error@+1 {{refers to @nowhere, which is not a zest.unit or a valid zest.bucket declaration}}
  %0 = zest.all_gather %s for @nowhere : tensor<4xf32> -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @f(%a: tensor<3xf32>, %b: tensor<4xf32>) -> tensor<7xf32> {
  // expected-error@+1 {{'tensor<3xf32>' does not split into 2 equal pieces}}
  %0 = zest.pack %a, %b pieces 2 : tensor<3xf32>, tensor<4xf32> -> tensor<7xf32>
  return %0 : tensor<7xf32>
}

// -----

func.func @f(%a: tensor<2xf32>, %b: tensor<4xf32>) -> tensor<8xf32> {
  // expected-error@+1 {{the packed buffer 'tensor<8xf32>' must hold exactly the 6 elements of its 2 parts}}
  %0 = zest.pack %a, %b pieces 2 : tensor<2xf32>, tensor<4xf32> -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @f(%p: tensor<6xf32>) -> (tensor<2xf32>, tensor<4xi32>) {
  // expected-error@+1 {{packs 'tensor<4xi32>' into 'tensor<6xf32>': every buffer must have the same element type}}
  %0:2 = zest.unpack %p pieces 1 : tensor<6xf32> -> tensor<2xf32>, tensor<4xi32>
  return %0#0, %0#1 : tensor<2xf32>, tensor<4xi32>
}

// -----

// expected-error@+1 {{gather_type must be bf16 or f16, got 'f64'}}
zest.unit @u sharded : f32, world_size = 2, padded_size = 4, shard_size = 2 [
  "w" : tensor<4xf32> at 0
] {gather_type = f64}

// -----

// expected-error@+1 {{reduce_type needs an f32 unit (an f32 master copy), this one holds 'bf16'}}
zest.unit @u sharded : bf16, world_size = 2, padded_size = 4, shard_size = 2 [
  "w" : tensor<4xbf16> at 0
] {reduce_type = f16}

// -----

func.func @barrier_types(%x: tensor<4xf32>) -> tensor<4xf16> {
  // expected-error@+1 {{all of {input, result} have same type}}
  %b = "zest.optimization_barrier"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  return %b : tensor<4xf16>
}

// -----

func.func @stage_on_device(%g: tensor<4xf32>, %stage: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{stage must be an argument of the function marked 'zest.host' (pinned host memory)}}
  %f = zest.copy_to_host_start %g into %stage : tensor<4xf32> -> !zest.future<tensor<4xf32>>
  %h = zest.copy_wait %f : !zest.future<tensor<4xf32>>
  return %h : tensor<4xf32>
}

// -----

func.func @stage_never_waited(%g: tensor<4xf32>, %stage: tensor<4xf32> {zest.host}) {
  // expected-error@+1 {{future must be waited for by exactly one zest.copy_wait}}
  %f = zest.copy_to_host_start %g into %stage : tensor<4xf32> -> !zest.future<tensor<4xf32>>
  return
}

// -----

func.func @stage_type(%g: tensor<4xf32>, %stage: tensor<4xf32> {zest.host}) -> tensor<8xf32> {
  // expected-error@+1 {{future must hold 'tensor<4xf32>', got '!zest.future<tensor<8xf32>>'}}
  %f = zest.copy_to_host_start %g into %stage : tensor<4xf32> -> !zest.future<tensor<8xf32>>
  %h = zest.copy_wait %f : !zest.future<tensor<8xf32>>
  return %h : tensor<8xf32>
}

