"""Layer models shared across hardware points: a grid study's points that differ
only in SRAM capacity or DRAM bandwidth build each layer's cost model once.

A :class:`schedules.accel.model.LayerModel` builds sympy expressions of a layer's
tile sizes (buffer boxes, copies, engine cycles) and checks MAC mappings per tile
size; that is most of a layer's search. Neither reads an SRAM level's capacity
(the search filters the points that fit afterwards) nor DRAM's bandwidth (it
enters the numeric evaluation, :mod:`schedules.accel.terms`): what they read of
the hardware is its :func:`accelerator.hardware.spec.model_view`. So a model is
kept per process, keyed by the layer's text as the search cache sees it
(:func:`schedules.accel.layertext.layer_text`, under the layer's own names: the
expressions name its tile symbols), its statements' domains, the structure, the
engines' level and the model view; a layer of another point with the same key
gets that model :meth:`~schedules.accel.model.LayerModel.on` its own
description. The evaluation (footprints, DMA routes, the engines' overlap, what
fits) runs per point as before, so every point's search returns what it returns
with a model of its own (``tests/schedules/accel/test_shared_models.py`` checks
whole compiles over a small grid both ways).

``POLYC_SHARED_ANALYSES=0`` turns it off (``bench/codesign_speed.py`` compares); :data:`STATS` counts ``built`` and
``shared`` models; at most :data:`SIZE` are kept, the least recently used
dropped first.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Callable

from accelerator.hardware.spec import Spec, model_view, view_id
from polyc.ir.deps import shared_analyses
from polyc.ir.kernel import Kernel, Statement
from schedules.accel import estimate_cache
from schedules.accel.layers import Layer
from schedules.accel.layertext import layer_text
from schedules.accel.model import LayerModel
from schedules.accel.structure import Structure

#: models kept per process (one ResNet-18 compile builds a few hundred)
SIZE = 2048
#: ``built`` and ``shared`` models in this process
STATS: Counter = Counter()
_MODELS: OrderedDict = OrderedDict()


def enabled() -> bool:
    """``$POLYC_SHARED_ANALYSES`` is not ``0`` (it turns off the dependences'
    sharing too, :func:`polyc.ir.deps.by_program`)."""
    return shared_analyses()


def layer_model(
    kernel: Kernel,
    layer: Layer,
    spec: Spec,
    shape: Structure,
    level: int,
    engines: Callable[[Kernel, Statement, Spec], list[str]],
) -> LayerModel:
    """The model of ``layer`` under ``shape`` for ``spec``: one built for another
    description of the same model view, on ``spec``, when this process has it;
    else a new one (kept for the next). ``engines``: the engines the search
    offers a statement (:func:`schedules.accel.space.engines`), part of the key."""
    key = _key(kernel, layer, spec, shape, level, engines) if enabled() else None
    if key is None:
        return LayerModel(kernel, layer, spec, shape, level)
    base = _MODELS.get(key)
    if base is None:
        STATS["built"] += 1
        base = _MODELS[key] = LayerModel(kernel, layer, spec, shape, level)
        while len(_MODELS) > SIZE:
            _MODELS.popitem(last=False)
        return base
    STATS["shared"] += 1
    _MODELS.move_to_end(key)
    return base if base.spec is spec else base.on(spec)


def _key(kernel, layer, spec, shape, level, engines) -> tuple | None:
    def compute(k: Kernel):
        text = layer_text(k, layer, lambda s: engines(k, s, spec))
        if text is None:
            return None
        lines, names = text
        domains = tuple(str(s.domain) for s in layer.stmts)
        return "\n".join(lines), tuple(names.items()), domains

    # the layer's text reads the engines the spec offers each statement: keyed
    # with the model view, which holds what they depend on
    view = view_id(spec, model_view)
    text = kernel.analysis(
        ("accel.layer_text", layer.index, layer.name, layer.depth, view), compute
    )
    return None if text is None else (text, shape, level, view)


def clear() -> None:
    """Forget the models kept, and their estimates (tests)."""
    _MODELS.clear()
    estimate_cache.clear()
