// A bf16 linear layer with bias and ReLU (all of it stored in bf16, as a
// model cast to bf16 computes it), the result back in f32; `%reference`
// computes the same in f32. zest-fuse-linear makes the bf16 layer one
// zest_linear_forward_bf16 call.
#map = affine_map<(i, j) -> (i, j)>
#ma = affine_map<(m, n, k) -> (m, k)>
#mb = affine_map<(m, n, k) -> (n, k)>
#mc = affine_map<(m, n, k) -> (m, n)>
module {
  func.func @forward(%w: tensor<16x32xf32> {zest.param = "fc.weight"},
                     %b: tensor<16xf32> {zest.param = "fc.bias"},
                     %x: tensor<4x32xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
    %eb = tensor.empty() : tensor<16x32xbf16>
    %wb = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
        ins(%w : tensor<16x32xf32>) outs(%eb : tensor<16x32xbf16>) {
    ^bb0(%in: f32, %out: bf16):
      %t = arith.truncf %in : f32 to bf16
      linalg.yield %t : bf16
    } -> tensor<16x32xbf16>
    %ebias = tensor.empty() : tensor<16xbf16>
    %bb = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
        ins(%b : tensor<16xf32>) outs(%ebias : tensor<16xbf16>) {
    ^bb0(%in: f32, %out: bf16):
      %t = arith.truncf %in : f32 to bf16
      linalg.yield %t : bf16
    } -> tensor<16xbf16>
    %ex = tensor.empty() : tensor<4x32xbf16>
    %xb = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
        ins(%x : tensor<4x32xf32>) outs(%ex : tensor<4x32xbf16>) {
    ^bb0(%in: f32, %out: bf16):
      %t = arith.truncf %in : f32 to bf16
      linalg.yield %t : bf16
    } -> tensor<4x32xbf16>
    %ey = tensor.empty() : tensor<4x16xbf16>
    %init = linalg.broadcast ins(%bb : tensor<16xbf16>) outs(%ey : tensor<4x16xbf16>) dimensions = [0]
    %yb = linalg.matmul indexing_maps = [#ma, #mb, #mc]
        ins(%xb, %wb : tensor<4x32xbf16>, tensor<16x32xbf16>) outs(%init : tensor<4x16xbf16>) -> tensor<4x16xbf16>
    %zb = arith.constant 0.0 : bf16
    %er = tensor.empty() : tensor<4x16xbf16>
    %rb = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
        ins(%yb : tensor<4x16xbf16>) outs(%er : tensor<4x16xbf16>) {
    ^bb0(%in: bf16, %out: bf16):
      %r = arith.maximumf %in, %zb : bf16
      linalg.yield %r : bf16
    } -> tensor<4x16xbf16>
    %e = tensor.empty() : tensor<4x16xf32>
    %y = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
        ins(%rb : tensor<4x16xbf16>) outs(%e : tensor<4x16xf32>) {
    ^bb0(%in: bf16, %out: f32):
      %r = arith.extf %in : bf16 to f32
      linalg.yield %r : f32
    } -> tensor<4x16xf32>
    %e2 = tensor.empty() : tensor<4x16xf32>
    %init32 = linalg.broadcast ins(%b : tensor<16xf32>) outs(%e2 : tensor<4x16xf32>) dimensions = [0]
    %y32 = linalg.matmul indexing_maps = [#ma, #mb, #mc]
        ins(%x, %w : tensor<4x32xf32>, tensor<16x32xf32>) outs(%init32 : tensor<4x16xf32>) -> tensor<4x16xf32>
    %z = arith.constant 0.0 : f32
    %e3 = tensor.empty() : tensor<4x16xf32>
    %reference = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
        ins(%y32 : tensor<4x16xf32>) outs(%e3 : tensor<4x16xf32>) {
    ^bb0(%in: f32, %out: f32):
      %r = arith.maximumf %in, %z : f32
      linalg.yield %r : f32
    } -> tensor<4x16xf32>
    return %y, %reference : tensor<4x16xf32>, tensor<4x16xf32>
  }
}
