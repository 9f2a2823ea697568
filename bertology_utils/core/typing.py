"""Type aliases that carry an array's or tensor's shape in their name.

mypy checks the base type (``torch.Tensor`` or a numpy array); the name and the docstring say the
shape, in the letters the docstrings use: B items of a batch, L layers, H heads (or maps per layer),
T tokens, W words.

torch is imported only for type checkers (the torch aliases are strings at run time), so importing
this module stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    import torch

__all__ = [
    "AttentionMaps",
    "MixingMatrix",
    "TokenMask",
    "BatchMaps",
    "TokenToWord",
    "ItemMaps",
    "WordMap",
    "HeadMatrix",
]

AttentionMaps: TypeAlias = "torch.Tensor"
"""``(B, H, T, T)`` attention of one layer for a batch, rows over keys (the model's ``attentions``)."""

MixingMatrix: TypeAlias = "torch.Tensor"
"""``(B, T, T)`` one map a layer for a batch: ``[b, i, j]`` how much token i draws on token j."""

TokenMask: TypeAlias = "torch.Tensor"
"""``(B, T)`` 1 (or True) for a real token, 0 for padding."""

BatchMaps: TypeAlias = "torch.Tensor"
"""``(B, ..., T, T)`` or ``(B, ..., W, W)`` maps of a batch, any dims (layers, heads) between B and the map."""

TokenToWord: TypeAlias = "torch.Tensor"
"""``(B, T)`` integer word index of each token, ``-1`` for padding."""

ItemMaps: TypeAlias = NDArray[np.floating[Any]]
"""``(L, H, W, W)`` (or ``(L, H, T, T)``) maps of one item: every head of every layer."""

WordMap: TypeAlias = NDArray[np.floating[Any]]
"""``(W, W)`` one head's map of one item: ``[i, j]`` is how much word i attends to word j."""

HeadMatrix: TypeAlias = NDArray[Any]
"""``(L, H)`` one value per head (scores, counts, masks), ``[layer, head]``."""
