// RUN: zest-opt %s -split-input-file -verify-diagnostics --zest-insert-optimizer="optimizer=adamw"
// RUN: not zest-opt %s --zest-insert-optimizer="optimizer=lamb" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not zest-opt %s --zest-insert-optimizer="nesterov" 2>&1 | FileCheck %s --check-prefix=NESTEROV
// UNKNOWN: error: unknown optimizer 'lamb': use sgd or adamw
// NESTEROV: error: nesterov needs optimizer=sgd with momentum

// The optimizer keeps f32 state: a bf16 unit is refused at the function.
zest.unit @h sharded : bf16, world_size = 1, padded_size = 2, shard_size = 2 [
  "h.w" : tensor<2xbf16> at 0
]
// expected-error@+1 {{unit @h holds 'bf16' parameters; the optimizer updates f32 units only}}
func.func @half(%s: tensor<2xbf16> {zest.unit = @h}) -> (tensor<f32> {zest.loss}, tensor<2xbf16> {zest.unit_grad = @h}) {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l, %s : tensor<f32>, tensor<2xbf16>
}

// -----

// RUN: not zest-opt %s -split-input-file --zest-insert-optimizer="max-grad-norm=-2" 2>&1 | FileCheck %s --check-prefix=NEGNORM
// NEGNORM: error: max-grad-norm must be positive (0 disables clipping), got -2
