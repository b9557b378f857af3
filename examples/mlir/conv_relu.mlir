// A 3x3 convolution and ReLU in linalg on tensors (see examples/mlir/mlp.mlir).
func.func @conv_relu(%x: tensor<1x8x10x10xf32>, %w: tensor<16x8x3x3xf32>) -> tensor<1x16x8x8xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<1x16x8x8xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%empty : tensor<1x16x8x8xf32>) -> tensor<1x16x8x8xf32>
  %c = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
       ins(%x, %w : tensor<1x8x10x10xf32>, tensor<16x8x3x3xf32>) outs(%acc : tensor<1x16x8x8xf32>) -> tensor<1x16x8x8xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(n, c, h, w) -> (n, c, h, w)>, affine_map<(n, c, h, w) -> (n, c, h, w)>],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
       ins(%c : tensor<1x16x8x8xf32>) outs(%empty : tensor<1x16x8x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = arith.maximumf %v, %zero : f32
    linalg.yield %r : f32
  } -> tensor<1x16x8x8xf32>
  return %y : tensor<1x16x8x8xf32>
}
