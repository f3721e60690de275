// RUN: zest-opt %s -split-input-file -verify-diagnostics

func.func @target_rows(%x: tensor<6x50xf32>, %t: tensor<5xi64>, %l: tensor<f32>, %lse: tensor<6xf32>) {
  // expected-error@+1 {{'zest.cross_entropy' op target has type 'tensor<5xi64>'; expected shape 6}}
  %r:2 = zest.cross_entropy mean ignore_index(-100) ins(%x, %t : tensor<6x50xf32>, tensor<5xi64>) outs(%l, %lse : tensor<f32>, tensor<6xf32>) -> tensor<f32>, tensor<6xf32>
  return
}

// -----

func.func @loss_per_row(%x: tensor<6x50xf32>, %t: tensor<6xi64>, %l: tensor<f32>, %lse: tensor<6xf32>) {
  // expected-error@+1 {{'zest.cross_entropy' op loss (reduction none: one per row) has type 'tensor<f32>'; expected shape 6}}
  %r:2 = zest.cross_entropy none ignore_index(-100) ins(%x, %t : tensor<6x50xf32>, tensor<6xi64>) outs(%l, %lse : tensor<f32>, tensor<6xf32>) -> tensor<f32>, tensor<6xf32>
  return
}

// -----

func.func @loss_scalar(%x: tensor<6x50xf32>, %t: tensor<6xi64>, %l: tensor<6xf32>) {
  // expected-error@+1 {{'zest.cross_entropy' op loss (reduction sum: a 0-D tensor) has type 'tensor<6xf32>'; expected shape }}
  %r:2 = zest.cross_entropy sum ignore_index(-100) ins(%x, %t : tensor<6x50xf32>, tensor<6xi64>) outs(%l, %l : tensor<6xf32>, tensor<6xf32>) -> tensor<6xf32>, tensor<6xf32>
  return
}

// -----

func.func @smoothing(%x: tensor<6x50xf32>, %t: tensor<6xi64>, %l: tensor<f32>, %lse: tensor<6xf32>) {
  // expected-error@+1 {{'zest.cross_entropy' op label_smoothing 1.500000e+00 is not in [0, 1]}}
  %r:2 = zest.cross_entropy mean ignore_index(-100) label_smoothing(1.5) ins(%x, %t : tensor<6x50xf32>, tensor<6xi64>) outs(%l, %lse : tensor<f32>, tensor<6xf32>) -> tensor<f32>, tensor<6xf32>
  return
}

// -----

func.func @float_targets(%x: tensor<6x50xf32>, %t: tensor<6xf32>, %l: tensor<f32>, %lse: tensor<6xf32>) {
  // expected-error@+1 {{'zest.cross_entropy' op operand #1 must be 1-D i64 or i32 tensor or memref}}
  %r:2 = zest.cross_entropy mean ignore_index(-100) ins(%x, %t : tensor<6x50xf32>, tensor<6xf32>) outs(%l, %lse : tensor<f32>, tensor<6xf32>) -> tensor<f32>, tensor<6xf32>
  return
}

// -----

func.func @grad_type(%x: tensor<6x50xf32>, %t: tensor<6xi64>, %g: tensor<f32>, %lse: tensor<6xf32>, %dx: tensor<6x50xbf16>) {
  // expected-error@+1 {{'zest.cross_entropy_backward' op grad_logits has type 'tensor<6x50xbf16>'; expected the logits' shape and element type ('tensor<6x50xf32>')}}
  %r = zest.cross_entropy_backward mean ignore_index(-100) grad_loss(%g : tensor<f32>) ins(%x, %t, %lse : tensor<6x50xf32>, tensor<6xi64>, tensor<6xf32>) outs(%dx : tensor<6x50xbf16>) -> tensor<6x50xbf16>
  return
}

// -----

func.func @grad_loss_rows(%x: tensor<6x50xf32>, %t: tensor<6xi64>, %g: tensor<f32>, %lse: tensor<6xf32>) {
  // expected-error@+1 {{'zest.cross_entropy_backward' op grad_loss (reduction none: one per row) has type 'tensor<f32>'; expected shape 6}}
  %r = zest.cross_entropy_backward none ignore_index(-100) grad_loss(%g : tensor<f32>) ins(%x, %t, %lse : tensor<6x50xf32>, tensor<6xi64>, tensor<6xf32>) outs(%x : tensor<6x50xf32>) -> tensor<6x50xf32>
  return
}
