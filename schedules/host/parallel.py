"""Parallel marks of the automatic scheduler: which dependence-free loop gets
``@parallel``, and only where one fork of it runs enough work
(:data:`schedules.host.cache_model.MIN_PARALLEL_WORK`)."""

from __future__ import annotations

import numpy as np

from polyc.errors import IllegalTransformError
from polyc.ir.kernel import Kernel
from schedules import stree
from schedules.bands import permute, skew, split_band
from schedules.host.cache_model import Model
from schedules.marks import parallel as mark_parallel


def band_at(kernel: Kernel, name: str) -> tuple[list[stree.Band], stree.Named]:
    """The bands above band ``name`` (outermost first) and the band."""
    root = stree.from_isl(kernel.schedule)
    path, nb = stree.find(root, name, "auto")
    band_path = path + (0,) * (1 + len(nb.attrs))
    return stree.bands_above(root, band_path), nb


def mark_parallel_below(kernel: Kernel, model: Model) -> Kernel:
    """Mark the outermost dependence-free loop on every path that has none yet
    (bands that were not tiled), when one entry of it (one fork/join) runs at least
    ``model.min_parallel_work`` statement instances: the space loops inside a
    stencil's time loop, or one row loop of a cache-resident softmax, do not."""
    tried: set = set()
    while True:
        root = stree.from_isl(kernel.schedule)
        todo = None
        for path, node in stree.walk(root):
            nb = stree.named_at(node)
            if nb is None or "@parallel" in nb.attrs or not any(nb.band.coincident):
                continue
            if _marked_above(root, path) or (path, nb.name) in tried:
                continue
            if not model.pays_to_fork(_work_per_entry(root, path, nb, model)):
                continue
            todo = (path, nb)
            break
        if todo is None:
            return kernel
        tried.add((todo[0], todo[1].name))
        kernel = _parallel_band(kernel, todo[1])


def _work_per_entry(root, path, nb: stree.Named, model: Model) -> float:
    """Statement instances below the band divided by the times it is entered (the
    product of the extents of the enclosing band members)."""
    dom = stree.domain(nb.band)
    total = 0.0
    for name in stree.statements(nb.band):
        total += float(np.prod(model.iterator_extents(model.kernel.statement(name))))
    entries = 1.0
    for band in stree.bands_above(root, path):
        for p in range(band.n_member):
            entries *= max(model.extent(band.member(p), dom), 1)
    return total / entries


def _marked_above(root: stree.Node, path: stree.Path) -> bool:
    return any(
        isinstance(n := stree.at(root, path[:k]), stree.Mark) and n.name == "@parallel"
        for k in range(len(path))
    )


def _parallel_band(kernel: Kernel, nb: stree.Named) -> Kernel:
    """Mark ``nb`` parallel, moving its first coincident member to the front when the
    band is permutable."""
    name, band = nb.name, nb.band
    first = next(p for p in range(band.n_member) if is_coincident(band, p))
    if first and band.permutable:
        order = [nb.members[first]] + [
            m for p, m in enumerate(nb.members) if p != first
        ]
        kernel = attempt(lambda: permute(kernel, name, order), kernel)
    return attempt(lambda: mark_parallel(kernel, name), kernel)


def _enough_work(kernel: Kernel, name: str, model: Model) -> bool:
    """Whether one entry of band ``name`` runs enough instances to fork for it."""
    root = stree.from_isl(kernel.schedule)
    path, nb = stree.find(root, name, "auto")
    return model.pays_to_fork(_work_per_entry(root, path, nb, model))


def parallel_tiles(kernel: Kernel, name: str, model: Model) -> Kernel:
    """Mark the tile band ``name`` parallel (a coincident member moved to the front,
    or a wavefront of its first two members) when a fork of it pays."""
    _, nb = band_at(kernel, name)
    band = nb.band
    coincident = [p for p in range(band.n_member) if is_coincident(band, p)]
    if coincident:
        if not _enough_work(kernel, name, model):
            return kernel
        first = coincident[0]
        if first:
            order = [nb.members[first]] + [
                m for p, m in enumerate(nb.members) if p != first
            ]
            kernel = attempt(lambda: permute(kernel, name, order), kernel)
        return attempt(lambda: mark_parallel(kernel, name), kernel)
    if band.n_member < 2:
        return kernel

    def wavefront() -> Kernel:
        k = skew(kernel, name, nb.members[0], {nb.members[1]: 1})
        k = split_band(k, name, 1)
        inner = f"{name}_{nb.members[1]}"
        if not _enough_work(k, inner, model):  # one fork per wavefront step
            return kernel
        return mark_parallel(k, inner)

    return attempt(wavefront, kernel)


def is_coincident(band: stree.Band, p: int) -> bool:
    """Whether member ``p`` of ``band`` is marked coincident (dependence-free)."""
    return p < len(band.coincident) and band.coincident[p]


def attempt(fn, fallback: Kernel) -> Kernel:
    """``fn()``, or ``fallback`` when the check refuses it (the model's guess of a
    parallel loop can be wrong; the exact check decides)."""
    try:
        return fn()
    except IllegalTransformError:
        return fallback
