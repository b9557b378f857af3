"""Preprocessing C for the SCoP frontend: ``gcc -E`` as the user's compiler would run it.

The source is preprocessed with the user's ``-D`` defines and ``-I`` include directories
against small stand-in system headers (pycparser cannot read glibc's headers, which are
full of compiler extensions; its documentation advises exactly this), written for each
call to a private temporary directory (nothing is shared between users or runs, so the
result never depends on what ran before); any other ``<header>`` the file or its own
headers include gets an empty stand-in there. ``#pragma scop``
and ``#pragma endscop`` pass through the preprocessor unchanged, so pycparser sees them
as statements.

Integer macros that a region names (``N``, ``_PB_N``) must stay names, so that they
become isl parameters: inside each region they are protected with
``#pragma push_macro`` / ``#undef`` / ``#pragma pop_macro``, with ``#line`` directives
keeping every line number. Their values are recorded (``Source.macro_values``).

Columns: gcc collapses runs of blanks and expands macros, so a column in its output is
mapped back to the original line by aligning the two lines' tokens.
"""

from __future__ import annotations

import ast
import contextlib
import difflib
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from polyc.errors import FrontendError
from polyc.frontends.c.headers import HEADERS
from polyc.frontends.c.types import int_literal

CC = os.environ.get("POLYC_CPP", "gcc")

#: compiler extensions pycparser cannot parse, erased the way pycparser's docs advise
_EXTENSIONS = {
    "__attribute__(x)": "",
    "__extension__": "",
    "__restrict": "restrict",
    "__restrict__": "restrict",
    "__inline": "inline",
    "__inline__": "inline",
    "__asm__(x)": "",
    "__asm(x)": "",
    "__volatile__": "volatile",
    "__const": "const",
    "__signed__": "signed",
    "__builtin_expect(x, y)": "(x)",
}

_SCOP = re.compile(r"^\s*#\s*pragma\s+scop\b")
_ENDSCOP = re.compile(r"^\s*#\s*pragma\s+endscop\b")
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*(<[^>\n]+>|"[^"\n]+")', re.M)
#: user headers followed when looking for the system headers a file needs
_MAX_HEADERS = 256
_TOKEN = re.compile(
    r"[A-Za-z_]\w*|\d[\w.]*(?:[eEpP][+-]\d+)?|\.\d[\w.]*|->|\+\+|--|<<=|>>=|[<>=!&|^%*/+-]=|"
    r"&&|\|\||<<|>>|\S"
)
_IDENT = re.compile(r"[A-Za-z_]\w*")
_PROBE = "__polyc_probe_"


@dataclass(frozen=True)
class RegionSpan:
    """Lines (1-based, inclusive) of ``#pragma scop`` and ``#pragma endscop``."""

    begin: int
    end: int


@dataclass
class Source:
    """A preprocessed translation unit and what is needed to point back into it."""

    filename: str
    text: str  # the original text
    output: str  # gcc -E output, ready for pycparser
    regions: list[RegionSpan]
    macro_values: dict[int, dict[str, int]]  # region begin line -> {macro: value}
    macro_names: dict[int, set[str]]  # region begin line -> macros defined there
    pp_lines: dict[tuple[str, int], str] = field(default_factory=dict)

    @property
    def lines(self) -> list[str]:
        return self.text.splitlines()

    def column(self, line: int, pp_column: int) -> int:
        """The 1-based column in the original line of the token that gcc's output
        has at ``pp_column`` (blanks collapsed, macros expanded)."""
        lines = self.lines
        if not 1 <= line <= len(lines):
            return pp_column
        orig = lines[line - 1]
        pp = self.pp_lines.get((self.filename, line))
        if pp is None or pp == orig:
            return pp_column
        return _align_column(orig, pp, pp_column)


def read_source(path_or_source) -> tuple[str, str]:
    """``(filename, text)`` from a path or from C source text.

    A :class:`~pathlib.Path` is a path. A string is a path when it names an
    existing file, or when it reads as one: a single line without ``;`` or ``{``
    that ends in a C suffix or contains a path separator. Anything else is source.

    Raises:
        FrontendError: for a path that does not exist, is a directory or cannot
            be read as text.
    """
    if isinstance(path_or_source, os.PathLike):
        return _read_file(os.fspath(path_or_source), "Check the path.")
    text = str(path_or_source)
    if "\n" not in text and len(text) < 4096 and os.path.isfile(text):
        return _read_file(text, "")
    if _looks_like_path(text):
        return _read_file(
            text.strip(),
            "Check the path, or pass the C source itself (text with its code).",
        )
    return "<source>", text


def _looks_like_path(text: str) -> bool:
    line = text.strip()
    if not line or "\n" in line or ";" in line or "{" in line or len(line) > 4096:
        return False
    if line.startswith(("#", "/*", "//")):  # a one-line directive or comment
        return False
    suffix = os.path.splitext(line)[1].lower()
    return suffix in (".c", ".h", ".i", ".inc") or "/" in line or os.sep in line


def _read_file(name: str, fix: str) -> tuple[str, str]:
    path = Path(name)
    if path.is_dir():
        raise FrontendError(
            f"{name}: c frontend: cannot read the C file because it is a directory. "
            "Pass the path of a .c file."
        )
    if not path.exists():
        where = "" if path.is_absolute() else f" in {os.getcwd()}"
        raise FrontendError(
            f"{name}: c frontend: cannot read the C file because it does not exist"
            f"{where}. {fix}"
        )
    try:
        return name, path.read_text()
    except (OSError, UnicodeDecodeError) as err:
        why = (
            f"reading it failed ({err.strerror or err})"
            if isinstance(err, OSError)
            else f"it is not UTF-8 text ({err})"
        )
        raise FrontendError(
            f"{name}: c frontend: cannot read the C file because {why}. Pass a "
            "readable UTF-8 text file."
        ) from None


def find_regions(filename: str, text: str) -> list[RegionSpan]:
    """Pairs of ``#pragma scop`` / ``#pragma endscop`` lines.

    Raises:
        FrontendError: for an ``endscop`` without ``scop``, nested or unclosed regions.
    """
    out: list[RegionSpan] = []
    begin = None
    for n, line in enumerate(text.splitlines(), start=1):
        if _SCOP.match(line):
            if begin is not None:
                raise FrontendError(
                    f"{filename}:{n}:1: c frontend: a '#pragma scop' opens inside the "
                    f"region opened on line {begin} because regions do not nest. Close "
                    "the first region with '#pragma endscop'."
                )
            begin = n
        elif _ENDSCOP.match(line):
            if begin is None:
                raise FrontendError(
                    f"{filename}:{n}:1: c frontend: '#pragma endscop' closes no region "
                    "because no '#pragma scop' precedes it. Add '#pragma scop' before "
                    "the loop nest."
                )
            out.append(RegionSpan(begin, n))
            begin = None
    if begin is not None:
        raise FrontendError(
            f"{filename}:{begin}:1: c frontend: the region opened here is never closed "
            "because no '#pragma endscop' follows it. Add '#pragma endscop' after the "
            "loop nest."
        )
    return out


def preprocess(
    path_or_source,
    defines=None,
    include_dirs=(),
) -> Source:
    """Preprocess like the user's compiler; protect the regions' integer macros.

    ``defines`` is a mapping ``{name: value}`` (value ``None`` for ``-DNAME``) or a
    sequence of ``NAME`` / ``NAME=VALUE`` strings.

    Raises:
        FrontendError: when gcc fails (a missing header, a bad define) or the scop
            pragmas do not pair.
    """
    filename, text = read_source(path_or_source)
    regions = find_regions(filename, text)
    # a private directory of stand-in headers per call: nothing shared between
    # users or runs, so the result never depends on what ran before
    with tempfile.TemporaryDirectory(prefix="polyc-headers-") as headers:
        _write_headers(Path(headers), _system_includes(filename, text, include_dirs))
        flags = _flags(filename, defines, include_dirs, headers)
        return _preprocess(filename, text, regions, flags)


def _preprocess(filename, text, regions, flags) -> Source:
    lines = text.splitlines()
    macro_values: dict[int, dict[str, int]] = {}
    macro_names: dict[int, set[str]] = {}
    inserts: dict[int, list[str]] = {}  # after line n (1-based)
    for span in regions:
        values, names = _integer_macros(lines, span, flags, filename)
        macro_values[span.begin] = values
        macro_names[span.begin] = names
        if not values:
            continue
        inserts[span.begin] = [
            *(f'#pragma push_macro("{m}")\n#undef {m}' for m in values),
            f'#line {span.begin + 1} "{_escape(filename)}"',
        ]
        inserts[span.end] = [
            *(f'#pragma pop_macro("{m}")' for m in values),
            f'#line {span.end + 1} "{_escape(filename)}"',
        ]
    parts = [f'#line 1 "{_escape(filename)}"']
    for n, line in enumerate(lines, start=1):
        parts.append(line)
        parts.extend(inserts.get(n, ()))
    output = _run_cpp("\n".join(parts) + "\n", flags, filename)
    output, pp_lines = _clean(output, filename)
    return Source(filename, text, output, regions, macro_values, macro_names, pp_lines)


# gcc ---------------------------------------------------------------------------------


def _system_includes(filename: str, text: str, include_dirs) -> set[str]:
    """Every ``<header>`` the source includes, directly or through its own headers
    (those found in its directory or ``include_dirs``), that none of those
    directories holds: each gets a stand-in, so an unknown system header is no
    error wherever its ``#include`` is."""
    dirs = [Path(d) for d in include_dirs or ()]
    # gcc looks for "header" next to the including file; source text comes on
    # stdin, whose directory is the working directory
    here = Path(
        os.path.dirname(os.path.abspath(filename))
        if filename != "<source>"
        else os.getcwd()
    )
    need: set[str] = set()
    seen: set[Path] = set()
    todo = [(text, here)]
    while todo and len(seen) < _MAX_HEADERS:
        body, base = todo.pop()
        for m in _INCLUDE.finditer(body):
            spelled = m.group(1)
            name = spelled[1:-1].strip()
            angled = spelled.startswith("<")
            look = dirs if angled else [base, here, *dirs]
            found = next((d / name for d in look if (d / name).is_file()), None)
            if found is None:
                if angled and ".." not in Path(name).parts and not name.startswith("/"):
                    need.add(name)
                continue
            found = found.resolve()
            if found not in seen:
                seen.add(found)
                with contextlib.suppress(OSError):  # gcc will say why it cannot
                    todo.append((found.read_text(errors="replace"), found.parent))
    return need


def _write_headers(root: Path, standins: set[str]) -> None:
    """The stand-in system headers, and an empty one for each name in
    ``standins`` that is not among them."""
    files = dict(HEADERS)
    for name in standins:
        files.setdefault(name, "/* polyc: stand-in for a system header */\n")
    for name, body in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)


def _flags(filename, defines, include_dirs, headers: str) -> list[str]:
    flags = ["-E", "-nostdinc", "-std=gnu11", "-x", "c"]
    for key, value in _EXTENSIONS.items():
        flags.append(f"-D{key}={value}")
    if filename != "<source>":
        flags += ["-iquote", os.path.dirname(os.path.abspath(filename)) or "."]
    for d in include_dirs or ():
        flags.append(f"-I{d}")
    flags += ["-isystem", headers]
    if isinstance(defines, dict):
        items = [k if v is None else f"{k}={v}" for k, v in defines.items()]
    else:
        items = list(defines or ())
    flags += [f"-D{d}" for d in items]
    return flags


def _run_cpp(text: str, flags: list[str], filename: str) -> str:
    try:
        proc = subprocess.run(
            [CC, *flags, "-"], input=text, capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.SubprocessError) as err:
        raise FrontendError(
            f"{filename}: c frontend: cannot run the preprocessor {CC!r} because "
            f"{err}. Install gcc or set POLYC_CPP to a C preprocessor."
        ) from None
    if proc.returncode != 0:
        first = next(
            (ln for ln in proc.stderr.splitlines() if "error" in ln),
            proc.stderr.strip(),
        )
        missing = re.search(r"fatal error: (.+?): No such file or directory", first)
        fix = (
            f"Pass the directory that holds {missing.group(1)} (-I DIR, "
            "include_dirs=[DIR])."
            if missing
            else "Pass the include directories (include_dirs=, -I) and defines "
            "(defines=, -D) you compile with."
        )
        raise FrontendError(
            f"{filename}: c frontend: preprocessing failed because {CC} -E says: "
            f"{first.strip()}. {fix}"
        )
    return proc.stdout


def _integer_macros(
    lines: list[str], span: RegionSpan, flags: list[str], filename: str
) -> tuple[dict[str, int], set[str]]:
    """Object-like macros named in the region whose value is an integer constant,
    and the names of every macro defined where the region starts."""
    body = "\n".join(lines[span.begin : span.end - 1])
    names = sorted(set(_IDENT.findall(_strip_comments(body))))
    prefix = "\n".join(lines[: span.begin - 1])
    probes = "\n".join(f"{_PROBE}{k} {n}" for k, n in enumerate(names))
    out = _run_cpp(f"{prefix}\n{probes}\n", [*flags, "-dD"], filename)
    values: dict[str, int] = {}
    defined: set[str] = set()
    for line in out.splitlines():
        line = line.strip()
        m = re.match(r"#\s*(define|undef)\s+([A-Za-z_]\w*)", line)
        if m:
            (defined.add if m.group(1) == "define" else defined.discard)(m.group(2))
            continue
        if not line.startswith(_PROBE):
            continue
        key, _, expansion = line.partition(" ")
        name = names[int(key[len(_PROBE) :])]
        expansion = expansion.strip()
        if expansion == name:
            continue
        value = _int_value(expansion)
        if value is not None:
            values[name] = value
    return values, defined


_INT_LITERAL = re.compile(r"\b(0[xX][0-9a-fA-F]+|\d+)[uUlL]*\b")
_INT_CAST = re.compile(
    r"\(\s*(?:unsigned\s+|signed\s+)?(?:int|long|short|long\s+long|size_t)\s*\)"
)


def _int_value(expansion: str) -> int | None:
    """The value of an integer constant expression, or None (C semantics for / %)."""
    text = _INT_CAST.sub(" ", expansion)
    text = _INT_LITERAL.sub(lambda m: str(int_literal(m.group(0))[0]), text)
    if not text.strip() or not re.fullmatch(r"[\d\s()+\-*/%<>~]*", text):
        return None
    try:
        return _eval(ast.parse(text, mode="eval").body)
    except (SyntaxError, ValueError, ZeroDivisionError):
        return None


def _eval(node) -> int:
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand)
        if isinstance(node.op, ast.USub):
            return -v
        if isinstance(node.op, ast.UAdd):
            return v
        if isinstance(node.op, ast.Invert):
            return ~v
    if isinstance(node, ast.BinOp):
        a, b = _eval(node.left), _eval(node.right)
        op = type(node.op)
        if op is ast.Add:
            return a + b
        if op is ast.Sub:
            return a - b
        if op is ast.Mult:
            return a * b
        if op in (ast.Div, ast.FloorDiv):  # C truncates
            q = abs(a) // abs(b)
            return q if (a >= 0) == (b > 0) else -q
        if op is ast.Mod:
            q = abs(a) // abs(b)
            q = q if (a >= 0) == (b > 0) else -q
            return a - q * b
        if op is ast.LShift:
            return a << b
        if op is ast.RShift:
            return a >> b
    raise ValueError("not an integer constant expression")


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return re.sub(r'"(?:\\.|[^"\\])*"', '""', text)


def _escape(name: str) -> str:
    return name.replace("\\", "\\\\").replace('"', '\\"')


_LINEMARK = re.compile(r'^#\s*(?:line\s+)?(\d+)\s+"((?:\\.|[^"\\])*)"')


def _clean(output: str, filename: str) -> tuple[str, dict[tuple[str, int], str]]:
    """Blank the push/pop pragmas; index gcc's output lines by original position."""
    pp_lines: dict[tuple[str, int], str] = {}
    out: list[str] = []
    current, line_no = filename, 1
    for line in output.splitlines():
        m = _LINEMARK.match(line)
        if m:
            current, line_no = m.group(2).replace('\\"', '"'), int(m.group(1))
            out.append(line)
            continue
        if re.match(r"^\s*#\s*pragma\s+(push_macro|pop_macro)\b", line):
            line = ""
        pp_lines.setdefault((current, line_no), line)
        out.append(line)
        line_no += 1
    return "\n".join(out) + "\n", pp_lines


def _align_column(orig: str, pp: str, pp_column: int) -> int:
    """Map a column of gcc's output line to the original line by token alignment."""
    a = [(m.start(), m.group()) for m in _TOKEN.finditer(orig)]
    b = [(m.start(), m.group()) for m in _TOKEN.finditer(pp)]
    col = pp_column - 1
    target = next((k for k, (s, t) in enumerate(b) if s + len(t) > col), None)
    if target is None:
        return pp_column
    matcher = difflib.SequenceMatcher(None, [t for _, t in a], [t for _, t in b], False)
    for i, j, size in matcher.get_matching_blocks():
        if j <= target < j + size:
            return a[i + target - j][0] + 1
    # inside a macro expansion: point at the nearest preceding matched token's end
    best = 1
    for i, j, size in matcher.get_matching_blocks():
        if size and j + size <= target:
            best = a[i + size - 1][0] + 1
    return best
