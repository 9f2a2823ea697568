"""Item types (sentences, pairs, GAP examples), the Corpus that holds them, and the word rule."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import re
import sys
import unicodedata
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bertology_utils.core.errors import BertologyError, DataFormatError

__all__ = [
    "Sentence",
    "SentencePair",
    "GapExample",
    "Corpus",
    "consecutive_pairs",
    "words_of",
    "is_punctuation",
    "punctuation_forms",
]


# --------------------------------------------------------------------------- items


def _freeze(obj: object, *names: str) -> None:
    """Turn list-valued fields of a frozen dataclass into tuples, so items stay hashable."""
    for name in names:
        value = getattr(obj, name)
        if value is not None and not isinstance(value, tuple):
            object.__setattr__(obj, name, tuple(value))


@dataclass(frozen=True)
class Sentence:
    """A sentence as words, with its dependency tree when known.

    ``heads`` follow UD: the 1-based index of each word's head, 0 for the root.
    """

    id: str
    words: tuple[str, ...]
    heads: tuple[int, ...] | None = None
    relations: tuple[str, ...] | None = None
    upos: tuple[str, ...] | None = None
    text: str | None = None

    def __post_init__(self) -> None:
        _freeze(self, "words", "heads", "relations", "upos")
        for name in ("heads", "relations", "upos"):
            value = getattr(self, name)
            if value is not None and len(value) != len(self.words):
                raise ValueError(f"sentence {self.id}: {len(value)} {name} for {len(self.words)} words")

    @property
    def has_syntax(self) -> bool:
        """True when both heads and relations are known."""
        return self.heads is not None and self.relations is not None


@dataclass(frozen=True)
class SentencePair:
    """Two word sequences and the pair's label (class name, 0/1, or a similarity score)."""

    id: str
    a: tuple[str, ...]
    b: tuple[str, ...]
    label: str | int | float | None = None

    def __post_init__(self) -> None:
        _freeze(self, "a", "b")


@dataclass(frozen=True)
class GapExample:
    """One GAP row: a pronoun, two candidate names, whether each corefers; offsets index ``text``."""

    id: str
    text: str
    pronoun: str
    pronoun_offset: int
    a: str
    a_offset: int
    a_coref: bool
    b: str
    b_offset: int
    b_coref: bool
    url: str


def _canonical_sha256(items: Sequence, labels: Sequence | None) -> str:
    """sha256 of a canonical JSON of the items (and labels), for corpora not read from one file.

    Items are the dataclasses above or anything JSON can hold (e.g. a list of words).
    """
    records = [
        {"type": type(item).__name__, **{f.name: getattr(item, f.name) for f in dataclasses.fields(item)}}
        if dataclasses.is_dataclass(item)
        else item
        for item in items
    ]
    payload = json.dumps(
        {"items": records, "labels": labels}, sort_keys=True, ensure_ascii=False, separators=(",", ":")
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _summary(items: Sequence) -> str:
    kinds = {type(item) for item in items}
    if kinds == {Sentence}:
        return f"{_count(len(items), 'sentence')}, {_count(sum(len(s.words) for s in items), 'word')}"
    if kinds == {SentencePair}:
        return _count(len(items), "sentence pair")
    if kinds == {GapExample}:
        return _count(len(items), "GAP example")
    return _count(len(items), "item")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


@dataclass(frozen=True)
class Corpus(Sequence):
    """An immutable sequence of items plus where they came from.

    ``sha256`` is that of the source file's bytes, or of a canonical JSON of the items for
    corpora built in memory (and slices). ``labels`` runs parallel to the items (None when the
    data has no labels). ``description`` is one line naming the data, for notebooks to print.
    """

    items: tuple
    name: str
    path: Path | None = None
    sha256: str = ""
    description: str = ""
    labels: tuple | None = None

    def __post_init__(self) -> None:
        _freeze(self, "items", "labels")
        if self.labels is not None and len(self.labels) != len(self.items):
            raise ValueError(f"corpus {self.name}: {len(self.labels)} labels for {len(self.items)} items")
        if not self.sha256:
            object.__setattr__(self, "sha256", _canonical_sha256(self.items, self.labels))
        if not self.description:
            # the file's name, not its folder: descriptions are recorded and shown, the sha256 says which file it was
            origin = f"read from {self.path.name}" if self.path is not None else "built in memory"
            object.__setattr__(
                self, "description", f"{self.name}: {_summary(self.items)}, {origin} (sha256 {self.sha256[:12]})"
            )

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.items)

    def __getitem__(self, index: int | slice) -> Any:  # an item, or a Corpus of a slice
        if not isinstance(index, slice):
            return self.items[index]
        start, stop, step = index.indices(len(self.items))
        if (start, stop, step) == (0, len(self.items), 1):
            return self  # the whole corpus keeps its name, so cached extractions of it are shared
        where = f"{start}:{stop}" + (f":{step}" if step != 1 else "")
        items = self.items[index]
        return Corpus(
            items,
            f"{self.name}[{where}]",
            self.path,
            labels=None if self.labels is None else self.labels[index],
            description=f"{_summary(items)}, items {where} of {self.description}",
        )

    @classmethod
    def of(cls, items: Iterable) -> Corpus:
        """``items`` as a corpus: a :class:`Corpus` as it is, any other iterable of items as a new one named "items"."""
        return items if isinstance(items, Corpus) else cls.from_items(list(items), "items")

    @classmethod
    def from_items(cls, items: Iterable, name: str, labels: Iterable | None = None) -> Corpus:
        """A corpus of ready-made items (its sha256 is that of their canonical JSON)."""
        return cls(tuple(items), name, labels=None if labels is None else tuple(labels))

    @classmethod
    def from_texts(cls, texts: Iterable[str] | str, name: str = "texts") -> Corpus:
        """Sentences from raw strings, split into words with :func:`words_of`; ids are ``name:i``."""
        if isinstance(texts, str):
            texts = [texts]
        items = []
        for i, text in enumerate(texts):
            words = words_of(text)
            if not words:
                raise DataFormatError(f"text {i} of {name!r} contains no words: {text!r}")
            items.append(Sentence(f"{name}:{i}", tuple(words), text=text))
        return cls.from_items(items, name)


def consecutive_pairs(corpus: Corpus) -> Corpus:
    """Sentences 1+2, 3+4, ... of a corpus as :class:`SentencePair` items.

    Clark et al. fed BERT ``[CLS] p1 [SEP] p2 [SEP]`` (two segments, two separators); pairs of
    consecutive treebank sentences give inputs of the same shape.
    """
    items = list(corpus)
    pairs = [SentencePair(f"{a.id}+{b.id}", a.words, b.words) for a, b in zip(items[0::2], items[1::2])]
    if not pairs:
        raise BertologyError(f"{corpus.name}: need at least two sentences to make a pair")
    return Corpus.from_items(pairs, f"{corpus.name} (consecutive pairs)")


# --------------------------------------------------------------------------- words


def _char_class(codepoints: list[int]) -> str:
    """Body of a regex character class covering the given sorted code points, as ranges."""
    ranges: list[list[int]] = []
    for cp in codepoints:
        if ranges and cp == ranges[-1][1] + 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    return "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in ranges)


@functools.cache
def _word_rule() -> tuple[dict[int, str | None], re.Pattern]:
    """Built on first use from the running Python's Unicode tables (one scan, ~0.2 s)."""
    marks: list[int] = []
    table: dict[int, str | None] = {}
    for cp in range(sys.maxunicode + 1):
        category = unicodedata.category(chr(cp))
        if category[0] == "M":
            marks.append(cp)
        elif category == "Cc":
            table[cp] = " "
        elif category == "Cf":
            table[cp] = None
    table[0x200B] = " "  # zero-width space marks a word break (Thai, Khmer, web text)
    m = _char_class(marks)
    pattern = re.compile(
        r"\d+(?:[.,]\d+)+"  # 3.14, 1,000
        rf"|[\w{m}]+(?:['’][\w{m}]+)*"  # words, with inner apostrophes: don't, O’Neil
        rf"|(?i:['’](?:s|re|ve|ll|d|m|t))(?![\w{m}])"  # split-off clitics in pre-tokenized text: it 's
        rf"|[^\w\s{m}][{m}]*"  # any other visible character, alone
    )
    return table, pattern


def words_of(text: str) -> list[str]:
    """Split raw text into words: the one rule for text that is not already tokenized.

    * A word is a run of letters, digits, underscores and combining marks, possibly with inner
      apostrophes (``don't``, ``O’Neil`` stay whole; unlike UD, clitics are not split off).
    * An English clitic already split off, as in PTB-tokenized GLUE text (``it 's``,
      ``doesn 't``, ``they 're``), stays one word: ``'s``, ``'t``, ``'re``.
    * Numbers with inner ``.`` or ``,`` stay whole (``3.14``, ``1,000``).
    * Every other visible character (punctuation, symbols, each emoji) is a word of its own,
      keeping any combining marks that follow it (e.g. an emoji's variation selector).
    * Whitespace, control characters and the zero-width space separate words; other invisible
      format characters (soft hyphen, zero-width joiner, BOM, bidi marks) are dropped.
    * Scripts written without spaces (Chinese, Japanese, Thai) are not segmented: a run of
      letters is one word.

    So no word is empty or contains whitespace, and joining the words gives the text with its
    whitespace, control and format characters removed.
    """
    table, pattern = _word_rule()
    return pattern.findall(text.translate(table))


def is_punctuation(word: str, forms: Collection[str] | None = None) -> bool:
    """Is ``word`` punctuation? One of ``forms`` when given (a treebank's own punctuation, see
    :func:`punctuation_forms`), else a non-empty word made only of Unicode punctuation characters
    (categories P*): no language's characters are assumed."""
    if forms is not None:
        return word in forms
    return bool(word) and all(unicodedata.category(ch).startswith("P") for ch in word)


def punctuation_forms(corpus: Iterable) -> frozenset[str] | None:
    """The word forms a treebank tags as punctuation: UPOS ``PUNCT``, else the relation ``punct``.

    None when no sentence has either annotation (raw text, pairs, GLUE): :func:`is_punctuation`
    then falls back to Unicode's punctuation categories.
    """
    forms: set[str] = set()
    annotated = False
    for sentence in corpus:
        if not isinstance(sentence, Sentence):
            continue
        tags, wanted = (sentence.upos, "PUNCT") if sentence.upos is not None else (sentence.relations, "punct")
        if tags is None:
            continue
        annotated = True
        forms.update(word for word, tag in zip(sentence.words, tags) if tag.split(":")[0] == wanted)
    return frozenset(forms) if annotated else None
