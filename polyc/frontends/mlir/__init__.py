"""MLIR affine programs -> Kernels (``polyc.from_mlir``)."""
