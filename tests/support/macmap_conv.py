"""A convolution's operands for :func:`polyc.ir.macmap.check`, shared by the tests of
the MAC mapping predicate."""

from __future__ import annotations

from polyc.ir import macmap
from polyc.ir.affine import var


def conv_operands(dilation: int = 1) -> dict[str, macmap.Operand]:
    """``out[n, o, h, w] += input[n, rc, h + d*rh, w + d*rw] * weight[o, rc, rh,
    rw]`` over channels-last buffers of a tile of 4 channels, 8 x 8 outputs and
    3 x 3 taps: an input row of ``8 + 2 d`` pixels."""
    n, o, h, w, rc, rh, rw = (var(x) for x in ("n", "o", "h", "w", "rc", "rh", "rw"))
    d = dilation
    span = 8 + d * 2
    return {
        "c": macmap.Operand("out_l1_0", (n, o, h, w), (512, 64, 8, 1)),
        "a": macmap.Operand(
            "input_l1_0",
            (n, rc, h + rh * d, w + rw * d),
            (span * span * 4, 1, span * 4, 4),
        ),
        "b": macmap.Operand("weight_l1_0", (o, rc, rh, rw), (36, 1, 12, 4)),
    }


def conv_tile() -> tuple[dict[str, int], dict[str, bool]]:
    """The tile's extents, each iterator's range exact."""
    extents = {"n": 1, "o": 8, "h": 8, "w": 8, "rc": 4, "rh": 3, "rw": 3}
    return extents, dict.fromkeys(extents, True)
