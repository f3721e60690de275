// RUN: zest-opt %s -split-input-file -verify-diagnostics

func.func @per_row(%x: tensor<6x3xf32>, %w: tensor<5x3xf32>, %t: tensor<6xi64>, %g: tensor<f32>, %l: tensor<f32>, %ws: tensor<4x5xf32>, %lse: tensor<6xf32>) {
  // expected-error@+1 {{'zest.linear_cross_entropy' op takes reduction mean or sum: a loss per row (none) has a gradient per row, known only after the forward}}
  %r:3 = zest.linear_cross_entropy none ignore_index(-100) transpose_weight grad_loss(%g : tensor<f32>) ins(%x, %w, %t : tensor<6x3xf32>, tensor<5x3xf32>, tensor<6xi64>) outs(loss %l : tensor<f32>, logits %ws : tensor<4x5xf32>, logsumexp %lse : tensor<6xf32>) -> tensor<f32>, tensor<4x5xf32>, tensor<6xf32>
  return
}

// -----

func.func @chunk_too_large(%x: tensor<6x3xf32>, %w: tensor<5x3xf32>, %t: tensor<6xi64>, %g: tensor<f32>, %l: tensor<f32>, %ws: tensor<7x5xf32>, %lse: tensor<6xf32>) {
  // expected-error@+1 {{'zest.linear_cross_entropy' op takes a logits workspace of 1 to 6 rows (one chunk of the input's rows), not 7}}
  %r:3 = zest.linear_cross_entropy mean ignore_index(-100) transpose_weight grad_loss(%g : tensor<f32>) ins(%x, %w, %t : tensor<6x3xf32>, tensor<5x3xf32>, tensor<6xi64>) outs(loss %l : tensor<f32>, logits %ws : tensor<7x5xf32>, logsumexp %lse : tensor<6xf32>) -> tensor<f32>, tensor<7x5xf32>, tensor<6xf32>
  return
}

// -----

func.func @workspace_classes(%x: tensor<6x3xf32>, %w: tensor<5x3xf32>, %t: tensor<6xi64>, %g: tensor<f32>, %l: tensor<f32>, %ws: tensor<4x6xf32>, %lse: tensor<6xf32>) {
  // expected-error@+1 {{'zest.linear_cross_entropy' op logits has type 'tensor<4x6xf32>'; expected shape 4x5}}
  %r:3 = zest.linear_cross_entropy mean ignore_index(-100) transpose_weight grad_loss(%g : tensor<f32>) ins(%x, %w, %t : tensor<6x3xf32>, tensor<5x3xf32>, tensor<6xi64>) outs(loss %l : tensor<f32>, logits %ws : tensor<4x6xf32>, logsumexp %lse : tensor<6xf32>) -> tensor<f32>, tensor<4x6xf32>, tensor<6xf32>
  return
}

// -----

func.func @weight_layout(%x: tensor<6x3xf32>, %w: tensor<5x3xf32>, %t: tensor<6xi64>, %g: tensor<f32>, %l: tensor<f32>, %ws: tensor<4x3xf32>, %lse: tensor<6xf32>) {
  // expected-error@+1 {{'zest.linear_cross_entropy' op weight has type 'tensor<5x3xf32>'; expected shape 3x3}}
  %r:3 = zest.linear_cross_entropy mean ignore_index(-100) grad_loss(%g : tensor<f32>) ins(%x, %w, %t : tensor<6x3xf32>, tensor<5x3xf32>, tensor<6xi64>) outs(loss %l : tensor<f32>, logits %ws : tensor<4x3xf32>, logsumexp %lse : tensor<6xf32>) -> tensor<f32>, tensor<4x3xf32>, tensor<6xf32>
  return
}

// -----

func.func @grad_weight_layout(%x: tensor<6x3xf32>, %w: tensor<5x3xf32>, %t: tensor<6xi64>, %g: tensor<f32>, %l: tensor<f32>, %ws: tensor<4x5xf32>, %lse: tensor<6xf32>, %dw: tensor<5x3xf32>) {
  // expected-error@+1 {{'zest.linear_cross_entropy' op grad_weight has type 'tensor<5x3xf32>'; expected shape 3x5}}
  %r:4 = zest.linear_cross_entropy mean ignore_index(-100) transpose_weight grad_loss(%g : tensor<f32>) ins(%x, %w, %t : tensor<6x3xf32>, tensor<5x3xf32>, tensor<6xi64>) outs(loss %l : tensor<f32>, logits %ws : tensor<4x5xf32>, logsumexp %lse : tensor<6xf32> grad_weight %dw : tensor<5x3xf32>) -> tensor<f32>, tensor<4x5xf32>, tensor<6xf32>, tensor<5x3xf32>
  return
}

// -----

func.func @target_rows(%x: tensor<6x3xf32>, %w: tensor<5x3xf32>, %t: tensor<5xi64>, %g: tensor<f32>, %l: tensor<f32>, %ws: tensor<4x5xf32>, %lse: tensor<6xf32>) {
  // expected-error@+1 {{'zest.linear_cross_entropy' op target has type 'tensor<5xi64>'; expected shape 6}}
  %r:3 = zest.linear_cross_entropy mean ignore_index(-100) transpose_weight grad_loss(%g : tensor<f32>) ins(%x, %w, %t : tensor<6x3xf32>, tensor<5x3xf32>, tensor<5xi64>) outs(loss %l : tensor<f32>, logits %ws : tensor<4x5xf32>, logsumexp %lse : tensor<6xf32>) -> tensor<f32>, tensor<4x5xf32>, tensor<6xf32>
  return
}

// -----

func.func @mixed_types(%x: tensor<6x3xbf16>, %w: tensor<5x3xf32>, %t: tensor<6xi64>, %g: tensor<f32>, %l: tensor<f32>, %ws: tensor<4x5xbf16>, %lse: tensor<6xf32>) {
  // expected-error@+1 {{'zest.linear_cross_entropy' op takes its input, weight and logits in one type; got 'tensor<6x3xbf16>', 'tensor<5x3xf32>' and 'tensor<4x5xbf16>'}}
  %r:3 = zest.linear_cross_entropy mean ignore_index(-100) transpose_weight grad_loss(%g : tensor<f32>) ins(%x, %w, %t : tensor<6x3xbf16>, tensor<5x3xf32>, tensor<6xi64>) outs(loss %l : tensor<f32>, logits %ws : tensor<4x5xbf16>, logsumexp %lse : tensor<6xf32>) -> tensor<f32>, tensor<4x5xbf16>, tensor<6xf32>
  return
}

// -----

func.func @bf16_gradient(%x: tensor<6x3xbf16>, %w: tensor<5x3xbf16>, %t: tensor<6xi64>, %g: tensor<f32>, %l: tensor<f32>, %ws: tensor<4x5xbf16>, %lse: tensor<6xf32>, %dx: tensor<6x3xbf16>) {
  // expected-error@+1 {{'zest.linear_cross_entropy' op operand #7 must be 2-D f32 tensor or memref, but got 'tensor<6x3xbf16>'}}
  %r:4 = zest.linear_cross_entropy mean ignore_index(-100) transpose_weight grad_loss(%g : tensor<f32>) ins(%x, %w, %t : tensor<6x3xbf16>, tensor<5x3xbf16>, tensor<6xi64>) outs(loss %l : tensor<f32>, logits %ws : tensor<4x5xbf16>, logsumexp %lse : tensor<6xf32> grad_input %dx : tensor<6x3xbf16>) -> tensor<f32>, tensor<4x5xbf16>, tensor<6xf32>, tensor<6x3xbf16>
  return
}

// -----

func.func @smoothing(%x: tensor<6x3xf32>, %w: tensor<5x3xf32>, %t: tensor<6xi64>, %g: tensor<f32>, %l: tensor<f32>, %ws: tensor<4x5xf32>, %lse: tensor<6xf32>) {
  // expected-error@+1 {{'zest.linear_cross_entropy' op label_smoothing -1.000000e-01 is not in [0, 1]}}
  %r:3 = zest.linear_cross_entropy mean ignore_index(-100) label_smoothing(-0.1) transpose_weight grad_loss(%g : tensor<f32>) ins(%x, %w, %t : tensor<6x3xf32>, tensor<5x3xf32>, tensor<6xi64>) outs(loss %l : tensor<f32>, logits %ws : tensor<4x5xf32>, logsumexp %lse : tensor<6xf32>) -> tensor<f32>, tensor<4x5xf32>, tensor<6xf32>
  return
}
