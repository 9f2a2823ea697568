"""Type aliases that carry an array's or tensor's shape in their name.

mypy checks the base type (``torch.Tensor`` or a numpy array); the name and the docstring say the
shape, in the letters the docstrings use: B items of a batch, L layers, H heads (or maps per layer),
T tokens, W words, E vector dims, C classes, N examples of a set (or draws, configurations).

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
    "AllAttentionMaps",
    "TokenIds",
    "TokenScores",
    "TokenVectors",
    "WordScores",
    "ItemValues",
    "Logits",
    "HeadTensor",
    "WordValues",
    "TokenValues",
    "HeadDraws",
    "AttentionScores",
    "LayerValues",
    "SampleValues",
    "HeadSamples",
    "WordCodes",
    "ItemWordVectors",
    "ArcScores",
]

AttentionMaps: TypeAlias = "torch.Tensor"
"""``(B, H, T, T)`` attention of one layer for a batch, rows over keys (the model's ``attentions``)."""

MixingMatrix: TypeAlias = "torch.Tensor"
"""``(B, T, T)`` one map a layer for a batch: ``[b, i, j]`` how much token i draws on token j."""

TokenMask: TypeAlias = "torch.Tensor"
"""``(B, T)`` 1 (or True) on the tokens selected (the real ones unless said otherwise), 0 (or False) elsewhere."""

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

AllAttentionMaps: TypeAlias = "torch.Tensor"
"""``(B, L, H, T, T)`` attention of every layer for a batch."""

TokenIds: TypeAlias = "torch.Tensor"
"""``(B, T)`` an integer code per token (token ids, segment ids, kind codes)."""

TokenScores: TypeAlias = "torch.Tensor"
"""``(B, T)`` a float per token (attributions, relevances)."""

TokenVectors: TypeAlias = "torch.Tensor"
"""``(B, T, E)`` a vector per token (hidden states, embeddings)."""

WordScores: TypeAlias = "torch.Tensor"
"""``(B, W)`` a float per word of each item, NaN where an item has no word W."""

ItemValues: TypeAlias = "torch.Tensor"
"""``(B,)`` one value per item of a batch (a loss, a score, a class id, a token position)."""

Logits: TypeAlias = "torch.Tensor"
"""``(B, C)`` a classifier's logits."""

HeadTensor: TypeAlias = "torch.Tensor"
"""``(L, H)`` one value per head (gates, probabilities, masks) as a tensor, ``[layer, head]``."""

WordValues: TypeAlias = NDArray[Any]
"""``(W,)`` one value per word of one item (gold heads, kinds, segments)."""

TokenValues: TypeAlias = NDArray[Any]
"""``(T,)`` one value per token of one item (kind codes, word indices)."""

HeadDraws: TypeAlias = "torch.Tensor"
"""``(N, L, H)`` N draws or configurations of one value per head (sampled gates, their noise, gate stacks)."""

AttentionScores: TypeAlias = "torch.Tensor"
"""``(B, H, T, T)`` one layer's attention before the softmax (``q·k`` and what is added to it), rows over keys."""

LayerValues: TypeAlias = NDArray[Any]
"""``(L,)`` one value per layer."""

SampleValues: TypeAlias = NDArray[Any]
"""``(N,)`` one value per example of a set (per dev example, per word of a corpus, per configuration)."""

HeadSamples: TypeAlias = NDArray[Any]
"""``(N, L, H)`` one value per head for each of N examples (or configurations)."""

WordCodes: TypeAlias = "torch.Tensor"
"""``(B, W)`` an integer or bool per word of each item (gold heads, which words count), padded."""

ItemWordVectors: TypeAlias = NDArray[np.floating[Any]]
"""``(W, E)`` one vector per word of one item."""

ArcScores: TypeAlias = "torch.Tensor"
"""``(B, W, W + 1)`` a score for each word's candidate heads, candidate 0 being ROOT."""
