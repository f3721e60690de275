// Layers through a private helper (a func.call per layer fed by gathered
// weights), a scalar parameter, and two entry points.
#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#mn = affine_map<(m, n, k) -> (m, n)>
module {
  func.func private @linear(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
    %e = tensor.empty() : tensor<4x8xf32>
    %bb = linalg.broadcast ins(%b : tensor<8xf32>) outs(%e : tensor<4x8xf32>) dimensions = [0]
    %y = linalg.matmul indexing_maps = [#mk, #nk, #mn] ins(%x, %w : tensor<4x8xf32>, tensor<8x8xf32>) outs(%bb : tensor<4x8xf32>) -> tensor<4x8xf32>
    return %y : tensor<4x8xf32>
  }
  func.func @forward(%w0: tensor<8x8xf32> {zest.param = "layers.0.weight"}, %b0: tensor<8xf32> {zest.param = "layers.0.bias"},
                     %w1: tensor<8x8xf32> {zest.param = "layers.1.weight"}, %b1: tensor<8xf32> {zest.param = "layers.1.bias"},
                     %t: tensor<f32> {zest.param = "temperature"},
                     %x: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %h = func.call @linear(%x, %w0, %b0) : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %y = func.call @linear(%h, %w1, %b1) : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %e = tensor.empty() : tensor<4x8xf32>
    %s = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> ()>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%y, %t : tensor<4x8xf32>, tensor<f32>) outs(%e : tensor<4x8xf32>) {
    ^bb0(%a: f32, %tt: f32, %o: f32):
      %m = arith.mulf %a, %tt : f32
      linalg.yield %m : f32
    } -> tensor<4x8xf32>
    return %s : tensor<4x8xf32>
  }
  func.func @forward_first(%w0: tensor<8x8xf32> {zest.param = "layers.0.weight"}, %b0: tensor<8xf32> {zest.param = "layers.0.bias"}, %x: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %h = func.call @linear(%x, %w0, %b0) : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    return %h : tensor<4x8xf32>
  }
}
