"""polyc: a polyhedral loop-nest scheduling compiler for ML accelerators.

The package imports lazily: ``import polyc`` loads the IR only; the op library, the
interpreter, code generation and the frontends load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from polyc.errors import (
    AffineError,
    ArgumentError,
    BudgetError,
    CodegenError,
    ConfigError,
    CycleError,
    DefinitionError,
    DTypeError,
    FrontendError,
    IllegalTransformError,
    InputError,
    PlacementError,
    PolycError,
    ReductionError,
    ScheduleError,
    ShapeError,
    SimulationError,
    SweepError,
    VerificationError,
)

__version__ = "0.1.0"

_LAZY = {
    "Kernel": ("polyc.ir", "Kernel"),
    "Array": ("polyc.ir", "Array"),
    "Statement": ("polyc.ir", "Statement"),
    "Role": ("polyc.ir", "Role"),
    "interpret": ("polyc.interpreter", "interpret"),
    "build": ("polyc.api", "build"),
    "compile": ("polyc.api", "compile"),
    "from_torch": ("polyc.frontend.torch_export", "from_torch"),
    "from_c": ("polyc.frontend.c", "from_c"),
    "ops": ("polyc.ops", None),
    "compute": ("polyc.compute", None),
    "dtypes": ("polyc.dtypes", None),
    # polyc.sweep is a callable module: polyc.sweep(points) runs a study
    "sweep": ("polyc.sweep", None),
    "explain": ("polyc.inspection", "explain"),
    "verify": ("polyc.verify", None),
}

__all__ = [
    "AffineError",
    "ArgumentError",
    "BudgetError",
    "CodegenError",
    "ConfigError",
    "CycleError",
    "DTypeError",
    "DefinitionError",
    "FrontendError",
    "IllegalTransformError",
    "InputError",
    "PlacementError",
    "PolycError",
    "ReductionError",
    "ScheduleError",
    "ShapeError",
    "SimulationError",
    "SweepError",
    "VerificationError",
    *_LAZY,
]


def __getattr__(name: str):
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'polyc' has no attribute {name!r}")
    module = importlib.import_module(target[0])
    value = module if target[1] is None else getattr(module, target[1])
    globals()[name] = value
    return value


if TYPE_CHECKING:  # pragma: no cover
    from polyc.api import build, compile
    from polyc.interpreter import interpret
    from polyc.ir import Array, Kernel, Role, Statement
