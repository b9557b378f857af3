"""C for the simulated accelerator: the DRAM-direct emitter and module build
(:mod:`.direct`), the placed emitter (:mod:`.placed`) with its copies, MAC calls and
the facts it reads off the placement marks (:mod:`.info`)."""
