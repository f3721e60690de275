// A 2-layer MLP training step, forward and backward written out in linalg on
// tensors (the form torch-mlir / IREE produce):
//
//   h    = relu(x W0^T + b0)          layers.0: Linear(16 -> 32)
//   out  = h W1^T + b1                layers.1: Linear(32 -> 4)
//   loss = mean((out - y)^2)          MSE over the per-rank micro-batch
//
// Per-rank micro-batch: 8 samples. Gradients are those of `loss`.

#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#km = affine_map<(m, n, k) -> (k, m)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id2 = affine_map<(i, j) -> (i, j)>
#scalar = affine_map<() -> ()>

module attributes {zest.module_classes = {"layers.0" = "Linear", "layers.1" = "Linear"}} {
  func.func @train_step(
      %w0: tensor<32x16xf32> {zest.param = "layers.0.weight"},
      %b0: tensor<32xf32> {zest.param = "layers.0.bias"},
      %w1: tensor<4x32xf32> {zest.param = "layers.1.weight"},
      %b1: tensor<4xf32> {zest.param = "layers.1.bias"},
      %x: tensor<8x16xf32>, %y: tensor<8x4xf32>)
      -> (tensor<f32> {zest.loss},
          tensor<32x16xf32> {zest.grad = "layers.0.weight"},
          tensor<32xf32> {zest.grad = "layers.0.bias"},
          tensor<4x32xf32> {zest.grad = "layers.1.weight"},
          tensor<4xf32> {zest.grad = "layers.1.bias"}) {
    %zero = arith.constant 0.0 : f32
    %inv_n = arith.constant 0.03125 : f32   // 1 / (8 * 4)
    %two_inv_n = arith.constant 0.0625 : f32 // 2 / (8 * 4)

    // ---- forward ----
    %e_h = tensor.empty() : tensor<8x32xf32>
    %b0b = linalg.broadcast ins(%b0 : tensor<32xf32>) outs(%e_h : tensor<8x32xf32>) dimensions = [0]
    %z0 = linalg.matmul indexing_maps = [#mk, #nk, #mn]
        ins(%x, %w0 : tensor<8x16xf32>, tensor<32x16xf32>)
        outs(%b0b : tensor<8x32xf32>) -> tensor<8x32xf32>
    %h = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
        ins(%z0 : tensor<8x32xf32>) outs(%e_h : tensor<8x32xf32>) {
    ^bb0(%a: f32, %o: f32):
      %r = arith.maximumf %a, %zero : f32
      linalg.yield %r : f32
    } -> tensor<8x32xf32>
    %e_o = tensor.empty() : tensor<8x4xf32>
    %b1b = linalg.broadcast ins(%b1 : tensor<4xf32>) outs(%e_o : tensor<8x4xf32>) dimensions = [0]
    %out = linalg.matmul indexing_maps = [#mk, #nk, #mn]
        ins(%h, %w1 : tensor<8x32xf32>, tensor<4x32xf32>)
        outs(%b1b : tensor<8x4xf32>) -> tensor<8x4xf32>

    // ---- loss ----
    %diff = linalg.sub ins(%out, %y : tensor<8x4xf32>, tensor<8x4xf32>) outs(%e_o : tensor<8x4xf32>) -> tensor<8x4xf32>
    %sq = linalg.mul ins(%diff, %diff : tensor<8x4xf32>, tensor<8x4xf32>) outs(%e_o : tensor<8x4xf32>) -> tensor<8x4xf32>
    %e_s = tensor.empty() : tensor<f32>
    %z_s = linalg.fill ins(%zero : f32) outs(%e_s : tensor<f32>) -> tensor<f32>
    %sum = linalg.reduce ins(%sq : tensor<8x4xf32>) outs(%z_s : tensor<f32>) dimensions = [0, 1]
      (%in: f32, %acc: f32) {
        %s = arith.addf %in, %acc : f32
        linalg.yield %s : f32
      }
    %loss = linalg.generic {indexing_maps = [#scalar, #scalar], iterator_types = []}
        ins(%sum : tensor<f32>) outs(%e_s : tensor<f32>) {
    ^bb0(%a: f32, %o: f32):
      %m = arith.mulf %a, %inv_n : f32
      linalg.yield %m : f32
    } -> tensor<f32>

    // ---- backward ----
    %dout = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
        ins(%diff : tensor<8x4xf32>) outs(%e_o : tensor<8x4xf32>) {
    ^bb0(%a: f32, %o: f32):
      %m = arith.mulf %a, %two_inv_n : f32
      linalg.yield %m : f32
    } -> tensor<8x4xf32>
    // layers.1: dW1 = dout^T h, db1 = sum_batch dout, dh = dout W1
    %e_w1 = tensor.empty() : tensor<4x32xf32>
    %z_w1 = linalg.fill ins(%zero : f32) outs(%e_w1 : tensor<4x32xf32>) -> tensor<4x32xf32>
    %dw1 = linalg.matmul indexing_maps = [#km, #kn, #mn]
        ins(%dout, %h : tensor<8x4xf32>, tensor<8x32xf32>)
        outs(%z_w1 : tensor<4x32xf32>) -> tensor<4x32xf32>
    %e_b1 = tensor.empty() : tensor<4xf32>
    %z_b1 = linalg.fill ins(%zero : f32) outs(%e_b1 : tensor<4xf32>) -> tensor<4xf32>
    %db1 = linalg.reduce ins(%dout : tensor<8x4xf32>) outs(%z_b1 : tensor<4xf32>) dimensions = [0]
      (%in: f32, %acc: f32) {
        %s = arith.addf %in, %acc : f32
        linalg.yield %s : f32
      }
    %z_h = linalg.fill ins(%zero : f32) outs(%e_h : tensor<8x32xf32>) -> tensor<8x32xf32>
    %dh = linalg.matmul ins(%dout, %w1 : tensor<8x4xf32>, tensor<4x32xf32>)
        outs(%z_h : tensor<8x32xf32>) -> tensor<8x32xf32>
    // relu backward
    %dz0 = linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel", "parallel"]}
        ins(%dh, %z0 : tensor<8x32xf32>, tensor<8x32xf32>) outs(%e_h : tensor<8x32xf32>) {
    ^bb0(%d: f32, %z: f32, %o: f32):
      %pos = arith.cmpf ogt, %z, %zero : f32
      %r = arith.select %pos, %d, %zero : f32
      linalg.yield %r : f32
    } -> tensor<8x32xf32>
    // layers.0: dW0 = dz0^T x, db0 = sum_batch dz0
    %e_w0 = tensor.empty() : tensor<32x16xf32>
    %z_w0 = linalg.fill ins(%zero : f32) outs(%e_w0 : tensor<32x16xf32>) -> tensor<32x16xf32>
    %dw0 = linalg.matmul indexing_maps = [#km, #kn, #mn]
        ins(%dz0, %x : tensor<8x32xf32>, tensor<8x16xf32>)
        outs(%z_w0 : tensor<32x16xf32>) -> tensor<32x16xf32>
    %e_b0 = tensor.empty() : tensor<32xf32>
    %z_b0 = linalg.fill ins(%zero : f32) outs(%e_b0 : tensor<32xf32>) -> tensor<32xf32>
    %db0 = linalg.reduce ins(%dz0 : tensor<8x32xf32>) outs(%z_b0 : tensor<32xf32>) dimensions = [0]
      (%in: f32, %acc: f32) {
        %s = arith.addf %in, %acc : f32
        linalg.yield %s : f32
      }
    return %loss, %dw0, %db0, %dw1, %db1
        : tensor<f32>, tensor<32x16xf32>, tensor<32xf32>, tensor<4x32xf32>, tensor<4xf32>
  }
}
