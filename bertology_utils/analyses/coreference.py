"""Heads that resolve pronouns: Clark et al. (2019) Section 4.3 / Table 2, measured on GAP.

Clark et al. (`What Does BERT Look At? <https://arxiv.org/abs/1906.04341>`_) scored antecedent
selection on CoNLL-2012 (every earlier mention is a candidate); that data is not public, so this
module uses GAP (Webster et al. 2018, `Mind the GAP <https://arxiv.org/abs/1810.05201>`_): each example is a
Wikipedia passage, a pronoun and two names, A and B, with whether each one is the pronoun's
antecedent. Only examples where exactly one of A and B is the antecedent are scored (the
others are counted as excluded), so chance is 50% here, unlike Clark's task.

* **Words.** The passage is split with :func:`~bertology_utils.data.words_of`, and a word that a
  mention boundary falls inside is cut there ("Smith's" -> "Smith" + "'s" when the name is
  "Smith"), so the pronoun and each name are whole words. Every mention is checked against its
  character offset.
* **Too long for the model.** A passage with more tokens than the model takes is cut to a window
  that holds the pronoun and both names, widened with equal context on both sides and trimmed
  to sentence boundaries where one is in reach. Windowed examples are counted; an example whose
  mentions alone do not fit is excluded and counted. Nothing is truncated silently.
* **A head's choice.** The pronoun's word-level attention to each name, summed over the name's
  words; the name with more attention is the head's answer. Tie-aware
  (:func:`~bertology_utils.core.maxima.tie_credit`): names within one float16 ulp of the larger sum
  (2**-12 ~ 2.4e-4 for a sum in [0.25, 0.5)) tie and count as half right; a pronoun that gives
  neither name any attention gets no credit.
* **Baselines** on the same examples: the nearest name (in words), the first name, and a
  salience rule: a name before the pronoun beats one after it (cataphora is rare), then the name
  in the closest sentence, then the earlier name in that sentence (English subjects come first,
  and subjects are the preferred antecedents).
* **Gender.** GAP's point is the gap between masculine (he, him, his) and feminine (she, her,
  hers) pronouns; every accuracy is also reported per gender with the F/M ratio. GAP itself
  reports F1 over both names; we report accuracy of choosing between them.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from bertology_utils.analyses.syntax.scoring import real_word_positions
from bertology_utils.attention.store import AttentionStore
from bertology_utils.attention.word_attention import ItemAttention
from bertology_utils.core.errors import BertologyError, DataFormatError
from bertology_utils.core.heads import Head
from bertology_utils.core.maxima import tie_credit
from bertology_utils.core.models import LoadedModel
from bertology_utils.core.typing import HeadMatrix, HeadSamples, SampleValues
from bertology_utils.data import Corpus, GapExample, Sentence, words_of

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = [
    "MASCULINE",
    "FEMININE",
    "GENDERS",
    "SENTENCE_ENDS",
    "BASELINES",
    "ON_MISMATCH",
    "word_spans",
    "GapWords",
    "gap_words",
    "window",
    "PreparedGap",
    "prepare_gap",
    "CorefResult",
    "score_coreference",
    "PAPER_TABLE2",
    "paper_comparison",
    "example_index",
    "plot_pronoun_attention",
]

#: Pronouns scored as masculine.
MASCULINE = ("he", "him", "his", "himself")
#: Pronouns scored as feminine.
FEMININE = ("she", "her", "hers", "herself")
#: The genders every accuracy is also reported for.
GENDERS = ("masculine", "feminine")
#: Words that end a sentence, for the salience rule and for trimming windows.
SENTENCE_ENDS = (".", "!", "?")
#: Baselines, in the order of :attr:`CorefResult.baselines`.
BASELINES = ("nearest name", "first name", "salience rule")
#: What :func:`score_coreference` may do with an item whose words are not the prepared ones.
ON_MISMATCH = ("raise", "skip")


# --------------------------------------------------------------------------- words and offsets


def _droppable(char: str) -> bool:
    """Characters :func:`words_of` never puts in a word: whitespace, control and format characters."""
    return char.isspace() or unicodedata.category(char) in ("Cc", "Cf")


def _strip(text: str) -> str:
    return "".join(c for c in text if not _droppable(c))


def _walk(text: str, word: str, pos: int) -> tuple[int, int]:
    """Character span of ``word`` at or after ``pos``, skipping characters words_of drops (e.g. a soft hyphen)."""
    k, start, i = 0, pos, pos
    while k < len(word):
        if i >= len(text):
            raise DataFormatError(f"word {word!r} not found in the text after character {pos}")
        if text[i] == word[k]:
            start = i if k == 0 else start
            k += 1
        elif not _droppable(text[i]):
            raise DataFormatError(f"word {word!r} does not match the text at character {i} ({text[i]!r})")
        i += 1
    return start, i


def word_spans(text: str, boundaries: Iterable[int] = ()) -> tuple[list[str], list[tuple[int, int]]]:
    """The words of ``text`` (:func:`~bertology_utils.data.words_of`) with their character spans.

    A word with one of ``boundaries`` (character offsets) strictly inside it is cut there, so
    that a span starting or ending at a boundary is made of whole words.

    :param text: a passage.
    :param boundaries: character offsets where a word must be cut.
    :returns: ``(words, spans)``, each span ``(start, end)`` with ``end`` excluded.
    """
    words, spans, pos = [], [], 0
    cuts = sorted(set(int(b) for b in boundaries))
    for word in words_of(text):
        start = text.find(word, pos)
        if start < 0 or _strip(text[pos:start]):
            start, end = _walk(text, word, pos)  # a dropped character sits inside the word
        else:
            end = start + len(word)
        pos = end
        inner = [c for c in cuts if start < c < end]
        for lo, hi in zip([start, *inner], [*inner, end]):
            piece = _strip(text[lo:hi])
            if piece:
                words.append(piece)
                spans.append((lo, hi))
    return words, spans


def _mention_words(
    spans: np.ndarray, words: list[str], start: int, string: str, what: str, example_id: str
) -> tuple[int, int]:
    """``[first, stop)`` word indices of a mention at character ``start``, checked against its string."""
    inside = np.flatnonzero((spans[:, 0] < start + len(string)) & (spans[:, 1] > start))
    covered = words[inside[0] : inside[-1] + 1] if len(inside) else []
    if "".join(covered) != _strip(string):
        raise DataFormatError(
            f"GAP example {example_id}: {what} {string!r} at offset {start} covers {' '.join(covered) or 'no word'!r}"
        )
    return int(inside[0]), int(inside[-1]) + 1


# --------------------------------------------------------------------------- one example as words


@dataclass(frozen=True)
class GapWords:
    """A GAP example as the words the model reads, with the pronoun and both names located in them.

    :param example: the GAP example.
    :param words: the words given to the model (the window, when windowed).
    :param pronoun: index of the pronoun in ``words``.
    :param a: ``(start, stop)`` word indices of name A in ``words``, ``stop`` excluded.
    :param b: the same for name B.
    :param sentences: sentence number of each word, counted in the whole passage.
    :param first_word: position of ``words[0]`` among the passage's words.
    :param passage_words: words in the whole passage.
    :param split_words: words cut at a mention boundary.
    """

    example: GapExample
    words: tuple[str, ...]  #: the words given to the model (the window, when windowed)
    pronoun: int  #: index of the pronoun in ``words``
    a: tuple[int, int]  #: ``[start, stop)`` of name A in ``words``
    b: tuple[int, int]  #: ``[start, stop)`` of name B in ``words``
    sentences: tuple[int, ...]  #: sentence number of each word, counted in the whole passage
    first_word: int = 0  #: position of ``words[0]`` among the passage's words
    passage_words: int = 0  #: words in the whole passage
    split_words: int = 0  #: words cut at a mention boundary

    @property
    def windowed(self) -> bool:
        """Whether the words are a window of the passage rather than all of it."""
        return len(self.words) < self.passage_words

    @property
    def gold(self) -> str | None:
        """ "A" or "B" when exactly one of them is the antecedent, else None."""
        if self.example.a_coref == self.example.b_coref:
            return None
        return "A" if self.example.a_coref else "B"

    @property
    def gender(self) -> str | None:
        """``"masculine"`` or ``"feminine"`` (:data:`GENDERS`) by the pronoun, None for another pronoun."""
        pronoun = self.example.pronoun.lower()
        return "masculine" if pronoun in MASCULINE else "feminine" if pronoun in FEMININE else None

    def baseline_choices(self) -> dict[str, int]:
        """Each baseline's pick (:data:`BASELINES`).

        :returns: baseline name -> +1 for A, -1 for B, 0 for a tie.
        """
        p, (a0, a1), (b0, b1) = self.pronoun, self.a, self.b

        def distance(lo: int, hi: int) -> int:
            return lo - p if lo > p else p - (hi - 1)

        def salience(lo: int) -> tuple[bool, int, int]:
            after = lo > p
            return (after, abs(self.sentences[lo] - self.sentences[p]), lo)

        return {
            "nearest name": int(np.sign(distance(b0, b1) - distance(a0, a1))),
            "first name": int(np.sign(b0 - a0)),
            "salience rule": (salience(a0) < salience(b0)) - (salience(b0) < salience(a0)),
        }


def gap_words(example: GapExample) -> GapWords:
    """The whole passage of a GAP example as words, every mention checked against its offset.

    :param example: a GAP example.
    :returns: its words, with the pronoun and both names located.
    :raises DataFormatError: when a mention is not where its offset says, or the pronoun is not one word.
    """
    mentions = (
        ("pronoun", example.pronoun, example.pronoun_offset),
        ("A", example.a, example.a_offset),
        ("B", example.b, example.b_offset),
    )
    for what, string, start in mentions:
        if example.text[start : start + len(string)] != string:
            raise DataFormatError(f"GAP example {example.id}: {what} {string!r} is not in the text at offset {start}")
    boundaries = [x for _, string, start in mentions for x in (start, start + len(string))]
    words, spans = word_spans(example.text, boundaries)
    span_array = np.array(spans, dtype=np.int64).reshape(-1, 2)
    p, a, b = (_mention_words(span_array, words, start, string, what, example.id) for what, string, start in mentions)
    if p[1] - p[0] != 1:
        raise DataFormatError(f"GAP example {example.id}: the pronoun {example.pronoun!r} is not one word")
    ends = np.isin(np.array(words, dtype=object), SENTENCE_ENDS)
    sentences: np.ndarray = np.cumsum(ends) - ends  # a sentence-ending word belongs to the sentence it ends
    return GapWords(
        example,
        tuple(words),
        p[0],
        a,
        b,
        tuple(sentences.tolist()),
        0,
        len(words),
        len(words) - len(words_of(example.text)),
    )


def window(item: GapWords, tokens_per_word: np.ndarray, budget: int) -> GapWords | None:
    """An example cut to at most ``budget`` tokens around its mentions.

    The mentions' span is widened by equal amounts of context on both sides (one side takes
    what the other cannot use), then each side is trimmed to a sentence boundary when one lies
    between the mentions and the window's edge.

    :param item: the example's words.
    :param tokens_per_word: ``(W,)`` tokens of each word.
    :param budget: tokens the model takes, special tokens left out.
    :returns: ``item`` itself when it fits, the window, or None when the mentions alone do not fit.
    """
    t = np.asarray(tokens_per_word, dtype=np.int64)
    if t.sum() <= budget:
        return item
    cs = np.concatenate([[0], np.cumsum(t)])
    lo = min(item.pronoun, item.a[0], item.b[0])
    hi = max(item.pronoun + 1, item.a[1], item.b[1])
    spare = budget - (cs[hi] - cs[lo])
    if spare < 0:
        return None
    left_room, right_room = cs[lo], cs[-1] - cs[hi]
    left = min(left_room, spare // 2)
    right = min(right_room, spare - left)
    left = min(left_room, spare - right)
    start = int(np.searchsorted(cs, cs[lo] - left, side="left"))
    stop = int(np.searchsorted(cs, cs[hi] + right, side="right")) - 1
    sentences = np.asarray(item.sentences)
    new_sentence = np.flatnonzero(np.diff(sentences)) + 1  # word indices where a sentence starts
    starts = new_sentence[(new_sentence >= start) & (new_sentence <= lo)]
    stops = new_sentence[(new_sentence >= hi) & (new_sentence <= stop)]
    start = int(starts[0]) if len(starts) else start
    stop = int(stops[-1]) if len(stops) else stop

    def shift(span: tuple[int, int]) -> tuple[int, int]:
        return (span[0] - start, span[1] - start)

    return GapWords(
        item.example,
        item.words[start:stop],
        item.pronoun - start,
        shift(item.a),
        shift(item.b),
        item.sentences[start:stop],
        item.first_word + start,
        item.passage_words,
        item.split_words,
    )


# --------------------------------------------------------------------------- a corpus of examples


@dataclass(frozen=True)
class PreparedGap:
    """GAP examples ready for extraction: ``corpus[i]`` holds the words of ``items[i]``.

    :param items: the examples kept, as words.
    :param corpus: their words as sentences, for extraction.
    :param counts: examples read, kept, windowed, split words, and excluded by reason.
    :param description: what was prepared.
    """

    items: tuple[GapWords, ...]
    corpus: Corpus
    counts: dict[str, int]  #: examples read, kept, windowed, split words, and excluded by reason
    description: str = ""


def prepare_gap(examples: Corpus, model: LoadedModel, max_tokens: int | None = None) -> PreparedGap:
    """Turn GAP examples into word sequences the model can take, keeping those with exactly one antecedent.

    :param examples: GAP examples (:func:`~bertology_utils.data.load_gap`).
    :param model: the model whose tokenizer counts the tokens.
    :param max_tokens: tokens per example, special tokens included; by default what the model takes.
    :returns: the examples kept, their words as a corpus, and the counts of what was left out.
    """
    limit = model.max_tokens if max_tokens is None else int(max_tokens)
    budget = limit - model.tokenizer.num_special_tokens_to_add(pair=False)
    counts = {
        "examples": len(examples),
        "excluded: both names are antecedents": 0,
        "excluded: neither name is the antecedent": 0,
        "excluded: mentions too far apart for the model": 0,
    }
    whole = [gap_words(ex) for ex in examples]
    kept = []
    for item in whole:
        if item.gold is None:
            which = "both names are antecedents" if item.example.a_coref else "neither name is the antecedent"
            counts[f"excluded: {which}"] += 1
        else:
            kept.append(item)
    if kept:
        encoded = model.tokenizer([list(g.words) for g in kept], is_split_into_words=True, add_special_tokens=False)
    items = []
    for k, item in enumerate(kept):
        ids = np.array([w for w in encoded.word_ids(k) if w is not None], dtype=np.int64)
        # A word the tokenizer drops still gets one token: alignment stands the unknown token in for it.
        per_word = np.maximum(np.bincount(ids, minlength=len(item.words)), 1)
        cut = window(item, per_word, budget)
        if cut is None:
            counts["excluded: mentions too far apart for the model"] += 1
        else:
            items.append(cut)
    counts["kept"] = len(items)
    counts["windowed"] = sum(g.windowed for g in items)
    counts["words cut at a mention boundary"] = sum(g.split_words for g in items)
    sentences = [Sentence(g.example.id, g.words) for g in items]
    corpus = Corpus.from_items(sentences, name=f"{examples.name} words (<= {limit} tokens)")
    description = (
        f"{examples.description}; {len(items)} examples with exactly one antecedent, "
        f"{counts['windowed']} cut to a window of {limit} tokens"
    )
    return PreparedGap(tuple(items), corpus, counts, description)


# --------------------------------------------------------------------------- scoring


def _choice_correct(choice: np.ndarray, gold_is_a: np.ndarray) -> np.ndarray:
    """1 when the pick (+1 A, -1 B) is the gold name, 0 when it is the other, 0.5 for a tie (0)."""
    sign = np.where(gold_is_a, 1, -1).reshape((-1,) + (1,) * (np.ndim(choice) - 1))
    return (np.sign(choice) * sign + 1) / 2


@dataclass(frozen=True)
class CorefResult:
    """Per example and head: did the pronoun attend more to its antecedent than to the other name?

    :param items: the scored examples.
    :param indices: ``(N,)`` their positions in the prepared examples (and the store).
    :param correct: ``(N, L, H)`` the antecedent's credit: 1, 0, or 0.5 for a tie.
    :param baselines: baseline name -> ``(N,)`` 1 / 0 / 0.5.
    :param counts: examples read, kept, excluded and skipped, by reason.
    :param description: what was scored.
    """

    items: tuple[GapWords, ...]  #: the scored examples
    indices: SampleValues  #: their positions in the prepared examples (and the store)
    correct: HeadSamples  #: (N, L, H): the antecedent's credit, 1, 0, or 0.5 for a tie
    baselines: dict[str, SampleValues]  #: baseline name -> (N,) 1 / 0 / 0.5
    counts: dict[str, int]
    description: str = ""

    @property
    def gender(self) -> SampleValues:
        """``(N,)`` each example's pronoun gender (None for another pronoun)."""
        return np.array([g.gender for g in self.items], dtype=object)

    @property
    def accuracy(self) -> HeadMatrix:
        """``(L, H)`` accuracy over all scored examples."""
        return self.correct.mean(0)

    @property
    def best_head(self) -> Head:
        """The most accurate head."""
        return Head.argmax(self.accuracy)

    def held_out(self) -> SampleValues:
        """Correctness of a head chosen on the other half of the examples (even / odd).

        Choosing the best of layers x heads on the same examples inflates its accuracy; this is
        the estimate free of that choice.

        :returns: ``(N,)`` 1 / 0 / 0.5, NaN where the other half is empty.
        """
        half = np.arange(len(self.items)) % 2
        out = np.full(len(self.items), np.nan)
        flat = self.correct.reshape(len(self.items), -1)
        for chosen_on in (0, 1):
            scored_on = half != chosen_on
            if (half == chosen_on).any() and scored_on.any():
                pick = int(flat[half == chosen_on].mean(0).argmax())
                out[scored_on] = flat[scored_on, pick]
        return out

    def table(self) -> pd.DataFrame:
        """Accuracy of the best head, its held-out estimate and the baselines.

        :returns: one row per method, accuracies in percent: ``all``, per gender, and ``F/M``; the
            examples counted are in ``attrs["examples"]``.
        """
        best = self.best_head
        methods = {
            f"best head {best}": self.correct[:, best.layer, best.head],
            "best head, held out": self.held_out(),
            **{name: self.baselines[name] for name in BASELINES},
            "chance": np.full(len(self.items), 0.5),
        }
        gender = self.gender
        rows = []
        for name, values in methods.items():
            row = {"method": name, "all": 100 * np.nanmean(values)}
            for g in GENDERS:
                row[g] = 100 * np.nanmean(values[gender == g]) if (gender == g).any() else np.nan
            row["F/M"] = row["feminine"] / row["masculine"] if row["masculine"] > 0 else np.nan
            rows.append(row)
        table = pd.DataFrame(rows).set_index("method")
        table.attrs["examples"] = {"all": len(self.items), **{g: int((gender == g).sum()) for g in GENDERS}}
        return table

    def head_metrics(self, prefix: str = "coref") -> dict[str, HeadMatrix]:
        """Per-head metrics.

        :param prefix: the metrics' name prefix.
        :returns: ``{prefix}.head.accuracy``, ``(L, H)`` fractions, the scale of ``best_accuracy``.
        """
        return {f"{prefix}.head.accuracy": self.accuracy}

    def metrics(self, prefix: str = "coref") -> dict[str, Any]:
        """The best head, its accuracy (fractions) overall, held out and per gender, the baselines and the counts.

        :param prefix: the metrics' name prefix.
        :returns: metric name -> value.
        """
        rows = self.table()
        best = rows.iloc[0]
        return {
            f"{prefix}.examples": len(self.items),
            f"{prefix}.best_head": str(self.best_head),
            f"{prefix}.best_accuracy": best["all"] / 100,
            f"{prefix}.held_out_accuracy": rows.loc["best head, held out", "all"] / 100,
            f"{prefix}.best_accuracy_masculine": best["masculine"] / 100,
            f"{prefix}.best_accuracy_feminine": best["feminine"] / 100,
            f"{prefix}.bias_fm": best["F/M"],
            **{f"{prefix}.{name.split()[0]}_accuracy": rows.loc[name, "all"] / 100 for name in BASELINES},
            f"{prefix}.windowed": self.counts["windowed"],
            f"{prefix}.excluded": sum(v for k, v in self.counts.items() if k.startswith("excluded")),
        }


def score_coreference(
    prepared: PreparedGap, attention: AttentionStore | Iterable[ItemAttention], *, on_mismatch: str = "raise"
) -> CorefResult:
    """Score every head on the prepared GAP examples: Clark et al.'s Table 2, on GAP (module docstring).

    :param prepared: the examples (:func:`prepare_gap`).
    :param attention: a store extracted from ``prepared.corpus``, or word-level
        :class:`~bertology_utils.attention.word_attention.ItemAttention` records whose ``index`` is the
        position in ``prepared.items``.
    :param on_mismatch: items whose words are not the prepared words ``"raise"``, or with ``"skip"``
        are counted and left out.
    :returns: each head's credit on each example, and the baselines'.
    :raises BertologyError: when no example could be scored, or the attention does not fit the examples.
    """
    if on_mismatch not in ON_MISMATCH:
        raise ValueError(f"on_mismatch must be one of {ON_MISMATCH}, not {on_mismatch!r}")
    counts = dict(prepared.counts)
    counts["skipped: words differ"] = 0
    scored: list[int] = []
    rows: list[np.ndarray] = []
    seen: set[int] = set()
    for item in attention.iter_items() if isinstance(attention, AttentionStore) else attention:
        i = int(item.index)
        if not 0 <= i < len(prepared.items):
            raise BertologyError(f"item {item.item_id} has index {i}, outside the {len(prepared.items)} examples")
        if i in seen:
            raise BertologyError(f"GAP example {i} comes twice in the attention given")
        seen.add(i)
        g = prepared.items[i]
        real = real_word_positions(item)
        if tuple(np.asarray(item.words, dtype=object)[real].tolist()) != g.words:
            if on_mismatch == "raise":
                raise BertologyError(
                    f"GAP example {i} ({g.example.id}): the attention's words are not the prepared "
                    "words (pass on_mismatch='skip' to leave such examples out)"
                )
            counts["skipped: words differ"] += 1
            continue
        row = np.asarray(item.attention)[:, :, real[g.pronoun], real].astype(np.float64)  # (L, H, W)
        (a0, a1), (b0, b1) = g.a, g.b
        rows.append(np.stack([row[..., a0:a1].sum(-1), row[..., b0:b1].sum(-1)], axis=-1))  # (L, H, 2)
        scored.append(i)
    counts["skipped: not in the attention"] = len(prepared.items) - len(scored) - counts["skipped: words differ"]
    if not scored:
        raise BertologyError("no GAP example could be scored")
    items = tuple(prepared.items[i] for i in scored)
    gold_is_a = np.array([g.gold == "A" for g in items])
    credit = tie_credit(np.stack(rows))  # (N, L, H, names A and B)
    correct = np.where(gold_is_a[:, None, None], credit[..., 0], credit[..., 1]).astype(np.float32)
    choices = [g.baseline_choices() for g in items]
    baselines = {name: _choice_correct(np.array([c[name] for c in choices]), gold_is_a) for name in BASELINES}
    counts["scored"] = len(items)
    return CorefResult(items, np.array(scored), correct, baselines, counts, prepared.description)


# --------------------------------------------------------------------------- the paper's Table 2

#: Clark et al. (2019) Table 2 as ../shared/reference/papers.md gives it: antecedent selection on
#: CoNLL-2012 (all mentions), accuracy in percent. Not the same task as GAP's two names.
PAPER_TABLE2 = {
    "nearest mention": 27.0,
    "same head word": 52.0,
    "rule-based system": 69.0,
    "neural system": 83.0,
    "best head (5-4)": 65.0,
}


def paper_comparison(result: CorefResult) -> pd.DataFrame:
    """Clark et al.'s Table 2 beside ours, in percent (:mod:`bertology_utils.papers.clark` judges the claims).

    :param result: the scored GAP examples.
    :returns: one row per method: the paper's accuracy (CoNLL-2012), ours (GAP) and a note on the difference.
    """
    ours = result.table()["all"]
    best = ours.index[0]
    rows = [
        ("best attention head", "best head (5-4)", best, "ours: chosen on the same examples"),
        ("best attention head, held out", None, "best head, held out", "chosen on the other half of the examples"),
        ("nearest candidate", "nearest mention", "nearest name", "Clark: every earlier mention; GAP: two names"),
        ("first candidate", None, "first name", ""),
        ("rule-based", "rule-based system", "salience rule", "Clark: Lee et al.'s sieves; ours: a three-line rule"),
        ("same head word", "same head word", None, "GAP's two names never share a head word"),
        ("neural system", "neural system", None, "not run here"),
        ("chance", None, "chance", "GAP: one of two names"),
    ]
    table = pd.DataFrame(
        [
            {
                "method": method,
                "paper (%)": PAPER_TABLE2.get(paper, np.nan) if paper is not None else np.nan,
                "ours": ours_name or "-",
                "ours (%)": ours.get(ours_name, np.nan) if ours_name else np.nan,
                "note": note,
            }
            for method, paper, ours_name, note in rows
        ]
    ).set_index("method")
    return table


# --------------------------------------------------------------------------- pictures


def example_index(result: CorefResult, layer: int, head: int, max_words: int = 45) -> int:
    """The shortest example one head gets right, to show.

    :param result: the scored GAP examples.
    :param layer: the head's layer, from 0.
    :param head: the head within its layer, from 0.
    :param max_words: the longest example to consider.
    :returns: a position in ``result.items`` (``result.indices`` maps it to the store); the shortest of
        all when the head gets none of ``max_words`` words or fewer right.
    """
    right = result.correct[:, layer, head] == 1
    lengths = np.array([len(g.words) for g in result.items])
    pool = np.flatnonzero(right & (lengths <= max_words))
    pool = pool if len(pool) else np.arange(len(result.items))
    return int(pool[np.argmin(lengths[pool])])


def plot_pronoun_attention(item: ItemAttention, words: GapWords, layer: int, head: int, ax: Axes | None = None) -> Axes:
    """Bars of the pronoun's attention to every word for one head, names A and B coloured.

    :param item: the example's word-level attention.
    :param words: the example's words (``result.items[k]``).
    :param layer: the head's layer, from 0.
    :param head: the head within its layer, from 0.
    :param ax: where to draw; a new figure when None.
    :returns: the axes drawn on.
    """
    import matplotlib.pyplot as plt

    real = real_word_positions(item)
    row = np.asarray(item.attention)[layer, head, real[words.pronoun], real]
    if ax is None:
        _, ax = plt.subplots(figsize=(max(6.0, 0.25 * len(words.words) + 1), 3.2))
    colours = np.full(len(row), "lightgrey", dtype=object)
    colours[words.a[0] : words.a[1]] = "tab:blue"
    colours[words.b[0] : words.b[1]] = "tab:orange"
    colours[words.pronoun] = "black"
    ax.bar(np.arange(len(row)), row, color=list(colours))
    ax.set_xticks(np.arange(len(row)), words.words, rotation=90, fontsize=7)
    ax.set_ylabel("attention from the pronoun")
    gold = words.example.a if words.gold == "A" else words.example.b
    ax.set_title(
        f"head {Head(layer, head)}: {words.example.pronoun!r} (black) -> "
        f"A {words.example.a!r} (blue) vs B {words.example.b!r} (orange); antecedent: {gold}",
        fontsize=9,
    )
    return ax
