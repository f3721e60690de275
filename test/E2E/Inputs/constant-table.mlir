// A step that adds a constant table (not a splat: a memref.global once
// bufferized) to its prediction.
module {
  func.func @train(%w: tensor<3xf32> {zest.param = "w"}, %x: tensor<4x3xf32>,
                   %y: tensor<4xf32>) -> (f32 {zest.loss}, tensor<3xf32> {zest.grad = "w"}) {
    %zero = arith.constant 0.0 : f32
    %table = arith.constant dense<[0.5, -0.25, 0.125, 1.0]> : tensor<4xf32>
    %e4 = tensor.empty() : tensor<4xf32>
    %z4 = linalg.fill ins(%zero : f32) outs(%e4 : tensor<4xf32>) -> tensor<4xf32>
    %pred = linalg.matvec ins(%x, %w : tensor<4x3xf32>, tensor<3xf32>) outs(%z4 : tensor<4xf32>) -> tensor<4xf32>
    %shifted = linalg.add ins(%pred, %table : tensor<4xf32>, tensor<4xf32>) outs(%e4 : tensor<4xf32>) -> tensor<4xf32>
    %diff = linalg.sub ins(%shifted, %y : tensor<4xf32>, tensor<4xf32>) outs(%e4 : tensor<4xf32>) -> tensor<4xf32>
    %sq = linalg.mul ins(%diff, %diff : tensor<4xf32>, tensor<4xf32>) outs(%e4 : tensor<4xf32>) -> tensor<4xf32>
    %es = tensor.empty() : tensor<f32>
    %zs = linalg.fill ins(%zero : f32) outs(%es : tensor<f32>) -> tensor<f32>
    %sum = linalg.reduce ins(%sq : tensor<4xf32>) outs(%zs : tensor<f32>) dimensions = [0]
      (%in: f32, %acc: f32) {
        %s = arith.addf %in, %acc : f32
        linalg.yield %s : f32
      }
    %total = tensor.extract %sum[] : tensor<f32>
    // d loss / d w = 2 x^T diff
    %e3 = tensor.empty() : tensor<3xf32>
    %z3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<3xf32>) -> tensor<3xf32>
    %xt = tensor.empty() : tensor<3x4xf32>
    %xT = linalg.transpose ins(%x : tensor<4x3xf32>) outs(%xt : tensor<3x4xf32>) permutation = [1, 0]
    %g = linalg.matvec ins(%xT, %diff : tensor<3x4xf32>, tensor<4xf32>) outs(%z3 : tensor<3xf32>) -> tensor<3xf32>
    %g2 = linalg.add ins(%g, %g : tensor<3xf32>, tensor<3xf32>) outs(%e3 : tensor<3xf32>) -> tensor<3xf32>
    return %total, %g2 : f32, tensor<3xf32>
  }
}
