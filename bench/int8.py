"""int8 beside float16: the PT2E-quantized models of the suite on one config.

    python -m bench.int8 [--configs edge-npu] [--models res-blocks,linear-stack]

Each model of :mod:`bench.zoo` built in ``int8`` (quantized with torchao's
``prepare_pt2e``/``convert_pt2e`` and the XNNPACK quantizer's symmetric int8
configuration, :func:`bench.zoo.int8`) goes through :func:`bench.models.measure`
in float16 and in int8 on each config: the same import, compile and run as the
model suite, the same numbers per run. For the int8 run the output is also
compared with PyTorch's quantized reference (the converted model run eagerly):
the largest difference in steps of the output's int8 scale.

Writes ``bench/results/int8.json`` and regenerates its table in docs/results.md.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench import zoo
from bench.common import RESULTS
from bench.compile_time import fresh_cache
from bench.models import _list, _once, measure, publish

#: edge-npu as shipped (the vector unit requantizes), with its MAC array's output
#: path requantizing (``[mac_array] requantize = true``), and datacenter (whose
#: MAC array runs int8 at twice its float16 rate)
CONFIGS = ("edge-npu", "edge-npu+requantize", "datacenter")
PATH = RESULTS / "int8.json"


def int8_models() -> list[str]:
    """The suite's models that are built in int8."""
    return [m.name for m in zoo.MODELS if "int8" in m.dtypes]


def main(argv: list[str] | None = None) -> int:
    names, configs, path = arguments(argv, __doc__, "every int8 model", CONFIGS, PATH)

    def steps(m: zoo.Model, row: dict) -> None:
        row["int8_steps"] = reference_steps(m, spec(row["config"]))

    payload = beside(
        names or int8_models(), configs, "int8", steps, lambda c: (c, spec(c))
    )
    publish(path, payload, table(payload), PATH)
    return 0


def arguments(
    argv, doc: str, models: str, configs, default: Path
) -> tuple[list[str], list[str], Path]:
    """A float16-beside bench's command line (``doc``: its module's docstring):
    the models asked for (empty: the bench's own, which ``models`` names), the
    configs (default ``configs``) and the JSON's path (default ``default``)."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--models", help=f"comma-separated (default: {models})")
    p.add_argument("--configs", help=f"comma-separated (default {','.join(configs)})")
    p.add_argument("--out", help="write the JSON here instead of bench/results/")
    args = p.parse_args(argv)
    path = Path(args.out) if args.out else default
    return _list(args.models), _list(args.configs) or list(configs), path


def beside(
    names: list[str], configs: list[str], other: str, annotate, config=str
) -> dict:
    """Each model of ``names`` measured in float16 and in ``other`` on
    ``configs``, from one empty build cache; :func:`bench.models.measure` gets
    ``config(name)`` for each, and ``annotate(model, row)`` adds to each run in
    ``other``."""
    models = [zoo.model(n) for n in names]
    given = [config(c) for c in configs]
    payload: dict = {"models": names, "configs": configs, "runs": []}
    with fresh_cache():
        payload["once_s"] = _once(models)
        for m in models:
            for dtype in ("float16", other):
                rows = measure(m, dtype, given, verify=False)
                if dtype == other:
                    for row in rows:
                        annotate(m, row)
                payload["runs"].extend(_slim(r) for r in rows)
    return payload


def spec(config: str):
    """The hardware spec of a config name; ``NAME+requantize`` is NAME with its
    MAC array's output path requantizing int8 results."""
    import dataclasses

    import accelerator

    name, _, variant = config.partition("+")
    s = accelerator.load_config(name)
    if variant == "requantize":
        s = dataclasses.replace(
            s, mac_array=dataclasses.replace(s.mac_array, requantize=True)
        )
    elif variant:
        raise ValueError(f"bench.int8: unknown config variant {variant!r}")
    return s


def _slim(row: dict) -> dict:
    """The run without its per-layer rows (the model suite's JSON keeps those)."""
    return {k: v for k, v in row.items() if k != "layers"}


def reference_steps(m: zoo.Model, config: str) -> float | None:
    """The int8 model's largest output difference from PyTorch's quantized
    reference, in steps of the output's scale (compiled for ``config``, a spec,
    again: the compile is reused from the run just measured)."""
    import numpy as np
    import torch

    import polyc

    module, inputs = m.build("int8")
    with torch.no_grad():
        want = module(*inputs).numpy()
    out = next(n for n in module.graph.nodes if n.op == "output").args[0]
    out = out[0] if isinstance(out, (list, tuple)) else out
    if "dequantize_per_tensor" not in str(out.target):
        return None
    kernel = polyc.from_torch(module, inputs)
    feeds = {f"arg{n}": x.numpy() for n, x in enumerate(inputs)}
    got, _ = polyc.compile(kernel, config=config).run(**feeds)
    return float(np.max(np.abs(got["out"] - want)) / float(out.args[1]))


def _by_model(payload: dict) -> dict:
    runs: dict = {}
    for r in payload["runs"]:
        runs.setdefault((r["model"], r["config"]), {})[r["dtype"]] = r
    return runs


def _pair(a: dict | None, b: dict | None, fmt) -> str:
    def one(r):
        return "-" if r is None or r.get("status") != "ok" else fmt(r)

    return f"{one(a)} / {one(b)}"


def table(payload: dict) -> str:
    """One row per model and config: float16 / int8 side by side."""

    def steps(run: dict) -> str:
        value = run.get("int8_steps")
        return "-" if value is None else f"{value:.0f}"

    return side_by_side(payload, "int8", "int8 error (steps)", steps)


def side_by_side(payload: dict, other: str, last: str, cell) -> str:
    """One row per model and config, float16 beside ``other`` (a dtype): cycles,
    the speed-up of ``other``, engine-bound ratios, DRAM bytes, MAC utilisation,
    energy, and a last column ``last`` whose cell is ``cell(other's run)`` ("-"
    when either run failed)."""
    lines = [
        f"| model | config | cycles float16 / {other} | {other} speed-up | x engine "
        f"bound float16 / {other} | DRAM bytes float16 / {other} | MAC util float16 / "
        f"{other} | energy uJ float16 / {other} | {last} |",
        "|" + "---|" * 9,
    ]
    for (model, config), runs in _by_model(payload).items():
        f16, run = runs.get("float16"), runs.get(other)
        ok = all(r is not None and r.get("status") == "ok" for r in (f16, run))
        speed = f"{f16['cycles'] / run['cycles']:.2f}x" if ok else "-"
        cells = [
            model,
            config,
            _pair(f16, run, lambda r: f"{r['cycles']:,}"),
            speed,
            _pair(f16, run, lambda r: _x(r["engine_ratio"])),
            _pair(f16, run, lambda r: f"{r['dram_bytes']:,}"),
            _pair(f16, run, lambda r: _pct(r["mac_utilization"])),
            _pair(f16, run, lambda r: f"{r['energy_pj'] / 1e6:,.1f}"),
            cell(run) if run is not None else "-",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _x(v) -> str:
    return "-" if v is None else f"{v:.2f}"


def _pct(v) -> str:
    return "-" if v is None else f"{v:.0%}"


if __name__ == "__main__":
    raise SystemExit(main())
