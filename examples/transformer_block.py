"""A transformer encoder block from PyTorch on the simulated accelerator.

    python examples/transformer_block.py [--config edge-npu] [--tokens 64] [--width 256]

Multi-head self-attention (scaled dot-product attention), layer norms, a GELU MLP and
residuals, imported with ``polyc.from_torch`` as one kernel, compiled for the
accelerator and run on random tokens; the output is checked against torch eager and
the per-layer report printed.
"""

from __future__ import annotations

import sys

import torch
from _torch_common import arguments, run

from polyc.frontends.torch.models import TransformerBlock


def main(argv: list[str] | None = None) -> int:
    parser = arguments(__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--heads", type=int, default=8)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)
    model = TransformerBlock(args.width, args.heads, 4 * args.width)
    x = torch.randn(1, args.tokens, args.width)
    return run(model, x, args.config)


if __name__ == "__main__":
    sys.exit(main())
