"""``polyc.to_mlir``: the emitter a kernel needs (host form, or placed with DMA)."""

from __future__ import annotations

from codegen.mlir.emit import MLIREmitter, MLIRSource
from codegen.mlir.placed import PlacedMLIREmitter, is_placed
from polyc.ir.kernel import Kernel


def to_mlir(kernel: Kernel, function: str | None = None) -> str:
    """The kernel (as written, scheduled or placed) as affine-dialect MLIR text.

    Raises:
        CodegenError: for a bound, guard or body with no affine/arith form.
    """
    return generate(kernel, function).text


def generate(
    kernel: Kernel, function: str | None = None, *, dma: bool = True
) -> MLIRSource:
    """The MLIR module of ``kernel`` and how to call it. ``dma=False`` writes a
    placed kernel's copies as element loops (the form the host lowering runs)."""
    if is_placed(kernel):
        return PlacedMLIREmitter(kernel, function, dma).generate()
    return MLIREmitter(kernel, function).generate()
