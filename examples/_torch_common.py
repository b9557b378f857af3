"""Shared by the PyTorch examples: import, compile, simulate, check, report."""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

import polyc
from polyc.studies.model_report import model_report


def arguments(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--config",
        default="edge-npu",
        help="accelerator: tiny, edge-npu, datacenter or a TOML path (default edge-npu)",
    )
    parser.add_argument("--seed", type=int, default=0)
    return parser


def run(model: torch.nn.Module, x: torch.Tensor, config: str) -> int:
    """from_torch -> polyc.compile -> simulated run; compare with eager; report."""
    model = model.eval()
    start = time.perf_counter()
    kernel = polyc.from_torch(model, (x,))
    imported = time.perf_counter()
    compiled = polyc.compile(kernel, config=config)
    built = time.perf_counter()
    outputs, report = compiled.run(arg0=x.numpy())
    ran = time.perf_counter()
    with torch.no_grad():
        ref = model(x).numpy()
    err = float(np.abs(outputs["out"] - ref).max())
    ok = np.allclose(outputs["out"], ref, rtol=1e-4, atol=1e-5)
    print(
        f"{kernel.name}: {len(kernel.statements)} statements in one kernel, "
        f"{sum(v.size for v in kernel.data.values()):,} weights bound"
    )
    print(
        f"time: import {imported - start:.1f} s, compile {built - imported:.1f} s, "
        f"simulate {ran - built:.1f} s (module to simulated run {ran - start:.1f} s)"
    )
    print(
        f"output vs torch eager: max |diff| {err:.2e} "
        f"({'within' if ok else 'OUTSIDE'} rtol 1e-4, atol 1e-5)"
    )
    print()
    print(model_report(compiled, report))
    return 0 if ok else 1
