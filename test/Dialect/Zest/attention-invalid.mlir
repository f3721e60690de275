// RUN: zest-opt %s -split-input-file -verify-diagnostics

func.func @heads_not_divisible(%q: tensor<1x6x4x8xf32>, %k: tensor<1x4x4x8xf32>, %o: tensor<1x6x4x8xf32>, %l: tensor<1x6x4xf32>) {
  // expected-error@+1 {{'zest.attention' op has 6 query heads and 4 key/value heads; the key/value heads must divide the query heads (grouped-query attention)}}
  %r:2 = zest.attention scale(1.0) ins(%q, %k, %k : tensor<1x6x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>) outs(%o, %l : tensor<1x6x4x8xf32>, tensor<1x6x4xf32>) -> tensor<1x6x4x8xf32>, tensor<1x6x4xf32>
  return
}

// -----

func.func @key_features(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x7xf32>, %v: tensor<1x2x4x8xf32>, %o: tensor<1x2x4x8xf32>, %l: tensor<1x2x4xf32>) {
  // expected-error@+1 {{'zest.attention' op key has type 'tensor<1x2x4x7xf32>'; expected shape 1x2x4x8}}
  %r:2 = zest.attention scale(1.0) ins(%q, %k, %v : tensor<1x2x4x8xf32>, tensor<1x2x4x7xf32>, tensor<1x2x4x8xf32>) outs(%o, %l : tensor<1x2x4x8xf32>, tensor<1x2x4xf32>) -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  return
}

// -----

func.func @value_keys(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x5x8xf32>, %o: tensor<1x2x4x8xf32>, %l: tensor<1x2x4xf32>) {
  // expected-error@+1 {{'zest.attention' op value has type 'tensor<1x2x5x8xf32>'; expected shape 1x2x4x8}}
  %r:2 = zest.attention scale(1.0) ins(%q, %k, %v : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x5x8xf32>) outs(%o, %l : tensor<1x2x4x8xf32>, tensor<1x2x4xf32>) -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  return
}

// -----

func.func @lse_shape(%q: tensor<1x2x4x8xf32>, %o: tensor<1x2x4x8xf32>, %l: tensor<1x2x5xf32>) {
  // expected-error@+1 {{'zest.attention' op logsumexp has type 'tensor<1x2x5xf32>'; expected shape 1x2x4}}
  %r:2 = zest.attention scale(1.0) ins(%q, %q, %q : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) outs(%o, %l : tensor<1x2x4x8xf32>, tensor<1x2x5xf32>) -> tensor<1x2x4x8xf32>, tensor<1x2x5xf32>
  return
}

// -----

func.func @lse_bf16(%q: tensor<1x2x4x8xbf16>, %o: tensor<1x2x4x8xbf16>, %l: tensor<1x2x4xbf16>) {
  // expected-error@+1 {{'zest.attention' op operand #4 must be 3-D f32 tensor or memref}}
  %r:2 = zest.attention scale(1.0) ins(%q, %q, %q : tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>) outs(%o, %l : tensor<1x2x4x8xbf16>, tensor<1x2x4xbf16>) -> tensor<1x2x4x8xbf16>, tensor<1x2x4xbf16>
  return
}

// -----

func.func @mixed_types(%q: tensor<1x2x4x8xbf16>, %k: tensor<1x2x4x8xf32>, %o: tensor<1x2x4x8xbf16>, %l: tensor<1x2x4xf32>) {
  // expected-error@+1 {{'zest.attention' op mixes element types 'bf16' and 'f32'; queries, keys, values, outputs and their gradients are stored in one type}}
  %r:2 = zest.attention scale(1.0) ins(%q, %k, %k : tensor<1x2x4x8xbf16>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) outs(%o, %l : tensor<1x2x4x8xbf16>, tensor<1x2x4xf32>) -> tensor<1x2x4x8xbf16>, tensor<1x2x4xf32>
  return
}

// -----

func.func @mask_shape(%q: tensor<1x2x4x8xf32>, %m: tensor<1x1x4x3xi1>, %o: tensor<1x2x4x8xf32>, %l: tensor<1x2x4xf32>) {
  // expected-error@+1 {{'zest.attention' op mask has type 'tensor<1x1x4x3xi1>'; each dimension is 1 (broadcast) or that of [batch, heads, queries, keys] = [1, 2, 4, 4]}}
  %r:2 = zest.attention scale(1.0) ins(%q, %q, %q : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) mask(%m : tensor<1x1x4x3xi1>) outs(%o, %l : tensor<1x2x4x8xf32>, tensor<1x2x4xf32>) -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  return
}

// -----

func.func @mask_type(%q: tensor<1x2x4x8xbf16>, %m: tensor<1x1x4x4xf16>, %o: tensor<1x2x4x8xbf16>, %l: tensor<1x2x4xf32>) {
  // expected-error@+1 {{'zest.attention' op mask of element type 'f16' is neither i1 (keep where true), f32 nor the inputs' type 'bf16' (added to the scores)}}
  %r:2 = zest.attention scale(1.0) ins(%q, %q, %q : tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>) mask(%m : tensor<1x1x4x4xf16>) outs(%o, %l : tensor<1x2x4x8xbf16>, tensor<1x2x4xf32>) -> tensor<1x2x4x8xbf16>, tensor<1x2x4xf32>
  return
}

// -----

func.func @scale_inf(%q: tensor<1x2x4x8xf32>, %o: tensor<1x2x4x8xf32>, %l: tensor<1x2x4xf32>) {
  // expected-error@+1 {{'zest.attention' op scale INF is not finite}}
  %r:2 = zest.attention scale(0x7F800000) ins(%q, %q, %q : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) outs(%o, %l : tensor<1x2x4x8xf32>, tensor<1x2x4xf32>) -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  return
}

// -----

func.func @mixed_buffers(%q: tensor<1x2x4x8xf32>, %o: memref<1x2x4x8xf32>, %l: memref<1x2x4xf32>) {
  // expected-error@+1 {{'zest.attention' op mixes tensors and memrefs}}
  zest.attention scale(1.0) ins(%q, %q, %q : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) outs(%o, %l : memref<1x2x4x8xf32>, memref<1x2x4xf32>)
  return
}

// -----

func.func @grad_key_shape(%q: tensor<1x4x4x8xf32>, %k: tensor<1x2x4x8xf32>, %l: tensor<1x4x4xf32>) {
  // expected-error@+1 {{'zest.attention_backward' op grad_key has type 'tensor<1x4x4x8xf32>'; expected shape 1x2x4x8}}
  %r:3 = zest.attention_backward scale(1.0) grad_output(%q : tensor<1x4x4x8xf32>) ins(%q, %k, %k, %q, %l : tensor<1x4x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x4x4xf32>) outs(%q, %q, %k : tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x2x4x8xf32>
  return
}

// -----

func.func @grad_results(%q: tensor<1x2x4x8xf32>, %l: tensor<1x2x4xf32>) {
  // expected-error@+1 {{'zest.attention_backward' op on tensors returns one tensor per destination (3), not 2}}
  %r:2 = zest.attention_backward scale(1.0) grad_output(%q : tensor<1x2x4x8xf32>) ins(%q, %q, %q, %q, %l : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4xf32>) outs(%q, %q, %q : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
  return
}

// -----

// Sequence-major: values are [batch, keys, kv_heads, dim] as the keys are;
// these have their heads where a [batch, heads, rows, dim] array has them.
func.func @sequence_major_values(%q: tensor<1x4x2x8xf32>, %k: tensor<1x5x2x8xf32>, %v: tensor<1x2x5x8xf32>, %o: tensor<1x4x2x8xf32>, %l: tensor<1x2x4xf32>) {
  // expected-error@+1 {{'zest.attention' op value has type 'tensor<1x2x5x8xf32>'; expected shape 1x5x2x8}}
  %r:2 = zest.attention sequence_major scale(1.0) ins(%q, %k, %v : tensor<1x4x2x8xf32>, tensor<1x5x2x8xf32>, tensor<1x2x5x8xf32>) outs(%o, %l : tensor<1x4x2x8xf32>, tensor<1x2x4xf32>) -> tensor<1x4x2x8xf32>, tensor<1x2x4xf32>
  return
}

// -----

// Sequence-major or not, the log-sum-exp is [batch, heads, queries].
func.func @sequence_major_logsumexp(%q: tensor<1x4x2x8xf32>, %o: tensor<1x4x2x8xf32>, %l: tensor<1x4x2xf32>) {
  // expected-error@+1 {{'zest.attention' op logsumexp has type 'tensor<1x4x2xf32>'; expected shape 1x2x4}}
  %r:2 = zest.attention sequence_major scale(1.0) ins(%q, %q, %q : tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>) outs(%o, %l : tensor<1x4x2x8xf32>, tensor<1x4x2xf32>) -> tensor<1x4x2x8xf32>, tensor<1x4x2xf32>
  return
}
