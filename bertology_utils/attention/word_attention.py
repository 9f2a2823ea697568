"""Token-level attention -> word-level attention, as Clark et al. (2019) converted it.

Attention *to* a word is the sum of the attention to its tokens; attention *from* a
word combines the rows of its tokens by ``from_rule``:

- ``"mean"`` (Clark et al.): the average of the rows,
- ``"first"``: the row of the word's first token,
- ``"max"``: the element-wise maximum of the rows, renormalised to sum to 1.

With every token belonging to exactly one word (special tokens are words of their
own), each word-level row still sums to 1. Everything is batched: one call converts
(batch, layers, heads) maps at once in one contraction; :class:`WordConversion` keeps
the per-batch preparation for reuse across layers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from bertology_utils.core.typing import BatchMaps, ItemMaps, TokenToWord

__all__ = ["FROM_RULES", "WordConversion", "word_attention", "word_attention_single", "ItemAttention", "SkippedItem"]

FROM_RULES = ("mean", "first", "max")


class WordConversion:
    """The token -> word conversion of one batch, prepared once and applied to many maps.

    Extraction converts every layer of a batch with the same token -> word map, so the
    one-hot membership and the ``from_rule`` row weights are built once per batch, not per
    layer. Each call is a single contraction: ``rows @ attention @ members``.

    Args:
        token_to_word: ``(B, T)`` integer word index of each token, ``-1`` for padding.
        from_rule: one of :data:`FROM_RULES`.
        n_words: word dimension of the results; defaults to the largest word index + 1.
    """

    def __init__(self, token_to_word: TokenToWord, from_rule: str = "mean", n_words: int | None = None):
        if from_rule not in FROM_RULES:
            raise ValueError(f"from_rule must be one of {FROM_RULES}, not {from_rule!r}")
        token_to_word = torch.as_tensor(token_to_word).long()
        self.from_rule = from_rule
        self.token_to_word = token_to_word
        self.n_words = int(token_to_word.max()) + 1 if n_words is None else n_words
        valid = token_to_word >= 0
        # (B, T, W) one-hot: token t of item b belongs to word w. Padding (-1) maps nowhere.
        one_hot = torch.nn.functional.one_hot(token_to_word.clamp(min=0), self.n_words + 1)[..., : self.n_words]
        self.members = (one_hot * valid.unsqueeze(-1)).float()
        self.rows: torch.Tensor | None  # (B, W, T) weights of the token rows of each word; None for "max"
        if from_rule == "mean":
            counts = self.members.sum(1, keepdim=True).clamp_min(1)  # (B, 1, W)
            self.rows = (self.members / counts).transpose(1, 2)  # (B, W, T)
        elif from_rule == "first":  # the first token of each word is where the word index changes
            first = torch.ones_like(token_to_word, dtype=torch.bool)
            first[:, 1:] = token_to_word[:, 1:] != token_to_word[:, :-1]
            self.rows = (self.members * first.unsqueeze(-1)).transpose(1, 2)
        else:
            self.rows = None

    def __call__(self, attention: BatchMaps) -> BatchMaps:
        """``(B, ..., T, T)`` token attention -> ``(B, ..., W, W)`` word attention, in ``attention``'s dtype;
        rows and columns of absent words (padding) are zero."""
        if attention.shape[-1] != attention.shape[-2] or attention.shape[-1] != self.token_to_word.shape[-1]:
            raise ValueError(
                f"attention {tuple(attention.shape)} does not match token_to_word {tuple(self.token_to_word.shape)}"
            )
        members = self.members.to(attention.device, attention.dtype)
        if self.rows is not None:
            rows = self.rows.to(attention.device, attention.dtype)
            return torch.einsum("bwt,b...ts,bsv->b...wv", rows, attention, members)
        # max: scatter each token's row of attention-to-words onto its word with amax; padding
        # goes to a spare row.
        to_words = torch.einsum("b...ts,bsv->b...tv", attention, members)
        extra = attention.dim() - 3  # dims between batch and (T, T)
        t2w = self.token_to_word.to(attention.device)
        index = torch.where(t2w >= 0, t2w, self.n_words)
        index = index.view(index.shape[0], *([1] * extra), -1, 1).expand(*to_words.shape)
        out = torch.zeros(
            *to_words.shape[:-2], self.n_words + 1, self.n_words, dtype=to_words.dtype, device=to_words.device
        )
        out = out.scatter_reduce(-2, index, to_words, reduce="amax", include_self=False)[..., : self.n_words, :]
        return out / out.sum(-1, keepdim=True).clamp_min(torch.finfo(out.dtype).tiny)


def word_attention(
    attention: BatchMaps,
    token_to_word: TokenToWord,
    from_rule: str = "mean",
    n_words: int | None = None,
) -> BatchMaps:
    """Convert token attention to word attention.

    Args:
        attention: ``(B, L, H, T, T)`` attention probabilities (any leading dims between B and
            the last two are carried along), rows over keys.
        token_to_word: ``(B, T)`` integer word index of each token, ``-1`` for padding.
        from_rule: one of :data:`FROM_RULES`.
        n_words: word dimension of the result; defaults to the largest word index + 1.

    Returns:
        ``(B, L, H, W, W)`` word attention in ``attention``'s dtype; rows and columns of
        absent words (padding) are zero.
    """
    return WordConversion(token_to_word.to(attention.device), from_rule, n_words)(attention)


def word_attention_single(attention: ItemMaps, token_to_word: np.ndarray, from_rule: str = "mean") -> ItemMaps:
    """Convenience for one item: ``(L, H, T, T)`` array and ``(T,)`` map -> ``(L, H, W, W)`` numpy array."""
    att = torch.as_tensor(np.asarray(attention, dtype=np.float32))[None]
    t2w = torch.as_tensor(np.asarray(token_to_word))[None]
    return word_attention(att, t2w, from_rule)[0].numpy()


@dataclass
class ItemAttention:
    """Attention maps of one item (sentence or pair): the record every analysis reads.

    ``attention[layer, head, i, j]`` is how much word ``i`` attends to word ``j``;
    ``words`` includes the special pseudo-words, ``word_kinds`` marks them
    (see :mod:`bertology_utils.attention.alignment`).
    """

    index: int
    item_id: str
    words: tuple[str, ...]
    word_kinds: np.ndarray
    segments: np.ndarray
    attention: ItemMaps  #: (layers, heads, words, words)
    n_tokens: int
    replaced: int = 0
    tokens: tuple[str, ...] | None = None
    token_to_word: np.ndarray | None = None
    token_attention: ItemMaps | None = None  #: (layers, heads, tokens, tokens), when kept

    @property
    def n_words(self) -> int:
        return len(self.words)


@dataclass(frozen=True)
class SkippedItem:
    """An item that was not extracted, and why (e.g. more tokens than the model takes)."""

    index: int
    item_id: str
    n_tokens: int
    reason: str
