"""A fuzz :class:`~polyc.studies.fuzz.grammar.Program` as a Kernel, two ways.

- :func:`through_compute`: the tensor-level op library (``polyc.ops.nn``) and, for
  convolutions, the compute API written as a kernel author would (any stride,
  dilation, groups, asymmetric or causal padding as a ``where`` condition, reversed
  taps); the weights are inputs of the kernel.
- :func:`through_torch`: a generated ``torch.nn.Module`` (``nn.Conv2d``,
  ``nn.BatchNorm2d``, ``F.pad``, ...), imported with :func:`polyc.from_torch`; the
  weights are the module's parameters.

Both return ``(kernel, inputs)``; values are drawn from ``seed`` (floats in [-1, 1],
int8 in [-4, 4], so that int8 results stay mostly inside the type after the clamp).
"""

from __future__ import annotations

import math

import numpy as np

from polyc.ir.expr import cast
from polyc.ir.kernel import Kernel
from polyc.lang import compute as pc
from polyc.ops import nn, quant
from polyc.ops._common import reset_names
from polyc.studies.fuzz.grammar import Program, family_at, shapes

_ACTS = {
    "relu": nn.relu,
    "relu6": nn.relu6,
    "sigmoid": nn.sigmoid,
    "tanh": nn.tanh,
    "gelu": nn.gelu,
    "silu": nn.silu,
    "hardswish": nn.hardswish,
    "leaky": lambda x: nn.leaky_relu(x, 0.1),
}


def values(rng: np.random.Generator, shape, dtype: str, positive=False) -> np.ndarray:
    """Random values for an input of ``shape`` and ``dtype``."""
    if dtype == "int8":
        return rng.integers(-4, 5, size=shape).astype(np.int8)
    if dtype == "int32":
        return rng.integers(-16, 17, size=shape).astype(np.int32)
    v = rng.uniform(0.5, 1.5, size=shape) if positive else rng.uniform(-1, 1, shape)
    return v.astype(dtype)


# the compute API --------------------------------------------------------------------


class _Inputs:
    """Placeholders of one kernel with their values."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.values: dict[str, np.ndarray] = {}

    def new(self, name: str, shape, dtype: str, positive=False) -> pc.Tensor:
        self.values[name] = values(self.rng, shape, dtype, positive)
        return pc.placeholder(name, shape, dtype)


def through_compute(program: Program, seed: int) -> tuple[Kernel, dict]:
    """``program`` built with the op library and the compute API."""
    shapes(program)  # raises InvalidProgram for a malformed program
    reset_names()
    ins = _Inputs(np.random.default_rng(seed))
    hist = [ins.new("x", program.input, program.dtype)]
    for i, layer in enumerate(program.layers):
        fam = family_at(program, i)
        hist.append(_COMPUTE[layer["op"]](ins, hist, layer, i, program.dtype, fam))
    return pc.kernel("fuzz", [hist[-1]]), ins.values


def _acc(dtype: str) -> str:
    return "int32" if dtype == "int8" else dtype


#: requantization multipliers: halves and quarters make exact ties (x.5) common,
#: the others round; all keep the fuzzer's small accumulators inside int8 mostly
_MULTIPLIERS = (0.5, 0.25, 0.125, 0.1, 0.03)


def _requant(y: pc.Tensor, dtype: str, ins=None, i: int = 0, axis: int = 1):
    """int8 programs: an int32 contraction back to int8.

    Even layers clamp and cast; odd layers use the requantization epilogue
    (:func:`polyc.ops.quant.requantize`): per channel along ``axis`` (a float32
    input drawn from the case's seed) on every other one, else per tensor, with a
    zero point and a fused ReLU that follow from the layer index.
    """
    if dtype != "int8":
        return y
    if ins is None or i % 2 == 0:
        return nn.cast(nn.clamp(y, -128, 127), "int8")
    zero_point = (i * 37) % 11 - 5
    relu = i % 4 == 3
    if (i // 2) % 2 == 0:
        m = _MULTIPLIERS[(i // 4) % len(_MULTIPLIERS)]
        return quant.requantize(y, m, zero_point, relu=relu)
    axis = axis % len(y.shape)
    n = y.shape[axis].const
    ins.values[f"m{i}"] = ins.rng.choice(_MULTIPLIERS, size=n).astype(np.float32)
    m = pc.placeholder(f"m{i}", (n,), "float32")
    return quant.requantize(y, m, zero_point, axis=axis, relu=relu)


def _conv(ins, hist, layer, i, dtype, fam):
    x = hist[-1]
    nd = len(x.shape) - 2
    c = x.shape[1].const
    o, g = layer["out"], layer["g"]
    w = ins.new(f"w{i}", (o, c // g, *layer["k"]), dtype)
    acc = _acc(dtype)
    b = ins.new(f"b{i}", (o,), acc) if layer["bias"] else None
    pads = layer["pad"]
    symmetric = all(pads[2 * d] == pads[2 * d + 1] for d in range(nd))
    if nd == 2 and symmetric and not layer["rev"] and i % 2 == 0:
        # the op library's conv2d (its own padding rule), every other layer
        y = nn.conv2d(
            x, w, b, layer["s"], (pads[0], pads[2]), layer["d"], g, name=f"conv{i}"
        )
        return _requant(y, dtype, ins, i)
    return _requant(_conv_general(x, w, b, layer, nd, acc, f"conv{i}"), dtype, ins, i)


def _conv_general(x, w, b, layer, nd, acc, name):
    """A convolution as a kernel author writes it with the compute API."""
    c, o, g = x.shape[1].const, layer["out"], layer["g"]
    cg, og = c // g, o // g
    k, s, d, pads = layer["k"], layer["s"], layer["d"], layer["pad"]
    sizes = []
    for t in range(nd):
        span = x.shape[2 + t].const + pads[2 * t] + pads[2 * t + 1] - d[t] * (k[t] - 1)
        sizes.append((span - 1) // s[t] + 1)
    shape = (x.shape[0], o, *sizes)
    ix = pc.indices("n o h w" if nd == 2 else "n o l")
    out = pc.tensor(name, shape, acc)
    out[ix] = b[ix[1]] if b is not None else pc.const(0, acc)
    rc = pc.reduce_axis(cg, "rc")
    taps = [pc.reduce_axis(k[t], f"r{'hw'[t] if nd == 2 else 'l'}") for t in range(nd)]
    coords = []
    for t in range(nd):
        tap = (k[t] - 1 - taps[t]) if layer["rev"] else taps[t]
        coords.append(ix[2 + t] * s[t] - pads[2 * t] + tap * d[t])
    ic = rc if g == 1 else (ix[1] // og) * cg + rc
    xv, wv = x[(ix[0], ic, *coords)], w[(ix[1], rc, *taps)]
    term = (cast(xv, acc) if xv.dtype != acc else xv) * (
        cast(wv, acc) if wv.dtype != acc else wv
    )
    where = None
    for t in range(nd):
        if pads[2 * t] or pads[2 * t + 1]:
            inside = (coords[t] >= 0) & (coords[t] < x.shape[2 + t].const)
            where = inside if where is None else where & inside
    out.set(ix, out[ix] + term, where=where)
    return out


def _bn(ins, hist, layer, i, dtype, fam):
    x = hist[-1]
    c = (x.shape[1].const,)
    return nn.batch_norm(
        x,
        ins.new(f"mean{i}", c, dtype),
        ins.new(f"var{i}", c, dtype, positive=True),
        ins.new(f"g{i}", c, dtype),
        ins.new(f"b{i}", c, dtype),
    )


def _affine(ins, hist, layer, i, dtype, fam):
    x = hist[-1]
    per = (x.shape[1].const,) + (1,) * (len(x.shape) - 2)
    return nn.add(nn.mul(x, ins.new(f"g{i}", per, dtype)), ins.new(f"b{i}", per, dtype))


def _act(ins, hist, layer, i, dtype, fam):
    return _ACTS[layer["fn"]](hist[-1])


def _pool(ins, hist, layer, i, dtype, fam):
    f = nn.max_pool2d if layer["kind"] == "max" else nn.avg_pool2d
    return f(hist[-1], layer["k"], layer["s"], layer["p"])


def _add(ins, hist, layer, i, dtype, fam):
    return nn.add(hist[-1], hist[layer["other"]])


def _cat(ins, hist, layer, i, dtype, fam):
    x = hist[-1]
    return nn.cat([x, hist[layer["other"]]], _dim(fam, x))


def _slice(ins, hist, layer, i, dtype, fam):
    x = hist[-1]
    return nn.slice(x, _dim(fam, x), layer["lo"], layer["hi"])


def picks(layer: dict, extent: int) -> np.ndarray:
    """The indices a ``pick`` layer selects (from its own seed: both builders
    pick the same)."""
    rng = np.random.default_rng(layer["seed"])
    return rng.integers(0, extent, size=layer["n"]).astype(np.int64)


def _pick(ins, hist, layer, i, dtype, fam):
    x = hist[-1]
    dim = _dim(fam, x)
    extent = int(x.shape[dim].const)
    name = f"pick{i}"
    ins.values[name] = picks(layer, extent)
    idx = pc.placeholder(name, (layer["n"],), "int64")
    return nn.index_select(x, dim, idx)


def _dim(fam, x) -> int:
    return 1 if fam in ("cnn", "seq") else len(x.shape) - 1


def _nhwc(ins, hist, layer, i, dtype, fam):
    x = hist[-1]
    y = nn.permute(x, (0, 2, 3, 1))
    y = nn.mul(y, ins.new(f"g{i}", (x.shape[1].const,), dtype))
    return nn.permute(y, (0, 3, 1, 2))


def _head(ins, hist, layer, i, dtype, fam):
    x = nn.flatten(hist[-1], 1)
    feats = x.shape[1].const
    w = ins.new(f"w{i}", (layer["out"], feats), dtype)
    b = ins.new(f"b{i}", (layer["out"],), _acc(dtype)) if layer["bias"] else None
    return _requant(nn.linear(x, w, b), dtype, ins, i, -1)


def _linear(ins, hist, layer, i, dtype, fam):
    x = hist[-1]
    w = ins.new(f"w{i}", (layer["out"], x.shape[-1].const), dtype)
    b = ins.new(f"b{i}", (layer["out"],), _acc(dtype)) if layer["bias"] else None
    return _requant(nn.linear(x, w, b), dtype, ins, i, -1)


def _matmul(ins, hist, layer, i, dtype, fam):
    x = hist[-1]
    d, f = x.shape[-1].const, layer["out"]
    if layer["wt"]:
        w = nn.transpose(ins.new(f"w{i}", (f, d), dtype), 0, 1)
    else:
        w = ins.new(f"w{i}", (d, f), dtype)
    return _requant(nn.matmul(x, w), dtype, ins, i, -1)


def _attn(ins, hist, layer, i, dtype, fam):
    x = hist[-1]
    d, dk = x.shape[-1].const, layer["dk"]
    q, k, v = (nn.linear(x, ins.new(f"w{n}{i}", (dk, d), dtype)) for n in "qkv")
    s = nn.mul(nn.bmm(q, nn.transpose(k, 1, 2)), 1 / math.sqrt(dk))
    o = nn.bmm(nn.softmax(s, -1), v)
    return nn.linear(o, ins.new(f"wo{i}", (d, dk), dtype))


def _ln(ins, hist, layer, i, dtype, fam):
    x = hist[-1]
    d = (x.shape[-1].const,)
    return nn.layer_norm(x, d, ins.new(f"g{i}", d, dtype), ins.new(f"b{i}", d, dtype))


def _softmax(ins, hist, layer, i, dtype, fam):
    return nn.softmax(hist[-1], -1)


def _transpose(ins, hist, layer, i, dtype, fam):
    return nn.transpose(hist[-1], -2, -1)


def _reshape(ins, hist, layer, i, dtype, fam):
    x = hist[-1]
    lead = tuple(d.const for d in x.shape[:-2])
    t, d = x.shape[-2].const, x.shape[-1].const
    return nn.reshape(x, (*lead, t * d // layer["f"], layer["f"]))


def _bmm(ins, hist, layer, i, dtype, fam):
    x = hist[-1]
    return _requant(nn.bmm(x, nn.transpose(x, 1, 2)), dtype, ins, i, -1)


_COMPUTE = {
    "conv": _conv,
    "conv1d": _conv,
    "bn": _bn,
    "affine": _affine,
    "act": _act,
    "pool": _pool,
    "add": _add,
    "cat": _cat,
    "slice": _slice,
    "pick": _pick,
    "nhwc": _nhwc,
    "head": _head,
    "linear": _linear,
    "matmul": _matmul,
    "attn": _attn,
    "ln": _ln,
    "softmax": _softmax,
    "transpose": _transpose,
    "reshape": _reshape,
    "bmm": _bmm,
}


# torch ------------------------------------------------------------------------------


def torch_supports(program: Program) -> bool:
    """Programs the torch builder takes: float32 (eager int8 convolutions do not
    exist in PyTorch; float16 goes through the compute API)."""
    return program.dtype == "float32"


def torch_module(program: Program, seed: int):
    """``(module, x)``: ``program`` as an eval-mode ``nn.Module`` and its input."""
    import torch

    shapes(program)
    gen = torch.Generator().manual_seed(seed)
    module = _module_class()(program, gen).eval()
    x = torch.rand(program.input, generator=gen) * 2 - 1
    return module, x


def through_torch(program: Program, seed: int) -> tuple[Kernel, dict]:
    """``program`` as a generated ``nn.Module``, through :func:`polyc.from_torch`."""
    from polyc.frontends.torch.export import from_torch

    module, x = torch_module(program, seed)
    kernel = from_torch(module, (x,), name="fuzz")
    (arg,) = [a.name for a in kernel.free_inputs]
    return kernel, {arg: x.numpy()}


_CLASS = None


def _module_class():
    """The module class (built on first use: ``import torch`` is slow)."""
    global _CLASS
    if _CLASS is None:
        _CLASS = _define_module()
    return _CLASS


def _define_module():
    import torch
    import torch.nn.functional as F
    from torch import nn as tnn

    def rand(gen, *shape, positive=False):
        if positive:
            return torch.rand(shape, generator=gen) + 0.5
        return torch.rand(shape, generator=gen) * 2 - 1

    acts = {
        "relu": F.relu,
        "relu6": F.relu6,
        "sigmoid": torch.sigmoid,
        "tanh": torch.tanh,
        "gelu": F.gelu,
        "silu": F.silu,
        "hardswish": F.hardswish,
        "leaky": lambda x: F.leaky_relu(x, 0.1),
    }

    class FuzzModule(tnn.Module):
        """One fuzz program; ``forward`` keeps every tensor for later joins."""

        def __init__(self, program: Program, gen):
            super().__init__()
            self.program = program
            self.mods = tnn.ModuleList()
            hist = shapes(program)
            for i, layer in enumerate(program.layers):
                fam = family_at(program, i)
                self.mods.append(self._make(layer, hist[i], gen, fam))

        def _make(self, layer, x, gen, fam):
            op = layer["op"]
            m = tnn.Module()
            if op in ("conv", "conv1d"):
                conv = tnn.Conv2d if op == "conv" else tnn.Conv1d
                nd = len(layer["k"])
                pads = layer["pad"]
                sym = all(pads[2 * d] == pads[2 * d + 1] for d in range(nd))
                m.conv = conv(
                    x[1],
                    layer["out"],
                    layer["k"],
                    layer["s"],
                    tuple(pads[2 * d] for d in range(nd)) if sym else 0,
                    layer["d"],
                    layer["g"],
                    bias=layer["bias"],
                )
                with torch.no_grad():
                    m.conv.weight.copy_(rand(gen, *m.conv.weight.shape))
                    if layer["bias"]:
                        m.conv.bias.copy_(rand(gen, layer["out"]))
                # F.pad takes the last dim first
                m.pad = (
                    None
                    if sym
                    else tuple(
                        p for d in reversed(range(nd)) for p in pads[2 * d : 2 * d + 2]
                    )
                )
            elif op == "bn":
                m.bn = (tnn.BatchNorm2d if len(x) == 4 else tnn.BatchNorm1d)(x[1])
                with torch.no_grad():
                    m.bn.running_mean.copy_(rand(gen, x[1]))
                    m.bn.running_var.copy_(rand(gen, x[1], positive=True))
                    m.bn.weight.copy_(rand(gen, x[1]))
                    m.bn.bias.copy_(rand(gen, x[1]))
            elif op == "affine":
                per = (x[1],) + (1,) * (len(x) - 2)
                m.g = tnn.Parameter(rand(gen, *per))
                m.b = tnn.Parameter(rand(gen, *per))
            elif op == "nhwc":
                m.g = tnn.Parameter(rand(gen, x[1]))
            elif op in ("head", "linear"):
                feats = math.prod(x[1:]) if op == "head" else x[-1]
                m.lin = tnn.Linear(feats, layer["out"], bias=layer["bias"])
                with torch.no_grad():
                    m.lin.weight.copy_(rand(gen, layer["out"], feats))
                    if layer["bias"]:
                        m.lin.bias.copy_(rand(gen, layer["out"]))
            elif op == "matmul":
                shape = (layer["out"], x[-1]) if layer["wt"] else (x[-1], layer["out"])
                m.w = tnn.Parameter(rand(gen, *shape))
            elif op == "attn":
                d, dk = x[-1], layer["dk"]
                for n in "qkv":
                    setattr(m, f"w{n}", tnn.Parameter(rand(gen, dk, d)))
                m.wo = tnn.Parameter(rand(gen, d, dk))
            elif op == "ln":
                m.ln = tnn.LayerNorm(x[-1])
                with torch.no_grad():
                    m.ln.weight.copy_(rand(gen, x[-1]))
                    m.ln.bias.copy_(rand(gen, x[-1]))
            elif op == "pick":
                dim = 1 if fam in ("cnn", "seq") else len(x) - 1
                m.register_buffer("idx", torch.from_numpy(picks(layer, x[dim])))
            elif op == "pool":
                pool = tnn.MaxPool2d if layer["kind"] == "max" else tnn.AvgPool2d
                m.pool = pool(layer["k"], layer["s"], layer["p"])
            return m

        def forward(self, x):
            hist = [x]
            for i, (layer, m) in enumerate(zip(self.program.layers, self.mods)):
                hist.append(self._apply(layer, m, hist, family_at(self.program, i)))
            return hist[-1]

        def _apply(self, layer, m, hist, fam):
            x = hist[-1]
            op = layer["op"]
            dim = 1 if fam in ("cnn", "seq") else x.dim() - 1
            if op in ("conv", "conv1d"):
                return m.conv(F.pad(x, m.pad) if m.pad else x)
            if op == "bn":
                return m.bn(x)
            if op == "affine":
                return x * m.g + m.b
            if op == "act":
                return acts[layer["fn"]](x)
            if op == "pool":
                return m.pool(x)
            if op == "add":
                return x + hist[layer["other"]]
            if op == "cat":
                return torch.cat([x, hist[layer["other"]]], dim)
            if op == "slice":
                return x.narrow(dim, layer["lo"], layer["hi"] - layer["lo"])
            if op == "pick":
                return torch.index_select(x, dim, m.idx)
            if op == "nhwc":
                return (x.permute(0, 2, 3, 1) * m.g).permute(0, 3, 1, 2)
            if op == "head":
                return m.lin(torch.flatten(x, 1))
            if op == "linear":
                return m.lin(x)
            if op == "matmul":
                return x @ (m.w.t() if layer["wt"] else m.w)
            if op == "attn":
                q, k, v = (x @ getattr(m, f"w{n}").t() for n in "qkv")
                s = (q @ k.transpose(1, 2)) * (1 / math.sqrt(layer["dk"]))
                return (torch.softmax(s, -1) @ v) @ m.wo.t()
            if op == "ln":
                return m.ln(x)
            if op == "softmax":
                return torch.softmax(x, -1)
            if op == "transpose":
                return x.transpose(-2, -1)
            if op == "reshape":
                f = layer["f"]
                return x.reshape(*x.shape[:-2], x.shape[-2] * x.shape[-1] // f, f)
            if op == "bmm":
                return torch.bmm(x, x.transpose(1, 2))
            raise AssertionError(op)  # pragma: no cover

    return FuzzModule
