"""A layer's first tile of rows waits for the rows of the layer before that it
reads, not for the whole layer (the runtime's periodic ranges, docs/accelerator.md:
the placed code's vector statements name the runs of bytes they touch in each
channel, `codegen.accel.placed.period`)."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

import polyc
from accelerator.sim.attribution import owners


def test_a_conv_reads_the_rows_of_the_conv_before_as_they_are_written():
    """Two 3x3 convolutions on 16x16 images, channel-major, on datacenter: the
    first runs in row tiles, each ending with its ReLU on the vector unit, and
    the second's first tile loads the rows it needs once the tiles that write
    them are done. With the byte hulls of those rows (every channel's, so most
    of the array) it waited for the first layer's last ReLU: cycle 1,038 of a
    2,551-cycle run on the code before, now 717 of 2,122."""
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 16, 3, padding=1),
        nn.ReLU(),
    ).eval()
    x = torch.randn(1, 3, 16, 16)
    compiled = polyc.compile(polyc.from_torch(model, (x,)), config="datacenter")
    outputs, report = compiled.run(arg0=x.numpy())
    (got,) = outputs.values()
    np.testing.assert_allclose(got, model(x).detach().numpy(), rtol=1e-4, atol=1e-5)
    layers = [[s.name for s in lc.layer.stmts] for lc in compiled.choice.layers]
    assert len(layers) == 2
    first = {s: n for n, names in enumerate(layers) for s in names}
    events = list(zip(report.events, owners(report.events, first)))
    relus = [e for e, n in events if n == 0 and e.kind == "vector"]
    written = relus[0].label.split()[0]  # the first layer's last statement
    target = compiled.kernel.statement(written).target.array
    loads = [
        e for e, n in events if n == 1 and e.kind == "dma" and e.label == f"{target} in"
    ]
    assert len(relus) >= 3 and loads  # row tiles, and copies of what they write
    assert loads[0].start < relus[-1].end
