"""Bilinear and bicubic resizing (``F.interpolate``), separable over H and W.

Along one axis, output index ``o`` reads ``taps`` input indices with weights that
depend on ``o`` alone (never on data). PyTorch computes them in float32:
``src = scale * (o + 0.5) - 0.5`` (``scale * o`` with ``align_corners``), the
first tap ``floor(src)`` and the weights from ``src - floor(src)``. The tables are
computed here the same way, in numpy float32, and turned into affine pieces:
with ``in / out = p / q`` the taps of ``o = q * t + r`` are ``p * t + c_r`` and its
weights depend on ``r`` only, so each residue ``r`` (split where the clamping at
the borders breaks the pattern) is one definition whose indices are affine in
``t`` and whose weights are constants::

    tmp[n, c, h, q*t + r] = x[n, c, h, p*t + c0] * w0 + x[n, c, h, p*t + c1] * w1

W is resized first, then H, with the products and sums in PyTorch's order; a
float16 input is computed in float32 (its W pass kept in float32) and rounded once,
as PyTorch does for outputs up to H' + W' = 128 (bit for bit); past that PyTorch
switches kernels and float16 results may differ from it by one float16 rounding.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from polyc.errors import ArgumentError
from polyc.ir import dtypes
from polyc.ir.expr import cast
from polyc.lang import compute as pc
from polyc.lang.compute import Tensor
from polyc.ops._common import (
    check_float,
    choice,
    concrete,
    flag,
    fresh,
    ints,
    tensor,
)

_A = -0.75  # PyTorch's bicubic convolution coefficient


def _source(scale: np.float32, out: int, align_corners: bool, cubic: bool):
    o = np.arange(out, dtype=np.float32)
    if align_corners:
        return scale * o
    src = scale * (o + np.float32(0.5)) - np.float32(0.5)
    return src if cubic else np.maximum(src, np.float32(0))


def _scale(size_in: int, size_out: int, align_corners: bool, factor) -> np.float32:
    if align_corners:
        if size_out <= 1:
            return np.float32(0)
        return np.float32(size_in - 1) / np.float32(size_out - 1)
    if factor is not None and factor > 0:
        return np.float32(1.0 / float(factor))
    return np.float32(size_in) / np.float32(size_out)


def _cubic(t: np.ndarray) -> np.ndarray:
    """PyTorch's four cubic convolution weights for fractions ``t`` ([out, 4])."""
    a = np.float32(_A)
    one = np.float32(1)

    def near(x):
        return ((a + 2) * x - (a + 3)) * x * x + one

    def far(x):
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return np.stack([far(t + one), near(t), near(one - t), far(2 * one - t)], 1)


def tables(size_in, size_out, mode, align_corners, factor=None):
    """``(indices, weights)``, each ``[size_out, taps]``: what PyTorch reads and
    multiplies for every output index along one axis (``mode`` linear or cubic)."""
    if mode == "linear" and size_in == size_out:
        o = np.arange(size_out)
        return np.stack([o, o], 1), np.tile(np.float32([1, 0]), (size_out, 1))
    scale = _scale(size_in, size_out, align_corners, factor)
    src = _source(scale, size_out, align_corners, mode == "cubic")
    first = np.minimum(np.floor(src).astype(np.int64), size_in - 1)
    frac = np.clip(src - first.astype(np.float32), 0, 1).astype(np.float32)
    if mode == "linear":
        second = first + (first < size_in - 1)
        index = np.stack([first, second], 1)
        weight = np.stack([np.float32(1) - frac, frac], 1)
        return index, weight.astype(np.float32)
    index = np.clip(first[:, None] + np.arange(-1, 3)[None, :], 0, size_in - 1)
    return index, _cubic(frac).astype(np.float32)


def _period(size_in, size_out, align_corners, factor) -> tuple[int, int]:
    """``(p, q)``: ``q`` outputs advance the source by ``p`` inputs."""
    if align_corners:
        ratio = Fraction(size_in - 1, max(size_out - 1, 1))
    elif factor is not None and factor > 0:
        ratio = Fraction(1.0 / float(factor)).limit_denominator(size_out)
    else:
        ratio = Fraction(size_in, size_out)
    return ratio.numerator, ratio.denominator


def pieces(index, weight, p: int, q: int):
    """Runs ``(r, t_lo, t_hi, offsets, weights)``: for ``t`` in ``[t_lo, t_hi]``
    output ``q * t + r`` reads inputs ``p * t + offsets`` with ``weights``."""
    out = []
    for r in range(min(q, len(index))):
        run = None
        for t in range((len(index) - 1 - r) // q + 1):
            o = q * t + r
            offsets = tuple(int(i) - p * t for i in index[o])
            w = weight[o]
            if (
                run is not None
                and run[3] == offsets
                and np.allclose(w, run[4], rtol=0, atol=1e-6)
            ):
                run[2] = t
                continue
            if run is not None:
                out.append(tuple(run))
            run = [r, t, t, offsets, w]
        out.append(tuple(run))
    return out


def _axis(x: Tensor, dim: int, size: int, tabs, p, q, name, dt, wdt) -> Tensor:
    """``x`` resized along ``dim`` to ``size`` by the tables (weights rounded to
    ``wdt``), computed in the opmath dtype of ``x`` and stored as ``dt``."""
    index, weight = tabs
    weight = weight.astype(wdt.numpy).astype(np.float64)
    ot = dtypes.opmath(x.dtype)
    shape = list(x.shape)
    shape[dim] = size
    out = pc.tensor(name, tuple(shape), dt)
    for r, lo, hi, offsets, w in pieces(index, weight, p, q):
        names = [f"i{k}" for k in range(x.ndim)]
        names[dim] = "t"
        ix = list(pc.indices(" ".join(n for n in names if n != "t")))
        t = pc.index("t", hi - lo + 1, lo)
        ix.insert(dim, t)
        value = None
        for off, wk in zip(offsets, w):
            src = list(ix)
            src[dim] = t * p + off
            term = cast(x[tuple(src)], ot) * pc.const(float(wk), ot)
            value = term if value is None else value + term
        lhs = list(ix)
        lhs[dim] = t * q + r
        out.set(tuple(lhs), cast(value, dt))
    return out


def interpolate(
    input: Tensor,
    size,
    mode: str = "bilinear",
    align_corners: bool = False,
    scale_factor=None,
    name: str | None = None,
) -> Tensor:
    """``input`` ([N, C, H, W]) resized to ``size`` ``(H', W')`` by bilinear or
    bicubic interpolation, as ``F.interpolate`` (``scale_factor``, when PyTorch
    was given one, sets the source step ``1 / scale_factor`` instead of the size
    ratio, as PyTorch does).

    Raises:
        ArgumentError: for another mode, a tensor that is not 4-D or a bad size.
    """
    op = "interpolate"
    x = tensor(op, input)
    check_float(op, x)
    choice(op, mode, ("bilinear", "bicubic"), "mode")
    align_corners = flag(op, align_corners, "align_corners")
    if x.ndim != 4:
        raise ArgumentError(
            f"{op}: {x.name} is {x.ndim}-D but {mode} interpolation resizes "
            "[N, C, H, W] because it works on two spatial dims. Reshape to 4-D."
        )
    size = ints(op, size, 2, "size", minimum=1)
    factors = _factors(op, scale_factor)
    sizes_in = concrete(op, x, (2, 3), "resizing needs fixed sizes")
    out = fresh(op, name)
    kind = "linear" if mode == "bilinear" else "cubic"
    # PyTorch's CPU kernel for small outputs (H' + W' <= 128) keeps the weights
    # in float32, and float16 results here equal its bit for bit; its generic
    # kernel for larger ones stores them in the input's dtype, which this follows,
    # but rounds differently: float16 results then differ by up to one float16
    # rounding (and are as close to the float64 result as PyTorch's)
    wdt = dtypes.opmath(x.dtype) if size[0] + size[1] <= 128 else x.dtype
    y = x
    for dim in (3, 2):
        n_in, n_out, f = sizes_in[dim - 2], size[dim - 2], factors[dim - 2]
        tabs = tables(n_in, n_out, kind, align_corners, f)
        p, q = _period(n_in, n_out, align_corners, f)
        if kind == "linear" and n_in == n_out:
            p, q = 1, 1
        # the W pass keeps opmath (float32 for float16), as PyTorch's single pass
        label, dt = (out, x.dtype) if dim == 2 else (f"{out}_w", dtypes.opmath(x.dtype))
        y = _axis(y, dim, n_out, tabs, p, q, label, dt, wdt)
    return y


def _factors(op: str, scale_factor) -> tuple:
    """``(f_h, f_w)`` from None, a number or two numbers (or Nones)."""
    if scale_factor is None:
        return (None, None)
    seq = (
        scale_factor if isinstance(scale_factor, (tuple, list)) else (scale_factor,) * 2
    )
    ok = len(seq) == 2 and all(
        f is None or (isinstance(f, (int, float)) and not isinstance(f, bool) and f > 0)
        for f in seq
    )
    if not ok:
        raise ArgumentError(
            f"{op}: scale_factor={scale_factor!r} is not a scale because it must be "
            "None, a positive number or two of them (H, W). Pass e.g. "
            "scale_factor=2.0."
        )
    return tuple(seq)
