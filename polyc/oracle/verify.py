"""Verification: a run's outputs against the reference interpreter.

One mechanism serves every path that checks a run (``polyc.compile(..., verify=True)``,
``polyc compile FILE.c --config X --verify``, ``polyc sweep --check``, the
``torch.compile`` backend's ``verify`` option and the differential fuzzer)::

    result = polyc.verify.compare(kernel, inputs, outputs)   # a Verification
    polyc.verify.check(kernel, inputs, outputs)              # raises VerificationError

The reference is ``polyc.interpret(kernel.original, inputs)``: the untransformed
program, run by the interpreter. Every output array is compared element by element:

- integers and booleans: exact (bit for bit);
- floats: ``|got - ref| <= atol + rtol * |ref|`` with ``atol = atol_scale * max|ref|``
  (the largest finite ``|ref|`` of that array), so that an element near zero after
  cancellation is judged against the size of the terms that cancelled, not against
  itself. A schedule may reassociate sums (tiles of a reduction, the MAC array's
  k folds), which changes the rounding but not the value beyond a few ulps per term;

  ========  ======  ==========  ==========================================
  dtype     rtol    atol_scale  why
  ========  ======  ==========  ==========================================
  float64   1e-9    1e-10       eps 2.2e-16: reassociated sums stay far below
  float32   1e-4    1e-5        eps 1.2e-7: ~800 ulps, sums of thousands of terms
  float16   2e-2    2e-2        eps 9.8e-4, and every add rounds to float16
  bfloat16  1.6e-1  1.6e-1      eps 7.8e-3: float16's bounds scaled by the
                                eps ratio (8); contractions sum in float32
  ========  ======  ==========  ==========================================

- NaN and infinities must match exactly: NaN where the reference is NaN, the same
  infinity where it is infinite, and nowhere else.

The interpreter runs the original program in numpy: a verified run costs the run plus
an interpretation that grows with the number of statement instances (0.26 s of CPU
against 0.06 s for the simulated run of a small MobileNet-v1 at 32x32 on edge-npu).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from polyc.errors import VerificationError

__all__ = [
    "TOLERANCES",
    "ArrayCheck",
    "Verification",
    "check",
    "compare",
    "compare_arrays",
    "tolerance",
]

#: dtype name -> (rtol, atol_scale); see the module docstring
TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-9, 1e-10),
    "float32": (1e-4, 1e-5),
    "float16": (2e-2, 2e-2),
    "bfloat16": (1.6e-1, 1.6e-1),
}


def tolerance(dtype) -> tuple[float, float] | None:
    """``(rtol, atol_scale)`` for a float dtype (numpy or polyc), None when exact."""
    name = np.dtype(getattr(dtype, "numpy", dtype)).name
    return TOLERANCES.get(name)


@dataclass(frozen=True)
class ArrayCheck:
    """One output array compared with the interpreter's.

    ``count`` elements of ``size`` differ (0: the array is right); ``index`` is the
    first differing element (row-major order) with ``got`` (the run's value) and
    ``want`` (the interpreter's). ``max_abs_error`` is the largest ``|got - ref|``
    over elements finite in both (infinite when a NaN or an infinity is wrong),
    ``max_rel_error`` that divided by ``max|ref|``.
    ``rtol`` and ``atol`` are the tolerance used (0, 0 for exact dtypes). ``problem``
    is set instead when the array is missing or has the wrong shape.
    """

    name: str
    dtype: str
    shape: tuple[int, ...]
    size: int
    count: int
    index: tuple[int, ...] | None = None
    got: object = None
    want: object = None
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0
    rtol: float = 0.0
    atol: float = 0.0
    problem: str = ""

    @property
    def ok(self) -> bool:
        return self.count == 0 and not self.problem

    def describe(self, run: str = "on the accelerator") -> str:
        """Why this array is wrong, as a message's witness ("" when it is right)."""
        if self.problem:
            return self.problem
        if self.ok:
            return ""
        where = self.name
        if self.index:
            where += f"[{', '.join(map(str, self.index))}]"
        tol = (
            f", tolerance {self.atol:.3g} + {self.rtol:g} * |ref|"
            if self.rtol or self.atol
            else ", integers must match exactly"
        )
        return (
            f"{where} = {_value(self.got)} {run} and {_value(self.want)} in the "
            f"interpreter ({self.count} of {self.size} elements differ, max relative "
            f"error {self.max_rel_error:.3g}{tol})"
        )


@dataclass(frozen=True)
class Verification:
    """The comparison of every output array of a run (see :func:`compare`)."""

    kernel: str
    arrays: tuple[ArrayCheck, ...]

    @property
    def ok(self) -> bool:
        return all(a.ok for a in self.arrays)

    @property
    def wrong(self) -> tuple[ArrayCheck, ...]:
        return tuple(a for a in self.arrays if not a.ok)

    @property
    def max_abs_error(self) -> float:
        return max((a.max_abs_error for a in self.arrays), default=0.0)

    @property
    def max_rel_error(self) -> float:
        return max((a.max_rel_error for a in self.arrays), default=0.0)

    def message(
        self, operation: str = "verify", run: str = "on the accelerator"
    ) -> str:
        """The error message for the first wrong array ("" when all are right)."""
        wrong = self.wrong
        if not wrong:
            return ""
        first = wrong[0]
        others = ""
        if len(wrong) > 1:
            others = f" Output(s) {', '.join(a.name for a in wrong[1:])} differ too."
        return (
            f"{operation}: output {first.name} of {self.kernel} differs from the "
            f"interpreter because {first.describe(run)}.{others} The schedule or the "
            "code generated for it is wrong: report the kernel, the config and the "
            "inputs (polyc.verify.compare lists every array)."
        )

    def raise_if_wrong(
        self, operation: str = "verify", run: str = "on the accelerator"
    ) -> None:
        """Raise :class:`VerificationError` (carrying this result) unless all agree.

        Raises:
            VerificationError: naming the array, its first differing element, both
                values and how many elements differ.
        """
        if not self.ok:
            raise VerificationError(self.message(operation, run), self)

    def __str__(self) -> str:
        lines = [f"verify {self.kernel}: {'ok' if self.ok else 'WRONG'}"]
        for a in self.arrays:
            state = "ok" if a.ok else a.describe("in the run")
            lines.append(
                f"  {a.name} {a.dtype}{list(a.shape)}: {state}; max abs error "
                f"{a.max_abs_error:.3g}, max relative error {a.max_rel_error:.3g}"
            )
        return "\n".join(lines)


def compare(
    kernel,
    inputs: Mapping[str, object],
    outputs: Mapping[str, object],
    params: Mapping[str, int] | None = None,
) -> Verification:
    """Compare a run's ``outputs`` with the interpreter's on ``kernel.original``.

    Args:
        kernel: the Kernel that ran (scheduled or placed: its ``original`` is run).
        inputs: the inputs the run was given (parameter values may be among them).
        outputs: ``{output name: array}`` as the run returned them.
        params: parameter values not given in ``inputs``.

    Returns:
        A :class:`Verification` with one :class:`ArrayCheck` per output array of
        the kernel, in the kernel's order.

    Raises:
        InputError: when the interpreter refuses ``inputs``.
    """
    from polyc.oracle.interpreter import interpret

    want = interpret(kernel.original, inputs, **dict(params or {}))
    dtypes = {a.name: a.dtype.numpy for a in kernel.outputs}
    return compare_arrays(kernel.name, want, outputs, dtypes)


def check(
    kernel,
    inputs: Mapping[str, object],
    outputs: Mapping[str, object],
    params: Mapping[str, int] | None = None,
    *,
    operation: str = "verify",
    run: str = "on the accelerator",
) -> Verification:
    """:func:`compare`, raising when an output differs.

    ``operation`` starts the message; ``run`` says where the outputs came from
    (``"on the accelerator"``, ``"on the host"``).

    Raises:
        VerificationError: naming the array, the first differing element (index),
            both values and how many elements differ; ``err.verification`` holds
            the whole result.
        InputError: when the interpreter refuses ``inputs``.
    """
    result = compare(kernel, inputs, outputs, params)
    result.raise_if_wrong(operation, run)
    return result


def compare_arrays(
    kernel: str,
    want: Mapping[str, np.ndarray],
    outputs: Mapping[str, object],
    dtypes: Mapping[str, object] | None = None,
) -> Verification:
    """Compare ``outputs`` with the reference arrays ``want`` (name -> array).

    ``dtypes`` gives the dtype whose tolerance applies to each array (default: the
    reference's). Used by :func:`compare`; call it directly when the reference is
    already computed.
    """
    checks = []
    for name, ref in want.items():
        ref = np.asarray(ref)
        dtype = np.dtype((dtypes or {}).get(name, ref.dtype))
        got = outputs.get(name)
        checks.append(_compare_one(name, dtype, ref, got))
    return Verification(kernel, tuple(checks))


def _compare_one(name: str, dtype: np.dtype, ref: np.ndarray, got) -> ArrayCheck:
    base = {"name": name, "dtype": dtype.name, "shape": ref.shape, "size": ref.size}
    if got is None:
        return ArrayCheck(
            **base,
            count=ref.size,
            problem=f"the run returned no array {name} (the interpreter gives "
            f"{dtype.name}{list(ref.shape)})",
        )
    got = np.asarray(got)
    if got.shape != ref.shape:
        return ArrayCheck(
            **base,
            count=ref.size,
            problem=f"{name} has shape {got.shape} in the run and {ref.shape} in "
            "the interpreter",
        )
    tol = tolerance(dtype)
    if tol is None:
        return _exact(base, got, ref)
    return _close(base, got, ref, *tol)


def _exact(base: dict, got: np.ndarray, ref: np.ndarray) -> ArrayCheck:
    bad = got != ref
    diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
    worst = float(diff.max()) if diff.size else 0.0
    scale = float(np.abs(ref.astype(np.float64)).max()) if ref.size else 0.0
    return _result(base, bad, got, ref, worst, _ratio(worst, scale), 0.0, 0.0)


def _close(base, got, ref, rtol: float, atol_scale: float) -> ArrayCheck:
    g = got.astype(np.float64)
    r = ref.astype(np.float64)
    finite = np.isfinite(r) & np.isfinite(g)
    scale = float(np.abs(r[np.isfinite(r)]).max()) if np.isfinite(r).any() else 0.0
    atol = atol_scale * scale
    with np.errstate(invalid="ignore"):
        err = np.where(finite, np.abs(g - r), 0.0)
        within = finite & (err <= atol + rtol * np.abs(r))
        special = (np.isnan(r) & np.isnan(g)) | (np.isinf(r) & (g == r))
    bad = ~(within | special)
    worst = float(err.max()) if err.size else 0.0
    if (bad & ~finite).any():  # a NaN or an infinity where a number belongs
        worst = float("inf")
    return _result(base, bad, got, ref, worst, _ratio(worst, scale), rtol, atol)


def _result(base, bad, got, ref, worst, rel, rtol, atol) -> ArrayCheck:
    count = int(np.count_nonzero(bad))
    index = got_v = want_v = None
    if count:
        index = tuple(int(i) for i in np.unravel_index(np.argmax(bad), bad.shape))
        got_v, want_v = got[index].item(), ref[index].item()
    return ArrayCheck(
        **base,
        count=count,
        index=index,
        got=got_v,
        want=want_v,
        max_abs_error=worst,
        max_rel_error=rel,
        rtol=rtol,
        atol=atol,
    )


def _ratio(err: float, scale: float) -> float:
    if err == 0.0:
        return 0.0
    return err / scale if scale > 0.0 else float("inf")


def _value(v) -> str:
    if isinstance(v, float):
        return f"{v:.9g}"
    return str(v)
