"""isl's scheduler under a CPU-time bound, in a forked child.

isl does not count every step of its scheduler against its operation budget (some
problems spin in its LP solver for minutes), so :func:`bounded_compute` runs the
computation in a forked child (copy-on-write: nothing is re-imported) and stops it
after a number of seconds of CPU time. The bound is honoured the same way on an idle
and on a loaded machine:

- the child's CPU time is limited by the kernel (``RLIMIT_CPU``, whole seconds,
  rounded up): past it the child gets ``SIGXCPU`` and ends;
- the child measures the CPU time its answer cost and sends it with the answer, and
  an answer that cost more than the bound is refused. The kernel checks the limit
  only at its clock ticks, so without this a problem finished within a tick of the
  bound (every problem, for a bound of 0 s) was accepted or refused depending on
  where the tick fell;
- wall time stops only a child that is stuck (it has used no CPU at all for
  :data:`STALL_SECONDS`), never one that merely waits for a core.
"""

from __future__ import annotations

import math
import os
import resource
import select
import signal
import time
from pathlib import Path

import islpy as isl

#: the text of the ``isl.Error`` raised when the child runs past its bound
TIMEOUT = "polyc: deadline"

#: seconds of wall time during which a child that has used no CPU is taken to be
#: stuck (a deadlock, a stopped process) and killed; a child on a loaded machine gets
#: some CPU in far less (2 cores, two test workers and two CPU hogs: a fraction of
#: a core each, every few milliseconds)
STALL_SECONDS = 60.0
#: where the child's CPU time cannot be read (no /proc), a plain wall deadline of
#: this many seconds per second of the CPU bound, plus ``STALL_SECONDS``
WALL_PER_CPU_SECOND = 10


def bounded_compute(sc: isl.ScheduleConstraints, seconds: float) -> isl.Schedule:
    """``sc.compute_schedule()`` stopped after ``seconds`` of CPU time.

    The computation runs in a forked child that writes the schedule back as text,
    with the CPU time it cost, through a pipe (see the module docstring). Without
    fork (not POSIX) the call runs in this process, bounded only by isl's operation
    budget.

    Args:
        sc: the schedule constraints.
        seconds: the CPU-time bound; 0 refuses every answer.

    Raises:
        isl.Error: ``TIMEOUT`` when the child ran past ``seconds`` of CPU time (or
            was stuck), isl's own error when it failed within the bound.
    """
    if not hasattr(os, "fork"):
        return sc.compute_schedule()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: compute, report, and leave without running any cleanup
        status = 0
        try:
            os.close(read_end)
            _limit_cpu(seconds)
            try:
                kind, body = "ok", str(sc.compute_schedule())
            except isl.Error as err:
                kind, body = "error", str(err)
            text = body.encode()
            data = f"{kind} {time.process_time()!r} {len(text)}\n".encode() + text
            while data:
                data = data[os.write(write_end, data) :]
        except BaseException:
            status = 1
        finally:
            os._exit(status)
    os.close(write_end)
    try:
        data = _read_answer(read_end, pid, seconds)
    except BaseException:  # stuck, or this process interrupted (Ctrl-C, an alarm):
        os.kill(pid, signal.SIGKILL)  # do not wait for isl to finish
        raise
    finally:
        os.close(read_end)
        _, status = os.waitpid(pid, 0)
    answer = _parse(data)
    if answer is None:  # the child ended before it had answered
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) in (
            signal.SIGXCPU,
            signal.SIGKILL,  # at the hard limit, when one is set
        ):
            raise isl.Error(TIMEOUT)
        raise isl.Error("the scheduler's process stopped without an answer")
    kind, used, body = answer
    if used > seconds:
        raise isl.Error(TIMEOUT)
    if kind == "ok":
        return isl.Schedule(body)
    raise isl.Error(body)


def _read_answer(read_end: int, pid: int, seconds: float) -> bytes:
    """Everything the child writes, until it closes the pipe; ``TIMEOUT`` when
    the child is stuck."""
    chunks: list[bytes] = []
    used = _cpu_ticks(pid)
    wait = STALL_SECONDS
    if used is None:
        wait += seconds * WALL_PER_CPU_SECOND
    while True:
        if not select.select([read_end], [], [], wait)[0]:
            now = _cpu_ticks(pid)
            if now is None or now == used:
                raise isl.Error(TIMEOUT)
            used = now  # slow but running: RLIMIT_CPU bounds it
            continue
        chunk = os.read(read_end, 1 << 16)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _parse(data: bytes) -> tuple[str, float, str] | None:
    """``(kind, CPU seconds, body)`` of a complete answer, else None."""
    head, newline, body = data.partition(b"\n")
    fields = head.decode().split()
    if not newline or len(fields) != 3 or len(body) != int(fields[2]):
        return None
    return fields[0], float(fields[1]), body.decode()


def _cpu_ticks(pid: int) -> int | None:
    """User plus system CPU time of process ``pid`` in clock ticks (Linux), or None
    when it cannot be read."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()  # after the command name
    return int(fields[11]) + int(fields[12])  # utime and stime: fields 14 and 15


def _limit_cpu(seconds: float) -> None:
    """Limit this (child) process to ``seconds`` of CPU time, rounded up to whole
    seconds (the kernel sends SIGXCPU, which ends it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    want = max(math.ceil(seconds), 0)  # 0: stopped at the first tick
    if hard != resource.RLIM_INFINITY:
        want = min(want, hard)
    if soft == resource.RLIM_INFINITY or want < soft:
        resource.setrlimit(resource.RLIMIT_CPU, (want, hard))
