"""The simulated accelerator: hardware descriptions, the C runtime, the Report.

``load_config(name_or_path)`` returns a frozen :class:`Spec`; ``CONFIGS`` names the
shipped descriptions. ``vary(spec, {key: values})`` makes a hardware grid;
``area(spec)`` and ``cost(spec, cycles, pj)`` give area, leakage, power and EDP. The runtime sources live in ``accelerator/sim/runtime``; the
code generator (``codegen.accel.direct``) compiles them together with each kernel.
"""

from __future__ import annotations

from accelerator.hardware.area import area, cost
from accelerator.hardware.config import CONFIGS, Spec, from_dict, load_config
from accelerator.hardware.grid import vary

__all__ = ["CONFIGS", "Spec", "area", "cost", "from_dict", "load_config", "vary"]
