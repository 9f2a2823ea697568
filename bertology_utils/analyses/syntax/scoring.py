"""Heads that track dependency syntax: Clark et al. (2019), Section 4.2 and Table 1.

`What Does BERT Look At? An Analysis of BERT's Attention <https://arxiv.org/abs/1906.04341>`_.
For every head and every dependency relation: how often is the word a word attends to most its
gold syntactic head? The definition follows Clark et al.'s public notebook
(``Syntax_Analysis.ipynb`` in clarkkev/attention-analysis):

* **Predictions.** In a head's word-level map the word itself and the special pseudo-words
  ([CLS], [SEP], ``<s>``...) are never predictions; the prediction is the maximum over the other
  words of the sentence, tie-aware (below).
* **Two directions**, both scored, and the better one reported per relation:
  ``dep->head`` reads the dependent's row (the dependent attends to its head);
  ``head->dep`` is Clark's transpose: for each dependent, the word that attends to it most is
  predicted to be its head (the head attends to its dependent).
* **Possessives** (``poss_via_clitic``, Clark's special case): when a possessor (``nmod:poss``;
  ``poss`` in Stanford labels) is followed by the clitic ``'s`` or ``'``, the clitic's prediction is
  scored instead of the possessor's.
* **Baseline**: the best fixed relative offset per relation, chosen on the same words. We try
  −3…+3 (Clark's code tried −3…+2); an offset that falls outside the sentence predicts nothing
  (Clark clamped it to the first or last word).

Unlike Clark's "all" row, which counted every word, **root words and punctuation are excluded**
everywhere here, the "all" row included: a root has no head word to attend to, and punctuation
attachment is a convention rather than syntax. **Ties**: words within one float16 ulp of the maximum
(2**-12 ~ 2.4e-4 for a maximum in [0.25, 0.5); :func:`~bertology_utils.core.maxima.tie_credit`)
share the prediction equally, so a dependent scores the credit its gold head gets (1 alone, 1/2 in a
two-way tie) and the counts below are sums of credit; a word whose row holds no attention at all on
other words (possible after float16 storage) predicts nothing and counts as wrong.

The hot path is vectorised: one tie-aware maximum per sentence and direction over the whole
``(L, H, W, W)`` array, and a single matrix product at the end turns the per-word credit into
``(relations, L, H)`` counts. Layer and head counts come from the data. The counts are read in
:class:`~bertology_utils.analyses.syntax.result.SyntaxResult`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bertology_utils.analyses.syntax.result import ALL, FOLDS, SyntaxResult, held_out_picks
from bertology_utils.attention.alignment import WORD
from bertology_utils.attention.store import AttentionStore
from bertology_utils.attention.word_attention import ItemAttention
from bertology_utils.core.errors import BertologyError
from bertology_utils.core.maxima import tie_credit
from bertology_utils.core.typing import ItemMaps, WordValues
from bertology_utils.data import Corpus

__all__ = [
    "OFFSETS",
    "EXCLUDED_RELATIONS",
    "POSSESSOR_RELATIONS",
    "POSSESSIVE_CLITICS",
    "ON_MISMATCH",
    "real_word_positions",
    "word_attention_without_specials",
    "prediction_credit",
    "word_mismatch",
    "score_syntax",
]

#: Relative offsets the baseline tries (head position minus dependent position).
OFFSETS = (-3, -2, -1, 1, 2, 3)
#: Relations left out besides root words: punctuation attachment is a convention, not syntax.
EXCLUDED_RELATIONS = ("punct",)
#: Possessor relations (UD, Stanford) whose following clitic is scored under ``poss_via_clitic``.
POSSESSOR_RELATIONS = ("nmod:poss", "poss")
#: The possessive clitics that follow a possessor.
POSSESSIVE_CLITICS = ("'s", "'", "’s", "’")
#: What :func:`score_syntax` may do with a sentence whose attention has other words than its tree.
ON_MISMATCH = ("raise", "skip")


# --------------------------------------------------------------------------- gold data


@dataclass(frozen=True)
class _Gold:
    """The corpus's trees as flat arrays with one entry per scored dependent, built once with numpy
    so that the per-sentence loop only slices. Sentence ``i``'s dependents are ``starts[i]:starts[i + 1]``.
    """

    starts: np.ndarray  # (sentences + 1,) offsets into the dependent arrays
    source: np.ndarray  # word position (0-based) whose prediction is scored
    gold: np.ndarray  # 0-based position of the gold head
    relation: np.ndarray  # index into ``labels``
    labels: np.ndarray  # relation labels (str)
    has_tree: np.ndarray  # (sentences,) bool
    excluded: dict[str, np.ndarray]  # kind ("root", "punct"...) -> (sentences,) words left out


def _gold(corpus: Corpus, excluded_relations: tuple[str, ...], poss_via_clitic: bool) -> _Gold:
    sentences = list(corpus)
    has_tree = np.array([s.has_syntax for s in sentences], dtype=bool)
    treed = [s for s in sentences if s.has_syntax]
    lengths = np.array([len(s.words) for s in treed], dtype=np.int64)
    total = int(lengths.sum())
    starts = np.concatenate([[0], np.cumsum(lengths)])
    sentence = np.repeat(np.arange(len(treed)), lengths)
    position = np.arange(total) - starts[sentence]
    heads = np.fromiter(itertools.chain.from_iterable(s.heads for s in treed), np.int64, total) - 1
    relations = np.array(list(itertools.chain.from_iterable(s.relations for s in treed)), dtype=object)
    words = np.array(list(itertools.chain.from_iterable(s.words for s in treed)), dtype=object)

    is_root = heads < 0
    is_excluded = np.isin(relations, list(excluded_relations)) & ~is_root
    keep = ~is_root & ~is_excluded

    source = position.copy()
    if poss_via_clitic and total:
        in_sentence = np.append(sentence[1:] == sentence[:-1], False)
        clitic = np.zeros(total, dtype=bool)
        clitic[:-1] = np.isin(words[1:], POSSESSIVE_CLITICS)
        via = np.isin(relations, POSSESSOR_RELATIONS) & in_sentence & clitic
        source[via] += 1

    labels, relation = np.unique(relations[keep].astype(str), return_inverse=True)
    # Dependents per corpus sentence (sentences without a tree get none).
    per_treed = np.bincount(sentence[keep], minlength=len(treed))
    per_sentence = np.zeros(len(sentences), dtype=np.int64)
    per_sentence[has_tree] = per_treed
    excluded = {"root": np.zeros(len(sentences), dtype=np.int64)}
    excluded["root"][has_tree] = np.bincount(sentence[is_root], minlength=len(treed))
    for name in excluded_relations:
        counts = np.zeros(len(sentences), dtype=np.int64)
        counts[has_tree] = np.bincount(sentence[is_excluded & (relations == name)], minlength=len(treed))
        excluded[name] = counts
    return _Gold(
        np.concatenate([[0], np.cumsum(per_sentence)]),
        source[keep],
        heads[keep],
        relation.astype(np.int64),
        labels,
        has_tree,
        excluded,
    )


# --------------------------------------------------------------------------- scoring one sentence


def real_word_positions(item: ItemAttention) -> WordValues:
    """Positions of the item's real words in its word-level map, special pseudo-words dropped.

    :param item: one item's word-level attention.
    :returns: ``(W',)`` indices into the item's words, of the real words only.
    """
    return np.flatnonzero(np.asarray(item.word_kinds) == WORD)


def word_attention_without_specials(item: ItemAttention) -> ItemMaps:
    """Every head's map over the real words only, special pseudo-words cut out.

    :param item: one item's word-level attention.
    :returns: ``(L, H, W', W')`` over the real words (a copy; rows no longer sum to 1).
    """
    real = real_word_positions(item)
    return np.asarray(item.attention)[:, :, real[:, None], real]


def prediction_credit(attention: ItemMaps) -> np.ndarray:
    """How much each word predicts each other word as its head, in both directions.

    Direction 0 (dep->head) reads each row's maximum, direction 1 (head->dep, Clark's transpose) each
    column's, with :func:`~bertology_utils.core.maxima.tie_credit`: a dependent's credit of 1 is split
    equally over the words within one float16 ulp of its maximum. The word itself is never a
    prediction; a word with no attention on any other word predicts nothing (no credit).

    :param attention: ``(L, H, W, W)`` over real words only.
    :returns: ``(2, L, H, W, W)`` credit, ``[direction, layer, head, dependent, head word]``.
    """
    att = np.array(attention, dtype=np.float64)  # a copy: the diagonal is overwritten
    diagonal = np.arange(att.shape[-1])
    att[..., diagonal, diagonal] = -np.inf
    return np.stack([tie_credit(att, axis=-1), np.swapaxes(tie_credit(att, axis=-2), -1, -2)])


def _sentence_words(item: ItemAttention, real: np.ndarray) -> tuple[str, ...]:
    return tuple(np.asarray(item.words, dtype=object)[real].tolist())


def word_mismatch(item: ItemAttention, real: np.ndarray, expected: tuple[str, ...]) -> str | None:
    """Why the item's words are not the treebank sentence's.

    :param item: one item's word-level attention.
    :param real: the positions of its real words (:func:`real_word_positions`).
    :param expected: the treebank sentence's words.
    :returns: the first difference in words, or None when the words agree.
    """
    found = _sentence_words(item, real)
    if found == tuple(expected):
        return None
    if len(found) != len(expected):
        return f"{len(found)} words in the attention map, {len(expected)} in the treebank"
    k = next(i for i, (a, b) in enumerate(zip(found, expected)) if a != b)
    return f"word {k + 1} is {found[k]!r} in the attention map, {expected[k]!r} in the treebank"


# --------------------------------------------------------------------------- scoring a corpus


def score_syntax(
    corpus: Corpus,
    attention: AttentionStore | Iterable[ItemAttention],
    *,
    on_mismatch: str = "raise",
    poss_via_clitic: bool = True,
    excluded_relations: Iterable[str] = EXCLUDED_RELATIONS,
    offsets: Iterable[int] = OFFSETS,
    cluster: Any = None,
) -> SyntaxResult:
    """Score every head on every relation of a treebank: Clark et al.'s Table 1 (module docstring).

    :param corpus: sentences with trees (e.g. :func:`~bertology_utils.data.load_treebank`, or
        :func:`~bertology_utils.data.read_conllu` of any CoNLL-U file).
    :param attention: an :class:`~bertology_utils.attention.store.AttentionStore` extracted from ``corpus``,
        or word-level :class:`~bertology_utils.attention.word_attention.ItemAttention` records whose
        ``index`` is the corpus index.
    :param on_mismatch: when an item's words are not its treebank sentence's words: ``"raise"``
        (default), or ``"skip"`` the sentence and count it in ``skipped``. Sentences are never re-aligned.
    :param poss_via_clitic: Clark's special case for possessors followed by ``'s`` (module docstring).
    :param excluded_relations: relations left out besides root words.
    :param offsets: the fixed offsets the baseline tries.
    :param cluster: ``"local:N"``, a scheduler address or a ``distributed.Client`` (``attention`` must
        then be a store): sentences are scored over ranges of the store on the cluster; the counts are
        the single-process ones exactly.
    :returns: the counts per fold, direction, relation, layer and head, with the offset baselines.
    :raises BertologyError: when no sentence could be scored, or the attention does not fit the corpus.
    """
    if on_mismatch not in ON_MISMATCH:
        raise ValueError(f"on_mismatch must be one of {ON_MISMATCH}, not {on_mismatch!r}")
    fixed = tuple(int(o) for o in offsets)
    gold = _gold(corpus, tuple(excluded_relations), poss_via_clitic)
    if cluster is None:
        items = attention.iter_items() if isinstance(attention, AttentionStore) else attention
        part = _score_items(corpus, gold, items, on_mismatch)
    else:
        from bertology_utils.attention.distributed import map_store

        if not isinstance(attention, AttentionStore):
            raise ValueError("cluster= needs an AttentionStore: its workers read the store's items themselves")
        parts = map_store(attention, _score_range, corpus, gold, on_mismatch, cluster=cluster)
        part = parts[0]
        for other in parts[1:]:
            part.merge(other)
    skipped = part.skipped
    missing = ~part.seen
    if isinstance(attention, AttentionStore):  # the store knows why an item is absent
        status = attention.status()
        skipped["too long for the model"] = int((missing & (status == 1)).sum())
        skipped["not extracted"] = int((missing & (status == -1)).sum())
    else:
        skipped["not in the attention given"] = int(missing.sum())
    if not part.scored:
        raise BertologyError("no sentence could be scored: " + ", ".join(f"{k}: {v}" for k, v in skipped.items() if v))
    assert part.shape is not None  # set by the first scored sentence
    return _reduce(gold, part.hits, np.array(part.scored), part.shape, fixed, corpus.description, skipped)


@dataclass
class _Scored:
    """Sentences scored so far: per scored sentence its (2, L, H, k) credit on the gold heads and corpus index,
    which were seen, skips."""

    seen: np.ndarray
    hits: list[np.ndarray] = field(default_factory=list)
    scored: list[int] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=lambda: {"no tree": 0, "words differ from the treebank": 0})
    shape: tuple[int, ...] | None = None

    def merge(self, other: _Scored) -> None:
        """Add a later range's sentences (ranges are disjoint and come in corpus order)."""
        if other.shape is not None and self.shape is not None and other.shape != self.shape:
            raise BertologyError(f"items have {other.shape} layers x heads in one range, {self.shape} in another")
        self.shape = self.shape or other.shape
        self.seen |= other.seen
        self.hits += other.hits
        self.scored += other.scored
        for key, value in other.skipped.items():
            self.skipped[key] += value


def _score_items(corpus: Corpus, gold: _Gold, items: Iterable[ItemAttention], on_mismatch: str) -> _Scored:
    part = _Scored(np.zeros(len(corpus), dtype=bool))
    for item in items:
        i = int(item.index)
        if not 0 <= i < len(corpus):
            raise BertologyError(f"item {item.item_id} has index {i}, outside the corpus of {len(corpus)} sentences")
        if part.seen[i]:
            raise BertologyError(f"sentence {i} ({corpus[i].id}) comes twice in the attention given")
        part.seen[i] = True
        if not gold.has_tree[i]:
            part.skipped["no tree"] += 1
            continue
        real = real_word_positions(item)
        problem = word_mismatch(item, real, corpus[i].words)
        if problem is not None:
            if on_mismatch == "raise":
                raise BertologyError(
                    f"sentence {i} ({corpus[i].id}): {problem}; the attention does not belong to "
                    "this treebank (pass on_mismatch='skip' to leave such sentences out)"
                )
            part.skipped["words differ from the treebank"] += 1
            continue
        att = np.asarray(item.attention)
        if part.shape is None:
            part.shape = att.shape[:2]
        elif att.shape[:2] != part.shape:
            raise BertologyError(f"item {i} has {att.shape[:2]} layers x heads, earlier items {part.shape}")
        lo, hi = gold.starts[i], gold.starts[i + 1]
        credit = prediction_credit(att[:, :, real[:, None], real])
        part.hits.append(credit[..., gold.source[lo:hi], gold.gold[lo:hi]].astype(np.float32))
        part.scored.append(i)
    return part


def _score_range(store_path: str, lo: int, hi: int, corpus: Corpus, gold: _Gold, on_mismatch: str) -> _Scored:
    """One map task of :func:`score_syntax` on a cluster: the sentences ``lo:hi`` of a store."""
    return _score_items(corpus, gold, AttentionStore.open(store_path).iter_items(range(lo, hi)), on_mismatch)


def _reduce(
    gold: _Gold,
    hits: list[np.ndarray],
    scored: np.ndarray,
    shape: tuple[int, ...],
    offsets: tuple[int, ...],
    description: str,
    skipped: dict[str, int],
) -> SyntaxResult:
    """Sum the per-dependent credit of all sentences into (fold, direction, relation, layer, head) hits, and per
    sentence the held-out head's and each offset's hits (those of every head per sentence would be too many)."""
    L, H = shape
    lengths = gold.starts[scored + 1] - gold.starts[scored]
    index = np.concatenate([np.arange(gold.starts[i], gold.starts[i + 1]) for i in scored])
    fold = np.repeat(scored % FOLDS, lengths)
    present, relation = np.unique(gold.relation[index], return_inverse=True)
    order = np.lexsort((gold.labels[present], -np.bincount(relation)))  # most frequent first, then by name
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    R = len(order) + 1
    group = fold * R + rank[relation] + 1  # row 0 is ALL, filled below

    # Every head at once: credit as (2 * L * H, dependents) times a one-hot (dependents, folds * R), in float64.
    flat = np.concatenate(hits, axis=-1).reshape(2 * L * H, -1)
    one_hot = np.zeros((len(index), FOLDS * R))
    one_hot[np.arange(len(index)), group] = 1.0
    correct = (flat @ one_hot).reshape(2, L, H, FOLDS, R).transpose(3, 0, 4, 1, 2).copy()
    correct[:, :, 0] = correct[:, :, 1:].sum(2)

    counts = np.bincount(group, minlength=FOLDS * R).reshape(FOLDS, R)
    counts[:, 0] = counts[:, 1:].sum(1)

    diff = gold.gold[index] - gold.source[index]
    offset_correct = np.stack(
        [np.bincount(group[diff == o], minlength=FOLDS * R).reshape(FOLDS, R) for o in offsets], axis=-1
    )
    offset_correct[:, 0] = offset_correct[:, 1:].sum(1)

    # Per sentence (rows in ``scored`` order) and relation; column 0 (ALL) sums the others.
    S = len(scored)
    cell = np.repeat(np.arange(S), lengths) * R + rank[relation] + 1
    sentence_counts = np.bincount(cell, minlength=S * R).reshape(S, R)
    sentence_counts[:, 0] = sentence_counts[:, 1:].sum(1)
    sentence_offsets = np.stack([np.bincount(cell[diff == o], minlength=S * R).reshape(S, R) for o in offsets], axis=-1)
    sentence_offsets[:, 0] = sentence_offsets[:, 1:].sum(1)
    # Each dependent's credit under the head chosen on the other fold, for its relation and for ALL.
    picks = held_out_picks(correct, counts)
    other = 1 - fold
    dependents = np.arange(len(index))
    held_out = np.zeros((S, R))
    for column, r in ((cell, rank[relation] + 1), (cell - rank[relation] - 1, np.zeros_like(relation))):
        pick = picks[other, r]
        credit = np.where(pick >= 0, flat[np.maximum(pick, 0), dependents], 0.0)
        held_out += np.bincount(column, weights=credit, minlength=S * R).reshape(S, R)
    held_out[:, (picks < 0).any(0)] = np.nan  # as _held_out: no check without dependents in both folds

    excluded = {name: int(values[scored].sum()) for name, values in gold.excluded.items()}
    relations = (ALL, *gold.labels[present][order].tolist())
    return SyntaxResult(
        relations,
        counts,
        correct,
        offset_correct,
        offsets,
        len(scored),
        excluded,
        skipped,
        description,
        scored.astype(np.int64),
        sentence_counts.astype(np.int32),
        held_out,
        sentence_offsets.astype(np.int32),
    )
