"""The errors polyc raises.

Every user-facing error is a subclass of :class:`PolycError`. A message reads
``<operation>: <what is wrong> because <witness>. <the one fix that helps>`` so that
the user learns what failed, why, and what to do, from the message alone.
"""

from __future__ import annotations


class PolycError(Exception):
    """Root of every error polyc raises on purpose."""


class AffineError(PolycError, ValueError):
    """An index, bound or condition that must be affine is not (``A[i*j]``, ``A[B[i]]``)."""


class ShapeError(PolycError, ValueError):
    """Shapes of operands, or of an operand and its use, do not agree."""


class DTypeError(PolycError, TypeError):
    """Element types of operands do not agree, or a dtype is not supported."""


class ArgumentError(PolycError, TypeError):
    """An op or function was called with an unknown or invalid argument."""


class InputError(PolycError, ValueError):
    """A runtime input (numpy array or parameter value) has the wrong shape or dtype."""


class IndexRangeError(InputError):
    """A data-dependent index (a gather's) read a value outside its array."""


class ReductionError(PolycError, ValueError):
    """A reduction axis is used outside a reduction, or a reduction is malformed."""


class CycleError(PolycError, ValueError):
    """Definitions depend on each other in a cycle."""


class DefinitionError(PolycError, ValueError):
    """A kernel or tensor definition is malformed (e.g. writes out of bounds)."""


class IllegalTransformError(PolycError, ValueError):
    """A transformation would reverse a dependence (the result would change)."""


class ScheduleError(PolycError, ValueError):
    """A schedule or band reference is malformed (unknown band, bad YAML, ...)."""


class PlacementError(PolycError, ValueError):
    """A memory placement does not fit, or is otherwise impossible."""


class FrontendError(PolycError, ValueError):
    """A frontend (torch, C) met a construct it cannot lower."""


class CodegenError(PolycError, RuntimeError):
    """Generating or compiling C failed."""


class ConfigError(PolycError, ValueError):
    """A hardware description is malformed."""


class GridError(ConfigError):
    """A hardware grid (``accelerator.vary``, ``--configs NAME:key=values``) is
    malformed, or one of its points is not a valid description."""


class SimulationError(PolycError, RuntimeError):
    """The simulated accelerator stopped on a violation (e.g. out-of-bounds access)."""


class BudgetError(PolycError, RuntimeError):
    """isl ran past its operation budget (a hard scheduling problem)."""


class SweepError(PolycError, RuntimeError):
    """A sweep could not run at all (its workers would not start, no cluster)."""


class StageError(PolycError, ValueError):
    """``POLYC_DEBUG`` names a compile stage that does not exist (``polyc.stages``)."""


class StoreError(PolycError, RuntimeError):
    """A study database cannot be used (not a study file, or it holds other points
    under the same study name)."""


class VerificationError(PolycError, RuntimeError):
    """A run's outputs differ from the reference interpreter's (``polyc.verify``).

    ``verification`` holds the whole comparison (:class:`polyc.verify.Verification`).
    """

    def __init__(self, message: str, verification=None):
        super().__init__(message)
        self.verification = verification

    def __reduce__(self):
        return type(self), (str(self), self.verification)


#: every error class above, in the order written (``polyc`` re-exports them all)
__all__ = [
    name
    for name, value in list(globals().items())
    if isinstance(value, type) and issubclass(value, PolycError)
]
