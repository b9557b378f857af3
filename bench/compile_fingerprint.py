"""What the accelerator scheduler decides, as a fingerprint to compare across changes.

    python -m bench.compile_fingerprint [--only NAME ...] [--out FILE]

For a dozen kernels (polyc's ResNet-18 at 64x64 on edge-npu, datacenter and hw-a,
a transformer block, a MobileNetV2 block, an MLP, a softmax, a layer norm, a
depthwise conv, and HW-A's GEMM, conv and decode layers in int8), one line each:
the scheduler's predicted cycles (whole kernel and per layer), the chosen tile
sizes' digest and a SHA-256 of the generated C. A change meant to make compiling
faster (and nothing else) leaves every line as it was: run this before and after
and ``diff`` the outputs. Nothing is compiled by gcc and nothing is simulated;
schedule and codegen are what is compared.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time


def _torch_kernel(name: str):
    import torch

    import polyc
    from polyc.frontends.torch import models

    torch.manual_seed(0)
    nn = torch.nn
    if name == "resnet18":
        m = models.ResNet18(num_classes=10, width=64)
        x = torch.randn(1, 3, 64, 64)
    elif name == "transformer":
        m = models.TransformerBlock(width=64, heads=4, hidden=128)
        x = torch.randn(1, 16, 64)
    elif name == "inverted_residual":
        m = models.InvertedResidual(16, 16)
        x = torch.randn(1, 16, 16, 16)
    elif name == "mlp":
        m = models.MLP()
        x = torch.randn(4, m.fc1.in_features)
    elif name == "depthwise":
        m = nn.Sequential(nn.Conv2d(32, 32, 3, 1, 1, groups=32, bias=False), nn.ReLU())
        x = torch.randn(1, 32, 28, 28)
    else:
        raise KeyError(name)
    if hasattr(models, "randomize_batch_norms"):
        models.randomize_batch_norms(m)
    return polyc.from_torch(m.eval(), (x,), name=name)


def _kernel(name: str):
    from polyc.ops import kernels

    if name == "softmax":
        return kernels.softmax((64, 128), dim=-1)
    if name == "layer_norm":
        return kernels.layer_norm((32, 256), 256)
    if name.startswith("hwa_"):
        from bench.fidelity import kernel
        from bench.peers.hwa import layer

        return kernel(layer(name[len("hwa_") :]))
    return _torch_kernel(name)


#: (kernel, config) pairs
CASES = (
    ("resnet18", "edge-npu"),
    ("resnet18", "datacenter"),
    ("resnet18", "hw-a"),
    ("transformer", "edge-npu"),
    ("inverted_residual", "edge-npu"),
    ("mlp", "datacenter"),
    ("softmax", "edge-npu"),
    ("layer_norm", "edge-npu"),
    ("depthwise", "edge-npu"),
    ("hwa_gemm_256", "hw-a"),
    ("hwa_conv3x3_c3", "hw-a"),
    ("hwa_gemm_decode", "hw-a"),
)


def fingerprint(name: str, config: str) -> tuple[str, float]:
    """One line for ``name`` compiled for ``config``, and the CPU seconds its
    schedule and codegen took."""
    from accelerator import load_config
    from codegen.accel import placed
    from schedules.accel.scheduler import schedule

    kernel = _kernel(name)
    spec = load_config(config)
    start = time.process_time()  # CPU seconds: the machine may be shared
    choice = schedule(kernel, spec)
    source, mode = placed.generate(choice.kernel)
    took = time.process_time() - start
    layers = []
    for lc in choice.layers:
        cand = lc.candidate
        if cand is None:
            layers.append("-")
        else:
            layers.append(f"{cand.cycles:.3f}/{sorted(map(str, cand.sizes))}")
    tiles = hashlib.sha256("|".join(layers).encode()).hexdigest()[:12]
    c_hash = hashlib.sha256(source.text.encode()).hexdigest()[:16]
    line = (
        f"{name:18} {config:10} predicted {choice.predicted_cycles:,.3f} "
        f"layers {len(layers)} tiles {tiles} mode {mode} C {c_hash}"
    )
    return line, took


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="kernel names to run (default: all)")
    ap.add_argument("--out", help="also write the lines to this file")
    args = ap.parse_args(argv)
    lines = []
    total = 0.0
    for name, config in CASES:
        if args.only and name not in args.only:
            continue
        line, took = fingerprint(name, config)
        total += took
        print(line, flush=True)
        print(f"  ({took:.1f} CPU s schedule + codegen)", file=sys.stderr, flush=True)
        lines.append(line)
    print(f"schedule + codegen: {total:.1f} CPU s in all", file=sys.stderr)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
