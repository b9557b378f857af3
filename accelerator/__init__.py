"""The simulated accelerator: hardware descriptions, the C runtime, the Report.

``load_config(name_or_path)`` returns a frozen :class:`Spec`; ``CONFIGS`` names the
shipped descriptions. The runtime sources live in ``accelerator/sim/runtime``; the
code generator (``codegen.accel.direct``) compiles them together with each kernel.
"""

from __future__ import annotations

from accelerator.hardware.config import CONFIGS, Spec, from_dict, load_config

__all__ = ["CONFIGS", "Spec", "from_dict", "load_config"]
