// A forward-only (inference) model, ZeRO-Inference style: a 3-layer MLP
// classifier head returning logits. No zest.loss, no gradients: sharding
// only gathers parameters before use.
//
//   logits = fc3(relu(fc2(relu(fc1(x)))))   16 -> 64 -> 64 -> 10, batch 4

#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id2 = affine_map<(i, j) -> (i, j)>

module attributes {zest.module_classes = {"fc1" = "Linear", "fc2" = "Linear", "fc3" = "Linear"}} {
  func.func @forward(
      %w1: tensor<64x16xf32> {zest.param = "fc1.weight"},
      %b1: tensor<64xf32> {zest.param = "fc1.bias"},
      %w2: tensor<64x64xf32> {zest.param = "fc2.weight"},
      %b2: tensor<64xf32> {zest.param = "fc2.bias"},
      %w3: tensor<10x64xf32> {zest.param = "fc3.weight"},
      %b3: tensor<10xf32> {zest.param = "fc3.bias"},
      %x: tensor<4x16xf32>) -> tensor<4x10xf32> {
    %zero = arith.constant 0.0 : f32
    %e_h = tensor.empty() : tensor<4x64xf32>
    %b1b = linalg.broadcast ins(%b1 : tensor<64xf32>) outs(%e_h : tensor<4x64xf32>) dimensions = [0]
    %z1 = linalg.matmul indexing_maps = [#mk, #nk, #mn]
        ins(%x, %w1 : tensor<4x16xf32>, tensor<64x16xf32>)
        outs(%b1b : tensor<4x64xf32>) -> tensor<4x64xf32>
    %h1 = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
        ins(%z1 : tensor<4x64xf32>) outs(%e_h : tensor<4x64xf32>) {
    ^bb0(%a: f32, %o: f32):
      %r = arith.maximumf %a, %zero : f32
      linalg.yield %r : f32
    } -> tensor<4x64xf32>
    %b2b = linalg.broadcast ins(%b2 : tensor<64xf32>) outs(%e_h : tensor<4x64xf32>) dimensions = [0]
    %z2 = linalg.matmul indexing_maps = [#mk, #nk, #mn]
        ins(%h1, %w2 : tensor<4x64xf32>, tensor<64x64xf32>)
        outs(%b2b : tensor<4x64xf32>) -> tensor<4x64xf32>
    %h2 = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
        ins(%z2 : tensor<4x64xf32>) outs(%e_h : tensor<4x64xf32>) {
    ^bb0(%a: f32, %o: f32):
      %r = arith.maximumf %a, %zero : f32
      linalg.yield %r : f32
    } -> tensor<4x64xf32>
    %e_o = tensor.empty() : tensor<4x10xf32>
    %b3b = linalg.broadcast ins(%b3 : tensor<10xf32>) outs(%e_o : tensor<4x10xf32>) dimensions = [0]
    %logits = linalg.matmul indexing_maps = [#mk, #nk, #mn]
        ins(%h2, %w3 : tensor<4x64xf32>, tensor<10x64xf32>)
        outs(%b3b : tensor<4x10xf32>) -> tensor<4x10xf32>
    return %logits : tensor<4x10xf32>
  }
}
