"""Head roles after Voita et al. (2019): positional, syntactic and rare-word heads, and head confidence.

`Analyzing Multi-Head Self-Attention: Specialized Heads Do the Heavy Lifting, the Rest Can Be Pruned
<https://arxiv.org/abs/1905.09418>`_. Voita et al. named three roles in Transformer NMT encoders, each read from where
a head's maximum attention goes:

* **positional**: the maximum points to one fixed relative position for at least 90% of the words;
* **syntactic**: for nsubj, dobj, amod and advmod the most-attended word is the related word, clearly
  more often than the best fixed-offset baseline;
* **rare words**: the maximum points to the sentence's least frequent word far more often than chance.

Here the maps are word-level :class:`~bertology_utils.attention.word_attention.ItemAttention` records (a list, or an
:class:`~bertology_utils.attention.store.AttentionStore`). Rows are the *real* words only; a row's maximum is taken
over *all* columns, so a row whose maximum rests on [CLS]/[SEP]/``<s>`` (BERT's no-op, Clark et al. 2019) points to no
word: it counts as a row but as no offset and no hit. Maxima are tie-aware
(:func:`~bertology_utils.core.maxima.tie_credit`): columns within one float16 ulp of the row's maximum (2**-12 ~ 2.4e-4
for a maximum in [0.25, 0.5)) share the row's credit equally, and every count below is a sum of credit, read from the
maps as stored; a row with no attention at all points nowhere. Positions and offsets are counted over real words, so in
a pair the [SEP] between the two texts is stepped over. Every statistic is one pass over the items, vectorised over
layers, heads and rows; layer and head counts come from the data.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from scipy.stats import norm

from bertology_utils.analyses.syntax.result import STANFORD_TO_UD, SyntaxResult
from bertology_utils.analyses.syntax.scoring import real_word_positions, score_syntax
from bertology_utils.attention.alignment import item_texts
from bertology_utils.attention.store import AttentionStore
from bertology_utils.attention.word_attention import ItemAttention
from bertology_utils.core.errors import BertologyError
from bertology_utils.core.heads import Head
from bertology_utils.core.maxima import tie_credit
from bertology_utils.core.typing import HeadMatrix, ItemMaps, WordValues
from bertology_utils.data import Corpus

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from bertology_utils.core.models import LoadedModel

__all__ = [
    "ROLES",
    "VOITA_RELATIONS",
    "SPECIALS",
    "PositionalRoles",
    "positional_heads",
    "SyntacticRoles",
    "syntactic_heads",
    "word_frequencies",
    "RareWordRoles",
    "rare_word_heads",
    "head_confidence",
    "HeadRoles",
    "head_roles",
    "find_roles",
    "plot_roles",
]

#: The roles, in the order of :attr:`HeadRoles.masks`, and the letter :func:`plot_roles` writes for each.
ROLES = {"positional": "P", "syntactic": "S", "rare": "R"}
#: Voita et al.'s relations, UD names (``dobj`` is accepted for ``obj``).
VOITA_RELATIONS = ("nsubj", "obj", "amod", "advmod")
#: How :func:`head_confidence` treats the special pseudo-words' columns.
SPECIALS = ("exclude", "include")

_SHORT = "fewer than 2 words"
_EQUAL = "every word equally frequent"


# --------------------------------------------------------------------------- reading items


def _items(attention: AttentionStore | Iterable[ItemAttention]) -> Iterator[ItemAttention]:
    """The items of a store, or the given ItemAttention records, as score_syntax accepts them."""
    return attention.iter_items() if isinstance(attention, AttentionStore) else iter(attention)


def _maps(item: ItemAttention, shape: tuple[int, int] | None) -> tuple[ItemMaps, tuple[int, int]]:
    """(L, H, W, W) float64 map as stored, and the (L, H) every item shares."""
    att = np.asarray(item.attention, dtype=np.float64)
    n = len(item.word_kinds)
    if att.ndim != 4 or att.shape[-2:] != (n, n):
        raise BertologyError(f"item {item.item_id}: attention {att.shape} does not fit its {n} words")
    if shape is None:
        shape = (att.shape[0], att.shape[1])
    elif att.shape[:2] != shape:
        raise BertologyError(f"item {item.item_id} has {att.shape[:2]} layers x heads, earlier items {shape}")
    return att, shape


def _sentences(
    items: AttentionStore | Iterable[ItemAttention], skipped: dict[str, int], min_words: int = 2
) -> Iterator[tuple[ItemAttention, np.ndarray, ItemMaps]]:
    """(item, real-word positions, (L, H, W, W) maps as stored) of every item with at least ``min_words`` real
    words; shorter items are counted in ``skipped``. Every item's maps are checked against the first's shape."""
    shape = None
    for item in _items(items):
        real = real_word_positions(item)
        att, shape = _maps(item, shape)
        if len(real) < min_words:
            skipped[_SHORT] = skipped.get(_SHORT, 0) + 1
            continue
        yield item, real, att


def _word_credit(att: ItemMaps, real: WordValues) -> ItemMaps:
    """(L, H, k, k) tie-aware credit of each real-word row's maximum over all columns, on the real words' columns.

    A row's credit on the special columns (and an empty row's missing credit) is what it lacks of 1.
    """
    return tie_credit(att[:, :, real, :])[..., real]


def _nothing_scored(what: str, skipped: dict[str, int]) -> BertologyError:
    reasons = ", ".join(f"{k}: {v}" for k, v in skipped.items() if v) or "no items given"
    return BertologyError(f"no sentence could be scored for {what}: {reasons}")


# --------------------------------------------------------------------------- positional heads


@dataclass(frozen=True)
class PositionalRoles:
    """What :func:`positional_heads` returns; arrays are ``(L, H)``.

    :param offset: modal relative offset of the maximum (ties: nearest 0, then the negative one).
    :param share: credit at that offset over all scored rows.
    :param is_positional: ``share >= threshold``.
    :param special: share of credit on special pseudo-words, or on nothing (empty rows): no offset.
    :param threshold: the share a positional head needs.
    :param rows: real-word rows scored (the same for every head).
    :param n_items: items scored.
    :param skipped: items left out, by reason.
    """

    offset: HeadMatrix  #: modal relative offset of the maximum (ties: nearest 0, then the negative one)
    share: HeadMatrix  #: credit at that offset over all scored rows
    is_positional: HeadMatrix  #: share >= threshold
    special: HeadMatrix  #: share of credit on special pseudo-words, or on nothing (empty rows): no offset
    threshold: float
    rows: int  #: real-word rows scored (the same for every head)
    n_items: int  #: items scored
    skipped: dict[str, int]  #: items left out, by reason

    def heads(self) -> list[Head]:
        """The positional heads, layer by layer."""
        return [Head(int(l), int(h)) for l, h in np.argwhere(self.is_positional)]


def positional_heads(items: AttentionStore | Iterable[ItemAttention], threshold: float = 0.9) -> PositionalRoles:
    """Heads whose maximum attention points to one fixed relative position for ``threshold`` of the words.

    For every real-word row, the offset of its maximum (over all columns) from the row's own position, both counted
    over real words; a row whose maximum rests on a special token has no offset and counts against every offset.
    Columns within one float16 ulp of the maximum share the row's credit
    (:func:`~bertology_utils.core.maxima.tie_credit`), so a row split between the previous word and itself gives each
    offset half. Offset 0 (a head on the word itself) is an offset like any other. Voita et al. used 90% of the tokens;
    their positional heads pointed to -1 or +1. Items with fewer than 2 real words are skipped and counted.

    :param items: word-level attention (a store, or ItemAttention records).
    :param threshold: the share of the rows a head's modal offset needs.
    :returns: each head's modal offset, its share, and which heads are positional.
    :raises BertologyError: when no item could be scored.
    """
    counts = np.zeros((0, 0, 1))  # (L, H, offsets -reach..reach): credit
    reach = 0
    special = None
    rows = n_items = 0
    skipped = {_SHORT: 0}
    for _, real, att in _sentences(items, skipped):
        k, shape = len(real), att.shape[:2]
        if special is None:
            counts = np.zeros((*shape, 1))
            special = np.zeros(shape)
        credit = _word_credit(att, real)
        if k - 1 > reach:  # widen the offset axis symmetrically
            counts = np.pad(counts, ((0, 0), (0, 0), (k - 1 - reach, k - 1 - reach)))
            reach = k - 1
        width = 2 * reach + 1
        offset = np.arange(k)[None, :] - np.arange(k)[:, None] + reach  # (row, column) -> offset index
        key = np.arange(shape[0] * shape[1]).reshape(*shape, 1, 1) * width + offset
        counts += np.bincount(key.ravel(), weights=credit.ravel(), minlength=counts.size).reshape(counts.shape)
        special += k - credit.sum((-2, -1))
        rows += k
        n_items += 1
    if not rows or special is None:
        raise _nothing_scored("positional heads", skipped)
    values = np.arange(-reach, reach + 1)
    order = np.lexsort((values, np.abs(values)))  # nearest 0 first, the negative offset before the positive
    best = counts[..., order].argmax(-1)  # the modal offset of each head's credit
    share = np.take_along_axis(counts[..., order], best[..., None], -1)[..., 0] / rows
    return PositionalRoles(
        offset=values[order][best],
        share=share,
        is_positional=share >= threshold,
        special=special / rows,
        threshold=threshold,
        rows=rows,
        n_items=n_items,
        skipped=skipped,
    )


# --------------------------------------------------------------------------- syntactic heads


def _aliases(relation: str) -> tuple[str, ...]:
    """The relation, then its UD or Stanford twin (``obj`` <-> ``dobj``, ``nmod:poss`` <-> ``poss``...)."""
    twins = [STANFORD_TO_UD.get(relation)] + [s for s, ud in STANFORD_TO_UD.items() if ud == relation]
    return tuple(dict.fromkeys([relation, *(t for t in twins if t)]))


@dataclass(frozen=True)
class SyntacticRoles:
    """What :func:`syntactic_heads` returns: per requested relation (as named in ``relations``).

    :param relations: as requested.
    :param labels: relation -> the label found in the result (``dobj`` for ``obj``...), None when missing.
    :param counts: relation -> scored dependents (0 when missing).
    :param accuracy: relation -> ``(L, H)`` accuracy in the better direction (NaN when missing).
    :param baseline: relation -> accuracy of the best fixed offset (NaN when missing).
    :param baseline_offset: relation -> that offset (None when missing).
    :param is_syntactic: relation -> ``(L, H)`` bool.
    :param margin: what a head must beat the baseline by.
    :param missing: requested relations with no scored dependent.
    """

    relations: tuple[str, ...]  #: as requested
    labels: dict[
        str, str | None
    ]  #: relation -> the label found in the result (``dobj`` for ``obj``...), None when missing
    counts: dict[str, int]  #: relation -> scored dependents (0 when missing)
    accuracy: dict[str, HeadMatrix]  #: relation -> (L, H) accuracy in the better direction (NaN when missing)
    baseline: dict[str, float]  #: relation -> accuracy of the best fixed offset (NaN when missing)
    baseline_offset: dict[str, int | None]  #: relation -> that offset (None when missing)
    is_syntactic: dict[str, HeadMatrix]  #: relation -> (L, H) bool
    margin: float
    missing: tuple[str, ...]  #: requested relations with no scored dependent

    @property
    def testable(self) -> bool:
        """False when none of the relations was found: no head can be called syntactic."""
        return len(self.missing) < len(self.relations)

    @property
    def any_syntactic(self) -> HeadMatrix:
        """``(L, H)`` bool: syntactic for at least one relation."""
        return np.logical_or.reduce([self.is_syntactic[r] for r in self.relations])

    def relations_of(self, layer: int, head: int) -> list[str]:
        """The relations a head is syntactic for, in the order requested.

        :param layer: the head's layer, from 0.
        :param head: the head within its layer, from 0.
        :returns: relation names.
        """
        return [r for r in self.relations if self.is_syntactic[r][layer, head]]

    def relation_names(self, sep: str = "+") -> HeadMatrix:
        """The relations each head is syntactic for, as text.

        :param sep: what joins two relations.
        :returns: ``(L, H)`` strings, ``""`` for none.
        """
        shape = self.is_syntactic[self.relations[0]].shape if self.relations else (0, 0)
        names = np.full(shape, "", dtype=object)
        for r in self.relations:
            names = np.where(self.is_syntactic[r], np.where(names == "", r, names + sep + r), names)
        return names

    def table(self) -> pd.DataFrame:
        """The relations side by side.

        :returns: one row per relation: count, baseline, best head, and the heads that beat the baseline by the margin.
        """
        rows = []
        for r in self.relations:
            acc = self.accuracy[r]
            found = r not in self.missing and not np.isnan(acc).all()
            best = Head.argmax(acc) if found else None
            rows.append(
                {
                    "relation": r,
                    "label": self.labels[r] or "-",
                    "count": self.counts[r],
                    "baseline": self.baseline[r],
                    "baseline_offset": self.baseline_offset[r],
                    "best_head": str(best) if best else "-",
                    "best_accuracy": float(acc[best]) if best else np.nan,
                    "syntactic_heads": int(self.is_syntactic[r].sum()),
                }
            )
        table = pd.DataFrame(rows).set_index("relation")
        table["baseline_offset"] = table["baseline_offset"].astype("Int64")
        return table


def syntactic_heads(
    result: SyntaxResult, relations: Sequence[str] = VOITA_RELATIONS, margin: float = 0.10
) -> SyntacticRoles:
    """Heads that find a relation's related word clearly more often than the best fixed offset does.

    Per relation and head, the accuracy of :func:`~bertology_utils.analyses.syntax.scoring.score_syntax` in the better
    of the two directions (Voita scored both) against the best fixed-offset baseline for that relation (Voita's "most
    frequent relative position"). A head is syntactic for a relation when its accuracy >= baseline + ``margin``
    (absolute, 0.10 = 10 points). Voita et al. report per-relation accuracies against the baseline and call a head
    syntactic when it clearly beats it; the 10-point margin is our reading of "clearly", kept a parameter. Accuracies
    are on the same words the best head is chosen on (no held-out check; :meth:`SyntaxResult.best` has one).

    Subtypes are separate relations (``nsubj:pass`` is not ``nsubj``, as Stanford's ``nsubjpass`` is not). A relation
    with no scored dependent is reported missing, never an error.

    :param result: :func:`~bertology_utils.analyses.syntax.scoring.score_syntax` of a treebank.
    :param relations: UD names; a Stanford twin (``dobj`` for ``obj``) found in the result is used instead.
    :param margin: what a head's accuracy must beat the baseline by (absolute).
    :returns: per relation, each head's accuracy against the baseline, and which heads are syntactic.
    """
    shape = (result.num_layers, result.num_heads)
    labels: dict[str, str | None] = {}
    counts: dict[str, int] = {}
    accuracy: dict[str, HeadMatrix] = {}
    baseline: dict[str, float] = {}
    baseline_offset: dict[str, int | None] = {}
    is_syntactic: dict[str, HeadMatrix] = {}
    missing = []
    for relation in relations:
        label = next((a for a in _aliases(relation) if a in result.relations), None)
        r = result.relations.index(label) if label is not None else None
        if r is None or result.counts[r] == 0:
            labels[relation], counts[relation], baseline_offset[relation] = label, 0, None
            accuracy[relation], baseline[relation] = np.full(shape, np.nan), np.nan
            is_syntactic[relation] = np.zeros(shape, dtype=bool)
            missing.append(relation)
            continue
        base = np.nan_to_num(result.baseline_accuracy[r], nan=-1.0)
        o = int(base.argmax())
        labels[relation], counts[relation] = label, int(result.counts[r])
        accuracy[relation] = result.head_accuracy[r]
        baseline[relation], baseline_offset[relation] = float(result.baseline_accuracy[r, o]), result.offsets[o]
        # The tolerance keeps a margin met exactly (0.8 vs 0.7 + 0.1) from failing on float rounding.
        is_syntactic[relation] = accuracy[relation] - baseline[relation] >= margin - 1e-12
    return SyntacticRoles(
        tuple(relations), labels, counts, accuracy, baseline, baseline_offset, is_syntactic, margin, tuple(missing)
    )


# --------------------------------------------------------------------------- rare-word heads


def word_frequencies(corpus: Iterable[Any], lowercase: bool = True) -> collections.Counter[str]:
    """How often each word occurs in every item (sentence, or both texts of a pair) of ``corpus``.

    Voita et al. counted on the model's training data; a notebook counts on whatever corpus it has,
    and should say which.

    :param corpus: sentences or pairs (anything :func:`~bertology_utils.attention.alignment.item_texts` reads).
    :param lowercase: count lowercased words.
    :returns: word -> occurrences.
    """
    counter: collections.Counter[str] = collections.Counter()
    for item in corpus:
        first, second, _ = item_texts(item)
        for words in (first, second or ()):
            counter.update([w.lower() for w in words] if lowercase else words)
    return counter


@dataclass(frozen=True)
class RareWordRoles:
    """What :func:`rare_word_heads` returns; arrays are ``(L, H)``.

    :param rate: hits over scored rows.
    :param chance: mean per-row chance, (least frequent words) / (real words).
    :param hits: credit of the rows' maxima on a least frequent word.
    :param z: ``(hits - expected) / sqrt(variance)``.
    :param p_value: one-sided, normal approximation, not corrected.
    :param is_rare: ``rate >= factor * chance`` and ``p_value < alpha / heads``.
    :param expected: sum of the per-row chances.
    :param variance: sum of ``p (1 - p)`` over rows.
    :param factor: the rate over chance a rare-word head needs.
    :param alpha: the test's level, before the Bonferroni correction.
    :param rows: real-word rows scored.
    :param n_items: items scored.
    :param skipped: items left out, by reason.
    """

    rate: HeadMatrix  #: hits over scored rows
    chance: HeadMatrix  #: mean per-row chance, (least frequent words) / (real words)
    hits: HeadMatrix  #: credit of the rows' maxima on a least frequent word
    z: HeadMatrix  #: (hits - expected) / sqrt(variance)
    p_value: HeadMatrix  #: one-sided, normal approximation, not corrected
    is_rare: HeadMatrix  #: rate >= factor * chance and p_value < alpha / heads
    expected: float  #: sum of the per-row chances
    variance: float  #: sum of p (1 - p) over rows
    factor: float
    alpha: float
    rows: int
    n_items: int
    skipped: dict[str, int]  #: items left out, by reason

    def heads(self) -> list[Head]:
        """The rare-word heads, layer by layer."""
        return [Head(int(l), int(h)) for l, h in np.argwhere(self.is_rare)]


def rare_word_heads(
    items: AttentionStore | Iterable[ItemAttention],
    frequencies: collections.Counter[str],
    *,
    lowercase: bool = True,
    factor: float = 2.0,
    alpha: float = 0.05,
) -> RareWordRoles:
    """Heads whose maximum attention goes to the sentence's least frequent word far more often than chance.

    For every real-word row: the least frequent real words of its item (unseen words count 0; every word at the minimum
    counts, ties included) and the row's credit on them: 1 when its maximum over all columns is one of them, a share
    when the maximum ties within one float16 ulp (:func:`~bertology_utils.core.maxima.tie_credit`); a rare word
    attending to itself counts. Chance for the row = (least frequent words) / (real words), what a head with its
    maximum on a random word would score. Per head, ``hits`` is tested against the Poisson-binomial of those chances
    with its normal approximation, one-sided, Bonferroni-corrected over the heads. Rows of one sentence are not
    independent (they share its words), so the test is optimistic; the ``factor`` over chance is the effect size
    Voita's "far more often" asks for. Items with fewer than 2 real words, or whose words are all equally frequent, are
    skipped and counted.

    :param items: word-level attention (a store, or ItemAttention records).
    :param frequencies: from :func:`word_frequencies` with the same ``lowercase``.
    :param lowercase: look words up lowercased.
    :param factor: the rate over chance a rare-word head needs.
    :param alpha: the test's level, Bonferroni-corrected over the heads.
    :returns: each head's rate, chance, test and verdict.
    :raises BertologyError: when no item could be scored.
    """
    hits = None
    rows = n_items = 0
    expected = variance = 0.0
    skipped = {_SHORT: 0, _EQUAL: 0}
    for item, real, att in _sentences(items, skipped):
        k = len(real)
        if hits is None:
            hits = np.zeros(att.shape[:2])
        words = np.asarray(item.words, dtype=object)[real]
        counts = np.array([frequencies[w.lower() if lowercase else w] for w in words])
        rare = counts == counts.min()
        if rare.all():
            skipped[_EQUAL] += 1
            continue
        hits += (_word_credit(att, real) @ rare.astype(np.float64)).sum(-1)
        p = rare.sum() / k
        expected += k * p
        variance += k * p * (1 - p)
        rows += k
        n_items += 1
    if not rows or hits is None:
        raise _nothing_scored("rare-word heads", skipped)
    z = (hits - expected) / np.sqrt(variance)
    p_value = norm.sf(z)
    rate = hits / rows
    chance = np.full(hits.shape, expected / rows)
    return RareWordRoles(
        rate=rate,
        chance=chance,
        hits=hits,
        z=z,
        p_value=p_value,
        is_rare=(rate >= factor * chance) & (p_value < alpha / hits.size),
        expected=expected,
        variance=variance,
        factor=factor,
        alpha=alpha,
        rows=rows,
        n_items=n_items,
        skipped=skipped,
    )


# --------------------------------------------------------------------------- confidence


def head_confidence(items: AttentionStore | Iterable[ItemAttention], specials: str = "exclude") -> HeadMatrix:
    """Voita et al.'s confidence: per head, the mean over real-word rows of the row's maximum weight.

    ``specials="exclude"`` (default) takes the maximum over the real words' columns only, without renormalising: BERT
    parks attention on [CLS]/[SEP] as a no-op (Clark et al. 2019), the analogue of the end-of-sentence token Voita left
    out, and a head resting on [SEP] is not confident about any word. ``"include"`` takes it over all columns. Rows are
    first renormalised over all columns (float16 storage); every real-word row of every item weighs the same. The
    maximum's value is read, not its column, so ties do not matter here.

    :param items: word-level attention (a store, or ItemAttention records).
    :param specials: one of :data:`SPECIALS`.
    :returns: ``(L, H)`` mean maximum weight.
    :raises BertologyError: without a real-word row.
    """
    if specials not in SPECIALS:
        raise ValueError(f"specials must be one of {SPECIALS}, not {specials!r}")
    total = None
    rows = 0
    for _, real, att in _sentences(items, {}, min_words=1):
        if total is None:
            total = np.zeros(att.shape[:2])
        att = att[:, :, real, :]
        mass = att.sum(-1, keepdims=True)
        att = np.divide(att, mass, out=np.zeros_like(att), where=mass > 0)
        total += (att[..., real] if specials == "exclude" else att).max(-1).sum(-1)
        rows += len(real)
    if not rows or total is None:
        raise BertologyError("no real-word row to measure confidence on (no items, or none with a real word)")
    return total / rows


# --------------------------------------------------------------------------- all roles


@dataclass(frozen=True)
class HeadRoles:
    """The roles of every head: what :func:`head_roles` gathers from the three role tests.

    :param positional: :func:`positional_heads`' result.
    :param syntactic: :func:`syntactic_heads`' result, None when untested.
    :param rare: :func:`rare_word_heads`' result, None when untested.
    :param masks: role -> ``(L, H)`` bool, keys as in :data:`ROLES`.
    :param untested: roles not tested (not given, or no relation found); their masks are all False.
    """

    positional: PositionalRoles
    syntactic: SyntacticRoles | None
    rare: RareWordRoles | None
    masks: dict[str, HeadMatrix]  #: role -> (L, H) bool, keys as in :data:`ROLES`
    untested: tuple[str, ...] = ()  #: roles not tested (not given, or no relation found); their masks are all False

    @property
    def shape(self) -> tuple[int, ...]:
        """``(L, H)``."""
        return self.positional.offset.shape

    @property
    def specialised(self) -> HeadMatrix:
        """``(L, H)`` bool: at least one role."""
        return np.logical_or.reduce(list(self.masks.values()))

    def table(self) -> pd.DataFrame:
        """Every head's roles.

        :returns: one row per head, layer by layer: its name (``l-h``), layer and head (from 1) and each role.
        """
        L, H = self.shape
        layer, head = (a.ravel() for a in np.indices((L, H)))
        heads = [Head(int(l), int(h)) for l, h in zip(layer, head)]
        relations = [", ".join(self.syntactic.relations_of(*h)) if self.syntactic else "" for h in heads]
        return pd.DataFrame(
            {
                "head": [str(h) for h in heads],
                "layer": layer + 1,
                "head_index": head + 1,
                "positional": self.masks["positional"].ravel(),
                "offset": self.positional.offset.ravel(),
                "share": self.positional.share.ravel(),
                "syntactic": relations,
                "rare": self.masks["rare"].ravel(),
                "rare_rate": self.rare.rate.ravel() if self.rare else np.full(L * H, np.nan),
                "specialised": self.specialised.ravel(),
            }
        )

    def summary(self) -> dict[str, int | None]:
        """How many heads have each role.

        :returns: head counts: in all, per role (None when untested), per relation, specialised, with several roles.
        """
        out: dict[str, int | None] = {"heads": int(np.prod(self.shape))}
        out.update({role: None if role in self.untested else int(mask.sum()) for role, mask in self.masks.items()})
        if self.syntactic is not None:
            for relation in self.syntactic.relations:
                missing = relation in self.syntactic.missing
                out[f"syntactic.{relation}"] = None if missing else int(self.syntactic.is_syntactic[relation].sum())
        out["specialised"] = int(self.specialised.sum())
        out["several roles"] = int((np.sum(list(self.masks.values()), axis=0) > 1).sum())
        return out


def head_roles(
    positional: PositionalRoles, syntactic: SyntacticRoles | None = None, rare: RareWordRoles | None = None
) -> HeadRoles:
    """Gather the three role tests into one :class:`HeadRoles`; all must come from maps of one shape.

    :param positional: :func:`positional_heads`' result.
    :param syntactic: :func:`syntactic_heads`' result; None (no treebank) leaves the role untested, its
        mask all False, and :meth:`HeadRoles.summary` gives None for it rather than 0.
    :param rare: :func:`rare_word_heads`' result; None (no frequency counts) leaves the role untested.
    :returns: the roles of every head.
    :raises BertologyError: when the tests are for different shapes.
    """
    shape = positional.offset.shape
    untested = []
    masks = {"positional": positional.is_positional}
    for role, part in (("syntactic", syntactic), ("rare", rare)):
        if part is None:
            masks[role] = np.zeros(shape, dtype=bool)
            untested.append(role)
            continue
        mask = part.any_syntactic if isinstance(part, SyntacticRoles) else part.is_rare
        if mask.shape != shape:
            raise BertologyError(f"{role} roles are for {mask.shape} layers x heads, positional roles for {shape}")
        masks[role] = mask
        if isinstance(part, SyntacticRoles) and not part.testable:
            untested.append(role)
    return HeadRoles(positional, syntactic, rare, masks, tuple(untested))


def find_roles(
    trees: Corpus,
    model: str | LoadedModel,
    frequencies: collections.Counter[str],
    *,
    threshold: float = 0.9,
    margin: float = 0.10,
    factor: float = 2.0,
    alpha: float = 0.05,
    progress: bool = True,
) -> tuple[HeadRoles, AttentionStore]:
    """Every role of ``model``'s heads on a treebank, and the (cached) attention store they were read from.

    The word-level maps come from :func:`~bertology_utils.attention.extraction.extract_cached` (shared with any
    analysis of the same model and sentences).

    :param trees: a treebank.
    :param model: a model name or a loaded model.
    :param frequencies: word frequencies for :func:`rare_word_heads`.
    :param threshold: for :func:`positional_heads`.
    :param margin: for :func:`syntactic_heads`.
    :param factor: for :func:`rare_word_heads`.
    :param alpha: for :func:`rare_word_heads`.
    :param progress: show the extraction's bar (none when the store is cached).
    :returns: the roles and the store.
    """
    from bertology_utils.attention.extraction import extract_cached

    store = extract_cached(trees, model, progress=progress)
    syntax_result = score_syntax(trees, store, on_mismatch="skip")
    found = head_roles(
        positional_heads(store, threshold=threshold),
        syntactic_heads(syntax_result, margin=margin),
        rare_word_heads(store, frequencies, factor=factor, alpha=alpha),
    )
    return found, store


def plot_roles(
    roles: HeadRoles, ax: Axes | None = None, confidence: HeadMatrix | None = None, title: str | None = None
) -> Axes:
    """Layers x heads grid with each head's roles written in its cell (P positional, S syntactic, R rare).

    :param roles: the roles of every head.
    :param ax: where to draw; a new figure when None.
    :param confidence: ``(L, H)`` :func:`head_confidence` to colour the cells by; by default the number of roles.
    :param title: the axes' title.
    :returns: the axes drawn on.
    """
    from bertology_utils.core.figures import plot_layer_head_grid

    stacked = np.stack(list(roles.masks.values()))
    if confidence is not None:
        values, label, vmin, vmax = np.asarray(confidence, dtype=float), "confidence", 0.0, 1.0
        if values.shape != roles.shape:
            raise BertologyError(f"confidence is {values.shape}, the roles are for {roles.shape} layers x heads")
    else:
        values, label, vmin, vmax = stacked.sum(0).astype(float), "roles", 0.0, float(len(ROLES))
    untested = f" (untested: {', '.join(roles.untested)})" if roles.untested else ""
    ax = plot_layer_head_grid(
        values,
        ax=ax,
        title=(title or "head roles: P positional, S syntactic, R rare word") + untested,
        cmap="Greys" if confidence is None else "viridis",
        label=label,
        annotate=False,
        vmin=vmin,
        vmax=vmax,
    )
    letters = np.array(list(ROLES.values()))
    for (l, h), marks in zip(np.ndindex(roles.shape), stacked.reshape(len(ROLES), -1).T):
        if marks.any():
            ax.text(
                h + 0.5,
                l + 0.5,
                "".join(letters[marks]),
                ha="center",
                va="center",
                fontsize=8,
                bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "alpha": 0.8, "linewidth": 0},
            )
    return ax
