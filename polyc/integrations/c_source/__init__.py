"""Source-to-source: a C file with each SCoP region replaced by its scheduled code.

``polyc compile in.c -o out.c [--schedule auto|FILE.yaml]`` (and
:func:`compile_c`) keep every byte of the file outside the regions, so the result
drops into the user's build. A region polyc cannot model is left as it is and
reported. Each replacement is a block that declares what it needs (temporaries,
helper macros, scoped with ``push_macro``/``pop_macro``) and addresses the user's own
arrays and scalars. Loop iterators are private to the region (as in Pluto and PPCG):
a region whose iterator is read after it is left untouched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from codegen.source import (
    SourceEmitter,
    contractible,
    declaration,
    helper_close,
    helper_open,
    helpers_used,
)
from polyc.errors import FrontendError, PolycError, ScheduleError
from polyc.frontends.c import parse as cfront
from polyc.frontends.c.preprocess import preprocess
from polyc.ir.kernel import Kernel, Role


@dataclass
class RegionReport:
    """What happened to one region."""

    name: str
    lines: tuple[int, int]
    replaced: bool
    schedule: str  # "original", "auto", "file"
    message: str = ""
    kernel: Kernel | None = None
    param_values: dict[str, int] = field(default_factory=dict)
    #: for an automatic schedule: the step of the fallback chain that won
    #: (``schedules.host.chain.STEPS``)
    step: str = ""


@dataclass
class Compiled:
    text: str
    regions: list[RegionReport] = field(default_factory=list)


def compile_c(
    path_or_source,
    *,
    schedule=None,
    defines=None,
    include_dirs=(),
    fusion: str = "smart",
    max_operations: int | None = None,
    max_seconds: float | None = None,
    cache=None,
    wavefront: bool = False,
) -> Compiled:
    """The source with every region replaced by code for its schedule.

    Args:
        schedule: None (program order), ``"auto"`` (``schedules.auto``), or isl YAML
            text of a schedule (several regions: one YAML document per region,
            separated by ``---`` lines, in source order).
        defines, include_dirs: as for :func:`polyc.from_c`.
        fusion, max_operations, max_seconds, cache, wavefront: passed to
            ``schedules.auto``
            for ``schedule="auto"`` (``cache``: a
            :class:`schedules.host.cache_model.Cache`, the cache capacities the
            cost model sizes tiles and compares candidates with; default: this
            host's, read from sysfs). A region whose automatic schedule fails (a budget
            the caller set runs out) is left as it is and reported, and the rest
            of the file is still rewritten.

    Raises:
        FrontendError: when the file cannot be preprocessed or parsed.
        IllegalTransformError: when a given schedule breaks a dependence.
        ScheduleError: when a schedule does not fit its region.
    """
    src = preprocess(path_or_source, defines, include_dirs)
    built = cfront.regions_of(src, collect=True)
    docs = schedule_documents(schedule, len(built))
    lines = src.text.splitlines(keepends=True)
    replacements: dict[int, tuple[int, list[str]]] = {}
    reports: list[RegionReport] = []
    need_stdlib = False
    for k, item in enumerate(built):
        if isinstance(item, FrontendError):
            line = _line_of(str(item))
            reports.append(
                RegionReport("?", (line, line), False, "original", str(item))
            )
            continue
        region = item
        span = region.span
        kind = (
            "original" if docs[k] is None else ("auto" if docs[k] == "auto" else "file")
        )
        if region.iterators_read_after:
            name, line = next(iter(region.iterators_read_after.items()))
            msg = (
                f"{src.filename}:{line}: compile: region {region.kernel.name} left as "
                f"it is because its loop iterator {name} is read after the region, "
                "and generated loops keep their iterators private. Declare the "
                f"iterator in the loop (for (int {name} = ...)) or read another variable."
            )
            reports.append(
                RegionReport(
                    region.kernel.name, (span.begin, span.end), False, kind, msg
                )
            )
            continue
        options = {
            "fusion": fusion,
            "max_operations": max_operations,
            "max_seconds": max_seconds,
            "cache": cache,
            "wavefront": wavefront,
        }
        try:
            kernel, step = schedule_region(
                region.kernel, docs[k], region.param_values, options
            )
        except PolycError as err:
            if docs[k] != "auto":
                raise
            msg = (
                f"{src.filename}:{span.begin}: compile: region {region.kernel.name} "
                f"left as it is because its automatic schedule failed: {err}"
            )
            reports.append(
                RegionReport(
                    region.kernel.name, (span.begin, span.end), False, kind, msg
                )
            )
            continue
        block, heap = _emit(region, kernel, _region_indent(lines, span))
        need_stdlib |= heap
        replacements[span.begin] = (span.end, block)
        reports.append(
            RegionReport(
                region.kernel.name,
                (span.begin, span.end),
                True,
                kind,
                "",
                kernel,
                dict(region.param_values),
                step,
            )
        )
    out: list[str] = []
    n = 1
    while n <= len(lines):
        if n in replacements:
            end, block = replacements[n]
            out.extend(line + "\n" for line in block)
            n = end + 1
            continue
        out.append(lines[n - 1])
        n += 1
    text = "".join(out)
    if need_stdlib:
        text = _add_include(text, "stdlib.h")
    return Compiled(text, reports)


def schedule_documents(schedule, n: int) -> list:
    """One schedule per region of a file with ``n`` regions: ``schedule`` itself
    for None or "auto", else the ``---``-separated documents of isl YAML text.

    Raises:
        ScheduleError: the text holds a different number of documents.
    """
    if schedule is None or schedule == "auto":
        return [schedule] * n
    docs = [d for d in re.split(r"(?m)^---\s*$", schedule) if d.strip()]
    if len(docs) != n:
        raise ScheduleError(
            f"compile: the schedule file has {len(docs)} YAML documents but the file "
            f"has {n} regions because each region takes one schedule. Give one "
            "document per region, separated by '---' lines, in source order."
        )
    return docs


def apply_region_schedule(
    kernel: Kernel, spec, known: dict[str, int] | None = None, options=None
) -> Kernel:
    """``kernel`` under ``spec``: None (program order), "auto", or isl YAML text
    (checked against every dependence by ``schedules.apply_schedule``);
    ``options`` are keyword arguments for ``schedules.auto``."""
    return schedule_region(kernel, spec, known, options)[0]


def schedule_region(
    kernel: Kernel, spec, known: dict[str, int] | None = None, options=None
) -> tuple[Kernel, str]:
    """:func:`apply_region_schedule` and, for "auto", the step of the fallback
    chain that won (else "")."""
    if spec is None:
        return kernel, ""
    import schedules
    from schedules.host.scheduler import auto_found

    if spec == "auto":
        values = {p: v for p, v in (known or {}).items() if p in kernel.params}
        sizes = values if values and len(values) == len(kernel.params) else None
        found = auto_found(kernel, params=sizes, **(options or {}))
        return found.kernel, found.step
    return schedules.apply_schedule(kernel, spec), ""


def _emit(region, kernel: Kernel, indent: str) -> tuple[list[str], bool]:
    names: dict[str, str] = {}
    scalars: set[str] = set()
    contracted: set[str] = set()
    decls: list[str] = []
    heap: list[str] = []
    unused: list[str] = sorted(region.outer_iterators)  # (void) them: no warnings
    parallel = "@parallel" in str(kernel.schedule)
    hoisted = {id(v) for v in region.hoisted}
    for a, info in region.arrays.items():
        local = info.var.scope == "region"
        names[a] = a if local else info.var.name
        if info.scalar and a not in region.privatized:
            scalars.add(a)
        if a in region.privatized:
            # one variable for all instances is safe only in sequential code
            if not parallel and contractible(kernel, a):
                contracted.add(a)
                if local:
                    decls.append(f"{_c_type(kernel, a)} {a};")
            else:
                names[a] = f"{info.var.name}_p"
                heap.append(names[a])
                decls += declaration(kernel, a, names[a], heap=True)
                if not local:
                    unused.append(info.var.name)
        elif local and id(info.var) not in hoisted:
            decls += declaration(kernel, a, a, heap=False)
    taken = set(region.visible) - set(region.iterators)
    for a in kernel.arrays:
        if a not in region.arrays:  # made by the schedule (an expanded temporary)
            names[a] = _fresh(a, taken | set(names.values()))
            heap.append(names[a])
            decls += declaration(kernel, a, names[a], heap=True)
    linear = {a: info.strides for a, info in region.arrays.items() if info.strides}
    emitter = SourceEmitter(kernel, names, scalars, contracted, taken, linear)
    body = emitter.block()
    used = helpers_used(body)
    pre = [f"{indent}{_hoisted(v)}" for v in region.hoisted]
    out = [
        *pre,
        f"{indent}/* polyc: region {kernel.name} */",
        *helper_open(used),
        f"{indent}{{",
        *(f"{indent}  {d}" for d in decls),
        *(f"{indent}  {line}" for line in body),
        *(f"{indent}  free({h});" for h in heap),
        *(f"{indent}  (void){n};" for n in unused),
        f"{indent}}}",
        *helper_close(used),
    ]
    return out, bool(heap)


def _fresh(name: str, taken: set[str]) -> str:
    """``name``, or ``name_1``, ``name_2``, ... when that is taken."""
    out, n = name, 0
    while out in taken:
        n += 1
        out = f"{name}_{n}"
    return out


def _c_type(kernel: Kernel, array: str) -> str:
    from codegen.source import C_NAMES

    return C_NAMES[kernel.arrays[array].dtype.name]


def _hoisted(v) -> str:
    from pycparser import c_ast, c_generator

    d = v.node
    copy = c_ast.Decl(
        d.name, d.quals, d.align, d.storage, d.funcspec, d.type, None, None
    )
    return c_generator.CGenerator().visit(copy) + ";"


def _region_indent(lines: list[str], span) -> str:
    """The indentation of the region's first statement."""
    for line in lines[span.begin : span.end - 1]:
        if line.strip() and not line.lstrip().startswith("#"):
            return _indent(line)
    return _indent(lines[span.begin - 1])


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _line_of(message: str) -> int:
    m = re.match(r"^[^:]*:(\d+):", message)
    return int(m.group(1)) if m else 0


def _add_include(text: str, header: str) -> str:
    if re.search(rf"^\s*#\s*include\s*<{re.escape(header)}>", text, re.M):
        return text
    m = re.search(r"^\s*#\s*include\b", text, re.M)
    pos = m.start() if m else 0
    return text[:pos] + f"#include <{header}> /* polyc: temporaries */\n" + text[pos:]


_ = (Role, PolycError)
