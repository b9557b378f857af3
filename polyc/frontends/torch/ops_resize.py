"""ATen bilinear and bicubic upsampling -> :func:`polyc.ops.resize.interpolate`.

``F.interpolate(x, ..., mode="bilinear" | "bicubic")`` arrives as
``upsample_bilinear2d.vec`` (``output_size`` or ``scale_factors``) or, after
torch's decompositions, ``upsample_bilinear2d.default`` (``output_size`` and
optional per-axis scales). Both stay whole
(:data:`~polyc.frontends.torch.registry.KEEP`)
rather than decompose into gathers.
"""

from __future__ import annotations

from polyc.frontends.torch.registry import lowering
from polyc.ops import resize


def _size(ctx) -> tuple[int, int]:
    return tuple(int(d) for d in ctx.node.meta["val"].shape[-2:])


def _factors(scales):
    if scales is None:
        return None
    if isinstance(scales, (int, float)):
        return (scales, scales)
    scales = tuple(scales)
    if all(s is None for s in scales):
        return None
    return scales


def _handler(mode: str):
    def handler(ctx, x, output_size, align_corners, *scales):
        factors = scales[0] if len(scales) == 1 else scales or None
        return resize.interpolate(
            x,
            _size(ctx),
            mode,
            bool(align_corners),
            _factors(factors) if output_size is None or len(scales) > 1 else None,
            name=ctx.name,
        )

    handler.__name__ = f"upsample_{mode}2d"
    return handler


lowering("aten.upsample_bilinear2d", keep=True)(_handler("bilinear"))
lowering("aten.upsample_bicubic2d", keep=True)(_handler("bicubic"))
