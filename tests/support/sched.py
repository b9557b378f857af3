"""Helpers for the schedules tests: run the generated C quickly, compare with the
interpreter on the original kernel.

``run_c`` compiles exactly the C that ``codegen`` emits for the host (same flags but
``-O1``) as a plain shared library loaded through cffi's ABI mode: no Python headers
to parse, so a compile takes ~0.1 s instead of ~0.5 s. ``compile_many`` puts many
kernels in one library (one gcc run), which is what lets the property test compile
every step of hundreds of random transformation sequences.
"""

from __future__ import annotations

import hashlib
import subprocess
import tempfile
from pathlib import Path

import cffi
import numpy as np

import polyc
import schedules as S
from codegen.build import BASE_FLAGS
from codegen.emit import CEmitter
from codegen.host import generate
from polyc.ir.inputs import prepare
from polyc.ir.kernel import Kernel
from polyc.ops import polybench as ex

_DIR = Path(tempfile.mkdtemp(prefix="polyc-sched-tests-"))
_LIBS: dict[str, object] = {}
FLAGS = tuple(f for f in BASE_FLAGS if not f.startswith("-O")) + ("-O1",)


def compile_c(kernel: Kernel):
    """``(ffi, lib, source)`` for the kernel's host C."""
    source = generate(kernel)
    flags = FLAGS + (("-fopenmp",) if source.uses_openmp else ())
    key = hashlib.sha256((source.text + repr(flags)).encode()).hexdigest()[:20]
    if key not in _LIBS:
        c_file = _DIR / f"k{key}.c"
        so_file = _DIR / f"k{key}.so"
        c_file.write_text(source.text)
        cmd = [
            "gcc",
            *flags,
            "-fPIC",
            "-shared",
            str(c_file),
            "-o",
            str(so_file),
            "-lm",
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr + source.text
        ffi = cffi.FFI()
        ffi.cdef(source.cdef)
        _LIBS[key] = (ffi, ffi.dlopen(str(so_file)))
    ffi, lib = _LIBS[key]
    return ffi, lib, source


def compile_many(kernels: list[Kernel], chunk: int = 60):
    """Libraries holding the host C of every kernel, ``chunk`` kernels per gcc run
    (two runs at a time); returns ``run(n, inputs, **params)`` that runs kernel
    ``n``."""
    sources = [
        CEmitter(k, function=f"pc_case{n}").generate() for n, k in enumerate(kernels)
    ]
    groups = [sources[i : i + chunk] for i in range(0, len(sources), chunk)]
    procs, libs = [], []
    for group in groups:
        text = group[0].text + "".join(
            s.text.replace(CEmitter.prelude, "", 1) for s in group[1:]
        )
        flags = FLAGS + (("-fopenmp",) if any(s.uses_openmp for s in group) else ())
        key = hashlib.sha256((text + repr(flags)).encode()).hexdigest()[:20]
        c_file, so_file = _DIR / f"m{key}.c", _DIR / f"m{key}.so"
        c_file.write_text(text)
        cmd = ["gcc", *flags, "-fPIC", "-shared", str(c_file), "-o", str(so_file)]
        if len(procs) >= 2:
            _wait(procs.pop(0))
        procs.append(subprocess.Popen([*cmd, "-lm"], stderr=subprocess.PIPE, text=True))
        libs.append((group, so_file))
    for proc in procs:
        _wait(proc)
    where = {}
    for group, so_file in libs:
        ffi = cffi.FFI()
        ffi.cdef("\n".join(s.cdef for s in group))
        lib = ffi.dlopen(str(so_file))
        for s in group:
            where[s.function] = (ffi, lib)

    def run(n: int, inputs: dict, **params) -> dict[str, np.ndarray]:
        kernel, source = kernels[n], sources[n]
        ffi, lib = where[source.function]
        arrays, values = prepare(kernel, dict(inputs), params)
        args = [int(values[p]) for p in source.params]
        args += [ffi.from_buffer("void *", arrays[a]) for a in source.arrays]
        getattr(lib, source.function)(*args)
        return {a.name: arrays[a.name] for a in kernel.outputs}

    return run


def _wait(proc: subprocess.Popen) -> None:
    _, err = proc.communicate()
    assert proc.returncode == 0, err[:4000]


def run_c(kernel: Kernel, inputs: dict, **params) -> dict[str, np.ndarray]:
    """Outputs of the compiled host C of ``kernel``."""
    ffi, lib, source = compile_c(kernel)
    arrays, values = prepare(kernel, dict(inputs), params)
    args = [int(values[p]) for p in source.params]
    args += [ffi.from_buffer("void *", arrays[a]) for a in source.arrays]
    getattr(lib, source.function)(*args)
    return {a.name: arrays[a.name] for a in kernel.outputs}


def inputs_for(kernel: Kernel, seed: int = 0, **params) -> dict[str, np.ndarray]:
    """Small random inputs (integers in -3..3, floats in [-1, 1))."""
    rng = np.random.default_rng(seed)
    values = {p: params[p] for p in kernel.params if p in params}
    out = {}
    for a in kernel.free_inputs:
        shape = a.concrete_shape(values)
        if np.issubdtype(a.dtype.numpy, np.integer):
            out[a.name] = rng.integers(-3, 4, shape).astype(a.dtype.numpy)
        else:
            out[a.name] = rng.uniform(-1, 1, shape).astype(a.dtype.numpy)
    return out


def assert_same(original: Kernel, transformed: Kernel, *, c: bool = True, **params):
    """The transformed kernel's interpreter (and compiled C) results equal the
    interpreter's on the original: bit-exact on integers, rtol 1e-5 on floats."""
    inputs = inputs_for(original, **params)
    want = polyc.interpret(original, {k: v.copy() for k, v in inputs.items()}, **params)
    runs = [
        polyc.interpret(transformed, {k: v.copy() for k, v in inputs.items()}, **params)
    ]
    if c:
        runs.append(
            run_c(transformed, {k: v.copy() for k, v in inputs.items()}, **params)
        )
    for got in runs:
        for name, ref in want.items():
            if np.issubdtype(ref.dtype, np.integer):
                np.testing.assert_array_equal(got[name], ref, err_msg=name)
            else:
                np.testing.assert_allclose(got[name], ref, rtol=1e-5, atol=1e-6)


def jacobi_time_tiled(n=12, steps=5, dtype="int32", size=4):
    """Time tiling of Jacobi-2D by hand: shift, fuse, merge, skew, tile."""
    k = ex.jacobi2d(n, steps, dtype)
    t = S.shift(k, "L2", {"i": 1, "j": 1})
    t = S.fuse(t, ["L1", "L2"], name="F")
    t = S.merge_bands(t, "L0", "F")
    t = S.skew(t, "L0", "i", {"t": 2})
    t = S.skew(t, "L0", "j", {"t": 2})
    return k, S.tile(t, "L0", {"t": size, "i": size, "j": size})
