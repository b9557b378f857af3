"""Random programs drawn from a grammar of real layers, with exact shape inference.

A :class:`Program` is plain data (JSON-able): a family, a dtype, an input shape and a
tuple of layers, each a dict ``{"op": name, ...parameters}``. Layers may read an
earlier tensor of the program (``"other": j``: tensor ``j`` is the input for 0, the
output of layer ``j - 1`` otherwise), so residual adds and concatenations form DAGs.
:func:`shapes` is the single source of truth on which programs are valid: the
generator draws only layers it accepts, the shrinker keeps only programs it accepts,
and both builders (:mod:`polyc.studies.fuzz.build`) must produce its shapes.

Families:

- ``cnn`` (``[N, C, H, W]``): conv2d with any kernel, stride, dilation and groups
  (pointwise and depthwise among them), symmetric, asymmetric and causal padding,
  reversed taps; batch norm, per-channel affine, activations, max/avg pooling,
  residual add, channel concat and slice, an NHWC round trip, a flatten + linear
  head (after which the program continues as ``mlp``);
- ``seq`` (``[N, C, L]``): conv1d with the same variety (causal padding included);
- ``mlp`` (``[B, T, D]`` or ``[T, D]``): linear, matmul against a plain or
  transposed weight, single-head attention, layer norm, softmax, activations,
  residual add, feature slice and concat, transpose of the last two dims, a
  reshape that regroups the last two dims, a batched ``x @ x^T``.

Every family also draws ``pick``: ``index_select`` of the channels or features by
an index input (int64, repeats allowed), a gather (a data-dependent read).

dtypes: float32, float16, and int8 (contractions accumulate in int32 and are
requantized to int8 by a clamp and a cast; only the layers with integer semantics
are drawn).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from polyc.errors import ArgumentError

FAMILIES = ("cnn", "seq", "mlp")
DTYPES = ("float32", "float16", "int8")
FLOAT_ACTS = ("relu", "relu6", "sigmoid", "tanh", "gelu", "silu", "hardswish", "leaky")
#: upper bounds that keep one case cheap to schedule, build, simulate and interpret
MAX_ELEMENTS = 6144
MAX_MACS = 400_000


class InvalidProgram(ArgumentError):
    """A program whose layers do not fit its shapes (the generator and the shrinker
    skip such programs; a user sees it from :func:`shapes`)."""


@dataclass(frozen=True)
class Program:
    """One random program: ``family``, ``dtype``, ``input`` shape and ``layers``."""

    family: str
    dtype: str
    input: tuple[int, ...]
    layers: tuple[dict, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict:
        return {
            "family": self.family,
            "dtype": self.dtype,
            "input": list(self.input),
            "layers": [dict(layer) for layer in self.layers],
        }

    @classmethod
    def from_dict(cls, d: dict) -> Program:
        layers = tuple(
            {k: tuple(v) if isinstance(v, list) else v for k, v in layer.items()}
            for layer in d["layers"]
        )
        return cls(d["family"], d["dtype"], tuple(d["input"]), layers)

    def text(self) -> str:
        """One line per layer, for reports and regression tests."""
        head = f"{self.family} {self.dtype} input {_shape(self.input)}"
        body = [f"  {i}: {_layer_text(layer)}" for i, layer in enumerate(self.layers)]
        return "\n".join([head, *body])


def _shape(s) -> str:
    return "x".join(str(d) for d in s)


def _layer_text(layer: dict) -> str:
    rest = ", ".join(f"{k}={v}" for k, v in layer.items() if k != "op")
    return f"{layer['op']}({rest})"


# shapes -----------------------------------------------------------------------------


def shapes(program: Program) -> list[tuple[int, ...]]:
    """The shape of every tensor of ``program``: the input, then each layer's output.

    Raises:
        InvalidProgram: naming the first layer that does not fit.
    """
    out = [tuple(program.input)]
    for i, layer in enumerate(program.layers):
        try:
            out.append(_after(program, layer, out))
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as err:
            raise InvalidProgram(
                f"fuzz: layer {i} ({_layer_text(layer)}) is malformed because "
                f"{type(err).__name__}: {err}. Fix the layer's parameters."
            ) from None
        if out[-1] is None:
            raise InvalidProgram(
                f"fuzz: layer {i} ({_layer_text(layer)}) does not fit its input "
                f"{_shape(out[-2])} because its sizes or operands disagree. Drop the "
                "layer or change its parameters."
            )
    return out


def family_at(program: Program, index: int) -> str:
    """The family of tensor ``index`` (a CNN continues as an MLP after its head)."""
    fam = program.family
    for layer in program.layers[:index]:
        if layer["op"] == "head":
            fam = "mlp"
    return fam


def _after(program: Program, layer: dict, hist: list) -> tuple[int, ...] | None:
    x = hist[-1]
    op = layer["op"]
    fam = family_at(program, len(hist) - 1)
    if op in ("conv", "conv1d"):
        nd = 2 if op == "conv" else 1
        if len(x) != nd + 2 or fam != ("cnn" if nd == 2 else "seq"):
            return None
        c, o, g = x[1], layer["out"], layer["g"]
        if g < 1 or c % g or o % g:
            return None
        pads = layer["pad"]
        sizes = []
        for d in range(nd):
            span = x[2 + d] + pads[2 * d] + pads[2 * d + 1]
            span -= layer["d"][d] * (layer["k"][d] - 1)
            if span < 1:
                return None
            sizes.append((span - 1) // layer["s"][d] + 1)
        return (x[0], o, *sizes)
    if op in ("bn", "affine", "act", "softmax", "ln"):
        if op in ("bn", "affine") and len(x) < 3:
            return None
        return x
    if op == "pool":
        if len(x) != 4 or fam != "cnn":
            return None
        k, s, p = layer["k"], layer["s"], layer["p"]
        if p > k // 2:
            return None
        sizes = [(n + 2 * p - k) // s + 1 for n in x[2:]]
        return (*x[:2], *sizes) if min(sizes) >= 1 else None
    if op == "add":
        return x if hist[layer["other"]] == x else None
    if op == "cat":
        y = hist[layer["other"]]
        dim = _feature_dim(fam, x)
        if len(y) != len(x) or any(
            a != b for d, (a, b) in enumerate(zip(x, y)) if d != dim
        ):
            return None
        return tuple(a + b if d == dim else a for d, (a, b) in enumerate(zip(x, y)))
    if op == "slice":
        dim = _feature_dim(fam, x)
        lo, hi = layer["lo"], layer["hi"]
        if not 0 <= lo < hi <= x[dim]:
            return None
        return tuple(hi - lo if d == dim else n for d, n in enumerate(x))
    if op == "pick":
        dim = _feature_dim(fam, x)
        return tuple(layer["n"] if d == dim else n for d, n in enumerate(x))
    if op == "nhwc":
        return x if len(x) == 4 else None
    if op == "head":
        return (x[0], layer["out"]) if len(x) == 4 else None
    if op in ("linear", "matmul"):
        return (*x[:-1], layer["out"]) if fam == "mlp" else None
    if op == "attn":
        return x if fam == "mlp" and len(x) == 3 else None
    if op == "transpose":
        return (*x[:-2], x[-1], x[-2]) if fam == "mlp" and len(x) >= 2 else None
    if op == "reshape":
        # the last two dims regrouped: [.., T, D] -> [.., T * D / f, f]
        if fam != "mlp" or len(x) < 2 or (x[-1] * x[-2]) % layer["f"]:
            return None
        return (*x[:-2], x[-1] * x[-2] // layer["f"], layer["f"])
    if op == "bmm":
        # x @ x^T over the batch: [B, T, D] -> [B, T, T]
        return (*x[:-1], x[-2]) if fam == "mlp" and len(x) == 3 else None
    raise ValueError(f"unknown op {op!r}")


def _feature_dim(fam: str, x) -> int:
    """The dim that slices and concatenations act on: channels, or features."""
    return 1 if fam in ("cnn", "seq") else len(x) - 1


def cost(program: Program) -> tuple[int, int]:
    """``(largest tensor's elements, MACs)`` of ``program`` (to keep cases cheap)."""
    hist = shapes(program)
    largest = max(math.prod(s) for s in hist)
    macs = 0
    for i, layer in enumerate(program.layers):
        x, y = hist[i], hist[i + 1]
        op = layer["op"]
        if op in ("conv", "conv1d"):
            macs += math.prod(y) * (x[1] // layer["g"]) * math.prod(layer["k"])
        elif op in ("linear", "matmul"):
            macs += math.prod(y) * x[-1]
        elif op == "head":
            macs += math.prod(x) * layer["out"]
        elif op == "bmm":
            macs += math.prod(y) * x[-1]
        elif op == "attn":
            b, t, d = x
            dk = layer["dk"]
            macs += b * t * d * dk * 4 + 2 * b * t * t * dk
    return largest, macs


# generation -------------------------------------------------------------------------


SMALL = (1, 2, 3, 4, 5, 6, 7, 8, 11, 12, 13, 16)
CHANNELS = (1, 2, 3, 4, 5, 6, 7, 8, 12, 16)
FEATURES = (1, 2, 3, 4, 5, 7, 8, 12, 16, 17, 24, 32)


def generate(rng: random.Random, max_layers: int = 6) -> Program:
    """A random valid program (see the module docstring), within the cost bounds."""
    while True:
        program = _draw(rng, max_layers)
        try:
            largest, macs = cost(program)
        except InvalidProgram:  # pragma: no cover - the generator checks each layer
            continue
        if program.layers and largest <= MAX_ELEMENTS and macs <= MAX_MACS:
            return program


def _draw(rng: random.Random, max_layers: int) -> Program:
    family = rng.choice(FAMILIES)
    dtype = rng.choices(DTYPES, weights=(6, 2, 2))[0]
    if family == "cnn":
        shape = (rng.choice((1, 1, 2)), rng.choice(CHANNELS), *_spatial(rng, 2))
    elif family == "seq":
        shape = (
            rng.choice((1, 2)),
            rng.choice(CHANNELS),
            rng.choice((5, 8, 11, 16, 23)),
        )
    else:
        t, d = rng.choice(SMALL), rng.choice(FEATURES)
        shape = (rng.choice((1, 2)), t, d) if rng.random() < 0.7 else (t, d)
    program = Program(family, dtype, shape)
    n = rng.randint(1, max_layers)
    for _ in range(n):
        for _attempt in range(12):
            layer = _layer(rng, program)
            if layer is None:
                continue
            candidate = Program(family, dtype, shape, (*program.layers, layer))
            try:
                hist = shapes(candidate)
            except InvalidProgram:
                continue
            if math.prod(hist[-1]) <= MAX_ELEMENTS:
                program = candidate
                break
    return program


def _spatial(rng: random.Random, n: int) -> tuple[int, ...]:
    if rng.random() < 0.6:
        s = rng.choice((4, 5, 7, 8, 9, 11, 12, 13, 16))
        return (s,) * n
    return tuple(rng.choice((3, 4, 5, 7, 8, 11, 13)) for _ in range(n))


def _layer(rng: random.Random, program: Program) -> dict | None:
    hist = shapes(program)
    x = hist[-1]
    fam = family_at(program, len(hist) - 1)
    integer = program.dtype == "int8"
    ops = {
        "cnn": ["conv"] * 6
        + ["bn", "affine", "act", "act", "pool", "add", "cat"]
        + ["slice", "nhwc", "head", "pick"],
        "seq": ["conv1d"] * 6 + ["affine", "act", "act", "add", "cat", "slice", "pick"],
        "mlp": ["linear"] * 3
        + ["matmul", "matmul", "attn", "ln", "softmax"]
        + ["act", "add", "cat", "slice", "transpose", "reshape", "bmm", "pick"],
    }[fam]
    if integer:
        ops = [o for o in ops if o not in ("bn", "affine", "attn", "ln", "softmax")]
    op = rng.choice(ops)
    if op in ("conv", "conv1d"):
        return _conv(rng, x, 2 if op == "conv" else 1, op)
    if op == "act":
        fn = "relu" if integer else rng.choice(FLOAT_ACTS)
        return {"op": "act", "fn": fn}
    if op in ("bn", "affine", "ln", "softmax", "nhwc", "transpose"):
        return {"op": op}
    if op == "pool":
        k = rng.choice((2, 3))
        kind = "max" if integer else rng.choice(("max", "avg"))
        return {"op": "pool", "kind": kind, "k": k, "s": rng.choice((1, 2)),
                "p": rng.choice((0, 0, k // 2))}  # fmt: skip
    if op in ("add", "cat"):
        same = [j for j, s in enumerate(hist) if _joinable(op, fam, s, x, hist, j)]
        return {"op": op, "other": rng.choice(same)} if same else None
    if op == "slice":
        dim = _feature_dim(fam, x)
        if x[dim] < 2:
            return None
        lo = rng.randrange(0, x[dim] - 1)
        return {"op": "slice", "lo": lo, "hi": rng.randrange(lo + 1, x[dim] + 1)}
    if op == "pick":
        n = x[_feature_dim(fam, x)]
        return {
            "op": "pick",
            "n": rng.randint(1, n + 2),
            "seed": rng.randrange(1 << 16),
        }
    if op == "head":
        return {"op": "head", "out": rng.choice(FEATURES), "bias": rng.random() < 0.7}
    if op == "linear":
        return {"op": "linear", "out": rng.choice(FEATURES), "bias": rng.random() < 0.6}
    if op == "matmul":
        return {"op": "matmul", "out": rng.choice(FEATURES), "wt": rng.random() < 0.5}
    if op == "attn":
        return {"op": "attn", "dk": rng.choice((1, 2, 4, 5, 8, 16))}
    if op == "reshape":
        total = x[-1] * x[-2]
        return {
            "op": "reshape",
            "f": rng.choice([f for f in range(1, 17) if total % f == 0]),
        }
    if op == "bmm":
        return {"op": "bmm"}
    raise AssertionError(op)  # pragma: no cover


def _joinable(op, fam, s, x, hist, j) -> bool:
    if j == len(hist) - 1 or family_at_shape(fam, s) is None:
        return False
    if op == "add":
        return s == x
    dim = _feature_dim(fam, x)
    return len(s) == len(x) and all(
        a == b for d, (a, b) in enumerate(zip(s, x)) if d != dim
    )


def family_at_shape(fam: str, s) -> str | None:
    """Tensors of a CNN before its head are 4-D; a mixed-rank join is not drawn."""
    return fam if (fam != "cnn" or len(s) == 4) else None


def _conv(rng: random.Random, x, nd: int, op: str) -> dict | None:
    c = x[1]
    kind = rng.choice(("dense", "dense", "pointwise", "depthwise", "grouped"))
    if kind == "depthwise":
        g, o = c, c * rng.choice((1, 1, 2))
    elif kind == "grouped":
        divisors = [d for d in range(2, c + 1) if c % d == 0 and d < c]
        if not divisors:
            return None
        g = rng.choice(divisors)
        o = g * rng.choice((1, 2, 3))
    else:
        g, o = 1, rng.choice(CHANNELS)
    k = (
        (1,) * nd
        if kind == "pointwise"
        else tuple(rng.choice((1, 2, 3, 3, 3, 5)) for _ in range(nd))
    )
    if nd == 2 and rng.random() < 0.6:
        k = (k[0], k[0])
    s = tuple(rng.choice((1, 1, 1, 2, 3)) for _ in range(nd))
    d = tuple(rng.choice((1, 1, 1, 2, 3)) if kk > 1 else 1 for kk in k)
    pad = _padding(rng, k, d)
    return {"op": op, "out": o, "k": k, "s": s, "d": d, "g": g, "pad": pad,
            "bias": rng.random() < 0.5, "rev": rng.random() < 0.1}  # fmt: skip


def _padding(rng: random.Random, k, d) -> tuple[int, ...]:
    """``(lo, hi)`` per spatial dim: none, symmetric ("same"), asymmetric, causal."""
    mode = rng.choice(("none", "same", "same", "asymmetric", "causal"))
    out = []
    for kk, dd in zip(k, d):
        total = dd * (kk - 1)
        if mode == "none":
            out += [0, 0]
        elif mode == "same":
            out += [total // 2, total // 2]
        elif mode == "causal":
            out += [total, 0]
        else:
            out += [rng.randint(0, total), rng.randint(0, total)]
    return tuple(out)
