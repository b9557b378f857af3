"""Kernels exported to MLIR, lowered and run by the real tools, against the
interpreter: every op of the library (``polyc.ops``, the PolyBench-style kernels
of ``polyc.ops.polybench``, a few dtypes) and the C corpus (``tests/c_corpus``).

``check(cases)`` builds all the cases as ONE module (one mlir-opt, mlir-translate
and clang run, cached by content) and returns ``{name: None | failure text}``.
"""

from __future__ import annotations

from collections.abc import Callable

import islpy as isl
import numpy as np

import polyc
from polyc import ops
from polyc.ops import nn, polybench
from tests.support.cfront_corpus import corpus_files, run_name

X4 = (2, 3, 5, 4)
X2 = (3, 5)


def _nn(build, shape=(4, 6)) -> polyc.Kernel:
    """A kernel of one ``polyc.ops.nn`` op on a placeholder ``x`` of ``shape``."""
    from polyc import compute as pc

    x = pc.placeholder("x", shape)
    return pc.kernel("nn_op", [build(x)])


#: every kernel-level op of polyc.ops, by name, with a small example
OPS: dict[str, Callable[[], polyc.Kernel]] = {
    "abs": lambda: ops.abs(X2),
    "adaptive_avg_pool2d": lambda: ops.adaptive_avg_pool2d(X4, (2, 3)),
    "adaptive_max_pool2d": lambda: ops.adaptive_max_pool2d(X4, (2, 3)),
    "add": lambda: ops.add(X4, (5, 1)),
    "avg_pool2d": lambda: ops.avg_pool2d(X4, 3, padding=1, ceil_mode=True),
    "batch_matmul": lambda: ops.batch_matmul(2, 3, 5, 4),
    "batch_norm": lambda: ops.batch_norm(X4),
    "bias_add": lambda: ops.bias_add(X4),
    "cast": lambda: ops.cast(X4, "int32"),
    "clamp": lambda: ops.clamp(X2, -0.5, 0.5),
    "concat": lambda: ops.concat([(2, 3), (2, 1), (2, 4)], 1),
    "conv2d": lambda: ops.conv2d(X4, (6, 1, 3, 3), groups=3, stride=2, padding=1),
    "conv_transpose2d": lambda: ops.conv_transpose2d(
        X4, (3, 2, 2, 3), stride=2, padding=1
    ),
    "cos": lambda: ops.cos(X2),
    "div": lambda: ops.div(X2, X2),
    "erf": lambda: ops.erf(X2),
    "exp": lambda: ops.exp(X2),
    "expand": lambda: ops.expand((3, 1), (3, 4)),
    "flatten": lambda: ops.flatten(X4, 1),
    "gelu": lambda: ops.gelu(X4, approximate="tanh"),
    "hardsigmoid": lambda: ops.hardsigmoid(X2),
    "hardswish": lambda: ops.hardswish(X2),
    "layer_norm": lambda: ops.layer_norm(X4, (5, 4)),
    "leaky_relu": lambda: ops.leaky_relu(X2, 0.1),
    "linear": lambda: ops.linear((2, 3, 6), (4, 6)),
    "log": lambda: ops.log(X2),
    "log_softmax": lambda: ops.log_softmax(X4),
    "matmul": lambda: ops.matmul(3, 5, 4),
    "max": lambda: ops.max(X4, 1),
    "max_pool2d": lambda: ops.max_pool2d(X4, 2, 1, 1),
    "maximum": lambda: ops.maximum(X2, X2),
    "mean": lambda: ops.mean(X4, -1),
    "min": lambda: ops.min(X4, 2),
    "minimum": lambda: ops.minimum(X2, X2),
    "mul": lambda: ops.mul(X4, 0.5),
    "neg": lambda: ops.neg(X2),
    "pad": lambda: ops.pad(X4, (1, 0, 2, 2)),
    "permute": lambda: ops.permute(X4, (0, 2, 3, 1)),
    "pow": lambda: ops.pow(X2, 2.0),
    "reciprocal": lambda: ops.reciprocal(X2),
    "relu": lambda: ops.relu(X4),
    "relu6": lambda: ops.relu6(X2),
    "requantize": lambda: ops.requantize((2, 3, 4), 0.05, 3),
    "reshape": lambda: ops.reshape(X4, (6, -1)),
    "rsqrt": lambda: ops.rsqrt(X2),
    "sigmoid": lambda: ops.sigmoid(X2),
    "silu": lambda: ops.silu(X2),
    "sin": lambda: ops.sin(X2),
    "slice": lambda: ops.slice(X4, 2, 1, 4),
    "softmax": lambda: ops.softmax(X4, 1),
    "sqrt": lambda: ops.sqrt(X2),
    "squeeze": lambda: ops.squeeze((3, 1, 4), 1),
    "sub": lambda: ops.sub(X2, X2),
    "sum": lambda: ops.sum(X4, (1, 2), True),
    "tanh": lambda: ops.tanh(X2),
    "transpose": lambda: ops.transpose(X4, 1, 3),
    "unsqueeze": lambda: ops.unsqueeze(X2, 1),
    "upsample_nearest2d": lambda: ops.upsample_nearest2d(X4, scale_factor=2),
    # dtypes beyond float32
    "conv2d_int8": lambda: ops.conv2d(X4, (4, 3, 3, 3), padding=1, dtype="int8"),
    "matmul_float16": lambda: ops.matmul(4, 3, 5, "float16"),
    "matmul_float64": lambda: ops.matmul(4, 3, 5, "float64"),
    "add_int32": lambda: ops.add(X2, X2, dtype="int32"),
    "relu_int8": lambda: ops.relu(X2, dtype="int8"),
    "gelu_float16": lambda: ops.gelu(X2, dtype="float16"),
    "mean_int32": lambda: ops.max(X4, 1, dtype="int32"),
    # the tensor-level families of polyc.ops.nn the PyTorch frontend lowers to
    "nn_argmax": lambda: _nn(lambda x: nn.argmax(x, 1, name="o")),
    "nn_argmax_whole": lambda: _nn(lambda x: nn.argmax(x, None, name="o")),
    "nn_cumsum": lambda: _nn(lambda x: nn.cumsum(x, 1, name="o")),
    "nn_where_gt": lambda: _nn(lambda x: nn.where(nn.gt(x, 0.0), x, 0.0, name="o")),
    "nn_normalize": lambda: _nn(lambda x: nn.normalize(x, 2.0, 1, name="o")),
    "nn_group_norm": lambda: _nn(lambda x: nn.group_norm(x, 2, name="o"), (1, 4, 3, 3)),
    "nn_bilinear": lambda: _nn(
        lambda x: nn.interpolate(x, (6, 6), mode="bilinear", name="o"), (1, 2, 3, 3)
    ),
    # the PolyBench-style kernels
    "pb_matmul": lambda: polybench.matmul(6),
    "pb_producer_consumer": lambda: polybench.producer_consumer(8),
    "pb_two_mm": lambda: polybench.two_mm(6),
    "pb_syrk": lambda: polybench.syrk(6),
    "pb_lu": lambda: polybench.lu(6),
    "pb_lu_right_looking": lambda: polybench.lu_right_looking(6),
    "pb_producer_stencil": lambda: polybench.producer_stencil(8),
    "pb_jacobi2d": lambda: polybench.jacobi2d(8),
    "pb_seidel2d": lambda: polybench.seidel2d(8),
}

#: the ops of the library the export refuses (a gather: codegen.mlir.export.
#: refuse_gathers), each with an example
REFUSED: dict[str, Callable[[], polyc.Kernel]] = {
    "embedding": lambda: ops.embedding((2, 3), (6, 4)),
}

#: the ops of the library that OPS or REFUSED must cover (a new op without an
#: entry fails)
LIBRARY = sorted(n for n in ops.__all__ if callable(getattr(ops, n)))


_KNOWN: dict[str, dict[str, int]] = {}


def corpus_kernel(name: str) -> polyc.Kernel:
    """The corpus file's kernel; the values of its macros are kept for
    :func:`param_values`."""
    from polyc.frontends.c.parse import parse_c

    (path,) = [p for p in corpus_files() if run_name(p) == name]
    (region,) = parse_c(str(path))
    _KNOWN[region.kernel.name] = dict(region.param_values)
    return region.kernel


CORPUS = [run_name(p) for p in corpus_files()]


def param_values(kernel: polyc.Kernel) -> dict[str, int]:
    """Equal small parameter values the kernel's context admits."""
    if not kernel.params:
        return {}
    known = _KNOWN.get(kernel.name, {})
    if set(kernel.params) <= set(known):
        return {p: int(known[p]) for p in kernel.params}
    for n in (10, 8, 12, 9, 16, 6):
        point = kernel.context
        for p in kernel.params:
            i = point.find_dim_by_name(isl.dim_type.param, p)
            point = point.fix_val(isl.dim_type.param, i, isl.Val(n))
        if not point.is_empty():
            return {p: n for p in kernel.params}
    raise AssertionError(f"{kernel.name}: no small parameter values")


def inputs_for(kernel: polyc.Kernel, seed: int = 0) -> dict[str, object]:
    rng = np.random.default_rng(seed)
    params = param_values(kernel)
    out: dict[str, object] = dict(params)
    for a in kernel.free_inputs:
        shape = a.concrete_shape(params)
        if a.dtype.is_float:
            values = rng.uniform(0.5, 1.5, shape)
        elif a.name == "input" and "embedding" in kernel.name:
            values = rng.integers(0, 6, shape)
        else:
            values = rng.integers(-20, 20, shape)
        out[a.name] = np.asarray(values).astype(a.dtype.numpy)
    return out


def compare(kernel, want, got) -> str | None:
    for name, w in want.items():
        g = got[name]
        if np.issubdtype(w.dtype, np.integer) or w.dtype == bool:
            if not np.array_equal(w, g):
                return f"{name}: integers differ"
            continue
        w64, g64 = w.astype(np.float64), g.astype(np.float64)
        tol = {"float16": 2e-3, "float32": 1e-6, "float64": 1e-12}[w.dtype.name]
        scale = max(1.0, float(np.nanmax(np.abs(w64)))) if w.size else 1.0
        ok = np.isclose(g64, w64, rtol=tol, atol=tol * scale, equal_nan=True)
        if not ok.all():
            i = int(np.flatnonzero(~ok)[0])
            return f"{name}: {g64.flat[i]} != {w64.flat[i]} at {i}"
    return None


def check(kernels: dict[str, polyc.Kernel]) -> dict[str, str | None]:
    """Build ``kernels`` through MLIR as one module and compare each with the
    interpreter: ``{name: None}`` when equal, else the difference."""
    from codegen.mlir.host import build_many

    names = list(kernels)
    modules = build_many([kernels[n] for n in names])
    out = {}
    for name, module in zip(names, modules):
        k = kernels[name]
        inputs = inputs_for(k)
        want = polyc.interpret(k.original, inputs)  # the untransformed program
        got = module(inputs)
        out[name] = compare(k, want, got)
    return out


def specialized(name: str) -> polyc.Kernel:
    """A corpus kernel with its parameters fixed (static memref shapes)."""
    k = corpus_kernel(name)
    return k.specialize(**param_values(k))


def imported_equal(original: polyc.Kernel, imported: polyc.Kernel) -> str | None:
    """Interpret both on the same inputs (arrays matched by position: the
    function's arguments); None when every output of ``original`` is equal.
    Arrays the import sees as inputs that the original does not (its temporaries,
    which are arguments in MLIR) start zeroed, as the interpreter zeroes them."""
    inputs = inputs_for(original)
    want = polyc.interpret(original, inputs)
    rename = dict(zip(original.arrays, imported.arrays))
    given = {rename[n]: v for n, v in inputs.items() if n in rename}
    given |= {p: inputs[p] for p in imported.params if p in inputs}
    feed = {}
    for a in imported.free_inputs:
        feed[a.name] = given.get(a.name)
        if feed[a.name] is None:
            feed[a.name] = np.zeros(a.concrete_shape(given), a.dtype.numpy)
    feed |= {p: given[p] for p in imported.params if p in given}
    got = polyc.interpret(imported, feed)
    missing = [n for n in want if rename[n] not in got]
    if missing:
        return f"{missing} are not outputs of the imported kernel"
    return compare(original, want, {n: got[rename[n]] for n in want})


def counts() -> dict[str, tuple[int, int]]:
    """``{category: (equal, total)}`` over every op, corpus kernel and the corpus
    auto-scheduled: exported, verified and run by the real tools."""
    import schedules

    groups = {
        "ops": {n: f() for n, f in OPS.items()},
        "corpus": {n: corpus_kernel(n) for n in CORPUS},
    }
    groups["corpus, auto-scheduled"] = {
        n: schedules.auto(k, params=param_values(k))
        for n, k in groups["corpus"].items()
    }
    out = {}
    for group, kernels in groups.items():
        results = check(kernels)
        bad = {n: r for n, r in results.items() if r}
        for n, r in bad.items():
            print(f"{group}: {n}: {r}")
        out[group] = (len(results) - len(bad), len(results))
    return out


if __name__ == "__main__":  # python -m tests.support.mlircheck
    for group, (ok, total) in counts().items():
        print(f"{group}: {ok} of {total} exported, verified and run equal")
