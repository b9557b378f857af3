// A model layer as an MLIR producer writes it: matmul, bias and ReLU in linalg
// on tensors. docs/mlir.md: mlir-opt lowers it to affine loops, polyc imports,
// schedules and places it, and the simulator runs it on edge-npu.
func.func @mlp(%x: tensor<16x32xf32>, %w: tensor<32x24xf32>, %b: tensor<24xf32>) -> tensor<16x24xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<16x24xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%empty : tensor<16x24xf32>) -> tensor<16x24xf32>
  %mm = linalg.matmul ins(%x, %w : tensor<16x32xf32>, tensor<32x24xf32>)
                      outs(%acc : tensor<16x24xf32>) -> tensor<16x24xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>,
                                        affine_map<(i, j) -> (j)>,
                                        affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
       ins(%mm, %b : tensor<16x24xf32>, tensor<24xf32>) outs(%empty : tensor<16x24xf32>) {
  ^bb0(%m: f32, %bb: f32, %o: f32):
    %s = arith.addf %m, %bb : f32
    %r = arith.maximumf %s, %zero : f32
    linalg.yield %r : f32
  } -> tensor<16x24xf32>
  return %y : tensor<16x24xf32>
}
