"""Every ATen lowering, registered: importing this module imports each family
module, whose handlers register themselves in :mod:`polyc.frontends.torch.registry`.
"""

from __future__ import annotations

from polyc.frontends.torch import (  # noqa: F401  (imported to register)
    ops,
    ops_compare,
    ops_gather,
    ops_norm,
    ops_quant,
    ops_resize,
    ops_scan,
    ops_sort,
    ops_transformer,
)
from polyc.frontends.torch.registry import KEEP, LOWERINGS

__all__ = ["KEEP", "LOWERINGS"]
