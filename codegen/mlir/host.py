"""Run exported MLIR on the host: lowered by the real tools, compiled, and called
with numpy arrays passed as memref descriptors (``llvm.emit_c_interface``).

Several kernels build as one module (one mlir-opt, mlir-translate and clang run):
:func:`build_many`.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping, Sequence

import numpy as np

from codegen.mlir import tools
from codegen.mlir.emit import MLIRSource
from codegen.mlir.export import generate
from polyc.ir.inputs import prepare
from polyc.ir.kernel import Kernel


def _descriptor(rank: int):
    fields = [
        ("allocated", ctypes.c_void_p),
        ("aligned", ctypes.c_void_p),
        ("offset", ctypes.c_int64),
    ]
    if rank:
        fields += [
            ("sizes", ctypes.c_int64 * rank),
            ("strides", ctypes.c_int64 * rank),
        ]
    return type(f"MemRef{rank}D", (ctypes.Structure,), {"_fields_": fields})


def descriptor(a: np.ndarray):
    """A memref descriptor viewing the contiguous array ``a``."""
    d = _descriptor(a.ndim)()
    ptr = a.ctypes.data
    d.allocated = d.aligned = ptr
    d.offset = 0
    if a.ndim:
        d.sizes[:] = list(a.shape)
        d.strides[:] = [s // a.itemsize for s in a.strides]
    return d


class MLIRModule:
    """A kernel compiled through MLIR: ``module(**inputs) -> {output: array}``."""

    def __init__(self, kernel: Kernel, source: MLIRSource, lib: ctypes.CDLL):
        self.kernel = kernel
        self.source = source
        self._fn = getattr(lib, f"_mlir_ciface_{source.function}")
        self._fn.restype = None

    def __call__(self, inputs: Mapping[str, object] | None = None, **kwargs):
        arrays, params = prepare(self.kernel, {**(inputs or {}), **kwargs})
        descs = [descriptor(arrays[a]) for a in self.source.arrays]
        args = [ctypes.c_int64(int(params[p])) for p in self.source.params]
        args += [ctypes.byref(d) for d in descs]
        self._fn(*args)
        return {a.name: arrays[a.name] for a in self.kernel.outputs}


def build_many(kernels: Sequence[Kernel]) -> list[MLIRModule]:
    """Export, lower, compile (one shared library, cached) and load ``kernels``.
    A placed kernel runs with its copies as element loops between the arrays and
    its buffers (``affine.dma_start`` has no lowering to LLVM).

    Raises:
        CodegenError: when a tool is missing or refuses the text.
    """
    sources = [generate(k, f"k{i}_{k.name}", dma=False) for i, k in enumerate(kernels)]
    text = "module {\n" + "".join(s.func for s in sources) + "}\n"
    lib = ctypes.CDLL(str(tools.shared_library(text)))
    return [MLIRModule(k, s, lib) for k, s in zip(kernels, sources)]


def build(kernel: Kernel) -> MLIRModule:
    """One kernel through MLIR (see :func:`build_many`)."""
    return build_many([kernel])[0]
