"""torch.compile against from_torch: the same kernels and the same cycles.

    python -m bench.torch_parity [--models a,b] [--config edge-npu] [--out FILE]

For each model of the suite (:mod:`bench.zoo`) in float32, and in int8 for the
models built in int8 (PT2E-quantized, :func:`bench.zoo.int8`), the model is imported
twice: with ``polyc.from_torch`` and with ``torch.compile(model, backend="polyc",
options={"config": ...})``, each compiled for one config and run once on the
model's example inputs. A row records whether the two kernels are the same
(:func:`kernel_difference`: every array's shape, dtype, role and bound data and
every statement's domain, accesses and body, with the arrays renamed by their
position and the source lines left out), both runs' cycles and DRAM bytes, the
per-layer cycles (``model_report``), and each output's largest difference from
eager torch. Not a timing benchmark: nothing in it depends on the machine's load.

Writes ``bench/results/torch_parity.json`` and regenerates its table in
docs/torch.md.
"""

from __future__ import annotations

import argparse
import re
import warnings
from pathlib import Path

from bench import zoo
from bench.common import RESULTS
from bench.models import _write, publish

PATH = RESULTS / "torch_parity.json"
CONFIG = "edge-npu"
#: float32 for every model; int8 for those built in int8
DTYPES = ("float32", "int8")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", help=f"comma-separated, of: {', '.join(zoo.names())}")
    p.add_argument("--config", default=CONFIG, help=f"(default {CONFIG})")
    p.add_argument("--out", help="write the JSON here instead of bench/results/")
    args = p.parse_args(argv)
    names = [w.strip() for w in (args.models or "").split(",") if w.strip()]
    try:
        models = [zoo.model(n) for n in names or zoo.names()]
    except KeyError as err:
        print(f"bench.torch_parity: {err.args[0]}")
        return 2
    payload = {"config": args.config, "rows": []}
    path = Path(args.out) if args.out else PATH
    for m in models:
        for dtype in (d for d in DTYPES if d in m.dtypes):
            row = measure(m, args.config, dtype)
            print(_line(row), flush=True)
            payload["rows"].append(row)
            _write(path, payload)
    publish(path, payload, table(payload), PATH)
    return 0


def measure(m: zoo.Model, config: str, dtype: str = "float32") -> dict:
    """One row: model ``m`` in ``dtype`` through both imports on ``config``."""
    import torch

    import polyc
    from polyc.integrations.torch_compile import backend

    module, inputs = m.build(dtype)
    row: dict = {"model": m.name, "dtype": dtype, "config": config}
    with torch.no_grad():
        ref = module(*inputs).numpy()
    feeds = {f"arg{n}": x.numpy() for n, x in enumerate(inputs)}
    kernel = polyc.from_torch(module, inputs)
    direct = polyc.compile(kernel, config)
    out, report = direct.run(**feeds)
    row["statements"] = len(kernel.statements)
    row["from_torch"] = _run(direct, report, out["out"], ref)

    torch._dynamo.reset()
    backend.reset()
    compiled = torch.compile(module, backend="polyc", options={"config": config})
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always", backend.EagerFallbackWarning)
        got = compiled(*inputs)
    records = backend.records()
    row["graphs"] = [r.status for r in records]
    row["eager_warnings"] = len(caught)
    kernels = [k for r in records for k in r.kernels]
    runs = [c for r in records for c in r.compiled]
    if len(kernels) != 1 or len(runs) != 1:
        row["same_kernel"] = False
        row["difference"] = f"torch.compile made {len(kernels)} kernels"
    else:
        difference = kernel_difference(kernel, kernels[0])
        row["same_kernel"] = difference is None
        row["difference"] = difference or ""
        row["torch_compile"] = _run(runs[0], runs[0].last_report, got.numpy(), ref)
    row["same_cycles"] = (
        row.get("torch_compile", {}).get("cycles") == (row["from_torch"]["cycles"])
        and row.get("torch_compile", {}).get("layers") == row["from_torch"]["layers"]
    )
    torch._dynamo.reset()
    return row


def _run(compiled, report, got, ref) -> dict:
    import numpy as np

    from polyc.studies.model_report import model_report

    layers = model_report(compiled, report).layers
    return {
        "cycles": report.cycles,
        "dram_bytes": report.dram_bytes,
        "layers": [[lay.name, lay.cycles] for lay in layers],
        "max_abs_error": float(np.abs(got.astype(np.float64) - ref).max()),
    }


def kernel_difference(a, b) -> str | None:
    """None when kernels ``a`` and ``b`` are the same up to names: arrays by
    position (shape, dtype, role, bound data), statements in order (domain,
    accesses, body), with every array renamed by its position and the kernels'
    names and source lines left out; else the first difference, in words."""
    import numpy as np

    from polyc.ir.printing import kernel_text

    if len(a.arrays) != len(b.arrays):
        return f"{len(a.arrays)} arrays against {len(b.arrays)}"
    for x, y in zip(a.arrays.values(), b.arrays.values()):
        dx, dy = a.data.get(x.name), b.data.get(y.name)
        if (dx is None) != (dy is None):
            return f"{x.name} is bound in one kernel only ({y.name})"
        if dx is not None and not np.array_equal(dx, dy):
            return f"{x.name} and {y.name} hold different data"
    ta, tb = _canonical(a, kernel_text(a)), _canonical(b, kernel_text(b))
    for n, (la, lb) in enumerate(zip(ta, tb)):
        if la != lb:
            return f"line {n + 1}: {la.strip()!r} against {lb.strip()!r}"
    if len(ta) != len(tb):
        return f"{len(ta)} lines of kernel text against {len(tb)}"
    return None


def _canonical(kernel, text: str) -> list[str]:
    names = sorted(kernel.arrays, key=len, reverse=True)
    index = {name: f"A{n}" for n, name in enumerate(kernel.arrays)}
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b")
    return [
        pattern.sub(lambda m: index[m.group(1)], line) for line in text.splitlines()[1:]
    ]


def _line(row: dict) -> str:
    tc = row.get("torch_compile", {})
    return (
        f"{row['model']} {row['dtype']}: same kernel {row['same_kernel']}, cycles "
        f"{row['from_torch']['cycles']} / {tc.get('cycles')} {row['difference']}"
    )


def table(payload: dict) -> str:
    """The markdown table of a run."""
    lines = [
        "| model | dtype | statements | from_torch cycles | torch.compile cycles | "
        "same kernel | same cycles per layer | graphs |",
        "|---|---|---:|---:|---:|---|---|---|",
    ]
    for r in payload["rows"]:
        tc = r.get("torch_compile", {})
        cycles = tc.get("cycles")
        lines.append(
            f"| {r['model']} | {r.get('dtype', 'float32')} | {r['statements']} | {r['from_torch']['cycles']:,} | "
            f"{'-' if cycles is None else f'{cycles:,}'} | "
            f"{'yes' if r['same_kernel'] else 'no: ' + r['difference']} | "
            f"{'yes' if r['same_cycles'] else 'no'} | {', '.join(r['graphs'])} |"
        )
    same = sum(r["same_kernel"] and r["same_cycles"] for r in payload["rows"])
    models = {r["model"] for r in payload["rows"]}
    lines.append("")
    lines.append(
        f"{same} of {len(payload['rows'])} runs ({len(models)} models): the same "
        f"kernel and the same cycles, whole and per layer, on {payload['config']}."
    )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
