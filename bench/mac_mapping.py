"""Convolutions whose taps cannot fuse with the channels, against the roofline.

    python -m bench.mac_mapping [--configs edge-npu ...]

Dilated, causal and reversed-tap convolutions run on the MAC array with K over
the channels and the taps looping around the call (``polyc.ir.macmap.check``
refuses the channels-last (tap, channel) K for them); the undilated conv2d of the
same size is the comparison. Each layer is compiled by ``polyc.compile(kernel,
config=...)`` in float32, simulated, and checked against the interpreter. Writes
``bench/results/mac_mapping.json`` and prints the table.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from bench.common import table, write_json


def causal_conv1d(c=64, o=64, t=256, r=3):
    from polyc import compute as pc

    x = pc.placeholder("x", (c, t), "float32")
    w = pc.placeholder("w", (o, c, r), "float32")
    rc, rr = pc.reduce_axis(c, "c"), pc.reduce_axis(r, "r")
    y = pc.compute(
        "y",
        (o, t),
        lambda oo, tt: pc.sum(
            x[rc, tt - rr] * w[oo, rc, rr], (rc, rr), where=tt - rr >= 0
        ),
    )
    return pc.kernel("causal_conv1d", outputs=[y])


def reversed_tap_conv1d(c=64, o=64, t=256, r=3):
    from polyc import compute as pc

    xp = pc.placeholder("xp", (c, t + r - 1), "float32")
    w = pc.placeholder("w", (o, c, r), "float32")
    rc, rr = pc.reduce_axis(c, "rc"), pc.reduce_axis(r, "r")
    y = pc.compute(
        "y",
        (o, t),
        lambda oo, tt: pc.sum(xp[rc, tt + r - 1 - rr] * w[oo, rc, rr], (rc, rr)),
    )
    return pc.kernel("reversed_tap_conv1d", outputs=[y])


def conv2d(dilation: int):
    from polyc import ops

    return ops.conv2d(
        input=(1, 32, 28, 28),
        weight=(64, 32, 3, 3),
        padding=dilation,
        dilation=dilation,
        bias=False,
    )


def torch_conv1d():
    import torch

    import polyc

    torch.manual_seed(0)
    model = torch.nn.Conv1d(64, 64, 3, dilation=2, padding=2).eval()
    return polyc.from_torch(model, (torch.randn(1, 64, 256),))


LAYERS = {
    "conv2d_dil2": (lambda: conv2d(2), "conv2d 1x32x28x28->64 3x3 dilation 2"),
    "conv2d_dil1": (lambda: conv2d(1), "same, dilation 1 (comparison)"),
    "causal_conv1d": (causal_conv1d, "causal conv1d 64->64, 256 steps, 3 taps"),
    "reversed_tap": (reversed_tap_conv1d, "xp[rc, t + R - 1 - r], 64->64, 256"),
    "torch_conv1d_dil2": (torch_conv1d, "nn.Conv1d(64, 64, 3, dilation=2, pad 2)"),
}


def run(name: str, config: str) -> dict:
    import polyc

    build, what = LAYERS[name]
    kernel = build()
    rng = np.random.default_rng(0)
    inputs = {
        a.name: rng.standard_normal(a.concrete_shape({})).astype(np.float32)
        for a in kernel.free_inputs
    }
    want = polyc.interpret(kernel, inputs)
    start = time.perf_counter()
    compiled = polyc.compile(kernel, config=config)
    compile_s = time.perf_counter() - start
    got, report = compiled.run(inputs)
    err = max(
        float(np.abs(got[o] - w).max() / np.abs(w).max()) for o, w in want.items()
    )
    on_mac = [
        ln.split(":")[0].strip()
        for ln in str(compiled).splitlines()
        if "[MAC array" in ln
    ]
    return {
        "layer": name,
        "what": what,
        "config": config,
        "cycles": report.cycles,
        "roofline": report.roofline_cycles,
        "ratio": report.ratio,
        "predicted": compiled.choice.predicted_cycles,
        "mac_statements": ",".join(on_mac),
        "max_rel_err": err,
        "compile_s": compile_s,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", nargs="+", default=["edge-npu"])
    ap.add_argument("--layers", nargs="+", default=list(LAYERS))
    args = ap.parse_args(argv)
    rows = [run(n, c) for c in args.configs for n in args.layers]
    write_json("mac_mapping", {"records": rows})
    cols = ("layer", "config", "cycles", "roofline", "ratio", "mac_statements")
    print(table(rows, cols + ("max_rel_err",)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
