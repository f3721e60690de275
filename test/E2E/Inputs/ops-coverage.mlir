// Forward model using ops beyond the examples: softmax (aggregate), erf, log,
// transpose, pad, integer token ids with an embedding lookup (tensor.extract).
module {
  func.func @forward(%w: tensor<8x4xf32> {zest.param = "proj.weight"},
                     %e: tensor<10x4xf32> {zest.param = "embed.weight"},
                     %x: tensor<2x4xf32>, %ids: tensor<2x3xi64>) -> (tensor<2x8xf32>, tensor<4x2xf32>, tensor<2x11xf32>, tensor<2x3x4xf32>) {
    %zero = arith.constant 0.0 : f32
    %e0 = tensor.empty() : tensor<2x8xf32>
    %z = linalg.fill ins(%zero : f32) outs(%e0 : tensor<2x8xf32>) -> tensor<2x8xf32>
    %y = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>] ins(%x, %w : tensor<2x4xf32>, tensor<8x4xf32>) outs(%z : tensor<2x8xf32>) -> tensor<2x8xf32>
    %s = linalg.softmax dimension(1) ins(%y : tensor<2x8xf32>) outs(%e0 : tensor<2x8xf32>) -> tensor<2x8xf32>
    %g = linalg.map { math.erf } ins(%s : tensor<2x8xf32>) outs(%e0 : tensor<2x8xf32>)
    %l = linalg.map { math.log } ins(%g : tensor<2x8xf32>) outs(%e0 : tensor<2x8xf32>)
    %et = tensor.empty() : tensor<4x2xf32>
    %t = linalg.transpose ins(%x : tensor<2x4xf32>) outs(%et : tensor<4x2xf32>) permutation = [1, 0]
    %p = tensor.pad %l low[0, 1] high[0, 2] { ^bb0(%i: index, %j: index): tensor.yield %zero : f32 } : tensor<2x8xf32> to tensor<2x11xf32>
    %eg = tensor.empty() : tensor<2x3x4xf32>
    %emb = linalg.generic {indexing_maps = [affine_map<(b, t, d) -> (b, t)>, affine_map<(b, t, d) -> (b, t, d)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%ids : tensor<2x3xi64>) outs(%eg : tensor<2x3x4xf32>) {
    ^bb0(%id: i64, %o: f32):
      %d = linalg.index 2 : index
      %row = arith.index_cast %id : i64 to index
      %v = tensor.extract %e[%row, %d] : tensor<10x4xf32>
      linalg.yield %v : f32
    } -> tensor<2x3x4xf32>
    return %y, %t, %p, %emb : tensor<2x8xf32>, tensor<4x2xf32>, tensor<2x11xf32>, tensor<2x3x4xf32>
  }
}
