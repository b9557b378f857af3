"""What ``polyc explain``, ``polyc report`` and ``polyc diff`` inspect, from the
command line: an op spec (``matmul:M=64,N=64,K=64``), or a file:

- ``model.py:ClassName`` with ``--input-shape 1x3x64x64`` (once per positional
  input): the PyTorch module ``ClassName()`` of that file in eval mode, imported
  with ``polyc.from_torch`` on random inputs of those shapes;
- ``program.pt2``: an exported program (``torch.export.save``), imported with its
  own example inputs;
- ``kernels.py`` or ``kernels.py:name``: a Python file that defines a polyc
  Kernel at module level (``name`` picks one when it defines several).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from polyc.errors import ArgumentError
from polyc.ir.kernel import Kernel


def is_file_target(text: str) -> bool:
    """Whether ``text`` names a file target rather than an op spec."""
    path = text.split(":", 1)[0] if ".py:" in text else text
    return path.endswith((".py", ".pt2"))


def load_target(text: str, input_shapes=()) -> Kernel:
    """The Kernel that ``text`` names (see the module docstring).

    Raises:
        ArgumentError: a missing file, a class or Kernel the file does not define,
            a model without ``--input-shape``, or a shape that is not ``AxBxC``.
        FrontendError: what ``polyc.from_torch`` raises for the model.
    """
    path_text, _, name = text.partition(":") if ".py:" in text else (text, "", "")
    path = Path(path_text)
    if not path.is_file():
        raise ArgumentError(
            f"target: {path} does not exist because no file is there. Give the path "
            "of a .py file (model.py:ClassName or kernels.py) or of a .pt2 program."
        )
    if path.suffix == ".pt2":
        return _exported(path)
    module = _import(path)
    if name:
        if not hasattr(module, name):
            defined = sorted(
                n for n, v in vars(module).items() if _is_model_or_kernel(v)
            )
            raise ArgumentError(
                f"target: {path} defines no {name!r} because it has only "
                f"{', '.join(defined) or 'no Kernel or nn.Module class'}. Name one "
                "of those after the colon."
            )
        value = getattr(module, name)
        if isinstance(value, Kernel):
            return value
        return _model(value, f"{path}:{name}", input_shapes)
    kernels = {n: v for n, v in vars(module).items() if isinstance(v, Kernel)}
    if len(kernels) != 1:
        why = "it defines none" if not kernels else f"it defines {', '.join(kernels)}"
        raise ArgumentError(
            f"target: {path} does not name one Kernel because {why}. Write "
            f"{path}:NAME (a Kernel, or an nn.Module class with --input-shape)."
        )
    return next(iter(kernels.values()))


def parse_shape(text: str) -> tuple[int, ...]:
    """``1x3x64x64`` as a tuple of positive ints.

    Raises:
        ArgumentError: for anything else.
    """
    try:
        shape = tuple(int(p) for p in text.lower().split("x"))
    except ValueError:
        shape = ()
    if not shape or any(d <= 0 for d in shape):
        raise ArgumentError(
            f"target: input shape {text!r} is not a shape because it must be "
            "positive integers joined by x. Write e.g. --input-shape 1x3x64x64."
        )
    return shape


def _import(path: Path):
    name = f"_polyc_target_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent.resolve()))
    try:
        spec.loader.exec_module(module)
    except Exception as err:
        raise ArgumentError(
            f"target: importing {path} failed because {type(err).__name__}: {err}. "
            "Fix the file so that `python {path}` runs."
        ) from err
    finally:
        sys.path.remove(str(path.parent.resolve()))
    return module


def _is_model_or_kernel(value) -> bool:
    if isinstance(value, Kernel):
        return True
    torch = sys.modules.get("torch")
    return (
        torch is not None
        and isinstance(value, type)
        and issubclass(value, torch.nn.Module)
    )


def _model(cls, label: str, input_shapes) -> Kernel:
    import torch

    import polyc

    if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
        raise ArgumentError(
            f"target: {label} is a {type(cls).__name__}, not a Kernel or an "
            "nn.Module class, because polyc inspects only those. Name a Kernel or "
            "a model class."
        )
    if not input_shapes:
        raise ArgumentError(
            f"target: {label} is a model but no input shape was given because the "
            "model's inputs set the kernel's sizes. Pass --input-shape 1x3x64x64 "
            "(once per input)."
        )
    shapes = [parse_shape(s) if isinstance(s, str) else tuple(s) for s in input_shapes]
    try:
        module = cls().eval()
    except TypeError as err:
        raise ArgumentError(
            f"target: {label}() failed because {err}. Give the class defaults for "
            "its arguments, or define a Kernel in the file."
        ) from err
    torch.manual_seed(0)
    inputs = tuple(torch.randn(*s) for s in shapes)
    return polyc.from_torch(module, inputs, name=cls.__name__)


def _exported(path: Path) -> Kernel:
    import torch

    import polyc

    try:
        ep = torch.export.load(str(path))
    except Exception as err:
        raise ArgumentError(
            f"target: {path} is not an exported program because torch.export.load "
            f"failed ({type(err).__name__}). Save one with torch.export.save."
        ) from err
    return polyc.from_torch(ep, (), name=path.stem)
