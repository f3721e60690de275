// A bag-of-words regressor with a tied embedding: token ids select rows of
// embed.weight, averaged per sample; the same matrix projects back to the
// vocabulary (like a language model's tied input/output embedding).
//
//   h[b, :]   = mean_t E[ids[b, t], :]       E: embed.weight [12, 8]
//   logits    = h E^T + head.bias            ids: [4, 3] in [0, 12)
//   loss      = mean((logits - y)^2)
//
// E gets gradient from both uses: dE = dlogits^T h + scatter(dh) / T.

#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#km = affine_map<(m, n, k) -> (k, m)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id2 = affine_map<(i, j) -> (i, j)>
#scalar = affine_map<() -> ()>

module attributes {zest.module_classes = {"embed" = "Embedding", "head" = "Head"}} {
  func.func @train_step(
      %emb: tensor<12x8xf32> {zest.param = "embed.weight"},
      %bias: tensor<12xf32> {zest.param = "head.bias"},
      %ids: tensor<4x3xi64>, %y: tensor<4x12xf32>)
      -> (tensor<f32> {zest.loss},
          tensor<12x8xf32> {zest.grad = "embed.weight"},
          tensor<12xf32> {zest.grad = "head.bias"}) {
    %zero = arith.constant 0.0 : f32
    %inv_t = arith.constant 0.333333343 : f32
    %inv_n = arith.constant 0.020833334 : f32    // 1 / (4 * 12)
    %two_inv_n = arith.constant 0.041666668 : f32

    // ---- forward ----
    %e_h = tensor.empty() : tensor<4x8xf32>
    %z_h = linalg.fill ins(%zero : f32) outs(%e_h : tensor<4x8xf32>) -> tensor<4x8xf32>
    %sum = linalg.generic {
        indexing_maps = [affine_map<(b, d, t) -> (b, t)>, affine_map<(b, d, t) -> (b, d)>],
        iterator_types = ["parallel", "parallel", "reduction"]}
        ins(%ids : tensor<4x3xi64>) outs(%z_h : tensor<4x8xf32>) {
    ^bb0(%id: i64, %acc: f32):
      %d = linalg.index 1 : index
      %row = arith.index_cast %id : i64 to index
      %v = tensor.extract %emb[%row, %d] : tensor<12x8xf32>
      %s = arith.addf %acc, %v : f32
      linalg.yield %s : f32
    } -> tensor<4x8xf32>
    %h = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
        ins(%sum : tensor<4x8xf32>) outs(%e_h : tensor<4x8xf32>) {
    ^bb0(%a: f32, %o: f32):
      %m = arith.mulf %a, %inv_t : f32
      linalg.yield %m : f32
    } -> tensor<4x8xf32>
    %e_o = tensor.empty() : tensor<4x12xf32>
    %bb = linalg.broadcast ins(%bias : tensor<12xf32>) outs(%e_o : tensor<4x12xf32>) dimensions = [0]
    %logits = linalg.matmul indexing_maps = [#mk, #nk, #mn]
        ins(%h, %emb : tensor<4x8xf32>, tensor<12x8xf32>)
        outs(%bb : tensor<4x12xf32>) -> tensor<4x12xf32>

    // ---- loss ----
    %diff = linalg.sub ins(%logits, %y : tensor<4x12xf32>, tensor<4x12xf32>) outs(%e_o : tensor<4x12xf32>) -> tensor<4x12xf32>
    %sq = linalg.mul ins(%diff, %diff : tensor<4x12xf32>, tensor<4x12xf32>) outs(%e_o : tensor<4x12xf32>) -> tensor<4x12xf32>
    %e_s = tensor.empty() : tensor<f32>
    %z_s = linalg.fill ins(%zero : f32) outs(%e_s : tensor<f32>) -> tensor<f32>
    %total = linalg.reduce ins(%sq : tensor<4x12xf32>) outs(%z_s : tensor<f32>) dimensions = [0, 1]
      (%in: f32, %acc: f32) {
        %s = arith.addf %in, %acc : f32
        linalg.yield %s : f32
      }
    %loss = linalg.generic {indexing_maps = [#scalar, #scalar], iterator_types = []}
        ins(%total : tensor<f32>) outs(%e_s : tensor<f32>) {
    ^bb0(%a: f32, %o: f32):
      %m = arith.mulf %a, %inv_n : f32
      linalg.yield %m : f32
    } -> tensor<f32>

    // ---- backward ----
    %dlogits = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
        ins(%diff : tensor<4x12xf32>) outs(%e_o : tensor<4x12xf32>) {
    ^bb0(%a: f32, %o: f32):
      %m = arith.mulf %a, %two_inv_n : f32
      linalg.yield %m : f32
    } -> tensor<4x12xf32>
    %e_b = tensor.empty() : tensor<12xf32>
    %z_b = linalg.fill ins(%zero : f32) outs(%e_b : tensor<12xf32>) -> tensor<12xf32>
    %dbias = linalg.reduce ins(%dlogits : tensor<4x12xf32>) outs(%z_b : tensor<12xf32>) dimensions = [0]
      (%in: f32, %acc: f32) {
        %s = arith.addf %in, %acc : f32
        linalg.yield %s : f32
      }
    // Output projection: dE_head = dlogits^T h, dh = dlogits E.
    %e_w = tensor.empty() : tensor<12x8xf32>
    %z_w = linalg.fill ins(%zero : f32) outs(%e_w : tensor<12x8xf32>) -> tensor<12x8xf32>
    %de_head = linalg.matmul indexing_maps = [#km, #kn, #mn]
        ins(%dlogits, %h : tensor<4x12xf32>, tensor<4x8xf32>)
        outs(%z_w : tensor<12x8xf32>) -> tensor<12x8xf32>
    %z_dh = linalg.fill ins(%zero : f32) outs(%e_h : tensor<4x8xf32>) -> tensor<4x8xf32>
    %dh = linalg.matmul ins(%dlogits, %emb : tensor<4x12xf32>, tensor<12x8xf32>)
        outs(%z_dh : tensor<4x8xf32>) -> tensor<4x8xf32>
    // Lookup: dE[v, d] += sum_{b, t} [ids[b, t] == v] dh[b, d] / T, on top
    // of the projection's gradient.
    %de = linalg.generic {
        indexing_maps = [affine_map<(v, d, b, t) -> (b, t)>, affine_map<(v, d, b, t) -> (b, d)>,
                         affine_map<(v, d, b, t) -> (v, d)>],
        iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
        ins(%ids, %dh : tensor<4x3xi64>, tensor<4x8xf32>) outs(%de_head : tensor<12x8xf32>) {
    ^bb0(%id: i64, %g: f32, %acc: f32):
      %v = linalg.index 0 : index
      %vi = arith.index_cast %v : index to i64
      %hit = arith.cmpi eq, %id, %vi : i64
      %scaled = arith.mulf %g, %inv_t : f32
      %add = arith.select %hit, %scaled, %zero : f32
      %s = arith.addf %acc, %add : f32
      linalg.yield %s : f32
    } -> tensor<12x8xf32>
    return %loss, %de, %dbias : tensor<f32>, tensor<12x8xf32>, tensor<12xf32>
  }
}
