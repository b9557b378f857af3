"""bfloat16 beside float16: the suite's transformers models on one config.

    python -m bench.bfloat16 [--configs edge-npu] [--models hf-bert,hf-llama]

Each model of :mod:`bench.zoo` goes through :func:`bench.models.measure` in float16
and in bfloat16 (``model.to(torch.bfloat16)``) on each config: the same import,
compile and run as the model suite, the same numbers per run. The simulated cycles
are deterministic (no clock is read). For the bfloat16 run the output is also
compared with eager bfloat16 PyTorch: the largest difference in units in the last
place of the output's largest element, and how many elements differ at all.

Writes ``bench/results/bfloat16.json`` and regenerates its table in docs/results.md.
"""

from __future__ import annotations

from bench import zoo
from bench.common import RESULTS
from bench.int8 import arguments, beside, side_by_side
from bench.models import publish

MODELS = ("hf-bert", "hf-llama", "hf-gpt2", "hf-vit")
CONFIGS = ("edge-npu", "datacenter")
PATH = RESULTS / "bfloat16.json"


def main(argv: list[str] | None = None) -> int:
    names, configs, path = arguments(argv, __doc__, ",".join(MODELS), CONFIGS, PATH)

    def ulps(m: zoo.Model, row: dict) -> None:
        if row.get("status") == "ok":
            row.update(eager_ulps(m, row["config"]))

    payload = beside(names or list(MODELS), configs, "bfloat16", ulps)
    publish(path, payload, table(payload), PATH)
    return 0


def eager_ulps(m: zoo.Model, config: str) -> dict:
    """The bfloat16 run's output against eager bfloat16 PyTorch: the largest
    difference in ULPs of the largest output element (``|got - want| / ulp(max
    |want|)``) and the number of elements that differ (compiled again: the compile
    is reused from the run just measured)."""
    import numpy as np
    import torch

    import polyc
    from polyc.frontends.torch.bf16 import to_numpy, ulp_distance

    module, inputs = m.build("bfloat16")
    with torch.no_grad():
        want = to_numpy(module(*inputs))
    kernel = polyc.from_torch(module, inputs)
    feeds = {f"arg{n}": to_numpy(x) for n, x in enumerate(inputs)}
    got, _ = polyc.compile(kernel, config=config).run(**feeds)
    g, w = (np.asarray(x, np.float32) for x in (got["out"], want))
    top = float(np.abs(w).max())
    ulp = 2.0 ** (np.floor(np.log2(top)) - 7) if top > 0 else 1.0
    differ = int(np.count_nonzero(ulp_distance(got["out"], want)))
    return {"eager_ulps": float(np.abs(g - w).max() / ulp), "eager_differ": differ}


def table(payload: dict) -> str:
    """One row per model and config: float16 / bfloat16 side by side."""

    def eager(run: dict) -> str:
        if run.get("status") != "ok" or "eager_ulps" not in run:
            return "-"
        return f"{run['eager_ulps']:.1f}, {run['eager_differ']:,}"

    return side_by_side(
        payload,
        "bfloat16",
        "bfloat16 vs eager: max error (ULPs of the largest output), elements that "
        "differ",
        eager,
    )


if __name__ == "__main__":
    raise SystemExit(main())
