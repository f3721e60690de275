// Linear regression whose loss is a plain f32 result (the contract allows a
// float scalar loss), with a scalar bias parameter.
module {
  func.func @train_step(%w: tensor<3xf32> {zest.param = "w"}, %b: tensor<f32> {zest.param = "b"},
                        %x: tensor<4x3xf32>, %y: tensor<4xf32>)
      -> (f32 {zest.loss}, tensor<3xf32> {zest.grad = "w"}, tensor<f32> {zest.grad = "b"}) {
    %zero = arith.constant 0.0 : f32
    %quarter = arith.constant 0.25 : f32
    %half = arith.constant 0.5 : f32
    %e4 = tensor.empty() : tensor<4xf32>
    %bb = linalg.broadcast ins(%b : tensor<f32>) outs(%e4 : tensor<4xf32>) dimensions = [0]
    %pred = linalg.matvec ins(%x, %w : tensor<4x3xf32>, tensor<3xf32>) outs(%bb : tensor<4xf32>) -> tensor<4xf32>
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
    %loss = arith.mulf %total, %quarter : f32
    // d loss / d pred = diff / 2
    %g = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
        ins(%diff : tensor<4xf32>) outs(%e4 : tensor<4xf32>) {
    ^bb0(%d: f32, %o: f32):
      %m = arith.mulf %d, %half : f32
      linalg.yield %m : f32
    } -> tensor<4xf32>
    %e3 = tensor.empty() : tensor<3xf32>
    %z3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<3xf32>) -> tensor<3xf32>
    %dw = linalg.vecmat ins(%g, %x : tensor<4xf32>, tensor<4x3xf32>) outs(%z3 : tensor<3xf32>) -> tensor<3xf32>
    %db = linalg.reduce ins(%g : tensor<4xf32>) outs(%zs : tensor<f32>) dimensions = [0]
      (%in: f32, %acc: f32) {
        %s = arith.addf %in, %acc : f32
        linalg.yield %s : f32
      }
    return %loss, %dw, %db : f32, tensor<3xf32>, tensor<f32>
  }
}
