"""Studies and inspection at the end of the pipeline: sweeps over ops x schedules x
hardware (``polyc.sweep``), ``polyc explain``, the per-layer model report, the
whole-pipeline fuzzer, and the executors they share (in process, a local pool, Dask)."""
