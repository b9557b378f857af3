"""Reading MLIR text with xDSL's parser (``polyc.from_mlir``).

When LLVM 19's ``mlir-opt`` is installed, the text goes through it first: it
verifies the input (a malformed program fails there, with MLIR's own diagnostic)
and prints it in the generic form with every operation's location, which xDSL
parses whatever custom syntax the producer used (``affine.if``, ``symbol(%n)``
subscripts); the locations then point into the original text. Without it, xDSL
parses the text as it is.
"""

from __future__ import annotations

import shutil
import subprocess
from functools import cache
from pathlib import Path

from polyc.errors import FrontendError
from polyc.ir.kernel import Kernel

GENERIC = (
    "--mlir-print-op-generic",
    "--mlir-print-debuginfo",
    "--mlir-print-local-scope",
)


def from_mlir(text_or_path, *, function: str | None = None) -> Kernel:
    """A Kernel from an MLIR module in the affine subset (docs/mlir.md): a
    ``func.func`` with memref (arrays) and index (parameters) arguments whose body
    is ``affine.for``/``if``/``load``/``store``/``apply`` with ``arith``/``math``
    values.

    Args:
        text_or_path: MLIR text, or the path of a ``.mlir`` file.
        function: which ``func.func`` (default: the module's only, or last, one).

    Raises:
        FrontendError: for text that does not parse or verify, or any operation
            outside the subset, with its MLIR location.
    """
    from polyc.frontends.mlir.lower import lower

    filename, text = _read(text_or_path)
    module = parse(text, filename)
    return lower(module, function, filename, text)


def _read(text_or_path) -> tuple[str, str]:
    if isinstance(text_or_path, Path) or (
        isinstance(text_or_path, str)
        and "\n" not in text_or_path
        and text_or_path.strip().endswith(".mlir")
    ):
        path = Path(text_or_path)
        try:
            return str(path), path.read_text()
        except (OSError, UnicodeDecodeError) as err:
            raise FrontendError(
                f"from_mlir: cannot read {path} because "
                f"{getattr(err, 'strerror', None) or err}. Pass an existing .mlir "
                "file or the MLIR text itself."
            ) from None
    if not isinstance(text_or_path, str):
        raise FrontendError(
            f"from_mlir: got a {type(text_or_path).__name__} because the argument "
            "must be MLIR text or a path. Pass a str or a pathlib.Path."
        )
    return "<mlir>", text_or_path


@cache
def mlir_opt() -> str | None:
    for name in ("mlir-opt-19", "/usr/lib/llvm-19/bin/mlir-opt", "mlir-opt"):
        path = shutil.which(name)
        if path:
            return path
    return None


def parse(text: str, filename: str = "<mlir>"):
    """The xDSL ``builtin.module`` of ``text``.

    Raises:
        FrontendError: when mlir-opt or xDSL refuses the text.
    """
    from xdsl.utils.exceptions import ParseError

    tool = mlir_opt()
    if tool is not None:
        proc = subprocess.run(
            [tool, *GENERIC, "-"], input=text, capture_output=True, text=True
        )
        if proc.returncode != 0:
            diag = proc.stderr.strip().replace("<stdin>", filename)
            raise FrontendError(
                f"from_mlir: the text is not valid MLIR because mlir-opt says: "
                f"{diag.splitlines()[0] if diag else 'nothing'}. Fix the input at "
                "that location."
            )
        text = proc.stdout.replace('loc("<stdin>"', f"loc({_quoted(filename)}")
    try:
        from xdsl.parser import Parser

        return Parser(_context(), text, filename).parse_module()
    except ParseError as err:
        first = str(err).strip().splitlines()
        raise FrontendError(
            f"from_mlir: xDSL cannot parse the text because {' '.join(first[:1])} "
            f"({first[-1].strip() if first else ''}). Install LLVM 19's mlir-opt "
            "(apt-get install mlir-19-tools) so that the text is printed in the "
            "generic form first, or pass the generic form."
        ) from None


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@cache
def _context():
    from xdsl.context import Context
    from xdsl.dialects import get_all_dialects

    ctx = Context(allow_unregistered=True)
    for name, factory in get_all_dialects().items():
        ctx.register_dialect(name, factory)
    return ctx
