"""The simulator at the end of the pipeline: the C runtime (``runtime/``), its
Python driver (:mod:`.simulator`), the Report, traces and per-layer attribution."""
