// Autocast to bf16 (as torch.autocast(dtype=torch.bfloat16) traces): f32
// parameters and inputs, the matrix product and the activation in bf16, the
// result back in f32. `%reference` computes the same in f32.
#map = affine_map<(i, j) -> (i, j)>
#ma = affine_map<(m, n, k) -> (m, k)>
#mb = affine_map<(m, n, k) -> (n, k)>
#mc = affine_map<(m, n, k) -> (m, n)>
module {
  func.func @forward(%w: tensor<16x32xf32> {zest.param = "fc.weight"},
                     %x: tensor<4x32xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
    %eb = tensor.empty() : tensor<16x32xbf16>
    %wb = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
        ins(%w : tensor<16x32xf32>) outs(%eb : tensor<16x32xbf16>) {
    ^bb0(%in: f32, %out: bf16):
      %t = arith.truncf %in : f32 to bf16
      linalg.yield %t : bf16
    } -> tensor<16x32xbf16>
    %ex = tensor.empty() : tensor<4x32xbf16>
    %xb = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
        ins(%x : tensor<4x32xf32>) outs(%ex : tensor<4x32xbf16>) {
    ^bb0(%in: f32, %out: bf16):
      %t = arith.truncf %in : f32 to bf16
      linalg.yield %t : bf16
    } -> tensor<4x32xbf16>
    %zb = arith.constant 0.0 : bf16
    %ey = tensor.empty() : tensor<4x16xbf16>
    %yz = linalg.fill ins(%zb : bf16) outs(%ey : tensor<4x16xbf16>) -> tensor<4x16xbf16>
    %yb = linalg.matmul indexing_maps = [#ma, #mb, #mc]
        ins(%xb, %wb : tensor<4x32xbf16>, tensor<16x32xbf16>) outs(%yz : tensor<4x16xbf16>) -> tensor<4x16xbf16>
    %e = tensor.empty() : tensor<4x16xf32>
    %y = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
        ins(%yb : tensor<4x16xbf16>) outs(%e : tensor<4x16xf32>) {
    ^bb0(%in: bf16, %out: f32):
      %g = math.tanh %in : bf16
      %r = arith.extf %g : bf16 to f32
      linalg.yield %r : f32
    } -> tensor<4x16xf32>
    %z = arith.constant 0.0 : f32
    %yz32 = linalg.fill ins(%z : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
    %y32 = linalg.matmul indexing_maps = [#ma, #mb, #mc]
        ins(%x, %w : tensor<4x32xf32>, tensor<16x32xf32>) outs(%yz32 : tensor<4x16xf32>) -> tensor<4x16xf32>
    %reference = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
        ins(%y32 : tensor<4x16xf32>) outs(%e : tensor<4x16xf32>) {
    ^bb0(%in: f32, %out: f32):
      %g = math.tanh %in : f32
      linalg.yield %g : f32
    } -> tensor<4x16xf32>
    return %y, %reference : tensor<4x16xf32>, tensor<4x16xf32>
  }
}
