"""Tokenize pre-split words and map every token back to the word it came from.

Words are tokenized with the model's fast tokenizer in ``is_split_into_words`` mode,
one word at a time as Clark et al. did, so a word never shares a token with its
neighbour. Special tokens ([CLS], [SEP], RoBERTa's ``<s>``/``</s>``...) become
pseudo-words of their own, so word-level maps keep them as rows and columns.

A word the tokenizer drops entirely (zero-width or control characters, an empty
string) would leave a word with no tokens and shift every later index. Such words
are replaced by the tokenizer's unknown token and counted in ``AlignedItem.replaced``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from bertology_utils.core.errors import BertologyError
from bertology_utils.data import SentencePair

if TYPE_CHECKING:
    from transformers import BatchEncoding, PreTrainedTokenizerBase

__all__ = ["WORD", "LEADING_SPECIAL", "SEPARATOR", "AlignedItem", "item_texts", "align"]

#: ``AlignedItem.word_kinds`` values.
WORD, LEADING_SPECIAL, SEPARATOR = 0, 1, 2


@dataclass(frozen=True)
class AlignedItem:
    """One input (sentence or sentence pair) tokenized, with its token -> word map."""

    index: int  #: position in the input corpus
    item_id: str
    words: tuple[str, ...]  #: words including special pseudo-words, in input order
    word_kinds: np.ndarray  #: int8 per word: WORD, LEADING_SPECIAL or SEPARATOR
    segments: np.ndarray  #: int8 per word: 0 for the first text, 1 for the second
    input_ids: np.ndarray  #: int64 per token
    token_type_ids: np.ndarray | None  #: int64 per token, when the model uses them
    token_to_word: np.ndarray  #: int32 per token: index into ``words``
    replaced: int = 0  #: words the tokenizer dropped, replaced by its unknown token

    @property
    def n_tokens(self) -> int:
        return len(self.input_ids)

    @property
    def n_words(self) -> int:
        return len(self.words)

    @property
    def tokens_per_word(self) -> np.ndarray:
        return np.bincount(self.token_to_word, minlength=self.n_words)


def item_texts(item: Any) -> tuple[Sequence[str], Sequence[str] | None, str | None]:
    """(first words, second words or None, id) of a corpus item.

    Accepts the data layer's ``Sentence``/``SentencePair``, a list of words, or a
    ``(words_a, words_b)`` tuple.
    """
    if isinstance(item, SentencePair):
        return item.a, item.b, item.id
    words = getattr(item, "words", None)
    if words is not None:
        return words, None, getattr(item, "id", None)
    if isinstance(item, tuple) and len(item) == 2 and not isinstance(item[0], str):
        return item[0], item[1], None
    if isinstance(item, str):
        raise BertologyError(
            "an item is a plain string; split it into words first (bertology_utils.data.words_of, or Corpus.from_texts)"
        )
    return item, None, None


def _encode(
    tokenizer: PreTrainedTokenizerBase, firsts: Sequence[Sequence[str]], seconds: Sequence[Sequence[str]] | None
) -> BatchEncoding:
    kwargs = dict(is_split_into_words=True, add_special_tokens=True, truncation=False, verbose=False)
    if seconds is None:
        return tokenizer([list(w) for w in firsts], **kwargs)
    return tokenizer([list(w) for w in firsts], [list(w) for w in seconds], **kwargs)


def _word_indices(
    word_ids: Sequence[int | None], sequence_ids: Sequence[int | None], n_first: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per token: running word index (specials count as words) and whether it is special."""
    # None -> nan: a vectorised way to turn the tokenizer's lists into arrays.
    wid = np.array(word_ids, dtype=float)
    sid = np.array(sequence_ids, dtype=float)
    special = np.isnan(wid)
    # A word's key is unique across both texts; a token starts a new word when it is
    # special or its key differs from the previous token's (a word's tokens are contiguous).
    key = np.where(special, -1.0, wid + np.where(np.isnan(sid), 0.0, sid) * (n_first + 1))
    starts = special.copy()
    starts[1:] |= key[1:] != key[:-1]
    starts[0] = True
    return np.cumsum(starts) - 1, special


def _replacement(tokenizer: PreTrainedTokenizerBase) -> str:
    if tokenizer.unk_token is None:
        raise BertologyError(f"{type(tokenizer).__name__} dropped a word and has no unknown token to stand in for it")
    return tokenizer.unk_token


def align(tokenizer: PreTrainedTokenizerBase, items: Iterable, start_index: int = 0) -> list[AlignedItem]:
    """Tokenize ``items`` (see :func:`item_texts`) and build each one's token -> word map.

    Items are tokenized in one batched call per kind (single texts, pairs); only items
    in which the tokenizer dropped a word are tokenized again.
    """
    parsed = [item_texts(it) for it in items]
    out: dict[int, AlignedItem] = {}  # position in items -> its alignment
    for is_pair in (False, True):
        idx = [i for i, p in enumerate(parsed) if (p[1] is not None) == is_pair]
        if not idx:
            continue
        firsts = [list(parsed[i][0]) for i in idx]
        seconds = [list(second) for i in idx if (second := parsed[i][1]) is not None] if is_pair else None
        enc = _encode(tokenizer, firsts, seconds)
        for row, i in enumerate(idx):
            aligned = _aligned_item(
                tokenizer,
                enc,
                row,
                firsts[row],
                seconds[row] if seconds is not None else None,
                index=start_index + i,
                item_id=parsed[i][2],
            )
            if aligned is None:  # a word vanished in tokenization: stand the unknown token in for it
                aligned = _align_with_replacements(
                    tokenizer, firsts[row], seconds[row] if seconds is not None else None, start_index + i, parsed[i][2]
                )
            out[i] = aligned
    return [out[i] for i in range(len(parsed))]


def _align_with_replacements(
    tokenizer: PreTrainedTokenizerBase,
    first: Sequence[str],
    second: Sequence[str] | None,
    index: int,
    item_id: str | None,
) -> AlignedItem:
    """Tokenize with dropped words replaced by the unknown token; ``words`` keeps the originals."""
    first_words, second_words = list(first), list(second) if second is not None else None
    replaced = 0
    for words in (first_words, second_words):
        if words is None:
            continue
        enc = tokenizer([words], is_split_into_words=True, add_special_tokens=False, verbose=False)
        present = np.array([w for w in enc.word_ids(0) if w is not None], dtype=int)
        missing = np.setdiff1d(np.arange(len(words)), present)
        for m in missing:
            words[m] = _replacement(tokenizer)
        replaced += len(missing)
    enc = _encode(tokenizer, [first_words], None if second_words is None else [second_words])
    aligned = _aligned_item(tokenizer, enc, 0, first, second, index=index, item_id=item_id, replaced=replaced)
    if aligned is None:
        raise BertologyError(
            f"item {index}: words still missing after replacing dropped words with {_replacement(tokenizer)!r}"
        )
    return aligned


def _aligned_item(
    tokenizer: PreTrainedTokenizerBase,
    enc: BatchEncoding,
    row: int,
    first: Sequence[str],
    second: Sequence[str] | None,
    *,
    index: int,
    item_id: str | None,
    replaced: int = 0,
) -> AlignedItem | None:
    word_ids, sequence_ids = enc.word_ids(row), enc.sequence_ids(row)
    n_first, n_second = len(first), len(second) if second is not None else 0
    token_to_word, special = _word_indices(word_ids, sequence_ids, n_first)
    n_special = int(special.sum())
    n_words = int(token_to_word[-1]) + 1 if len(token_to_word) else 0
    if n_words != n_first + n_second + n_special:
        return None

    input_ids = np.asarray(enc["input_ids"][row], dtype=np.int64)
    # Specials first take their own token string; real words then fill the remaining slots in order.
    special_words = token_to_word[special]
    is_special_word = np.zeros(n_words, dtype=bool)
    is_special_word[special_words] = True
    words = np.empty(n_words, dtype=object)
    words[special_words] = tokenizer.convert_ids_to_tokens(input_ids[special].tolist())
    words[~is_special_word] = list(first) + list(second or [])

    kinds = np.zeros(n_words, dtype=np.int8)
    kinds[special_words] = SEPARATOR
    if special[0] and input_ids[0] in {tokenizer.cls_token_id, tokenizer.bos_token_id} - {None}:
        kinds[0] = LEADING_SPECIAL

    # A special token belongs to the segment of the text before it ([CLS] to the first).
    filled = _forward_fill(np.array(sequence_ids, dtype=float))
    segments = np.zeros(n_words, dtype=np.int8)
    segments[token_to_word] = np.where(np.isnan(filled), 0, filled).astype(np.int8)

    tt = enc.get("token_type_ids")
    return AlignedItem(
        index=index,
        item_id=item_id if item_id is not None else str(index),
        words=tuple(words.tolist()),
        word_kinds=kinds,
        segments=segments,
        input_ids=input_ids,
        token_type_ids=np.asarray(tt[row], dtype=np.int64) if tt is not None else None,
        token_to_word=token_to_word.astype(np.int32),
        replaced=replaced,
    )


def _forward_fill(values: np.ndarray) -> np.ndarray:
    """Replace each nan by the last non-nan value before it (nan stays at the start)."""
    positions = np.where(np.isnan(values), 0, np.arange(len(values)))
    np.maximum.accumulate(positions, out=positions)
    return values[positions]
