"""A large kernel's C as several translation units, so that gcc compiles them at once.

The simulator kernel is one function: a prologue of declarations (array views,
buffer handles, statement ids, counters) and then its layers' code, one top-level
item after another. :func:`split` moves the prologue's variables into a frame
(``struct pc_frame``, on the entry function's stack) and the items into ``parts``
functions of about equal size, each in a file of its own that names the variables
through the frame (``v`` becomes ``(pc_F->v)``); the entry function fills the frame and
calls the parts in order. Each part is itself a run of smaller functions of
about :data:`PIECE_LINES` lines that it calls in order (gcc's optimisation of
one function grows faster than its length: a 6,800-line part compiles in 1.8
CPU s at -O1 as one function, 1.4 as 19). Same statements in the same order,
so the same simulation: only gcc's work is split. The C text the user sees
(``Compiled.c_source``) is the unsplit one.

It declines (returns ``None``) whatever it does not recognise: parameters, a
prologue line that is not a declaration it can read, or a variable whose name a
macro of the runtime header uses (its expansion would not be renamed).
"""

from __future__ import annotations

import re

#: a kernel under this many lines of C compiles as one unit (splitting costs a
#: header per unit, which a small kernel does not win back)
MIN_LINES = 2500
#: the frame's file, included by every part
FRAME = "pc_frame.h"
#: in the module's cache key (codegen/build.py): bumped when the split changes
VERSION = 3
#: lines of a part's pieces, each a function of its own (at least one item)
PIECE_LINES = 300

_IDENT = re.compile(r"[A-Za-z_]\w*")
_VIEW = re.compile(r"\(\*\s*restrict\s+([A-Za-z_]\w*)\)")
_MEMBER = re.compile(r"(?:\.|->)\s*([A-Za-z_]\w*)")
_ARRAY = re.compile(r"([A-Za-z_][\w ]*?) ([A-Za-z_]\w*)((?:\[\d+\])+);")
_KEYWORDS = {"const", "static", "restrict", "volatile", "unsigned", "signed"}


def split(text: str, function: str, parts: int) -> tuple[str, dict[str, str]] | None:
    """``(main unit, {file: text})``: ``text`` (a simulator kernel's C, whose
    kernel function is ``function``) as a main unit and ``parts`` more ``.c``
    files plus the frame header; ``None`` when it is not worth it or not safe.
    """
    if not worth_splitting(text, parts):
        return None
    head = f"void {function}(pc_ctx *_pc_ctx"
    start = text.find(head)
    if start < 0:
        return None
    sig_end = text.find("\n{\n", start)
    if sig_end < 0 or "long " in text[start:sig_end]:
        return None  # parameters: the parts would need them too
    body_start = sig_end + 3
    body_end = text.find("\n}\n", body_start)
    if body_end < 0:
        return None
    preamble, signature = text[:start], text[start:sig_end]
    lines = text[body_start:body_end].split("\n")
    decls, n = _prologue(lines)
    if decls is None or n == len(lines):
        return None
    names = [name for name, _, _ in decls]
    if _collides(names, preamble):
        return None
    items = _items(lines[n:])
    if items is None or len(items) < parts:
        return None
    chunks = _chunks(items, parts, extra=n)
    if _declares(items):  # a later item might use it: each part one function
        chunks = [[[line for item in chunk for line in item]] for chunk in chunks]
    frame = _frame(decls)
    framed = {name for name, _, assign in decls if assign is not None}
    # the first part stays in the main unit (one header less to compile)
    main = [preamble, frame, _part(0, chunks[0], framed)]
    main += [
        f"void pc_part_{i}(pc_ctx *_pc_ctx, struct pc_frame *pc_F);\n"
        for i in range(1, len(chunks))
    ]
    main.append(f"{signature}\n{{\n  struct pc_frame pc_F_s;\n")
    main.append("  struct pc_frame *pc_F = &pc_F_s;\n")
    for _, _, assign in decls:
        if assign:
            main.append(f"  {_through_frame(assign, framed)}\n")
    for i in range(len(chunks)):
        main.append(f"  pc_part_{i}(_pc_ctx, pc_F);\n")
    main.append("}\n")
    main.append(text[body_end + 3 :])
    files = {FRAME: frame}
    for i, chunk in enumerate(chunks[1:], start=1):
        files[f"pc_part_{i}.c"] = f'{preamble}#include "{FRAME}"\n' + _part(
            i, chunk, framed
        )
    return "".join(main), files


def _part(i: int, chunk: list[list[str]], framed: set[str]) -> str:
    """Part ``i``: a function that calls its pieces (runs of the items of
    ``chunk`` of about :data:`PIECE_LINES` lines, each a function of its own,
    never inlined) in order."""
    pieces: list[list[str]] = [[]]
    for item in chunk:
        if len(pieces[-1]) >= PIECE_LINES:
            pieces.append([])
        pieces[-1].extend(item)
    args = "(pc_ctx *_pc_ctx, struct pc_frame *pc_F)"
    out = []
    for j, piece in enumerate(pieces):
        out.append(
            f"static __attribute__((noinline)) void pc_part_{i}_{j}{args}\n{{\n"
            + _through_frame("\n".join(piece), framed)
            + "\n}\n"
        )
    static = "static " if i == 0 else ""
    calls = "".join(f"  pc_part_{i}_{j}(_pc_ctx, pc_F);\n" for j in range(len(pieces)))
    out.append(f"{static}void pc_part_{i}{args}\n{{\n{calls}}}\n")
    return "".join(out)


def _declares(items: list[list[str]]) -> bool:
    """Whether a top-level line of ``items`` (after the prologue) declares a
    variable, which a later item could use."""
    for item in items:
        for line in item:
            top = line.startswith("  ") and not line.startswith("   ")
            if top and _declaration(line[2:]) is not None:
                return True
    return False


def worth_splitting(text: str, parts: int) -> bool:
    """Whether :func:`split` would try ``text`` in ``parts`` (a large kernel,
    several compilers)."""
    return parts >= 2 and text.count("\n") >= MIN_LINES


def _prologue(lines: list[str]):
    """The leading declarations ``[(name, field, assignment)]`` and how many lines
    they take; ``None`` for a declaration it cannot read."""
    out = []
    n = 0
    for line in lines:
        if not line.startswith("  ") or line.startswith("   "):
            return None, 0
        stmt = line[2:]
        if stmt.startswith("static const "):
            name = _name_before_eq(stmt)
            if name is None:
                return None, 0
            out.append((name, stmt, None))  # a constant: copied, never assigned
            n += 1
            continue
        got = _declaration(stmt)
        if got is None:
            break
        out.extend(got)
        n += 1
    return out, n


def _declaration(stmt: str):
    """``[(name, field, assignment)]`` of a declaration line, or ``None`` when the
    line is not one (a statement: the prologue ends there). An array declared
    without a value (``long a[3][6];``, which the kernel fills before it reads
    it) is a field with nothing to assign (``""``)."""
    m = _ARRAY.fullmatch(stmt)
    if m is not None and _plain_type(m.group(1)):
        return [(m.group(2), f"{_unconst(m.group(1))} {m.group(2)}{m.group(3)};", "")]
    if not stmt.endswith(";") or "=" not in stmt:
        return None
    m = _VIEW.match(stmt[stmt.find("(") :]) if "(*" in stmt else None
    if m is not None and stmt.find("(") > 0:  # float (*restrict a)[2][3] = (...)x;
        base = stmt[: stmt.find("(")].strip()
        lhs, rhs = stmt.split(" = ", 1)
        if not _plain_type(base):
            return None
        field = lhs.replace(base, _unconst(base), 1)
        return [(m.group(1), f"{field};", f"{m.group(1)} = {rhs}")]
    first = stmt.split("=", 1)[0].replace("*", " * ").split()
    if len(first) < 2 or not _IDENT.fullmatch(first[-1]):
        return None
    base_words = [w for w in first[:-1] if w != "*"]
    base = " ".join(base_words)
    if not base or not _plain_type(base) or first[: len(base_words)] != base_words:
        return None  # a type, then stars, then the name: nothing else
    cut = stmt.find(base_words[-1]) + len(base_words[-1])
    rest = stmt[cut:-1]  # the declarators, without the ';'
    out = []
    for decl in _top_level_commas(rest):
        lhs, eq, rhs = decl.partition("=")
        if not eq:
            return None
        stars = lhs.strip()
        name = stars.lstrip("* ")
        if not _IDENT.fullmatch(name):
            return None
        ptr = stars[: len(stars) - len(name)].replace(" ", "")
        out.append((name, f"{_unconst(base)} {ptr}{name};", f"{name} = {rhs.strip()};"))
    return out


def _plain_word(word: str) -> bool:
    return bool(_IDENT.fullmatch(word.lstrip("*")))


def _plain_type(base: str) -> bool:
    return all(_IDENT.fullmatch(w) for w in base.split())


def _unconst(base: str) -> str:
    return " ".join(w for w in base.split() if w != "const")


def _name_before_eq(stmt: str) -> str | None:
    lhs = stmt.split("=", 1)[0].split()
    return lhs[-1] if lhs and _IDENT.fullmatch(lhs[-1]) else None


def _top_level_commas(text: str) -> list[str]:
    out, depth, cur = [], 0, []
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return [d.strip() for d in out]


def _collides(names: list[str], preamble: str) -> bool:
    """Whether a frame variable's name is also an identifier in a macro of the
    header (its expansion would not be renamed), or declared twice."""
    macros = re.findall(r"^#\s*define[^\n]*(?:\\\n[^\n]*)*", preamble, flags=re.M)
    used = set(_IDENT.findall("\n".join(macros)))
    return any(n in used for n in names) or len(set(names)) < len(names)


_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"' + r"|'(?:[^'\\\n]|\\.)*'")


def _through_frame(code: str, names: set[str]) -> str:
    """``code`` with every use of a name of ``names`` read through the frame:
    not inside string or character literals, nor as a member (after ``.``/``->``)."""

    def ident(m: re.Match) -> str:
        word = m.group(0)
        if word not in names:
            return word
        before = m.string[: m.start()].rstrip()
        if before.endswith((".", "->")):
            return word
        return f"(pc_F->{word})"

    out, last = [], 0
    for lit in _STRING.finditer(code):
        out.append(_IDENT.sub(ident, code[last : lit.start()]))
        out.append(lit.group(0))
        last = lit.end()
    out.append(_IDENT.sub(ident, code[last:]))
    return "".join(out)


def _items(lines: list[str]) -> list[list[str]] | None:
    """The function body's top-level items (a line, or a block with the line that
    opens it), or ``None`` when the braces do not balance."""
    items: list[list[str]] = []
    cur: list[str] = []
    depth = 0
    for line in lines:
        if not cur and items and line.lstrip().startswith("else"):
            cur = items.pop()  # an else stays with its if
        cur.append(line)
        depth += line.count("{") - line.count("}")
        if depth < 0:
            return None
        top = line.startswith("  ") and not line.startswith("   ")
        opens_block = top and (line.lstrip().startswith(("for ", "if ", "else")))
        if depth == 0 and not opens_block:
            items.append(cur)
            cur = []
    if cur or depth:
        return None
    return items


def _chunks(items: list[list[str]], parts: int, extra: int) -> list[list[list[str]]]:
    """``parts`` runs of consecutive items of about equal lines, the first one
    shorter by ``extra`` (the prologue, which stays in the main unit with it)."""
    total = sum(len(i) for i in items) + extra
    out: list[list[list[str]]] = [[]]
    size = extra
    for item in items:
        if size >= total / parts and len(out) < parts:
            out.append([])
            size = 0
        out[-1].append(item)
        size += len(item)
    return out


def _frame(decls) -> str:
    fields = [f for _, f, a in decls if a is not None]
    consts = [f for _, f, a in decls if a is None]
    return (
        "#ifndef PC_FRAME_H\n#define PC_FRAME_H\n"
        + "".join(f"{c}\n" for c in consts)
        + "struct pc_frame {\n"
        + "".join(f"  {f}\n" for f in fields)
        + "};\n#endif\n"
    )
