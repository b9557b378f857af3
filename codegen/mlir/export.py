"""``polyc.to_mlir``: the emitter a kernel needs (host form, or placed with DMA)."""

from __future__ import annotations

from codegen.mlir.emit import MLIREmitter, MLIRSource
from codegen.mlir.placed import PlacedMLIREmitter, is_placed
from polyc.errors import CodegenError
from polyc.ir.kernel import Kernel


def to_mlir(kernel: Kernel, function: str | None = None) -> str:
    """The kernel (as written, scheduled or placed) as affine-dialect MLIR text.

    Raises:
        CodegenError: for a bound, guard or body with no affine/arith form, and
            for a gather (a data-dependent index: :func:`refuse_gathers`).
    """
    return generate(kernel, function).text


def refuse_gathers(kernel: Kernel) -> None:
    """Refuse a kernel that reads through a data-dependent index: the affine
    dialect's loads take affine indices, and a ``memref.load`` of an unchecked
    index out of range is undefined behaviour in MLIR, where every polyc backend
    raises (PyTorch does too).

    Raises:
        CodegenError: naming the statement and its gather.
    """
    for s in kernel.statements:
        if s.gathers:
            raise CodegenError(
                f"to_mlir: {s.name} ({s}) reads through a data-dependent index "
                f"({s.gathers[0]}) because {s.origin or 'its body'} gathers, and "
                "the affine export has no checked form of it (an affine.load "
                "takes affine indices; an unchecked memref.load out of range is "
                "undefined). Export the kernel without the lookup (gather before "
                "it, pass the rows as an input), or run it with polyc.build or "
                "polyc.compile."
            )


def generate(
    kernel: Kernel, function: str | None = None, *, dma: bool = True
) -> MLIRSource:
    """The MLIR module of ``kernel`` and how to call it. ``dma=False`` writes a
    placed kernel's copies as element loops (the form the host lowering runs).

    Raises:
        CodegenError: as :func:`to_mlir`.
    """
    refuse_gathers(kernel)
    if is_placed(kernel):
        return PlacedMLIREmitter(kernel, function, dma).generate()
    return MLIREmitter(kernel, function).generate()
