// Input for zestc(-memory-budget).test: a gradient naming no parameter.
func.func @step(%w: tensor<4xf32> {zest.param = "fc.weight"})
    -> (f32 {zest.loss}, tensor<4xf32> {zest.grad = "fc.bias"}) {
  %c0 = arith.constant 0 : index
  %l = tensor.extract %w[%c0] : tensor<4xf32>
  return %l, %w : f32, tensor<4xf32>
}
