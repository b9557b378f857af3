"""The host scheduler: ``schedules.auto`` (isl's scheduler in a bounded child
process, then tiling, loop order and parallel marks from a cache model)."""
