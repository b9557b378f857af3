"""The simulator at the end of the pipeline: the C runtime (``runtime/``), its
interface numbers (:mod:`.abi`, parsed from ``polyc_rt.h``), its Python driver
(:mod:`.simulator`), the Report (:mod:`.report`, filled by :mod:`.readout`), traces
and per-layer attribution."""
