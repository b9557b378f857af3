"""polyc: a polyhedral loop-nest scheduling compiler for ML accelerators.

The package imports lazily: ``import polyc`` loads the IR only; the op library, the
interpreter, code generation and the frontends load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from polyc import errors as _errors
from polyc.errors import *  # noqa: F403 (the error classes, listed once: polyc/errors.py)

__version__ = "0.1.0"

_LAZY = {
    "Kernel": ("polyc.ir", "Kernel"),
    "Array": ("polyc.ir", "Array"),
    "Statement": ("polyc.ir", "Statement"),
    "Role": ("polyc.ir", "Role"),
    "interpret": ("polyc.oracle.interpreter", "interpret"),
    "build": ("polyc.api", "build"),
    "compile": ("polyc.api", "compile"),
    "from_torch": ("polyc.frontends.torch.export", "from_torch"),
    "from_c": ("polyc.frontends.c.parse", "from_c"),
    "to_mlir": ("polyc.api", "to_mlir"),
    "from_mlir": ("polyc.frontends.mlir.parse", "from_mlir"),
    "ops": ("polyc.ops", None),
    "compute": ("polyc.lang.compute", None),
    "dtypes": ("polyc.ir.dtypes", None),
    # polyc.sweep is a callable module: polyc.sweep(points) runs a study
    "sweep": ("polyc.studies.sweep", None),
    "explain": ("polyc.studies.explain", "explain"),
    "verify": ("polyc.oracle.verify", None),
    # the compile stages, top to bottom (POLYC_DEBUG prints after each)
    "stages": ("polyc.stages", None),
}

__all__ = [*_errors.__all__, *_LAZY]


def __getattr__(name: str):
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'polyc' has no attribute {name!r}")
    module = importlib.import_module(target[0])
    value = module if target[1] is None else getattr(module, target[1])
    globals()[name] = value
    return value


if TYPE_CHECKING:  # pragma: no cover
    from polyc.api import build, compile, to_mlir
    from polyc.frontends.mlir.parse import from_mlir
    from polyc.ir.kernel import Array, Kernel, Role, Statement
    from polyc.oracle.interpreter import interpret
