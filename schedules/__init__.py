"""Transformations on isl schedule trees, their legality check, and the automatic
scheduler.

Every transformation is a function ``Kernel -> Kernel`` that names bands by their name
marks (``print(kernel)`` shows them), checks the result against the kernel's exact
dependences (:mod:`schedules.legality`) and records itself in ``kernel.history``;
:func:`replay` applies a history again. ::

    import schedules as S
    k = S.tile(kernel, "S1", {"i": 32, "j": 32, "k": 32})
    k = S.parallel(k, "S1_t")
    k = S.auto(kernel)                  # or let polyc choose
"""

from __future__ import annotations

from schedules.accel.bias import defer_bias
from schedules.accel.fold import fold_copy
from schedules.accel.gather import gather_dma
from schedules.accel.homes import home
from schedules.accel.inline import inline_copy
from schedules.accel.pads import inline_zero_pad
from schedules.accel.placement import place
from schedules.accel.prefetch import prefetch, prefetch_dma
from schedules.accel.reindex import permute_iterators, translate_iterators
from schedules.accel.split import split_layer
from schedules.accel.tensorize import map_vector, tensorize
from schedules.apply import TRANSFORMATIONS, apply_schedule, replay, to_yaml
from schedules.bands import interchange, merge_bands, permute, shift, skew, split_band
from schedules.fusion import distribute, fuse, reorder
from schedules.host.pack import pack
from schedules.host.register import accumulate
from schedules.host.scheduler import auto, auto_found
from schedules.legality import first_violation
from schedules.marks import parallel, unmark, unroll, vectorize
from schedules.tiling import strip_mine, tile

TRANSFORMATIONS.update(
    {
        f.__name__: f
        for f in (
            accumulate,
            apply_schedule,
            defer_bias,
            distribute,
            fuse,
            gather_dma,
            home,
            fold_copy,
            inline_copy,
            inline_zero_pad,
            interchange,
            map_vector,
            merge_bands,
            pack,
            parallel,
            place,
            prefetch,
            prefetch_dma,
            permute,
            permute_iterators,
            reorder,
            shift,
            skew,
            split_layer,
            split_band,
            strip_mine,
            tensorize,
            tile,
            translate_iterators,
            unmark,
            unroll,
            vectorize,
        )
    }
)

__all__ = [
    "accumulate",
    "apply_schedule",
    "auto",
    "auto_found",
    "defer_bias",
    "distribute",
    "first_violation",
    "fold_copy",
    "fuse",
    "gather_dma",
    "inline_copy",
    "inline_zero_pad",
    "interchange",
    "map_vector",
    "merge_bands",
    "pack",
    "parallel",
    "place",
    "prefetch",
    "prefetch_dma",
    "permute",
    "permute_iterators",
    "reorder",
    "replay",
    "shift",
    "skew",
    "split_layer",
    "split_band",
    "strip_mine",
    "tensorize",
    "tile",
    "translate_iterators",
    "to_yaml",
    "unmark",
    "unroll",
    "vectorize",
]
