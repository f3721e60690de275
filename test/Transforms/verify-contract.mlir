// RUN: zest-opt %s -split-input-file -zest-verify-contract -verify-diagnostics | FileCheck %s

// A well-formed training step passes unchanged.
// CHECK-LABEL: func.func @ok
// CHECK-SAME: {zest.param = "fc.weight"}
func.func @ok(%w: tensor<4x8xf32> {zest.param = "fc.weight"},
              %b: tensor<4xf32> {zest.param = "fc.bias"},
              %x: tensor<2x8xf32>)
    -> (tensor<f32> {zest.loss}, tensor<4x8xf32> {zest.grad = "fc.weight"}) {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l, %w : tensor<f32>, tensor<4x8xf32>
}

// A forward-only function (no gradients, no loss) and a function without
// parameters are fine too.
// CHECK-LABEL: func.func @infer
func.func @infer(%w: tensor<4x8xf32> {zest.param = "fc.weight"}) -> tensor<4x8xf32> {
  return %w : tensor<4x8xf32>
}
// CHECK-LABEL: func.func @helper
func.func @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

func.func @dup(
    // expected-note@+1 {{first declared here}}
    %a: tensor<4xf32> {zest.param = "fc.weight"},
    // expected-error@+1 {{duplicate parameter 'fc.weight' in @dup (arguments #0 and #1)}}
    %b: tensor<4xf32> {zest.param = "fc.weight"}) {
  return
}

// -----

// expected-error@+1 {{gradient result #0 names 'fc.bias', which is not a parameter of @f}}
func.func @f(%a: tensor<4xf32> {zest.param = "fc.weight"})
    -> (tensor<4xf32> {zest.grad = "fc.bias"}, tensor<f32> {zest.loss}) {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %a, %l : tensor<4xf32>, tensor<f32>
}

// -----

// expected-error@+1 {{gradient result #0 for 'fc.weight' has type 'tensor<8x4xf32>', but the parameter has type 'tensor<4x8xf32>'}}
func.func @f(%a: tensor<4x8xf32> {zest.param = "fc.weight"}, %g: tensor<8x4xf32>)
    -> (tensor<8x4xf32> {zest.grad = "fc.weight"}, tensor<f32> {zest.loss}) {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %g, %l : tensor<8x4xf32>, tensor<f32>
}

// -----

// expected-error@+1 {{results #0 and #1 are both the gradient of 'w'}}
func.func @f(%a: tensor<4xf32> {zest.param = "w"})
    -> (tensor<4xf32> {zest.grad = "w"}, tensor<4xf32> {zest.grad = "w"}, tensor<f32> {zest.loss}) {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %a, %a, %l : tensor<4xf32>, tensor<4xf32>, tensor<f32>
}

// -----

// expected-error@+1 {{'zest.grad' of result #0 must be a string naming a parameter}}
func.func @f(%a: tensor<4xf32> {zest.param = "w"}) -> (tensor<4xf32> {zest.grad = 3 : i32}) {
  return %a : tensor<4xf32>
}

// -----

// expected-error@+1 {{@f returns gradients but no result carries 'zest.loss'}}
func.func @f(%a: tensor<4xf32> {zest.param = "w"}) -> (tensor<4xf32> {zest.grad = "w"}) {
  return %a : tensor<4xf32>
}

// -----

// expected-error@+1 {{loss result #0 must be a float scalar or a one-element float tensor, got 'tensor<4xf32>'}}
func.func @f(%a: tensor<4xf32> {zest.param = "w"}) -> (tensor<4xf32> {zest.loss}) {
  return %a : tensor<4xf32>
}

// -----

// expected-error@+1 {{results #0 and #1 both carry 'zest.loss'; a function has one loss}}
func.func @f(%a: tensor<4xf32> {zest.param = "w"}) -> (f32 {zest.loss}, f32 {zest.loss}) {
  %l = arith.constant 0.0 : f32
  return %l, %l : f32, f32
}

// -----

// expected-error@+1 {{parameter 'w' must be a statically shaped tensor, got 'tensor<?x4xf32>'}}
func.func @f(%a: tensor<?x4xf32> {zest.param = "w"}) {
  return
}

// -----

// expected-error@+1 {{parameter 'w' must be a statically shaped tensor, got 'memref<4xf32>'}}
func.func @f(%a: memref<4xf32> {zest.param = "w"}) {
  return
}

// -----

// expected-error@+1 {{parameter 'w' must be a statically shaped tensor, got 'f32'}}
func.func @f(%a: f32 {zest.param = "w"}) {
  return
}

// -----

// expected-error@+1 {{parameter 'w' must have an integer or float element type, got 'complex<f32>'}}
func.func @f(%a: tensor<4xcomplex<f32>> {zest.param = "w"}) {
  return
}

// -----

// expected-error@+1 {{'zest.param' must be a string naming the parameter, got 1 : i64}}
func.func @f(%a: tensor<4xf32> {zest.param = 1}) {
  return
}

// -----

// expected-error@+1 {{parameter name 'layers..w' is not a fully qualified name}}
func.func @f(%a: tensor<4xf32> {zest.param = "layers..w"}) {
  return
}

// -----

// expected-error@+1 {{parameter name '' is not a fully qualified name}}
func.func @f(%a: tensor<4xf32> {zest.param = ""}) {
  return
}

// -----

// expected-error@+1 {{unknown argument attribute 'zest.parm' (expected zest.param, zest.rng or zest.index_bound)}}
func.func @f(%a: tensor<4xf32> {zest.parm = "w"}) {
  return
}

// -----

// Index bounds on data arguments (an embedding's ids, a loss's targets).
// CHECK-LABEL: func.func @bounded
// CHECK-SAME: zest.index_bound = {bound = 64 : i64, table = "embed.weight"}
// CHECK-SAME: zest.index_bound = {bound = 64 : i64, ignore = -100 : i64}
func.func @bounded(%w: tensor<64x8xf32> {zest.param = "embed.weight"},
                   %ids: tensor<2x4xi64> {zest.index_bound = {bound = 64 : i64, table = "embed.weight"}},
                   %labels: tensor<2x4xi64> {zest.index_bound = {bound = 64 : i64, ignore = -100 : i64}})
    -> (tensor<f32> {zest.loss}) {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error@+1 {{'zest.index_bound' must be {bound = N (positive), table = "fqn" (optional), ignore = I (optional)}, got {bound = 0 : i64}}}
func.func @f(%ids: tensor<4xi64> {zest.index_bound = {bound = 0 : i64}}) {
  return
}

// -----

// expected-error@+1 {{'zest.index_bound' must be {bound = N (positive), table = "fqn" (optional), ignore = I (optional)}, got {bound = 4 : i64, tabel = "w"}}}
func.func @f(%ids: tensor<4xi64> {zest.index_bound = {bound = 4 : i64, tabel = "w"}}) {
  return
}

// -----

// expected-error@+1 {{'zest.index_bound' needs an integer tensor argument (indices), got 'tensor<4xf32>'}}
func.func @f(%x: tensor<4xf32> {zest.index_bound = {bound = 4 : i64}}) {
  return
}

// -----

// expected-error@+1 {{'zest.index_bound' belongs on a data argument, not on a parameter or the random streams}}
func.func @f(%w: tensor<4xi64> {zest.param = "w", zest.index_bound = {bound = 4 : i64}}) {
  return
}

// -----

// expected-error@+1 {{result #0 has unknown attribute 'zest.gradient' (expected zest.grad or zest.loss)}}
func.func @f(%a: tensor<4xf32> {zest.param = "w"}) -> (tensor<4xf32> {zest.gradient = "w"}) {
  return %a : tensor<4xf32>
}

// -----

func.func @train(%a: tensor<4xf32> {zest.param = "w"}) {
  return
}
// expected-note@+1 {{first declared here}}
func.func @eval(%a: tensor<4xf32> {zest.param = "shared"}) {
  return
}
// expected-error@+1 {{parameter 'shared' has type 'tensor<8xf32>' here but 'tensor<4xf32>' in an earlier function}}
func.func @other(%a: tensor<8xf32> {zest.param = "shared"}) {
  return
}

// -----

// expected-error@+1 {{@decl takes parameters but has no body}}
func.func private @decl(%a: tensor<4xf32> {zest.param = "w"})

// -----

func.func @callee(%a: tensor<4xf32> {zest.param = "w"}) {
  return
}
func.func @caller(%a: tensor<4xf32>) {
  // expected-error@+1 {{@callee takes parameters and cannot be called: its signature is rewritten by sharding}}
  func.call @callee(%a) : (tensor<4xf32>) -> ()
  return
}

// -----

// expected-error@+1 {{@f takes parameters and must have a single block (structured control flow only), it has 2}}
func.func @f(%a: tensor<4xf32> {zest.param = "w"}) {
  cf.br ^bb1
^bb1:
  return
}

// -----

// expected-error@+1 {{'zest.module_classes' must be a dictionary from module path to class name}}
module attributes {zest.module_classes = ["Block"]} {
}

// -----

// expected-error@+1 {{'zest.module_classes' entry 'layers.0' must map to a non-empty class name string}}
module attributes {zest.module_classes = {"layers.0" = 1}} {
}

// -----

// All violations in a module are reported in one run.
// expected-error@+2 {{duplicate parameter 'a' in @f}}
// expected-note@+1 {{first declared here}}
func.func @f(%a: tensor<4xf32> {zest.param = "a"}, %b: tensor<4xf32> {zest.param = "a"},
             // expected-error@+1 {{parameter 'c' must be a statically shaped tensor}}
             %c: tensor<?xf32> {zest.param = "c"}) {
  return
}

// -----

// A step with random streams (dropout): one tensor<2xi64> {zest.rng}.
// CHECK-LABEL: func.func @dropout_step
// CHECK-SAME: %{{.*}}: tensor<2xi64> {zest.rng}
func.func @dropout_step(%w: tensor<4xf32> {zest.param = "w"}, %x: tensor<4xf32>, %rng: tensor<2xi64> {zest.rng}) -> (f32 {zest.loss}, tensor<4xf32> {zest.grad = "w"}) {
  %c = arith.constant 0.0 : f32
  return %c, %w : f32, tensor<4xf32>
}

// -----

// expected-error@+1 {{the random-stream argument ('zest.rng') must be tensor<2xi64> (key, first sample), got 'tensor<2xi32>'}}
func.func @f(%w: tensor<4xf32> {zest.param = "w"}, %rng: tensor<2xi32> {zest.rng}) {
  return
}

// -----

// expected-error@+1 {{'zest.rng' is a unit attribute, got 1 : i64}}
func.func @f(%w: tensor<4xf32> {zest.param = "w"}, %rng: tensor<2xi64> {zest.rng = 1}) {
  return
}

// -----

// expected-error@+1 {{argument #0 cannot be both a parameter and the random streams ('zest.rng')}}
func.func @f(%w: tensor<2xi64> {zest.param = "w", zest.rng}) {
  return
}

// -----

// expected-note@+2 {{first declared here}}
// expected-error@+1 {{@f has two random-stream arguments (#1 and #2); one carries all of a step's draws}}
func.func @f(%w: tensor<4xf32> {zest.param = "w"}, %a: tensor<2xi64> {zest.rng}, %b: tensor<2xi64> {zest.rng}) {
  return
}
