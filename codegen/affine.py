"""Affine index expressions over loop variables, simplified with the loops' bounds.

Tile origins in emitted C are ``const + sum(coef * var)`` where each loop variable ranges
over ``[0, extent)``. Packed layouts index with ``x / pack`` and ``x % pack``; written
naively, those put a division, a remainder and a sign extension in front of every load
of the inner loop, and the C compiler cannot strength-reduce them. When the bounds prove
that the part of ``x`` below ``pack`` never carries into the next pack, both are affine
again:

    (32*i + j) / 16 == 2*i          (32*i + j) % 16 == j        for 0 <= j < 16

``divmod`` returns those affine parts, or None when the bounds do not prove it (the
emitter then splits the loop at pack boundaries, or falls back to C's ``/`` and ``%``).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Var:
    name: str
    extent: int  # the variable takes the values 0 .. extent-1


@dataclass(frozen=True)
class Affine:
    const: int = 0
    terms: tuple[tuple[Var, int], ...] = ()  # (variable, coefficient), coefficients != 0

    @staticmethod
    def of(x: int | Affine) -> Affine:
        return x if isinstance(x, Affine) else Affine(x)

    @staticmethod
    def var(v: Var, coef: int = 1) -> Affine:
        return Affine(0, ((v, coef),))

    def __add__(self, other: int | Affine) -> Affine:
        o = Affine.of(other)
        coefs: dict[Var, int] = dict(self.terms)
        for v, c in o.terms:
            coefs[v] = coefs.get(v, 0) + c
        return Affine(self.const + o.const, tuple((v, c) for v, c in coefs.items() if c))

    __radd__ = __add__

    def scaled(self, k: int) -> Affine:
        return Affine(self.const * k, tuple((v, c * k) for v, c in self.terms if c * k))

    @property
    def constant(self) -> int | None:
        return None if self.terms else self.const

    def max(self) -> int:
        return self.const + sum(c * (v.extent - 1) for v, c in self.terms if c > 0)

    def min(self) -> int:
        return self.const + sum(c * (v.extent - 1) for v, c in self.terms if c < 0)

    def divmod(self, p: int) -> tuple[Affine, Affine] | None:
        """``(self // p, self % p)`` as affine expressions, if the bounds allow it."""
        if self.min() < 0:
            return None
        outer = Affine(self.const // p * p, tuple(t for t in self.terms if t[1] % p == 0))
        inner = Affine(self.const % p, tuple(t for t in self.terms if t[1] % p))
        if inner.max() >= p:
            return None
        q = Affine(outer.const // p, tuple((v, c // p) for v, c in outer.terms))
        return q, inner

    def c(self) -> str:
        """A C expression (operands are ``long`` loop variables)."""
        parts = []
        for v, c in self.terms:
            parts.append(v.name if c == 1 else f"{c} * {v.name}")
        if self.const or not parts:
            parts.append(str(self.const))
        return " + ".join(parts)

    def __str__(self) -> str:
        return self.c()
