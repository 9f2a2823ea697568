"""Text, treebanks (CoNLL-U), GLUE tasks and GAP as immutable items of words.

Three layers:

* item types (:class:`Sentence`, :class:`SentencePair`, :class:`GapExample`) held in a
  :class:`Corpus`, which records where its data came from (``name``, ``path``, ``sha256``,
  ``description``);
* readers (:func:`read_conllu`, :func:`read_glue_tsv`, :func:`read_gap_tsv`,
  :func:`read_pairs_tsv`) that validate a file and raise :class:`DataFormatError` naming the
  file and line;
* resolution (:data:`DATASETS`, :func:`resolve_data_file`) and loaders (:func:`load_dataset`
  and friends). Every data set is looked for in the same order: an explicit path,
  ``$BERTOLOGY_DATA_DIR``, the project's ``data/`` folder, the cache, then a download into the
  cache (checked against the registry's sha256) unless offline.

Raw text is split into words by :func:`words_of`, the one rule used everywhere.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import unicodedata
import urllib.request
import warnings
import zipfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import conllu
from conllu.exceptions import ParseException

from . import settings
from .errors import DataFormatError, DataNotFoundError

__all__ = [
    "Sentence", "SentencePair", "GapExample", "Corpus", "words_of",
    "read_conllu", "read_glue_tsv", "read_gap_tsv", "read_pairs_tsv",
    "DataFile", "DatasetSpec", "DATASETS", "GLUE_TASKS", "DataVersionWarning",
    "file_sha256", "resolve_data_file", "available_datasets",
    "load_dataset", "load_treebank", "load_glue", "load_gap", "load_sample", "load_sample_pairs",
    "default_treebank",
]


# --------------------------------------------------------------------------- items

def _freeze(obj, *names: str) -> None:
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

    def __post_init__(self):
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

    def __post_init__(self):
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
        if dataclasses.is_dataclass(item) else item
        for item in items
    ]
    payload = json.dumps({"items": records, "labels": labels}, sort_keys=True, ensure_ascii=False,
                         separators=(",", ":"))
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

    def __post_init__(self):
        _freeze(self, "items", "labels")
        if self.labels is not None and len(self.labels) != len(self.items):
            raise ValueError(f"corpus {self.name}: {len(self.labels)} labels for {len(self.items)} items")
        if not self.sha256:
            object.__setattr__(self, "sha256", _canonical_sha256(self.items, self.labels))
        if not self.description:
            origin = f"read from {self.path}" if self.path is not None else "built in memory"
            object.__setattr__(self, "description",
                               f"{self.name}: {_summary(self.items)}, {origin} (sha256 {self.sha256[:12]})")

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self):
        return iter(self.items)

    def __getitem__(self, index):
        if not isinstance(index, slice):
            return self.items[index]
        start, stop, step = index.indices(len(self.items))
        where = f"{start}:{stop}" + (f":{step}" if step != 1 else "")
        items = self.items[index]
        return Corpus(
            items, f"{self.name}[{where}]", self.path,
            labels=None if self.labels is None else self.labels[index],
            description=f"{_summary(items)}, items {where} of {self.description}",
        )

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
    marks, table = [], {}
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
        r"\d+(?:[.,]\d+)+"                     # 3.14, 1,000
        rf"|[\w{m}]+(?:['’][\w{m}]+)*"         # words, with inner apostrophes: don't, O’Neil
        rf"|(?i:['’](?:s|re|ve|ll|d|m|t))(?![\w{m}])"  # split-off clitics in pre-tokenized text: it 's
        rf"|[^\w\s{m}][{m}]*"                  # any other visible character, alone
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


# --------------------------------------------------------------------------- reading files

# sha256 of files, keyed by (resolved path, mtime, size) so a changed file is hashed again.
_HASHES: dict[tuple[str, int, int], str] = {}


def _hash_key(path: Path) -> tuple[str, int, int]:
    stat = path.stat()
    return str(path.resolve()), stat.st_mtime_ns, stat.st_size


def file_sha256(path: str | os.PathLike) -> str:
    """sha256 of a file's bytes, cached per (path, mtime, size)."""
    path = Path(path)
    key = _hash_key(path)
    if key not in _HASHES:
        digest = hashlib.sha256()
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
        _HASHES[key] = digest.hexdigest()
    return _HASHES[key]


def _read_lines(path: Path) -> tuple[list[str], str]:
    """The file's lines (UTF-8, BOM dropped, LF or CRLF) and its sha256."""
    try:
        key = _hash_key(path)
        data = path.read_bytes()
    except FileNotFoundError:
        raise DataNotFoundError(f"{path}: no such file") from None
    _HASHES[key] = sha = hashlib.sha256(data).hexdigest()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise DataFormatError(f"not valid UTF-8 ({error.reason})", path,
                              data.count(b"\n", 0, error.start) + 1) from None
    # split("\n"), not splitlines(): texts may contain U+2028 or \x1c, which are not line ends here
    lines = text.replace("\r\n", "\n").split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines, sha


# --------------------------------------------------------------------------- CoNLL-U

def _blocks(lines: list[str]):
    """Sentence blocks as lists of (line number, line), split on blank lines."""
    block: list[tuple[int, str]] = []
    for number, line in enumerate(lines, 1):
        if line.strip():
            block.append((number, line))
        elif block:
            yield block
            block = []
    if block:
        yield block


def _find_cycle(heads: Sequence[int]) -> list[int] | None:
    """The word ids (1-based) of a cycle in a heads array, or None; linear time."""
    state = [2] + [0] * len(heads)  # 0 unvisited, 1 on the current walk, 2 reaches the root
    for start in range(1, len(heads) + 1):
        walk, node = [], start
        while state[node] == 0:
            state[node] = 1
            walk.append(node)
            node = heads[node - 1]
        if state[node] == 1:
            return walk[walk.index(node):]
        for visited in walk:
            state[visited] = 2
    return None


def _check_tree(heads: list, lines: list[int], path: Path, first_line: int) -> tuple[int, ...]:
    """Validate one sentence's heads (a single-rooted tree over 1..n); return them as a tuple."""
    n = len(heads)
    for head, line in zip(heads, lines):
        if head is None:
            raise DataFormatError("HEAD is '_' although other words of the sentence have heads", path, line)
        if not 0 <= head <= n:
            raise DataFormatError(f"HEAD {head} is out of range 0..{n}", path, line)
    roots = [i for i, head in enumerate(heads) if head == 0]
    if not roots:
        raise DataFormatError("no root: no word has HEAD 0", path, first_line)
    if len(roots) > 1:
        raise DataFormatError(f"more than one root: words {roots[0] + 1} and {roots[1] + 1} both have HEAD 0",
                              path, lines[roots[1]])
    cycle = _find_cycle(heads)
    if cycle:
        chain = " -> ".join(map(str, cycle + cycle[:1]))
        raise DataFormatError(f"cycle in HEADs ({chain}): these words never reach the root",
                              path, lines[min(cycle) - 1])
    return tuple(heads)


def _sentence(block: list[tuple[int, str]], number: int, path: Path) -> Sentence:
    """Parse and validate one sentence block with the conllu library."""
    first_line = block[0][0]
    token_lines = [(n, line) for n, line in block if not line.startswith("#")]
    if not token_lines:
        raise DataFormatError("comment lines without any word lines", path, first_line)
    for n, line in token_lines:
        columns = line.count("\t") + 1
        if columns != 10:
            raise DataFormatError(f"expected 10 tab-separated columns, found {columns}", path, n)
        if "  " in line:  # conllu splits on two spaces as well as tabs, which would shift columns
            raise DataFormatError("two consecutive spaces inside a field", path, n)
    try:
        tokens = conllu.parse_token_and_metadata("\n".join(line for _, line in block))
    except ParseException as block_error:
        # Re-parse line by line to name the offending line.
        for n, line in token_lines:
            try:
                conllu.parse_token_and_metadata(line)
            except ParseException as error:
                raise DataFormatError(str(error), path, n) from None
        raise DataFormatError(str(block_error), path, first_line) from None
    words = []  # (line number, token) of syntactic words; multiword tokens and empty nodes are skipped
    for (n, _), token in zip(token_lines, tokens):
        if isinstance(token["id"], int):
            words.append((n, token))
        elif token["id"] is None:
            raise DataFormatError("ID is '_'", path, n)
    if not words:
        raise DataFormatError("sentence has no words (only multiword tokens or empty nodes)", path, first_line)
    for expected, (n, token) in enumerate(words, 1):
        if token["id"] != expected:
            raise DataFormatError(f"word ID {token['id']} where {expected} was expected (IDs must run 1..n)",
                                  path, n)
    lines = [n for n, _ in words]
    heads = [token["head"] for _, token in words]
    relations = tuple(token["deprel"] for _, token in words)
    upos = tuple(token["upos"] for _, token in words)
    return Sentence(
        id=tokens.metadata.get("sent_id") or f"{path.name}:{number}",
        words=tuple(token["form"] for _, token in words),
        heads=None if all(h is None for h in heads) else _check_tree(heads, lines, path, first_line),
        relations=None if all(r == "_" for r in relations) else relations,
        upos=None if all(u == "_" for u in upos) else upos,
        text=tokens.metadata.get("text"),
    )


def read_text_lines(path: str | os.PathLike, name: str | None = None) -> Corpus:
    """One sentence per non-blank line of a UTF-8 text file, split with :func:`words_of`.

    Item ids are ``<name>:<line number>``, so they point back into the file.
    """
    path = Path(path)
    lines, sha = _read_lines(path)
    items = tuple(Sentence(f"{name or path.stem}:{n}", tuple(words_of(line)), text=line)
                  for n, line in enumerate(lines, 1) if words_of(line))
    if not items:
        raise DataFormatError("no sentences (no line has a word)", path)
    return Corpus(items, name or path.stem, path, sha)


def read_conllu(path: str | os.PathLike, name: str | None = None) -> Corpus:
    """Read a CoNLL-U file into a Corpus of :class:`Sentence`, checking every tree.

    Multiword-token lines (``3-4``) and empty nodes (``8.1``) are skipped: words are the
    syntactic words. ``id`` is ``# sent_id`` (else ``<file>:<n>``), ``text`` is ``# text``.
    """
    path = Path(path)
    lines, sha = _read_lines(path)
    sentences = tuple(_sentence(block, number, path) for number, block in enumerate(_blocks(lines), 1))
    if not sentences:
        raise DataFormatError("no sentences (empty file?)", path)
    return Corpus(sentences, name or path.stem, path, sha)


# --------------------------------------------------------------------------- TSV files

def _read_table(path: Path, header: tuple[str, ...] | None, columns: int,
                row: Callable[[list[str], int], tuple[object, object]]) -> tuple[list, list, str]:
    """Rows of a tab-separated file without quoting, each turned into (item, label) by ``row``.

    ``row(fields, index)`` raises ValueError for a bad value; that becomes a DataFormatError
    naming the line. Returns the items, labels and the file's sha256.
    """
    lines, sha = _read_lines(path)
    first = 1
    if header is not None:
        found = tuple(lines[0].split("\t")) if lines else ()
        if found != header:
            raise DataFormatError(f"expected the header {'|'.join(header)!r}, found {'|'.join(found)!r}", path, 1)
        first = 2
    items, labels = [], []
    for number, line in enumerate(lines[first - 1:], first):
        if not line:
            continue
        fields = line.split("\t")
        if len(fields) != columns:
            raise DataFormatError(f"expected {columns} tab-separated fields, found {len(fields)}", path, number)
        try:
            item, label = row(fields, len(items))
        except ValueError as error:
            raise DataFormatError(str(error), path, number) from None
        items.append(item)
        labels.append(label)
    if not items:
        raise DataFormatError("no data rows", path)
    return items, labels, sha


def _binary(value: str):
    if value not in ("0", "1"):
        raise ValueError(f"label {value!r} is not 0 or 1")
    return int(value)


def _entailment(value: str):
    if value not in ("entailment", "not_entailment"):
        raise ValueError(f"label {value!r} is not 'entailment' or 'not_entailment'")
    return value


def _score(value: str):
    try:
        score = float(value)
    except ValueError:
        raise ValueError(f"score {value!r} is not a number") from None
    if not 0.0 <= score <= 5.0:
        raise ValueError(f"score {score} is outside 0..5")
    return score


@dataclass(frozen=True)
class _Layout:
    """Where a sentence (or pair) task keeps its fields."""

    header: tuple[str, ...] | None
    columns: int
    texts: tuple[int, ...]           # one column: single sentences; two: pairs
    label: int
    parse_label: Callable[[str], object]
    ids: tuple[int, ...] = ()        # joined with "-"; empty: the row index

    def row(self, fields: list[str], index: int):
        label = self.parse_label(fields[self.label])
        item_id = "-".join(fields[i] for i in self.ids) or str(index)
        texts = [fields[i].strip() for i in self.texts]  # SST-2 sentences end with a space
        words = [tuple(words_of(text)) for text in texts]
        if not all(words):
            raise ValueError("a sentence field has no words")
        if len(texts) == 1:
            return Sentence(item_id, words[0], text=texts[0]), label
        return SentencePair(item_id, words[0], words[1], label), label


_GLUE_LAYOUTS = {
    "SST-2": _Layout(("sentence", "label"), 2, texts=(0,), label=1, parse_label=_binary),
    # CoLA: no header; source, label, original judgement mark, sentence.
    "CoLA": _Layout(None, 4, texts=(3,), label=1, parse_label=_binary),
    "MRPC": _Layout(("Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"), 5,
                    texts=(3, 4), label=0, parse_label=_binary, ids=(1, 2)),
    "RTE": _Layout(("index", "sentence1", "sentence2", "label"), 4,
                   texts=(1, 2), label=3, parse_label=_entailment, ids=(0,)),
    "STS-B": _Layout(("index", "genre", "filename", "year", "old_index", "source1", "source2",
                      "sentence1", "sentence2", "score"), 10,
                     texts=(7, 8), label=9, parse_label=_score, ids=(0,)),
}
_PAIRS_LAYOUT = _Layout(("id", "sentence1", "sentence2", "label"), 4,
                        texts=(1, 2), label=3, parse_label=_entailment, ids=(0,))

#: GLUE tasks this module reads (train and dev files, in the GLUE download script's format).
GLUE_TASKS = tuple(_GLUE_LAYOUTS)


def _glue_task(task: str) -> str:
    """Canonical GLUE task name: accepts 'SST-2', 'sst2', 'glue/SST-2'..."""
    key = task.lower().removeprefix("glue/").replace("-", "")
    for name in GLUE_TASKS:
        if name.lower().replace("-", "") == key:
            return name
    raise DataNotFoundError(f"unknown GLUE task {task!r}; known: {', '.join(GLUE_TASKS)}")


def _read_layout(path: str | os.PathLike, layout: _Layout, name: str | None) -> Corpus:
    path = Path(path)
    items, labels, sha = _read_table(path, layout.header, layout.columns, layout.row)
    return Corpus(tuple(items), name or path.stem, path, sha, labels=tuple(labels))


def read_glue_tsv(path: str | os.PathLike, task: str, name: str | None = None) -> Corpus:
    """Read a GLUE train/dev TSV: SST-2 and CoLA give :class:`Sentence`, MRPC/RTE/STS-B :class:`SentencePair`.

    Files are read without quoting (MRPC has bare ``"``); labels are ints for 0/1 tasks,
    strings for RTE, float scores for STS-B, and are also in ``Corpus.labels``.
    """
    task = _glue_task(task)
    return _read_layout(path, _GLUE_LAYOUTS[task], name or f"glue/{task}/{Path(path).stem}")


def read_pairs_tsv(path: str | os.PathLike, name: str | None = None) -> Corpus:
    """Read the project's sentence-pair TSV (``id, sentence1, sentence2, label``; RTE's labels)."""
    return _read_layout(path, _PAIRS_LAYOUT, name)


_GAP_HEADER = ("ID", "Text", "Pronoun", "Pronoun-offset", "A", "A-offset", "A-coref",
               "B", "B-offset", "B-coref", "URL")


def _offset(value: str, column: str) -> int:
    if not value.isdigit():  # also rejects negative offsets, which would index from the end
        raise ValueError(f"{column} {value!r} is not a non-negative integer")
    return int(value)


def _coref(value: str, column: str) -> bool:
    if value not in ("TRUE", "FALSE"):
        raise ValueError(f"{column} {value!r} is not TRUE or FALSE")
    return value == "TRUE"


def _gap_row(fields: list[str], index: int):
    id_, text, pronoun, p_off, a, a_off, a_coref, b, b_off, b_coref, url = fields
    example = GapExample(id_, text, pronoun, _offset(p_off, "Pronoun-offset"),
                         a, _offset(a_off, "A-offset"), _coref(a_coref, "A-coref"),
                         b, _offset(b_off, "B-offset"), _coref(b_coref, "B-coref"), url)
    for column, span, start in (("Pronoun", pronoun, example.pronoun_offset),
                                ("A", a, example.a_offset), ("B", b, example.b_offset)):
        found = text[start:start + len(span)]
        if found != span:
            raise ValueError(f"{column} {span!r} is not in Text at offset {start} (found {found!r})")
    return example, None


def read_gap_tsv(path: str | os.PathLike, name: str | None = None) -> Corpus:
    """Read a GAP TSV (header + 11 columns) into :class:`GapExample`, checking every offset."""
    path = Path(path)
    items, _, sha = _read_table(path, _GAP_HEADER, len(_GAP_HEADER), _gap_row)
    return Corpus(tuple(items), name or f"gap/{path.stem}", path, sha)


# --------------------------------------------------------------------------- registry

@dataclass(frozen=True)
class DataFile:
    """One file of a data set: its path inside a data directory, expected sha256, download URL.

    ``member`` names the file inside a zip archive at ``url``; ``url`` is None when there is no
    canonical single download.
    """

    path: str
    sha256: str | None
    url: str | None
    member: str | None = None


@dataclass(frozen=True)
class DatasetSpec:
    """A data set: its title, reader, files per split, and how to get it when no URL exists."""

    name: str
    title: str
    kind: str  # "treebank", "glue", "gap" or "pairs"
    reader: Callable[..., Corpus]
    files: dict[str, DataFile]
    default_split: str
    how_to_get: str = ""


_UD_URL = "https://raw.githubusercontent.com/UniversalDependencies/UD_English-EWT/r2.16/"
_GAP_URL = "https://raw.githubusercontent.com/google-research-datasets/gap-coreference/master/"
_GLUE_URL = "https://dl.fbaipublicfiles.com/glue/data/{task}.zip"

_EWT_SHA = {
    "train": "3fb78e2b55482c8ee00caa653af436c88c9e5bc9a73ce26e4ae3ddc79d2b7e7b",
    "dev": "531a54ff90d6ab12201c5a50c3e78e6ddac4de69abc4bce5d275d3cd29efe2b6",
    "test": "e266e515a0a7547657ed3d90d9ba46487d6bd251f27ad4269d4e8a427c8555cd",
}
_GAP_SHA = {
    "development": "b9a01434fcf58d8c2f9bc762480c27e58ce466cf1ffe8b09cfecbc7a20d2d634",
    "test": "1c35e36d5b14f6313ec3f6cd67b275de282595dd59e59390e00cfff9897a6819",
    "validation": "2d784f66b390404f554704b9aef6dcde8845e79dda9886b8391cf7e9a24fdb98",
}
_GLUE_SHA = {
    ("SST-2", "train"): "48eac26399f8456935f81dd9e3a745c1430adb6c62e233ccfe22db4a0d15d1d1",
    ("SST-2", "dev"): "54a9c12c77e402fc14d6a66a506f24d999f596b0176eb777c972cccc2f9cc4b0",
    ("CoLA", "train"): "cb368ebeb9f27d7ad03720d27ddc95687a311bdb100781a2fe59a5f5b1bc0624",
    ("CoLA", "dev"): "8c013e21dc39957cac37378d87bebe225b694a0d5fe13eded66c2856628833fd",
    ("MRPC", "train"): "69abcedee3cf738c6ce58d772e43e1b7cdf5b4edee4aceda459c0d9f4e5599f3",
    ("MRPC", "dev"): "9e8f284788040f7c9ecde2e1b3c07237c756f926bd9ef8548ef5d34b56f69f17",
    ("RTE", "train"): "41e3a9b063433392343fad9e962cf2f58b681c78d8f71592f4186f0837246c5c",
    ("RTE", "dev"): "80230dfa1347282e7b532b06a1004a76a710087541189bf874223ddf0e3819fb",
    ("STS-B", "train"): "41c4d978b6162abdcada7e49a982211954cca5459c228db478af333124b257a2",
    ("STS-B", "dev"): "fe7dc0632a5033562f3cadff991f6e8d9b9b6311861660e78c3c82eb7db67f59",
}
_GLUE_TITLES = {
    "SST-2": "Stanford Sentiment Treebank (GLUE SST-2)",
    "CoLA": "Corpus of Linguistic Acceptability (GLUE CoLA)",
    "MRPC": "Microsoft Research Paraphrase Corpus (GLUE MRPC)",
    "RTE": "Recognizing Textual Entailment (GLUE RTE)",
    "STS-B": "Semantic Textual Similarity Benchmark (GLUE STS-B)",
}
_MRPC_HOW = ("MRPC has no single canonical download file: GLUE's download_glue_data.py "
             "(https://github.com/nyu-mll/GLUE-baselines, `--tasks MRPC`) builds MRPC/train.tsv and "
             "MRPC/dev.tsv from the Microsoft Research Paraphrase Corpus; put them in "
             "<dir>/glue/MRPC/ and set BERTOLOGY_DATA_DIR=<dir>")


def _glue_spec(task: str) -> DatasetSpec:
    url = None if task == "MRPC" else _GLUE_URL.format(task=task)
    files = {split: DataFile(f"glue/{task}/{split}.tsv", _GLUE_SHA[task, split], url,
                             member=None if url is None else f"{task}/{split}.tsv")
             for split in ("train", "dev")}
    return DatasetSpec(f"glue/{task}", _GLUE_TITLES[task], "glue", functools.partial(read_glue_tsv, task=task),
                       files, "dev", _MRPC_HOW if task == "MRPC" else "")


#: Every data set the package knows, by name. Paths are relative to a data directory laid out
#: like ../shared/data; the sample files ship in the project's own data/ folder.
DATASETS: dict[str, DatasetSpec] = {
    "ud-english-ewt": DatasetSpec(
        "ud-english-ewt", "UD English Web Treebank v2.16", "treebank", read_conllu,
        {split: DataFile(f"ud-english-ewt/en_ewt-ud-{split}.conllu", sha, f"{_UD_URL}en_ewt-ud-{split}.conllu")
         for split, sha in _EWT_SHA.items()},
        "dev"),
    "gap-coreference": DatasetSpec(
        "gap-coreference", "GAP coreference (Webster et al. 2018)", "gap", read_gap_tsv,
        {split: DataFile(f"gap-coreference/gap-{split}.tsv", sha, f"{_GAP_URL}gap-{split}.tsv")
         for split, sha in _GAP_SHA.items()},
        "development"),
    **{f"glue/{task}": _glue_spec(task) for task in GLUE_TASKS},
    "sample": DatasetSpec(
        "sample", "Project sample treebank (40 sentences written and annotated for this project)", "treebank",
        read_conllu,
        {"all": DataFile("sample/sample.conllu",
                         "a7caa66bcd4f163473886285499b1616d8e345a7c624c78089aaa0d5951f5508", None)},
        "all", "it ships in the project's data/ folder (a source checkout)"),
    "sample-pairs": DatasetSpec(
        "sample-pairs", "Project sample sentence pairs (12 pairs written for this project)", "pairs",
        read_pairs_tsv,
        {"all": DataFile("sample/pairs.tsv",
                         "e76f7fe33711b71220ad58ee018afe40adf91e92209c8ae0c7b628bac55d638d", None)},
        "all", "it ships in the project's data/ folder (a source checkout)"),
}


def _spec(name: str) -> DatasetSpec:
    if name in DATASETS:
        return DATASETS[name]
    raise DataNotFoundError(f"unknown data set {name!r}; known: {', '.join(DATASETS)}")


def _file(spec: DatasetSpec, split: str) -> DataFile:
    if split in spec.files:
        return spec.files[split]
    raise DataNotFoundError(f"data set {spec.name!r} has no split {split!r}; splits: {', '.join(spec.files)}")


# --------------------------------------------------------------------------- resolution

class DataVersionWarning(UserWarning):
    """A data file was found but its sha256 differs from the registry's (another version?)."""


def _search_places() -> list[tuple[str, Path | None]]:
    """The local places every data set is looked for, in order."""
    return [
        (f"${settings.DATA_DIR_ENV}", settings.data_dir()),
        ("project data/", settings.project_data_dir()),
        ("cache", settings.cache_dir() / "data"),
    ]


def _find_local(file: DataFile) -> tuple[Path | None, str | None, list[str]]:
    """(path, where, places looked) for the first local copy of a file, or (None, None, looked)."""
    looked = []
    for where, root in _search_places():
        if root is None:
            looked.append(f"{where} (not set)")
            continue
        candidate = root / file.path
        if candidate.is_file():
            return candidate, where, looked
        looked.append(f"{where}: {candidate}")
    return None, None, looked


def _download(file: DataFile, target: Path) -> Path:
    """Download ``file`` (or extract it from the zip at its URL) to ``target``, checking its sha256.

    Everything goes through temporary files in the target folder and one rename, so a failed
    or refused download leaves nothing behind.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = []

    def new_temp() -> Path:
        fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
        os.close(fd)
        temporary.append(Path(name))
        return temporary[-1]

    try:
        try:
            fetched = new_temp()
            with urllib.request.urlopen(file.url, timeout=60) as response, fetched.open("wb") as out:
                shutil.copyfileobj(response, out)
            if file.member:
                extracted = new_temp()
                with zipfile.ZipFile(fetched) as archive, archive.open(file.member) as src, \
                        extracted.open("wb") as out:
                    shutil.copyfileobj(src, out)
                fetched = extracted
        except (OSError, ValueError, zipfile.BadZipFile, KeyError) as error:
            raise DataNotFoundError(f"could not download {file.url}: {error}") from error
        got = file_sha256(fetched)
        if file.sha256 and got != file.sha256:
            raise DataNotFoundError(f"refused the download of {file.url}: sha256 {got} is not the expected "
                                    f"{file.sha256}")
        os.replace(fetched, target)
        return target
    finally:
        for path in temporary:
            path.unlink(missing_ok=True)


def resolve_data_file(dataset: str, split: str, path: str | os.PathLike | None = None,
                      download: bool = True) -> Path:
    """The local file of ``dataset``/``split``, downloading it into the cache if allowed.

    Order: ``path`` (used as given, unchecked) -> ``$BERTOLOGY_DATA_DIR`` -> the project's
    ``data/`` -> ``<cache>/data`` -> download into ``<cache>/data`` (sha256-checked) unless
    offline or ``download=False``. A local file whose sha256 differs from the registry is used
    with a :class:`DataVersionWarning`. Raises DataNotFoundError listing every place looked.
    """
    spec = _spec(dataset)
    file = _file(spec, split)
    if path is not None:
        path = Path(path).expanduser()
        if path.is_file():
            return path
        raise DataNotFoundError(f"{path}: no such file (given for {dataset}/{split})")
    found, where, looked = _find_local(file)
    if found is not None:
        if file.sha256 and file_sha256(found) != file.sha256:
            warnings.warn(DataVersionWarning(
                f"{found} (for {dataset}/{split}, found in {where}) has sha256 {file_sha256(found)}, "
                f"not the expected {file.sha256}; using it anyway"), stacklevel=2)
        return found
    target = settings.cache_dir() / "data" / file.path
    if file.url is None:
        reason = "no download URL"
    elif settings.is_offline():
        reason = f"offline (${settings.OFFLINE_ENV}, HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE is set)"
    elif not download:
        reason = "download=False"
    else:
        try:
            return _download(file, target)
        except DataNotFoundError as error:
            reason = str(error)
    if file.url is not None:
        what = f"the file {file.member} inside {file.url}" if file.member else file.url
        how = f"download {what} to <dir>/{file.path} and set {settings.DATA_DIR_ENV}=<dir>, or go online"
    else:
        how = spec.how_to_get
    raise DataNotFoundError(
        f"{dataset}/{split} ({file.path}) not found. Looked in: {'; '.join(looked)}. "
        f"Not downloaded: {reason}. To get it: {how}.")


def available_datasets() -> list[dict]:
    """One row per data set and split: name, split, kind, path (or None), where it was found, url."""
    rows = []
    for spec in DATASETS.values():
        for split, file in spec.files.items():
            found, where, _ = _find_local(file)
            rows.append({"name": spec.name, "split": split, "kind": spec.kind,
                         "path": found, "where": where, "url": file.url})
    return rows


# --------------------------------------------------------------------------- loaders

def load_dataset(name: str, split: str | None = None, path: str | os.PathLike | None = None) -> Corpus:
    """Resolve and read any registered data set; ``split`` defaults to the data set's usual one."""
    spec = _spec(name)
    split = split or spec.default_split
    corpus = spec.reader(resolve_data_file(name, split, path), name=f"{name}/{split}")
    return dataclasses.replace(corpus, description=f"{spec.title} — {corpus.description}")


def load_treebank(split: str = "dev", name: str = "ud-english-ewt", path: str | os.PathLike | None = None) -> Corpus:
    """A CoNLL-U treebank (UD English EWT by default) as Sentences with trees."""
    if _spec(name).kind != "treebank":
        raise DataNotFoundError(f"{name!r} is not a treebank")
    return load_dataset(name, split, path)


def load_glue(task: str, split: str = "dev", path: str | os.PathLike | None = None) -> Corpus:
    """A GLUE task's train or dev split (task: 'SST-2', 'CoLA', 'MRPC', 'RTE', 'STS-B')."""
    return load_dataset(f"glue/{_glue_task(task)}", split, path)


def load_gap(split: str = "development", path: str | os.PathLike | None = None) -> Corpus:
    """GAP coreference: 'development', 'test' or 'validation'."""
    return load_dataset("gap-coreference", split, path)


def load_sample() -> Corpus:
    """The project's own hand-annotated 40-sentence treebank (data/sample/sample.conllu)."""
    return load_dataset("sample")


def load_sample_pairs() -> Corpus:
    """The project's own 12 sentence pairs with entailment labels (data/sample/pairs.tsv)."""
    return load_dataset("sample-pairs")


def default_treebank(split: str = "dev") -> Corpus:
    """UD English EWT when it can be had (found locally, or downloaded when online), else the sample.

    The description says which one was used, and why the sample when it falls back.
    """
    try:
        return load_treebank(split)
    except DataNotFoundError:
        sample = load_sample()
        return dataclasses.replace(sample, description=(
            f"{sample.description} — used because UD English EWT {split} was not found locally and not "
            f"downloaded (set {settings.DATA_DIR_ENV} or go online)"))
