"""What every rewrite returns: its holes and its affine cost rule."""
from __future__ import annotations

from dataclasses import dataclass

from morello.errors import RewriteError
from morello.specs import Spec

__all__ = ["Expansion", "RewriteError"]


@dataclass(frozen=True, slots=True)
class Expansion:
    """Sub-Specs (holes, in the order codegen nests them) and the cost rule.

    main = const + sum(coefs[i] * main(children[i])); peaks = own + max child peaks.
    """

    children: tuple[Spec, ...]
    coefs: tuple[int, ...]
    const: int
    own: tuple[int, ...]
