"""The user-facing entry points that sit at the end of the pipeline."""

from __future__ import annotations

from polyc.ir import Kernel


def build(kernel: Kernel, **options):
    """Compile ``kernel`` to native host C; returns a callable module.

    ``module(**inputs) -> dict[str, np.ndarray]``. Options: ``flags`` (extra C
    compiler flags).

    Raises:
        CodegenError: when the C compiler fails.
        InputError: (when called) for missing or mis-shaped inputs.
    """
    from codegen.host import build as host_build

    return host_build(kernel, **options)
