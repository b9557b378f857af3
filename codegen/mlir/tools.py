"""The real MLIR tools: find ``mlir-opt``, ``mlir-translate`` and ``clang`` (LLVM
19, Debian's ``mlir-19-tools`` and ``clang-19``), verify MLIR text, lower the host
form to LLVM IR and compile it to a shared library (cached by content under
``$POLYC_CACHE_DIR/mlir``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from functools import cache
from pathlib import Path

from codegen.build import cache_dir
from polyc.errors import CodegenError

INSTALL = (
    "Install LLVM 19's MLIR tools: apt-get install -y mlir-19-tools clang-19 "
    "(or put mlir-opt, mlir-translate and clang on PATH)."
)

#: the host lowering: affine -> scf -> cf, math to libm/LLVM, then the LLVM dialect
LOWER = (
    "--lower-affine",
    "--convert-scf-to-cf",
    "--arith-expand",
    "--convert-math-to-libm",
    "--convert-math-to-llvm",
    "--expand-strided-metadata",
    "--lower-affine",
    "--finalize-memref-to-llvm",
    "--convert-arith-to-llvm",
    "--convert-func-to-llvm",
    "--convert-cf-to-llvm",
    "--reconcile-unrealized-casts",
)


#: linalg on tensors -> the affine subset polyc.from_mlir reads (a producer's
#: pipeline: bufferize with identity layouts and results as out-parameters, then
#: linalg to affine loops)
FROM_LINALG = (
    "--one-shot-bufferize=bufferize-function-boundaries "
    "function-boundary-type-conversion=identity-layout-map",
    "--buffer-results-to-out-params",
    "--convert-linalg-to-affine-loops",
    "--canonicalize",
)


@cache
def tool(name: str) -> str:
    """The path of ``name`` (``mlir-opt``, ``mlir-translate``, ``clang``).

    Raises:
        CodegenError: when it is not installed.
    """
    for candidate in (
        f"{name}-19",
        f"/usr/lib/llvm-19/bin/{name}",
        name,
    ):
        path = shutil.which(candidate)
        if path:
            return path
    raise CodegenError(
        f"mlir: {name} is not installed because it is not on PATH. {INSTALL}"
    )


def available() -> bool:
    """Whether all three tools are installed."""
    try:
        for name in ("mlir-opt", "mlir-translate", "clang"):
            tool(name)
    except CodegenError:
        return False
    return True


def run(argv: list[str], text: str, what: str) -> str:
    """Run a tool on ``text`` (stdin); its stdout, or CodegenError quoting stderr."""
    proc = subprocess.run(argv, input=text, capture_output=True, text=True)
    if proc.returncode != 0:
        err = proc.stderr.strip().splitlines()
        quoted = "\n".join(err[:12])
        raise CodegenError(
            f"mlir: {what} failed because {Path(argv[0]).name} said:\n{quoted}\n"
            "Fix the construct it names (the exported text is in the message's "
            "locations)."
        )
    return proc.stdout


def opt(text: str, *passes: str, generic: bool = False) -> str:
    """``mlir-opt`` with ``passes`` (none: parse and verify) on ``text``."""
    flags = list(passes)
    if generic:
        flags += [
            "--mlir-print-op-generic",
            "--mlir-print-debuginfo",
            "--mlir-print-local-scope",
        ]
    what = f"mlir-opt {' '.join(passes)}".strip()
    return run([tool("mlir-opt"), *flags, "-"], text, what)


def verify(text: str) -> str:
    """Parse and verify ``text`` with ``mlir-opt``; its canonical printing."""
    return opt(text)


def to_llvm_ir(text: str) -> str:
    """The host form lowered to LLVM IR (mlir-opt, then mlir-translate)."""
    lowered = opt(text, *LOWER)
    return run(
        [tool("mlir-translate"), "--mlir-to-llvmir", "-"], lowered, "mlir-translate"
    )


def shared_library(text: str) -> Path:
    """``text`` lowered and compiled to a shared library, cached by content."""
    key = hashlib.sha256(
        "\n".join([text, *LOWER, tool("mlir-opt"), tool("clang")]).encode()
    ).hexdigest()[:24]
    root = cache_dir() / "mlir"
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"m{key}.so"
    if path.exists():
        return path
    ir = to_llvm_ir(text)
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        ll = Path(tmp) / "m.ll"
        ll.write_text(ir)
        out = Path(tmp) / "m.so"
        cmd = [tool("clang"), "-O2", "-ffp-contract=off", "-shared", "-fPIC"]
        cmd += ["-Wno-override-module", str(ll), "-o", str(out), "-lm"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise CodegenError(
                f"mlir: clang failed on the lowered LLVM IR because: "
                f"{proc.stderr.strip()[:800]}. {INSTALL}"
            )
        os.replace(out, path)
    return path
