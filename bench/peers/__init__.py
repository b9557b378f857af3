"""The peer tools of the fidelity suite (ZigZag, Stream, SCALE-Sim) on HW-A.

:mod:`bench.peers.hwa` describes HW-A and the layers once; :mod:`bench.peers.zigzag`,
:mod:`bench.peers.stream` and :mod:`bench.peers.scalesim` write each tool's inputs
from it and read its answer; :mod:`bench.peers.env` installs each tool in its own
virtual environment and runs its driver (``bench/peers/drivers/``) there.
``bench/fidelity.py`` is the benchmark that uses them.
"""
