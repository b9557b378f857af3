"""Running the C corpus: originals and polyc's source-to-source output, side by side.

Every corpus file has a kernel (one ``#pragma scop`` region) and a ``run_<name>``
function that fills its arrays deterministically, dumps the inputs, calls the kernel
and dumps the outputs (hex floats: exact). All originals are compiled into one
program and all rewritten files into another (two gcc runs for the whole corpus).
Results are computed once per test session and shared by the xdist workers.
"""

from __future__ import annotations

import fcntl
import hashlib
import pickle
import subprocess
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import numpy as np

from tests.support.paths import CORPUS, ROOT

#: no FMA contraction: the original and the rewritten code then round identically
CFLAGS = ["-O2", "-std=gnu11", "-ffp-contract=off", "-w"]


def corpus_files() -> list[Path]:
    return sorted(p for p in CORPUS.glob("*.c"))


def run_name(path: Path) -> str:
    return path.stem.replace("-", "_")


def build_and_run(
    batches: dict[str, tuple[dict[str, str], list[str]]], work: Path
) -> dict[str, dict[str, dict]]:
    """Compile each batch ``{label: ({name: C text}, extra flags)}`` into one program
    with a driver that calls every ``run_<name>`` (the batches build concurrently),
    run them and return ``{label: {name: {(tag, array): np.ndarray}}}``."""
    procs = {}
    for label, (sources, extra) in batches.items():
        workdir = work / label
        workdir.mkdir(parents=True, exist_ok=True)
        files = []
        for name, text in sources.items():
            f = workdir / f"{name}.c"
            f.write_text(text)
            files.append(str(f))
        driver = ["#include <stdio.h>"]
        driver += [f"void run_{n}(void);" for n in sources]
        driver.append("int main(void) {")
        for n in sources:
            driver.append(f'  printf("== {n}\\n"); run_{n}(); fflush(stdout);')
        driver.append("  return 0;\n}")
        (workdir / "driver.c").write_text("\n".join(driver) + "\n")
        exe = workdir / "corpus"
        cmd = ["gcc", *CFLAGS, *extra, f"-I{CORPUS}", *files]
        cmd += [str(workdir / "driver.c"), "-lm", "-o", str(exe)]
        procs[label] = (subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True), exe)
    out = {}
    for label, (proc, exe) in procs.items():
        _, err = proc.communicate()
        assert proc.returncode == 0, err
        run = subprocess.run([str(exe)], check=True, capture_output=True, text=True)
        out[label] = parse_dumps(run.stdout)
    return out


def assert_same_bits(runs: dict, names) -> None:
    """Each of ``names`` dumped the same arrays, bit for bit, in the
    ``rewritten`` run of :func:`build_and_run` as in the ``original`` one."""
    for name in names:
        want, got = runs["original"][name], runs["rewritten"][name]
        assert want.keys() == got.keys(), name
        for key in want:
            assert want[key].tobytes() == got[key].tobytes(), (name, key)


def parse_dumps(text: str) -> dict[str, dict]:
    results: dict[str, dict] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("== "):
            current = results.setdefault(line[3:].strip(), {})
            continue
        tag, name, kind, n, *values = line.split()
        if kind in ("d", "f"):
            arr = np.array([float.fromhex(v) for v in values], dtype=np.float64)
            arr = arr.astype(np.float32 if kind == "f" else np.float64)
        else:
            arr = np.array(
                [int(v) for v in values], np.int8 if kind == "c" else np.int32
            )
        assert len(arr) == int(n)
        current[(tag, name)] = arr
    return results


def corpus_results(base: Path) -> dict:
    """Parse, rewrite, compile and run the whole corpus once (shared by workers)."""
    cache = base / f"cfront_corpus_{_fingerprint()}.pkl"
    with open(base / "cfront_corpus.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if cache.exists():
            return pickle.loads(cache.read_bytes())
        result = _compute(base / "cfront_corpus")
        cache.write_bytes(pickle.dumps(result))
        return result


def _fingerprint() -> str:
    """A hash of everything the results depend on (so a stale cache is never read)."""
    root = ROOT
    h = hashlib.sha256()
    paths = sorted(CORPUS.glob("*")) + sorted((root / "polyc").rglob("*.py"))
    paths += sorted((root / "codegen").rglob("*.py")) + [Path(__file__)]
    paths += sorted((root / "schedules").rglob("*.py"))
    for p in paths:
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def _rewrite(path: Path) -> tuple:
    """Program-order and automatic rewrites of one corpus file (a worker's job)."""
    from polyc.integrations.c_source import compile_c

    result = compile_c(path)
    assert all(r.replaced for r in result.regions), result.regions
    kernels = [r.kernel for r in result.regions]
    known = {k: v for r in result.regions for k, v in r.param_values.items()}
    return kernels, known, result.text, compile_c(path, schedule="auto").text


def _compute(work: Path) -> dict:
    """Rewrite the corpus on two processes (the other test worker waits for this),
    then build and run the three versions."""
    paths = corpus_files()
    with ProcessPoolExecutor(2, mp_context=get_context("spawn")) as pool:
        done = list(pool.map(_rewrite, paths))
    names = [run_name(p) for p in paths]
    originals = {n: p.read_text() for n, p in zip(names, paths)}
    runs = build_and_run(
        {
            "original": (originals, []),
            "rewritten": ({n: d[2] for n, d in zip(names, done)}, []),
            "auto": ({n: d[3] for n, d in zip(names, done)}, ["-fopenmp"]),
        },
        work,
    )
    return {
        "kernels": {n: d[0] for n, d in zip(names, done)},
        "known": {n: d[1] for n, d in zip(names, done)},
        "original_runs": runs["original"],
        "rewritten_runs": runs["rewritten"],
        "auto_runs": runs["auto"],
    }


def interpret_inputs(kernel, dumps: dict, known: dict[str, int]):
    """Inputs and parameters for ``polyc.interpret`` from a run's ``in`` dumps."""
    params = dict(known)
    for (tag, name), arr in dumps.items():
        if tag == "param" and name in kernel.params:
            params[name] = int(arr[0])
    params = {p: v for p, v in params.items() if p in kernel.params}
    inputs = {}
    for a in kernel.free_inputs:
        arr = dumps[("in", a.name)]
        shape = a.concrete_shape(params)
        inputs[a.name] = arr.reshape(-1)[: int(np.prod(shape))].reshape(shape)
        inputs[a.name] = inputs[a.name].astype(a.dtype.numpy)
    return inputs, params


def bench_checksums(
    name: str, sizes: dict[str, int], work: Path, **options
) -> tuple[list[str], dict[str, str], dict[str, str]]:
    """A corpus kernel through the corpus benchmark's driver at ``sizes``
    (``bench.host_c_corpus``): ``(steps, original's checksums, polyc's)``, the
    steps of ``--schedule auto`` for each region and every array's checksum (hex
    floats) after the original and after polyc's output, each built with gcc.
    ``options`` go to ``compile_c`` (``cache=``...)."""
    from bench import host_c_corpus as hc
    from polyc.integrations.c_source import compile_c

    text = (CORPUS / f"{name}.c").read_text()
    tag = "_".join(f"{k}{v}" for k, v in sorted(sizes.items()))
    src = work / f"{name}_{tag}.c"
    src.write_text(hc.prepare(name, text, sizes))
    drv = work / f"{name}_{tag}_driver.c"
    drv.write_text(hc.driver(name, text, sizes))
    result = compile_c(src, schedule="auto", include_dirs=[CORPUS], **options)
    out = work / f"{name}_{tag}.polyc.c"
    out.write_text(result.text)
    sums = []
    for label, file in (("gcc", src), ("polyc", out)):
        exe = work / f"{name}_{tag}.{label}"
        hc._build(["gcc"], [file, drv], exe)
        sums.append(hc._run(exe, 60.0)[1])
    return [r.step for r in result.regions], sums[0], sums[1]
