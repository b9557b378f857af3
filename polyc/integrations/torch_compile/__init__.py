"""``torch.compile(model, backend="polyc")``: see :mod:`.backend`. ``report()``
lists the graphs compiled so far, ``reset()`` forgets them."""

from polyc.integrations.torch_compile.backend import (
    polyc_backend,
    records,
    report,
    reset,
)

__all__ = ["polyc_backend", "records", "report", "reset"]
