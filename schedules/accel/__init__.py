"""The accelerator scheduler and its transformations: layers, footprints,
placement (buffers, DMA), memory planning, tensorization, the cost model and the
search (:func:`schedules.accel.scheduler.schedule` is what ``polyc.compile`` runs)."""
