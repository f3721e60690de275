// A loss without gradients: an evaluation, run forward only (its loss is
// the checksum).
module {
  func.func @eval(%w: tensor<3xf32> {zest.param = "w"}, %x: tensor<4x3xf32>,
                  %y: tensor<4xf32>) -> (f32 {zest.loss}) {
    %zero = arith.constant 0.0 : f32
    %e4 = tensor.empty() : tensor<4xf32>
    %z4 = linalg.fill ins(%zero : f32) outs(%e4 : tensor<4xf32>) -> tensor<4xf32>
    %pred = linalg.matvec ins(%x, %w : tensor<4x3xf32>, tensor<3xf32>) outs(%z4 : tensor<4xf32>) -> tensor<4xf32>
    %diff = linalg.sub ins(%pred, %y : tensor<4xf32>, tensor<4xf32>) outs(%e4 : tensor<4xf32>) -> tensor<4xf32>
    %sq = linalg.mul ins(%diff, %diff : tensor<4xf32>, tensor<4xf32>) outs(%e4 : tensor<4xf32>) -> tensor<4xf32>
    %es = tensor.empty() : tensor<f32>
    %zs = linalg.fill ins(%zero : f32) outs(%es : tensor<f32>) -> tensor<f32>
    %sum = linalg.reduce ins(%sq : tensor<4xf32>) outs(%zs : tensor<f32>) dimensions = [0]
      (%in: f32, %acc: f32) {
        %s = arith.addf %in, %acc : f32
        linalg.yield %s : f32
      }
    %total = tensor.extract %sum[] : tensor<f32>
    return %total : f32
  }
}
