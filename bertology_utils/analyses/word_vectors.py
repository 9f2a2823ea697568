"""Static word vectors for the probes of :mod:`bertology_utils.analyses.probes`: one fixed vector per word.

Clark et al. (2019, `What Does BERT Look At? <https://arxiv.org/abs/1906.04341>`_, Section 5) gave
their attention-and-words probe GloVe vectors (Pennington et al., 2014,
`GloVe <https://nlp.stanford.edu/projects/glove/>`_). GloVe is on no package
registry this project can reach, so there are two sources:

* :func:`load_glove` reads any GloVe-format text file (``word v1 ... vd`` per line, optionally
  gzipped, optionally with word2vec's ``count dim`` header line) for users who have one,
  e.g. ``glove.840B.300d.txt`` from https://nlp.stanford.edu/projects/glove/.
* :class:`ModelEmbeddingVectors`, the offline default: the model's own input (word-piece)
  embeddings, averaged over the pieces the word is split into. Words are tokenized alone, exactly
  as :func:`bertology_utils.attention.alignment.align` tokenizes them inside a sentence (one word at a time),
  so a word's vector does not depend on its sentence: it is as static as a GloVe vector. It is
  *not* GloVe: it was trained with the model, so it may already carry what the model's attention
  uses; the notebooks say which vectors they used.

Every source is a :class:`WordVectors`: call it with a sequence of words to get a
``(W, dim)`` float32 array. Unknown words get the zero vector and are counted.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import numpy as np

from bertology_utils.core.errors import DataFormatError, DataNotFoundError
from bertology_utils.core.typing import ItemWordVectors

if TYPE_CHECKING:
    from bertology_utils.core.models import LoadedModel

__all__ = ["WordVectors", "StaticVectors", "ModelEmbeddingVectors", "load_glove", "default_word_vectors"]


class WordVectors:
    """A fixed vector per word. Subclasses implement :meth:`_vectors` for words not seen before.

    Vectors are cached per word form, so memory grows with the vocabulary met, never with the
    number of sentences. ``lookups`` and ``unknown`` count word tokens looked up and those that got
    the zero vector (see :attr:`unknown_rate`).

    :param dim: the vectors' dimension.
    """

    #: One line saying where the vectors come from, for notebooks to print.
    description: str = ""

    def __init__(self, dim: int) -> None:
        if dim <= 0:
            raise ValueError(f"word vectors need a positive dimension, not {dim}")
        self.dim = int(dim)
        self._cache: dict[str, np.ndarray] = {}
        self._known: dict[str, bool] = {}
        self.lookups = 0
        self.unknown = 0
        self._lock = threading.Lock()  # probes fitted side by side share one vector table
        self._fingerprint: dict[str, Any] | None = None

    def __call__(self, words: Sequence[str]) -> ItemWordVectors:
        """The vectors of ``words``.

        :param words: a sequence of words (not one string).
        :returns: ``(W, E)`` float32, the zero vector for an unknown word.
        """
        if isinstance(words, str):
            raise TypeError("pass a sequence of words, not one string")
        with self._lock:
            return self._lookup([str(w) for w in words])

    def _lookup(self, words: list[str]) -> ItemWordVectors:
        new = list(dict.fromkeys(w for w in words if w not in self._cache))
        if new:
            vectors, known = self._vectors(new)
            for word, vector, is_known in zip(new, vectors, known):
                self._cache[word] = np.asarray(vector, dtype=np.float32)
                self._known[word] = bool(is_known)
        out = np.zeros((len(words), self.dim), dtype=np.float32)
        for k, word in enumerate(words):
            out[k] = self._cache[word]
            self.unknown += not self._known[word]
        self.lookups += len(words)
        return out

    def _vectors(self, words: list[str]) -> tuple[np.ndarray, list[bool]]:
        """Vectors of new words and whether each was known (unknown ones are zero)."""
        raise NotImplementedError

    def fingerprint(self) -> dict[str, Any] | None:
        """What identifies these vectors, for cache keys (fitted probes).

        :returns: a JSON-able description with a digest of the vectors; None when unknown (nothing is cached).
        """
        if self._fingerprint is None:
            self._fingerprint = self._identity()
        return self._fingerprint

    def _identity(self) -> dict[str, Any] | None:
        return None

    def add_counts(self, lookups: int, unknown: int) -> None:
        """Count lookups made by a copy of these vectors elsewhere (a fit in another process).

        :param lookups: word tokens the copy looked up.
        :param unknown: those that got the zero vector.
        """
        with self._lock:
            self.lookups += int(lookups)
            self.unknown += int(unknown)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["_lock"]  # a lock does not pickle; a copy gets its own
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    @property
    def unknown_rate(self) -> float:
        """Share of the word tokens looked up so far that got the zero vector."""
        return self.unknown / self.lookups if self.lookups else 0.0

    def __repr__(self) -> str:
        return f"{type(self).__name__}(dim={self.dim}, {self.description!r})"


class StaticVectors(WordVectors):
    """A lookup table ``word -> vector``, as read from a GloVe file.

    A word not in the table is looked up lowercased (``lowercase_fallback``), as GloVe's
    uncased files need; still missing, it gets the zero vector.

    :param vocabulary: the table's words, one per row of ``matrix`` (the first of repeated words wins).
    :param matrix: ``(len(vocabulary), dim)`` vectors.
    :param lowercase_fallback: look a missing word up lowercased.
    :param description: where the vectors come from; by default the table's size.
    """

    def __init__(
        self, vocabulary: Sequence[str], matrix: np.ndarray, *, lowercase_fallback: bool = True, description: str = ""
    ) -> None:
        matrix = np.asarray(matrix, dtype=np.float32)
        if matrix.ndim != 2 or matrix.shape[0] != len(vocabulary):
            raise ValueError(
                f"a vocabulary of {len(vocabulary)} words needs a ({len(vocabulary)}, dim) matrix, got {matrix.shape}"
            )
        super().__init__(matrix.shape[1])
        self.matrix = matrix
        self.index: dict[str, int] = {}  # word -> its row
        for row, word in enumerate(vocabulary):
            self.index.setdefault(word, row)  # the first occurrence wins, as in most GloVe readers
        self.lowercase_fallback = lowercase_fallback
        self.description = description or f"a table of {len(self.index)} word vectors of dimension {self.dim}"

    def __len__(self) -> int:
        return len(self.index)

    def _identity(self) -> dict[str, Any]:
        digest = hashlib.sha256()
        for word, row in sorted(self.index.items(), key=lambda item: item[1]):
            digest.update(f"{row}\t{word}\n".encode())
        digest.update(np.ascontiguousarray(self.matrix).tobytes())
        return {"kind": "table", "sha256": digest.hexdigest(), "lowercase_fallback": self.lowercase_fallback}

    def _vectors(self, words: list[str]) -> tuple[np.ndarray, list[bool]]:
        rows = []
        for word in words:
            row = self.index.get(word)
            if row is None and self.lowercase_fallback:
                row = self.index.get(word.lower())
            rows.append(row)
        out = np.zeros((len(words), self.dim), dtype=np.float32)
        known = [r is not None for r in rows]
        found = [k for k, r in enumerate(rows) if r is not None]
        if found:
            out[found] = self.matrix[[r for r in rows if r is not None]]
        return out, known


def _open_text(path: Path) -> TextIO:
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", errors="strict", newline="\n")
    return path.open("r", encoding="utf-8", errors="strict", newline="\n")


def load_glove(
    path: str | os.PathLike,
    *,
    vocabulary: Iterable[str] | None = None,
    max_words: int | None = None,
    lowercase_fallback: bool = True,
) -> StaticVectors:
    """Read a GloVe-format text file (``.txt`` or ``.txt.gz``) into :class:`StaticVectors`.

    Each line is a word and its ``dim`` numbers separated by spaces; ``dim`` is taken from the
    first line. A first line of exactly two integers (word2vec's ``count dim`` header) is skipped.
    Words may contain spaces (``glove.840B`` has a few): the last ``dim`` fields are the vector.

    :param path: the file, e.g. ``glove.840B.300d.txt`` from https://nlp.stanford.edu/projects/glove/.
    :param vocabulary: keep only these words (and their lowercase forms), so a 5 GB file of 2 million
        words can be read for a treebank's 20 thousand.
    :param max_words: stop after that many lines (GloVe files are sorted by frequency).
    :param lowercase_fallback: look a missing word up lowercased (:class:`StaticVectors`).
    :returns: the table of the words kept.
    :raises DataFormatError: naming the line of a malformed row.
    :raises DataNotFoundError: for a missing file.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise DataNotFoundError(f"{path}: no such GloVe file")
    keep: set[str] | None = None
    if vocabulary is not None:
        keep = set()
        for word in vocabulary:
            keep.update((word, word.lower()))
    words: list[str] = []
    rows: list[np.ndarray] = []
    dim = None
    read = 0  # vector lines read, kept or not
    try:
        with _open_text(path) as f:
            for number, line in enumerate(f, 1):
                line = line.rstrip("\n").rstrip("\r")
                if not line.strip():
                    continue
                fields = line.rstrip(" ").split(" ")
                if number == 1 and len(fields) == 2 and all(f.isdigit() for f in fields):
                    continue  # word2vec header
                if max_words is not None and read >= max_words:
                    break
                read += 1
                if dim is None:
                    dim = len(fields) - 1
                    if dim < 1:
                        raise DataFormatError("a line needs a word and at least one number", path, number)
                if len(fields) < dim + 1:
                    raise DataFormatError(
                        f"expected a word and {dim} numbers, found {len(fields)} fields", path, number
                    )
                word = " ".join(fields[: len(fields) - dim])
                if keep is not None and word not in keep:
                    continue
                try:
                    rows.append(np.asarray(fields[len(fields) - dim :], dtype=np.float32))
                except ValueError:
                    raise DataFormatError(f"a vector value of {word!r} is not a number", path, number) from None
                words.append(word)
    except UnicodeDecodeError as error:
        raise DataFormatError(f"not valid UTF-8 ({error.reason})", path) from None
    if dim is None:
        raise DataFormatError("no vectors (empty file?)", path)
    matrix = np.stack(rows) if rows else np.zeros((0, dim), dtype=np.float32)
    description = (
        f"GloVe-format vectors from {path.name} ({len(words)} words kept, dimension {dim}"
        + (", restricted to the words asked for" if keep is not None else "")
        + ")"
    )
    return StaticVectors(words, matrix, lowercase_fallback=lowercase_fallback, description=description)


class ModelEmbeddingVectors(WordVectors):
    """The model's input embeddings averaged over the word pieces of each word: the offline default.

    Each word is tokenized on its own with :func:`~bertology_utils.attention.alignment.align` (so
    exactly as in the attention maps, including the unknown token standing in for a word the tokenizer
    drops); special tokens are left out. Only the word-piece embedding table is used, not position or
    segment embeddings, so a word has one vector wherever it occurs. Every word is known (the
    tokenizer can split anything).

    :param loaded: the model and its tokenizer.
    :param batch_size: words tokenized at a time.
    """

    def __init__(self, loaded: LoadedModel, batch_size: int = 4096) -> None:
        import torch

        model: Any = loaded.model  # a PreTrainedModel: get_input_embeddings is unknown to nn.Module's typing
        table = model.get_input_embeddings().weight.detach().to("cpu", dtype=torch.float32)
        super().__init__(table.shape[1])
        self.table = table.numpy()
        self.tokenizer = loaded.tokenizer
        self.batch_size = batch_size
        self.tokenizer_sha256 = loaded.tokenizer_sha256  # not the model itself: the vectors pickle without it
        self.description = (
            f"input embeddings of {loaded.name} averaged over word pieces (dimension {self.dim}; no GloVe file given)"
        )

    def _identity(self) -> dict[str, Any]:
        return {
            "kind": "model input embeddings",
            "sha256": hashlib.sha256(np.ascontiguousarray(self.table).tobytes()).hexdigest(),
            "tokenizer_sha256": self.tokenizer_sha256,
        }

    def _vectors(self, words: list[str]) -> tuple[np.ndarray, list[bool]]:
        from bertology_utils.attention.alignment import WORD, align

        out = np.zeros((len(words), self.dim), dtype=np.float32)
        for lo in range(0, len(words), self.batch_size):
            for k, item in enumerate(align(self.tokenizer, [[w] for w in words[lo : lo + self.batch_size]])):
                word_index = int(np.flatnonzero(item.word_kinds == WORD)[0])
                pieces = item.input_ids[item.token_to_word == word_index]
                out[lo + k] = self.table[pieces].mean(0)
        return out, [True] * len(words)


def default_word_vectors(
    loaded: LoadedModel, glove_path: str | os.PathLike | None = None, vocabulary: Iterable[str] | None = None
) -> WordVectors:
    """GloVe-format vectors from ``glove_path`` when given, else :class:`ModelEmbeddingVectors` of ``loaded``.

    :param loaded: the model whose input embeddings serve without a GloVe file.
    :param glove_path: a GloVe-format file (:func:`load_glove`).
    :param vocabulary: with ``glove_path``, keep only these words.
    :returns: the word vectors.
    """
    if glove_path is not None:
        return load_glove(glove_path, vocabulary=vocabulary)
    return ModelEmbeddingVectors(loaded)
