"""One attention head, and its one written form.

A :class:`Head` holds 0-based ``layer`` and ``head`` (numpy's indices into a ``(layers, heads)``
grid); ``str(head)`` is the papers' ``layer-head`` counted from 1 (``Head(2, 1)`` -> ``"3-2"``),
the form every table, figure title and metric uses, and :meth:`Head.parse` reads it back.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import numpy as np

from bertology_utils.core.typing import HeadMatrix

__all__ = ["Head", "all_heads"]

_WRITTEN = re.compile(r"\s*(\d+)-(\d+)\s*")


class Head(NamedTuple):
    """A head of a ``(layers, heads)`` grid, both fields 0-based; written ``layer-head`` from 1."""

    layer: int
    head: int

    def __str__(self) -> str:
        return f"{self.layer + 1}-{self.head + 1}"

    @classmethod
    def parse(cls, text: str) -> Head:
        """``"3-2"`` -> ``Head(2, 1)``; anything else raises ValueError."""
        match = _WRITTEN.fullmatch(text)
        if match is None or int(match[1]) < 1 or int(match[2]) < 1:
            raise ValueError(f"not a head written layer-head counted from 1: {text!r}")
        return cls(int(match[1]) - 1, int(match[2]) - 1)

    @classmethod
    def argmax(cls, grid: HeadMatrix) -> Head:
        """The head with the largest value of a ``(layers, heads)`` grid, NaN left out (first on ties)."""
        values = np.asarray(grid, dtype=np.float64)
        if values.ndim != 2:
            raise ValueError(f"need a (layers, heads) grid, got shape {values.shape}")
        if np.isnan(values).all():
            raise ValueError("every value of the grid is NaN")
        layer, head = np.unravel_index(int(np.nanargmax(values)), values.shape)
        return cls(int(layer), int(head))


def all_heads(layers: int, heads: int) -> list[Head]:
    """Every head of a ``(layers, heads)`` grid, layer by layer (the order of ``grid.ravel()``)."""
    return [Head(layer, head) for layer in range(layers) for head in range(heads)]
