// Every f32 math function zest-approximate-math rewrites, elementwise over
// one input vector (test/E2E/math-approximation.test sweeps the f32 range).
#id = affine_map<(i) -> (i)>
func.func @math(%x: tensor<4096xf32>)
    -> (tensor<4096xf32>, tensor<4096xf32>, tensor<4096xf32>, tensor<4096xf32>,
        tensor<4096xf32>, tensor<4096xf32>, tensor<4096xf32>) {
  %e = tensor.empty() : tensor<4096xf32>
  %r:7 = linalg.generic {indexing_maps = [#id, #id, #id, #id, #id, #id, #id, #id],
                         iterator_types = ["parallel"]}
      ins(%x : tensor<4096xf32>) outs(%e, %e, %e, %e, %e, %e, %e
          : tensor<4096xf32>, tensor<4096xf32>, tensor<4096xf32>, tensor<4096xf32>,
            tensor<4096xf32>, tensor<4096xf32>, tensor<4096xf32>) {
  ^bb0(%in: f32, %o0: f32, %o1: f32, %o2: f32, %o3: f32, %o4: f32, %o5: f32, %o6: f32):
    %tanh = math.tanh %in : f32
    %erf = math.erf %in : f32
    %exp = math.exp %in : f32
    %expm1 = math.expm1 %in : f32
    %log = math.log %in : f32
    %log1p = math.log1p %in : f32
    %log2 = math.log2 %in : f32
    linalg.yield %tanh, %erf, %exp, %expm1, %log, %log1p, %log2 : f32, f32, f32, f32, f32, f32, f32
  } -> (tensor<4096xf32>, tensor<4096xf32>, tensor<4096xf32>, tensor<4096xf32>,
        tensor<4096xf32>, tensor<4096xf32>, tensor<4096xf32>)
  return %r#0, %r#1, %r#2, %r#3, %r#4, %r#5, %r#6
      : tensor<4096xf32>, tensor<4096xf32>, tensor<4096xf32>, tensor<4096xf32>,
        tensor<4096xf32>, tensor<4096xf32>, tensor<4096xf32>
}
