"""Readers for CoNLL-U treebanks, GLUE and pair TSV files and GAP: validate a file, name its bad line."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import conllu
from conllu.exceptions import ParseException

from bertology_utils.core.errors import DataFormatError, DataNotFoundError
from bertology_utils.data._items import Corpus, GapExample, Sentence, SentencePair, words_of

__all__ = [
    "TableLayout",
    "GLUE_TASKS",
    "glue_task_name",
    "file_sha256",
    "read_text_lines",
    "read_conllu",
    "read_glue_tsv",
    "read_pairs_tsv",
    "read_classification_tsv",
    "read_gap_tsv",
    # the checks every reader shares, data/_hf.py's too
    "GAP_HEADER",
    "parse_rows",
    "check_tree",
    "classification_layout",
    "require_columns",
    "gap_row",
]


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
    """The file's lines (UTF-8 without NUL bytes, BOM dropped, LF or CRLF) and its sha256."""
    try:
        key = _hash_key(path)
        data = path.read_bytes()
    except FileNotFoundError:
        raise DataNotFoundError(f"{path}: no such file") from None
    _HASHES[key] = sha = hashlib.sha256(data).hexdigest()
    nul = data.find(b"\0")
    if nul >= 0:  # binary or UTF-16 data: read as text, its NULs would be kept in words or dropped silently
        raise DataFormatError(
            "NUL byte: not a UTF-8 text file (binary, or UTF-16?)", path, data.count(b"\n", 0, nul) + 1
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        # error.start counts from after a BOM, in error.object
        line = error.object.count(b"\n", 0, error.start) + 1
        raise DataFormatError(f"not valid UTF-8 ({error.reason})", path, line) from None
    # split("\n"), not splitlines(): texts may contain U+2028 or \x1c, which are not line ends here
    lines = text.replace("\r\n", "\n").split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines, sha


# --------------------------------------------------------------------------- CoNLL-U


def _blocks(lines: list[str]) -> Iterator[list[tuple[int, str]]]:
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
            return walk[walk.index(node) :]
        for visited in walk:
            state[visited] = 2
    return None


def check_tree(heads: list, lines: list[int], path: str | os.PathLike | None, first_line: int) -> tuple[int, ...]:
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
        raise DataFormatError(
            f"more than one root: words {roots[0] + 1} and {roots[1] + 1} both have HEAD 0", path, lines[roots[1]]
        )
    cycle = _find_cycle(heads)
    if cycle:
        chain = " -> ".join(map(str, cycle + cycle[:1]))
        raise DataFormatError(
            f"cycle in HEADs ({chain}): these words never reach the root", path, lines[min(cycle) - 1]
        )
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
            raise DataFormatError(f"word ID {token['id']} where {expected} was expected (IDs must run 1..n)", path, n)
    lines = [n for n, _ in words]
    heads = [token["head"] for _, token in words]
    relations = tuple(token["deprel"] for _, token in words)
    upos = tuple(token["upos"] for _, token in words)
    return Sentence(
        id=tokens.metadata.get("sent_id") or f"{path.name}:{number}",
        words=tuple(token["form"] for _, token in words),
        heads=None if all(h is None for h in heads) else check_tree(heads, lines, path, first_line),
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
    items = tuple(
        Sentence(f"{name or path.stem}:{n}", tuple(words_of(line)), text=line)
        for n, line in enumerate(lines, 1)
        if words_of(line)
    )
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


def _read_table(
    path: Path,
    header: tuple[str, ...] | None,
    columns: int,
    row: Callable[[list[str], int], tuple[object, object]],
    read: tuple[list[str], str] | None = None,
) -> tuple[list, list, str]:
    """Rows of a tab-separated file without quoting, each turned into (item, label) by ``row``.

    ``row(fields, index)`` raises ValueError for a bad value; that becomes a DataFormatError
    naming the line. ``read`` is the file's lines and sha256 when the caller has read them.
    Returns the items, labels and the file's sha256.
    """
    lines, sha = read or _read_lines(path)
    first = 1
    if header is not None:
        found = tuple(lines[0].split("\t")) if lines else ()
        if found != header:
            raise DataFormatError(f"expected the header {'|'.join(header)!r}, found {'|'.join(found)!r}", path, 1)
        first = 2

    def rows() -> Iterator[tuple[int, list[str]]]:
        for number, line in enumerate(lines[first - 1 :], first):
            if not line:
                continue
            fields = line.split("\t")
            if len(fields) != columns:
                raise DataFormatError(f"expected {columns} tab-separated fields, found {len(fields)}", path, number)
            yield number, fields

    items, labels = parse_rows(rows(), row, path)
    return items, labels, sha


def parse_rows(
    rows: Iterable[tuple[int, list[str]]],
    row: Callable[[list[str], int], tuple[object, object]],
    where: str | os.PathLike | None,
) -> tuple[list, list]:
    """(items, labels) of (number, fields) rows, each turned into (item, label) by ``row``.

    The checks every table shares, a TSV file's or a Hugging Face data set's: ``row`` raises
    ValueError for a bad value, which becomes a DataFormatError naming ``where`` and the row's number;
    no rows at all is an error too.
    """
    items: list = []
    labels: list = []
    for number, fields in rows:
        try:
            item, label = row(fields, len(items))
        except ValueError as error:
            raise DataFormatError(str(error), where, number) from None
        items.append(item)
        labels.append(label)
    if not items:
        raise DataFormatError("no data rows", where)
    return items, labels


def _binary(value: str) -> int:
    if value not in ("0", "1"):
        raise ValueError(f"label {value!r} is not 0 or 1")
    return int(value)


def _entailment(value: str) -> str:
    if value not in ("entailment", "not_entailment"):
        raise ValueError(f"label {value!r} is not 'entailment' or 'not_entailment'")
    return value


def _score(value: str) -> float:
    try:
        score = float(value)
    except ValueError:
        raise ValueError(f"score {value!r} is not a number") from None
    if not 0.0 <= score <= 5.0:
        raise ValueError(f"score {score} is outside 0..5")
    return score


@dataclass(frozen=True)
class TableLayout:
    """Where a sentence (or pair) task keeps its fields."""

    header: tuple[str, ...] | None
    columns: int
    texts: tuple[int, ...]  # one column: single sentences; two: pairs
    label: int | None  # None: unlabelled
    parse_label: Callable[[str], int | str | float]
    ids: tuple[int, ...] = ()  # joined with "-"; empty: the row index

    def row(self, fields: list[str], index: int) -> tuple[Sentence | SentencePair, object]:
        label = None if self.label is None else self.parse_label(fields[self.label])
        item_id = "-".join(fields[i] for i in self.ids) or str(index)
        texts = [fields[i].strip() for i in self.texts]  # SST-2 sentences end with a space
        words = [tuple(words_of(text)) for text in texts]
        if not all(words):
            raise ValueError("a sentence field has no words")
        if len(texts) == 1:
            return Sentence(item_id, words[0], text=texts[0]), label
        return SentencePair(item_id, words[0], words[1], label), label


_GLUE_LAYOUTS = {
    "SST-2": TableLayout(("sentence", "label"), 2, texts=(0,), label=1, parse_label=_binary),
    # CoLA: no header; source, label, original judgement mark, sentence.
    "CoLA": TableLayout(None, 4, texts=(3,), label=1, parse_label=_binary),
    "MRPC": TableLayout(
        ("Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"),
        5,
        texts=(3, 4),
        label=0,
        parse_label=_binary,
        ids=(1, 2),
    ),
    "RTE": TableLayout(
        ("index", "sentence1", "sentence2", "label"), 4, texts=(1, 2), label=3, parse_label=_entailment, ids=(0,)
    ),
    "STS-B": TableLayout(
        ("index", "genre", "filename", "year", "old_index", "source1", "source2", "sentence1", "sentence2", "score"),
        10,
        texts=(7, 8),
        label=9,
        parse_label=_score,
        ids=(0,),
    ),
}
_PAIRS_LAYOUT = TableLayout(
    ("id", "sentence1", "sentence2", "label"), 4, texts=(1, 2), label=3, parse_label=_entailment, ids=(0,)
)

#: GLUE tasks this module reads (train and dev files, in the GLUE download script's format).
GLUE_TASKS = tuple(_GLUE_LAYOUTS)


def glue_task_name(task: str) -> str:
    """Canonical GLUE task name: accepts 'SST-2', 'sst2', 'glue/SST-2'..."""
    key = task.lower().removeprefix("glue/").replace("-", "")
    for name in GLUE_TASKS:
        if name.lower().replace("-", "") == key:
            return name
    raise DataNotFoundError(f"unknown GLUE task {task!r}; known: {', '.join(GLUE_TASKS)}")


def _read_layout(
    path: str | os.PathLike, layout: TableLayout, name: str | None, read: tuple[list[str], str] | None = None
) -> Corpus:
    path = Path(path)
    items, labels, sha = _read_table(path, layout.header, layout.columns, layout.row, read)
    return Corpus(tuple(items), name or path.stem, path, sha, labels=tuple(labels))


def read_glue_tsv(path: str | os.PathLike, task: str, name: str | None = None) -> Corpus:
    """Read a GLUE train/dev TSV: SST-2 and CoLA give :class:`Sentence`, MRPC/RTE/STS-B :class:`SentencePair`.

    Files are read without quoting (MRPC has bare ``"``); labels are ints for 0/1 tasks,
    strings for RTE, float scores for STS-B, and are also in ``Corpus.labels``.
    """
    task = glue_task_name(task)
    return _read_layout(path, _GLUE_LAYOUTS[task], name or f"glue/{task}/{Path(path).stem}")


def read_pairs_tsv(path: str | os.PathLike, name: str | None = None) -> Corpus:
    """Read the project's sentence-pair TSV (``id, sentence1, sentence2, label``; RTE's labels)."""
    return _read_layout(path, _PAIRS_LAYOUT, name)


def _label(value: str) -> str:
    if not value.strip():
        raise ValueError("empty label")
    return value.strip()


def read_classification_tsv(
    path: str | os.PathLike,
    text: str | None = None,
    label: str = "label",
    text_pair: str | None = None,
    name: str | None = None,
) -> Corpus:
    """Read a user's classification TSV: a header naming the columns, then one example per row.

    ``text`` (and ``text_pair`` for sentence pairs) and ``label`` name columns of the header; other
    columns are ignored. Without ``text``: ``sentence1``/``sentence2`` pairs when the header has
    both, else ``sentence``, else ``text``. Labels are kept as stripped strings (class names); the
    fine-tuning layer numbers them. Fields are not quoted, as in GLUE's files.
    """
    path = Path(path)
    read = _read_lines(path)
    header = tuple(read[0][0].split("\t")) if read[0] else ()
    return _read_layout(path, classification_layout(header, text, label, text_pair, path, 1), name, read)


def classification_layout(
    header: tuple[str, ...],
    text: str | None,
    label: str | None,
    text_pair: str | None,
    where: str | os.PathLike | None,
    line: int | None = None,
) -> TableLayout:
    """The layout of a table of texts with these columns (see :func:`read_classification_tsv`); ``label`` None: unlabelled.

    Raises a DataFormatError naming ``where`` (and ``line``) when a named column is missing.
    """
    if text is None:
        if text_pair is None and {"sentence1", "sentence2"} <= set(header):
            text, text_pair = "sentence1", "sentence2"
        else:
            text = "sentence" if "sentence" in header else "text"
    wanted = [text] + ([label] if label is not None else []) + ([text_pair] if text_pair else [])
    require_columns(header, wanted, "the text and label", where, line)
    texts = (header.index(text),) + ((header.index(text_pair),) if text_pair else ())
    return TableLayout(header, len(header), texts, None if label is None else header.index(label), _label)


def require_columns(
    header: Sequence[str], wanted: Sequence[str], what: str, where: str | os.PathLike | None, line: int | None = None
) -> None:
    missing = [column for column in wanted if column not in header]
    if missing:
        raise DataFormatError(
            f"no column {', '.join(map(repr, missing))} in the header {'|'.join(header)!r} (name {what} columns)",
            where,
            line,
        )


GAP_HEADER = ("ID", "Text", "Pronoun", "Pronoun-offset", "A", "A-offset", "A-coref", "B", "B-offset", "B-coref", "URL")


def _offset(value: str, column: str) -> int:
    if not value.isdigit():  # also rejects negative offsets, which would index from the end
        raise ValueError(f"{column} {value!r} is not a non-negative integer")
    return int(value)


def _coref(value: str, column: str) -> bool:
    if value not in ("TRUE", "FALSE"):
        raise ValueError(f"{column} {value!r} is not TRUE or FALSE")
    return value == "TRUE"


def gap_row(fields: list[str], index: int) -> tuple[GapExample, None]:
    id_, text, pronoun, p_off, a, a_off, a_coref, b, b_off, b_coref, url = fields
    example = GapExample(
        id_,
        text,
        pronoun,
        _offset(p_off, "Pronoun-offset"),
        a,
        _offset(a_off, "A-offset"),
        _coref(a_coref, "A-coref"),
        b,
        _offset(b_off, "B-offset"),
        _coref(b_coref, "B-coref"),
        url,
    )
    for column, span, start in (
        ("Pronoun", pronoun, example.pronoun_offset),
        ("A", a, example.a_offset),
        ("B", b, example.b_offset),
    ):
        found = text[start : start + len(span)]
        if found != span:
            raise ValueError(f"{column} {span!r} is not in Text at offset {start} (found {found!r})")
    return example, None


def read_gap_tsv(path: str | os.PathLike, name: str | None = None) -> Corpus:
    """Read a GAP TSV (header + 11 columns) into :class:`GapExample`, checking every offset."""
    path = Path(path)
    items, _, sha = _read_table(path, GAP_HEADER, len(GAP_HEADER), gap_row)
    return Corpus(tuple(items), name or f"gap/{path.stem}", path, sha)
