"""A ResNet-18-style network from PyTorch on the simulated accelerator.

    python examples/resnet18.py [--config edge-npu] [--size 64] [--width 64]

Imports the model with ``polyc.from_torch`` (one kernel for the whole network,
batch norms folded into the convolutions, weights bound inside), compiles it for the
accelerator, runs it on a random image, checks the logits against torch eager and
prints the per-layer report.
"""

from __future__ import annotations

import sys

import torch
from _torch_common import arguments, run

from polyc.frontends.torch.models import ResNet18, randomize_batch_norms


def main(argv: list[str] | None = None) -> int:
    parser = arguments(__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=64, help="image side (default 64)")
    parser.add_argument(
        "--width", type=int, default=64, help="channels of the first stage (64)"
    )
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)
    model = randomize_batch_norms(ResNet18(num_classes=10, width=args.width))
    x = torch.randn(1, 3, args.size, args.size)
    return run(model, x, args.config)


if __name__ == "__main__":
    sys.exit(main())
