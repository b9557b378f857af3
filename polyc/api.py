"""The user-facing entry points that sit at the end of the pipeline."""

from __future__ import annotations

from polyc.ir.kernel import Kernel


def build(kernel: Kernel, **options):
    """Compile ``kernel`` to native host C; returns a callable module.

    ``module(**inputs) -> dict[str, np.ndarray]``. Options: ``flags`` (extra C
    compiler flags).

    Raises:
        CodegenError: when the C compiler fails.
        InputError: (when called) for missing or mis-shaped inputs.
    """
    from codegen.host import build as host_build

    return host_build(kernel, **options)


def to_mlir(kernel: Kernel) -> str:
    """``kernel`` (as written, scheduled or placed) as affine-dialect MLIR text:
    one ``func.func`` with the arrays as memref arguments (see docs/mlir.md).

    Raises:
        ArgumentError: when ``kernel`` is not a Kernel.
        CodegenError: for a construct with no affine/arith form.
    """
    from codegen.mlir.export import to_mlir as export

    if not isinstance(kernel, Kernel):
        from polyc.errors import ArgumentError

        raise ArgumentError(
            f"to_mlir: got a {type(kernel).__name__} because the argument must be a "
            "Kernel. Pass a Kernel (polyc.ops.*, polyc.from_c, polyc.from_mlir, or "
            "polyc.compile(...).kernel for the placed one)."
        )
    return export(kernel)


def compile(
    kernel: Kernel,
    config="edge-npu",
    schedule: Kernel | None = None,
    *,
    checks: bool = True,
    trace_limit: int | None = None,
    verify: bool = False,
    objective: str = "cycles",
):
    """Compile ``kernel`` for the simulated accelerator described by ``config``.

    ``config`` is a shipped name (``accelerator.CONFIGS``), a TOML path or a
    :class:`accelerator.Spec`. With no ``schedule``, the accelerator-aware
    scheduler (:mod:`schedules.accel`) chooses loop order, tiling, fusion,
    placement, double buffering and the engine of every statement for this
    config. ``schedule`` is a hand-scheduled version of ``kernel`` (the same
    program with another schedule, placed or not) to compile as it is; pass
    ``schedule=kernel`` for the DRAM-direct baseline.
    ``objective`` is what the scheduler minimises: ``"cycles"`` (the default),
    ``"energy"`` (the layers' MAC, DRAM-traffic and leakage energy) or ``"edp"``
    (energy x cycles); see :mod:`schedules.accel.objective`.
    ``checks=False`` compiles the per-access bounds checks out (faster, once a
    kernel is known to be correct). ``verify=True`` makes every
    ``compiled.run`` compare its outputs with ``polyc.interpret`` on the
    untransformed kernel (:mod:`polyc.verify`: integers exact, floats within a
    per-dtype tolerance) and raise :class:`VerificationError` on a difference;
    the interpreter runs the whole original program in numpy, so this costs
    several times the simulated run and grows with the kernel's instance count.
    Returns a :class:`polyc.compiled.Compiled`:
    ``compiled.run(**inputs) -> (outputs, report)``.

    The stages it runs are listed in :mod:`polyc.stages`;
    ``POLYC_DEBUG=stage[,stage...]`` (or ``all``, and ``time`` for durations)
    prints what each produced to stderr.

    Raises:
        StageError: for an unknown stage name in ``POLYC_DEBUG``.
        ConfigError: for an unknown or malformed config.
        ArgumentError: when ``schedule`` is not a schedule of ``kernel``, or
            ``objective`` is none of cycles, energy, edp.
        CodegenError: when the C compiler fails.
    """
    from polyc import stages
    from schedules.accel.objective import check

    check(objective)

    return stages.compile(
        kernel,
        config,
        schedule,
        checks=checks,
        trace_limit=trace_limit,
        verify=verify,
        objective=objective,
    )
