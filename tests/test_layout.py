"""The layout as a test: every module sits in a known room of the pipeline, and
imports go one way (docs/architecture.md). Each import of every module is read
with ``ast``, module-level and function-local alike (only ``if TYPE_CHECKING:``
blocks are skipped: they never run), and checked against the rooms it may use.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support.paths import ROOT

PACKAGES = ("polyc", "schedules", "codegen", "accelerator")

#: room -> the rooms it may import (besides itself); "*" means any
ALLOWED: dict[str, set[str] | str] = {
    "polyc.errors": set(),
    # the IR imports nothing of the pipeline
    "polyc.ir": {"polyc.errors"},
    "polyc.oracle": {"polyc.errors", "polyc.ir"},
    "polyc.lang": {"polyc.errors", "polyc.ir"},
    "polyc.ops": {"polyc.errors", "polyc.ir", "polyc.lang"},
    # frontends make Kernels and nothing else
    "polyc.frontends": {"polyc.errors", "polyc.ir", "polyc.lang", "polyc.ops"},
    # the hardware description is read early (by the schedulers)
    "accelerator.hardware": {"polyc.errors", "polyc.ir"},
    # the simulator is the end of the pipe: it imports no scheduler and no codegen
    "accelerator.sim": {"polyc.errors", "polyc.ir", "accelerator.hardware"},
    "accelerator": {"accelerator.hardware"},
    # schedules may read the hardware description, never the simulator or codegen
    "schedules": {
        "polyc.errors",
        "polyc.ir",
        "accelerator",
        "accelerator.hardware",
        "schedules",
        "schedules.host",
        "schedules.accel",
    },
    # codegen never imports schedules; the C it makes links against the runtime
    "codegen": {
        "polyc.errors",
        "polyc.ir",
        "accelerator",
        "accelerator.hardware",
        "accelerator.sim",
        "codegen",
        "codegen.host",
        "codegen.accel",
    },
    # the end of the pipe: entry points, studies, integrations import everything
    "polyc": "*",
    "polyc.api": "*",
    "polyc.compiled": "*",
    "polyc.stages": "*",
    "polyc.reuse": "*",
    "polyc.cli": "*",
    "polyc.demo": "*",
    "polyc.studies": "*",
    "polyc.integrations": "*",
}
#: rooms that share their package's rules (a package and its sub-rooms)
SAME_RULES = {
    "schedules.host": "schedules",
    "schedules.accel": "schedules",
    "codegen.host": "codegen",
    "codegen.accel": "codegen",
}


def room(module: str) -> str:
    """The room of a dotted module name (see :data:`ALLOWED`)."""
    parts = module.split(".")
    top = parts[0]
    if top == "polyc":
        if len(parts) == 1:
            return "polyc"
        return f"polyc.{parts[1]}"
    if len(parts) > 1:
        sub = f"{top}.{parts[1]}"
        if sub in ALLOWED or sub in SAME_RULES:
            return sub
    return top


def modules() -> list[tuple[str, Path]]:
    out = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            name = ".".join(rel.parts).removesuffix(".__init__")
            out.append((name, path))
    return out


def imports(path: Path):
    """``(line, imported module)`` for every import that runs (not only at module
    level); ``from x import y`` yields ``x.y`` too (``y`` may be a submodule)."""
    tree = ast.parse(path.read_text())
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip |= {id(n) for n in ast.walk(node)}
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module
            for a in node.names:
                yield node.lineno, f"{node.module}.{a.name}"


def violations() -> list[str]:
    mods = dict(modules())
    out = []
    for name, path in mods.items():
        mine = room(name)
        rules = ALLOWED[SAME_RULES.get(mine, mine)]
        if rules == "*":
            continue
        for line, target in imports(path):
            if target.split(".")[0] not in PACKAGES:
                continue
            if target not in mods and target.rsplit(".", 1)[0] in mods:
                target = target.rsplit(".", 1)[0]  # `from m import name`
            theirs = room(target)
            if theirs == mine or theirs in rules:
                continue
            out.append(
                f"{path.relative_to(ROOT)}:{line}: {name} imports {target}, but "
                f"{mine} may import only {', '.join(sorted(rules)) or 'nothing'}"
            )
    return sorted(set(out))


def test_every_module_is_in_a_known_room():
    unknown = [
        name
        for name, _ in modules()
        if SAME_RULES.get(room(name), room(name)) not in ALLOWED
    ]
    assert not unknown, f"modules outside the rooms of docs/architecture.md: {unknown}"


def test_imports_go_one_way():
    found = violations()
    assert not found, "imports against docs/architecture.md:\n" + "\n".join(found)


@pytest.mark.parametrize("family", ["sweep_", "c_", "torch_"])
def test_no_flat_prefix_families(family):
    """Related modules live in a folder, not as a prefix family of flat files."""
    flat = [
        str(p.relative_to(ROOT))
        for pkg in PACKAGES
        for p in (ROOT / pkg).rglob(f"{family}*.py")
    ]
    assert len(flat) < 2, f"a {family}* family of flat modules: {flat}"


def test_no_stray_files_at_the_top():
    assert not (ROOT / "x").exists()


#: packages whose modules must not import each other in a cycle (a cycle means two
#: modules that cannot be read, or imported, one after the other)
#: every package, checked for import cycles among its own modules
ACYCLIC = (
    "accelerator",
    "codegen",
    "polyc.frontends",
    "polyc.integrations",
    "polyc.ir",
    "polyc.lang",
    "polyc.ops",
    "polyc.oracle",
    "polyc.studies",
    "schedules",
)
#: the one cycle left, and why: ``kernel.deps`` computes the dependences on first
#: use (in polyc.ir.deps), which read the kernel's statements through its
#: ``access_map``; the import of deps is local to that property
KNOWN_CYCLES = {"polyc.ir": ["polyc.ir.kernel", "polyc.ir.deps", "polyc.ir.kernel"]}


def import_cycle(package: str) -> list[str]:
    """One import cycle among the modules of ``package`` (as ``[a, b, ..., a]``), or
    ``[]``; imports are read as :func:`imports` reads them, function-local ones
    included."""
    mods = dict(modules())
    inside = {m for m in mods if m == package or m.startswith(package + ".")}
    graph: dict[str, set[str]] = {}
    for name in sorted(inside):
        found = list(imports(mods[name]))
        # ``from pkg import sub`` depends on the submodule, not on the package's
        # face (its __init__ runs first, but only hands names on)
        subs = {(line, t.rsplit(".", 1)[0]) for line, t in found if t in mods}
        deps = set()
        for line, target in found:
            if (line, target) in subs:
                continue
            if target not in mods and target.rsplit(".", 1)[0] in mods:
                target = target.rsplit(".", 1)[0]
            if target in inside and target != name:
                deps.add(target)
        graph[name] = deps
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str]:
        if node in path:
            return path[path.index(node) :] + [node]
        if node in done:
            return []
        for dep in sorted(graph[node]):
            found = visit(dep, [*path, node])
            if found:
                return found
        done.add(node)
        return []

    for start in sorted(graph):
        found = visit(start, [])
        if found:
            return found
    return []


@pytest.mark.parametrize("package", ACYCLIC)
def test_no_import_cycle(package):
    cycle = import_cycle(package)
    if cycle == KNOWN_CYCLES.get(package):
        return
    assert not cycle, f"an import cycle in {package}: {' -> '.join(cycle)}"
