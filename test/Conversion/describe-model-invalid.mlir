// RUN: zest-opt %s -split-input-file -zest-describe-model -verify-diagnostics

// Entry points the host driver cannot call.
// expected-error @+1 {{entry point name 'main' clashes with the runtime; rename the function}}
func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  return %x : tensor<2xf32>
}

// -----

// expected-error @+2 {{argument #0 of entry point @dynamic has type 'tensor<?xf32>'; entry points take statically shaped tensors}}
// expected-error @+1 {{result #0 of entry point @dynamic has type 'f32'; entry points return statically shaped tensors}}
func.func @dynamic(%x: tensor<?xf32>) -> f32 {
  %c = arith.constant 0.0 : f32
  return %c : f32
}

// -----

// expected-error @+1 {{the module has no entry point: zestc compiles the public functions with a body}}
module {
  func.func private @helper(%x: tensor<2xf32>) -> tensor<2xf32> {
    return %x : tensor<2xf32>
  }
}
