"""Quasi-affine integer expressions: the language of indices, bounds and conditions.

An :class:`Aff` is ``sum(coef * atom) + const`` where an atom is a name (an index
variable or a parameter) or ``floor(aff / d)`` for a positive integer ``d``. This is
exactly what isl accepts in access relations and domains, so every Aff converts to isl
text, to C, and evaluates vectorised with numpy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Union

import numpy as np

from polyc.errors import AffineError


@dataclass(frozen=True)
class FloorDiv:
    """The atom ``floor(num / den)`` with ``den > 0``."""

    num: Aff
    den: int

    def __str__(self) -> str:
        return f"floor(({self.num})/{self.den})"


Atom = Union[str, FloorDiv]


class Aff:
    """An immutable quasi-affine expression over named integer variables.

    Build with :func:`var` and :func:`const`, then ``+``, ``-``, ``*`` by an integer,
    ``//`` and ``%`` by a positive integer. Multiplying two non-constant expressions
    raises :class:`AffineError`: the result would not be affine.
    """

    __slots__ = ("_hash", "const", "terms")

    def __init__(self, terms: Mapping[Atom, int] | None = None, const: int = 0):
        items = {a: int(c) for a, c in (terms or {}).items() if c != 0}
        self.terms: tuple[tuple[Atom, int], ...] = tuple(
            sorted(items.items(), key=lambda kv: _atom_key(kv[0]))
        )
        self.const = int(const)
        self._hash = hash((self.terms, self.const))

    # construction -------------------------------------------------------------
    @staticmethod
    def lift(value: object) -> Aff:
        """Return ``value`` as an Aff (an Aff, an int, or a name)."""
        if isinstance(value, Aff):
            return value
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            return Aff(const=int(value))
        if isinstance(value, str):
            return Aff({value: 1})
        raise AffineError(
            f"affine: {value!r} is not an affine integer expression because it is a "
            f"{type(value).__name__}. Use index variables, parameters and integers."
        )

    # queries ------------------------------------------------------------------
    @property
    def is_constant(self) -> bool:
        return not self.terms

    def names(self) -> set[str]:
        """Every variable name the expression mentions, inside floors too."""
        out: set[str] = set()
        for atom, _ in self.terms:
            if isinstance(atom, str):
                out.add(atom)
            else:
                out |= atom.num.names()
        return out

    def coefficient(self, name: str) -> int:
        """The coefficient of ``name`` outside any floor (0 when absent)."""
        return dict(self.terms).get(name, 0)

    @property
    def is_linear(self) -> bool:
        """True when no floor atom appears (a plain affine form)."""
        return all(isinstance(a, str) for a, _ in self.terms)

    # arithmetic ---------------------------------------------------------------
    def __add__(self, other: object) -> Aff:
        other = Aff.lift(other)
        terms = dict(self.terms)
        for atom, coef in other.terms:
            terms[atom] = terms.get(atom, 0) + coef
        return Aff(terms, self.const + other.const)

    __radd__ = __add__

    def __neg__(self) -> Aff:
        return Aff({a: -c for a, c in self.terms}, -self.const)

    def __sub__(self, other: object) -> Aff:
        return self + (-Aff.lift(other))

    def __rsub__(self, other: object) -> Aff:
        return Aff.lift(other) - self

    def __mul__(self, other: object) -> Aff:
        other = Aff.lift(other)
        if other.is_constant:
            k = other.const
            return Aff({a: c * k for a, c in self.terms}, self.const * k)
        if self.is_constant:
            return other * self
        raise AffineError(
            f"affine: ({self}) * ({other}) is not affine because it multiplies two "
            "expressions that both contain variables. Rewrite the index so that each "
            "variable is multiplied by a constant only."
        )

    __rmul__ = __mul__

    def __floordiv__(self, other: object) -> Aff:
        den = _positive_constant(other, "//")
        if den == 1:
            return self
        if all(c % den == 0 for _, c in self.terms) and self.const % den == 0:
            return Aff({a: c // den for a, c in self.terms}, self.const // den)
        if self.is_constant:
            return Aff(const=self.const // den)
        return Aff({FloorDiv(self, den): 1})

    def __mod__(self, other: object) -> Aff:
        den = _positive_constant(other, "%")
        return self - (self // den) * den

    # conversions --------------------------------------------------------------
    def __str__(self) -> str:
        return self.render(lambda name: name, lambda num, den: f"({num}) // {den}")

    def __repr__(self) -> str:
        return f"Aff({self})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (int, str)) and not isinstance(other, bool):
            other = Aff.lift(other)
        return (
            isinstance(other, Aff)
            and self.terms == other.terms
            and self.const == other.const
        )

    def __hash__(self) -> int:
        return self._hash

    def render(self, name_fn, floor_fn) -> str:
        """Render with ``name_fn(name)`` for names and ``floor_fn(num, den)`` for floors."""
        parts: list[str] = []
        for atom, coef in self.terms:
            text = (
                name_fn(atom)
                if isinstance(atom, str)
                else floor_fn(atom.num.render(name_fn, floor_fn), atom.den)
            )
            if coef == 1:
                parts.append(f"+ {text}")
            elif coef == -1:
                parts.append(f"- {text}")
            elif coef < 0:
                parts.append(f"- {-coef}*{text}")
            else:
                parts.append(f"+ {coef}*{text}")
        if self.const or not parts:
            parts.append(f"+ {self.const}" if self.const >= 0 else f"- {-self.const}")
        text = " ".join(parts)
        return text[2:] if text.startswith("+ ") else "-" + text[2:]

    def to_isl(self) -> str:
        """isl syntax, e.g. ``2*i + floor((j)/4) - 1``."""
        return self.render(lambda n: n, lambda num, den: f"floor(({num})/{den})")

    def to_c(self, name_fn=lambda n: n) -> str:
        """C syntax; floors use the ``floord`` macro that generated code defines."""
        return self.render(name_fn, lambda num, den: f"floord({num}, {den})")

    def evaluate(self, env: Mapping[str, object]):
        """Evaluate with numpy (ints or integer arrays in ``env``); floors round down."""
        total: object = None
        for atom, coef in self.terms:
            if isinstance(atom, str):
                try:
                    value = env[atom]
                except KeyError:
                    raise AffineError(
                        f"affine: {self} mentions {atom!r} because it is a free "
                        f"variable, but no value was given for it. Bind {atom!r}."
                    ) from None
            else:
                value = np.floor_divide(atom.num.evaluate(env), atom.den)
            term = value if coef == 1 else (-value if coef == -1 else coef * value)
            total = term if total is None else total + term
        if total is None:
            return self.const
        return total + self.const if self.const else total

    def substitute(self, mapping: Mapping[str, Aff]) -> Aff:
        """Replace names by Affs (names not in ``mapping`` stay)."""
        out = Aff(const=self.const)
        for atom, coef in self.terms:
            if isinstance(atom, str):
                out = out + Aff.lift(mapping.get(atom, atom)) * coef
            else:
                out = out + (atom.num.substitute(mapping) // atom.den) * coef
        return out


def _atom_key(atom: Atom) -> tuple[int, str]:
    return (0, atom) if isinstance(atom, str) else (1, str(atom))


def _positive_constant(value: object, op: str) -> int:
    if isinstance(value, Aff) and value.is_constant:
        value = value.const
    if (
        isinstance(value, (int, np.integer))
        and not isinstance(value, bool)
        and value > 0
    ):
        return int(value)
    raise AffineError(
        f"affine: '{op} {value}' is not affine because the divisor is not a positive "
        "integer constant. Divide only by positive integer constants."
    )


def var(name: str) -> Aff:
    """The expression made of the single variable ``name``."""
    return Aff({name: 1})


def const(value: int) -> Aff:
    return Aff(const=value)


def names_of(affs: Iterable[Aff]) -> set[str]:
    out: set[str] = set()
    for a in affs:
        out |= a.names()
    return out
