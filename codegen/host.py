"""Host target: a Kernel compiled to native C and called with numpy arrays."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from codegen import build as cbuild
from codegen.emit import CEmitter, CSource
from polyc.errors import IndexRangeError
from polyc.ir.inputs import prepare
from polyc.ir.kernel import Kernel


def generate(kernel: Kernel, emitter: type[CEmitter] = CEmitter) -> CSource:
    """The C source of ``kernel`` for the host."""
    return emitter(kernel).generate()


class HostModule:
    """A compiled kernel: ``module(**inputs) -> {output: array}``."""

    def __init__(self, kernel: Kernel, source: CSource, built: cbuild.Built):
        self.kernel = kernel
        self.source = source
        self._ffi = built.ffi
        self._fn = getattr(built.lib, source.function)
        # a kernel that gathers reports an index out of range after the call
        self._gather_error = getattr(built.lib, f"{source.function}_gather_error", None)
        self.path = built.path
        self.cached = built.cached

    @property
    def c_source(self) -> str:
        return self.source.text

    def __call__(
        self, inputs: Mapping[str, object] | None = None, **kwargs
    ) -> dict[str, np.ndarray]:
        arrays, params = prepare(self.kernel, {**(inputs or {}), **kwargs})
        self.call(arrays, params)
        return {a.name: arrays[a.name] for a in self.kernel.outputs}

    def call(self, arrays: dict[str, np.ndarray], params: dict[str, int]) -> None:
        """Run on prepared arrays (no checks: see :func:`polyc.ir.inputs.prepare`)."""
        ffi = self._ffi
        args = [int(params[p]) for p in self.source.params]
        args += [ffi.from_buffer("void *", arrays[a]) for a in self.source.arrays]
        self._fn(*args)
        if self._gather_error is not None:
            record = ffi.new("int64_t[3]")
            if self._gather_error(record):
                value, extent = int(record[1]), int(record[2])
                raise IndexRangeError(
                    f"{self.kernel.name}: a gather read index {value}, outside "
                    f"0..{extent - 1}, because the index data holds it (the host "
                    f"read row 0 instead and the outputs are not valid). Pass "
                    f"indices in 0..{extent - 1} (PyTorch raises on them too)."
                )

    def __repr__(self) -> str:
        return f"<HostModule {self.kernel.name} ({len(self.source.text)} bytes of C)>"


def build(kernel: Kernel, *, flags: tuple[str, ...] = ()) -> HostModule:
    """Generate, compile (cached) and load ``kernel`` for the host.

    Raises:
        CodegenError: when compilation fails.
    """
    source = generate(kernel)
    omp = ("-fopenmp",) if source.uses_openmp else ()
    built = cbuild.build(
        source.text,
        source.cdef,
        name=kernel.name,
        flags=omp + tuple(flags),
        link_flags=omp,
    )
    return HostModule(kernel, source, built)
