"""One way to name the data a notebook reads: a registered data set, or the user's own files.

Every notebook parameter that names data takes a *source*, resolved here:

* ``None``: the notebook's default (UD English EWT, else the project's sample treebank; GAP; ...);
* a registered name (:data:`DATASETS`, e.g. ``"ud-english-ewt"``, ``"sample"``, ``"glue/MRPC"``;
  GLUE tasks also by their own name, ``"MRPC"``);
* a path: a CoNLL-U file (``.conllu``), a text file of one sentence per line (``.txt``), a pair
  TSV (``id, sentence1, sentence2, label``), a GAP TSV, or a folder of a treebank's splits named as
  UD names them (``xx_yyy-ud-train.conllu``...) or plainly (``train.conllu``...);
* a Hugging Face data set, ``hf:WHERE?KEY=VALUE&...``: a folder written by ``save_to_disk``, a local
  folder ``datasets.load_dataset`` reads, or a Hub name when online (``hf:glue/sst2``), with options
  picking the split and naming columns (:mod:`bertology_utils.data._hf`; needs the ``hf`` extra).

:func:`resolve_corpus` gives one corpus, :func:`treebank_splits` a treebank's train/dev/test,
:func:`resolve_task` a classification task (a GLUE name, or a folder of ``train.tsv`` and
``dev.tsv`` with named text and label columns). Missing registered data raises
:class:`DataNotFoundError` whose ``short()`` is the one line a notebook prints when it skips.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from bertology_utils.core.errors import DataFormatError, DataNotFoundError
from bertology_utils.data._hf import hf_corpus, hf_one_split, hf_task_splits, is_hf
from bertology_utils.data._items import Corpus, Sentence, SentencePair
from bertology_utils.data._readers import (
    GLUE_TASKS,
    glue_task_name,
    read_classification_tsv,
    read_conllu,
    read_gap_tsv,
    read_pairs_tsv,
    read_text_lines,
)
from bertology_utils.data._sources import DATASETS, default_treebank, load_dataset, load_gap, load_sample

__all__ = ["KINDS", "TREEBANK_SPLITS", "Task", "resolve_corpus", "treebank_splits", "resolve_task"]

#: What a notebook may ask :func:`resolve_corpus` for.
KINDS = ("treebank", "sentences", "pairs", "gap")
TREEBANK_SPLITS = ("train", "dev", "test")
_CONLLU = (".conllu", ".conll")
# Registered data-set kinds each requested kind accepts.
_REGISTERED = {"treebank": {"treebank"}, "sentences": {"treebank", "glue"}, "pairs": {"glue", "pairs"}, "gap": {"gap"}}


def _registered(source: str) -> str | None:
    """The registry name ``source`` stands for (GLUE tasks also by their bare name), or None."""
    if source in DATASETS:
        return source
    try:
        return f"glue/{glue_task_name(source)}"
    except DataNotFoundError:
        return None


def _unknown(source: object, kind: str) -> DataNotFoundError:
    names = ", ".join(n for n, spec in DATASETS.items() if spec.kind in _REGISTERED[kind])
    return DataNotFoundError(
        f"{source!r} is neither a registered data set of kind {kind!r} ({names}) nor an existing file or folder",
        what=str(source),
    )


def _split_file(folder: Path, split: str) -> Path:
    """The CoNLL-U file of ``split`` in a treebank folder (UD's ``*-ud-<split>.conllu`` or ``<split>.conllu``)."""
    found = sorted(p for ext in _CONLLU for p in folder.glob(f"*{split}{ext}") if p.stem.split("-")[-1] == split)
    if len(found) == 1:
        return found[0]
    what = "several files" if found else "no file"
    raise DataNotFoundError(
        f"{folder}: {what} for the {split} split (expected one *-ud-{split}.conllu or {split}.conllu)",
        what=f"{folder}/{split}",
    )


def _read_file(path: Path, kind: str) -> Corpus:
    suffix = path.suffix.lower()
    if suffix in _CONLLU:
        return read_conllu(path)
    if kind == "gap":
        return read_gap_tsv(path)
    if suffix == ".txt" and kind == "sentences":
        return read_text_lines(path)
    if suffix == ".tsv" and kind == "pairs":
        return read_pairs_tsv(path)
    expected = {"treebank": "a CoNLL-U file", "sentences": "a CoNLL-U or .txt file", "pairs": "a pair .tsv file"}
    raise DataFormatError(f"cannot read it as {kind}: expected {expected[kind]}", path)


def _check_kind(corpus: Corpus, kind: str, source: object) -> Corpus:
    if kind == "treebank" and not any(isinstance(s, Sentence) and s.has_syntax for s in corpus):
        raise DataFormatError(f"{source}: a treebank is needed, and no sentence has a dependency tree")
    if kind == "pairs" and not all(isinstance(item, SentencePair) for item in corpus):
        raise DataFormatError(f"{source}: sentence pairs are needed, and it holds single sentences")
    if kind == "sentences" and not all(isinstance(item, Sentence) for item in corpus):
        raise DataFormatError(f"{source}: single sentences are needed, and it holds pairs")
    return corpus


def resolve_corpus(source: str | os.PathLike | None = None, *, kind: str = "treebank", split: str = "dev") -> Corpus:
    """The corpus a data parameter names (see the module docstring), checked to be of ``kind``.

    ``kind`` is ``"treebank"`` (sentences with trees), ``"sentences"``, ``"pairs"`` or ``"gap"``;
    ``split`` picks the registered or Hugging Face data set's split or the treebank folder's file
    (data sets with one split, like the sample, ignore it; ``dev`` and ``validation`` stand for each other). ``None`` is the default treebank or GAP; pairs have no
    default. Raises DataNotFoundError (missing or unknown data) or DataFormatError (wrong kind).
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
    if source is None:
        if kind in ("treebank", "sentences"):
            return default_treebank(split)
        if kind == "gap":
            return load_gap()
        raise DataNotFoundError("pairs need a source: a registered pair task (e.g. 'glue/MRPC') or a pair .tsv file")
    if is_hf(source):
        return _check_kind(hf_corpus(str(source), kind, split), kind, source)
    name = _registered(str(source)) if isinstance(source, str) else None
    if name is not None:
        spec = DATASETS[name]
        if spec.kind not in _REGISTERED[kind]:
            raise _unknown(source, kind)
        corpus = load_dataset(name, split if split in spec.files else spec.default_split)
        return _check_kind(corpus, kind, source)
    path = Path(source).expanduser()
    if path.is_dir() and kind in ("treebank", "sentences"):
        path = _split_file(path, split)
    if not path.is_file():
        raise _unknown(source, kind)
    return _check_kind(_read_file(path, kind), kind, path)


def treebank_splits(
    n_train: int | None = None,
    n_dev: int | None = None,
    n_test: int | None = None,
    source: str | os.PathLike | Mapping[str, str | os.PathLike] | None = None,
) -> tuple[dict[str, Corpus], str]:
    """A treebank's train/dev/test, cut to the first ``n_*`` sentences when given, and one line saying what it is.

    ``source``: None (UD English EWT, else the project's sample split in order 60/20/20), a
    registered treebank, a folder of the three split files, a mapping ``{"train": path, "dev":
    path, "test": path}``, a Hugging Face data set (its train, dev or validation, and test splits), or
    one CoNLL-U file or split (``hf:...?split=train``, or a data set of one split), split in order
    60/20/20 as the sample is.
    """
    if isinstance(source, Mapping):
        if set(source) != set(TREEBANK_SPLITS):
            raise DataFormatError(f"treebank splits need exactly the keys {TREEBANK_SPLITS}, got {sorted(source)}")
        splits = {split: resolve_corpus(source[split], split=split) for split in TREEBANK_SPLITS}
        return _cut(splits, n_train, n_dev, n_test), "own treebank: " + ", ".join(
            f"{split} {splits[split].path}" for split in TREEBANK_SPLITS
        )
    if source is None:
        try:
            splits = {split: resolve_corpus("ud-english-ewt", split=split) for split in TREEBANK_SPLITS}
            note = "UD English EWT: train for training, dev for early stopping, test for the scores"
            return _cut(splits, n_train, n_dev, n_test), note
        except DataNotFoundError as missing:
            whole = load_sample()
            why = f"{missing.short()}; so the project's sample treebank"
    elif _one_file(source):
        whole = resolve_corpus(source)
        why = f"{whole.name} is one split" if is_hf(source) else f"{whole.name} has one file"
    else:
        splits = {split: resolve_corpus(source, split=split) for split in TREEBANK_SPLITS}
        note = f"{source}: train for training, dev for early stopping, test for the scores"
        return _cut(splits, n_train, n_dev, n_test), note
    k = len(whole)
    a, b = round(0.6 * k), round(0.8 * k)
    splits = {"train": whole[:a], "dev": whole[a:b], "test": whole[b:]}
    note = f"{why}, of {k} sentences, is split in order into {a} train, {b - a} dev and {k - b} test sentences" + (
        ": numbers on so few sentences say nothing about the model" if k < 1000 else ""
    )
    return _cut(splits, n_train, n_dev, n_test), note


def _one_file(source: str | os.PathLike) -> bool:
    """A registered treebank without a train split (the sample), a single file, or one split of a Hugging Face data set."""
    if is_hf(source):
        return hf_one_split(source)
    name = _registered(source) if isinstance(source, str) else None
    return "train" not in DATASETS[name].files if name is not None else Path(source).is_file()


def _cut(splits: dict[str, Corpus], n_train: int | None, n_dev: int | None, n_test: int | None) -> dict[str, Corpus]:
    for split, n in (("train", n_train), ("dev", n_dev), ("test", n_test)):
        if n is not None:
            splits[split] = splits[split][:n]
    return splits


@dataclass(frozen=True)
class Task:
    """A classification task: labelled train and dev corpora.

    ``glue`` is True for a registered GLUE task (the fine-tuning layer knows its labels and
    metric); a user's task has ``label_names``, its classes in id order (sorted, numerically when
    every label is a number).
    """

    name: str
    train: Corpus
    dev: Corpus
    label_names: tuple[str, ...] = ()
    glue: bool = False

    @property
    def description(self) -> str:
        kind = "GLUE task" if self.glue else f"{len(self.label_names)}-class task"
        return f"{self.name} ({kind}): {len(self.train)} train and {len(self.dev)} dev examples"


def _class_order(labels: Iterable[str]) -> tuple[str, ...]:
    classes = set(labels)
    try:
        return tuple(sorted(classes, key=float))
    except ValueError:
        return tuple(sorted(classes))


def resolve_task(source: str | os.PathLike | Mapping) -> Task:
    """The classification task a parameter names: a GLUE task name, a user's task folder, or a Hugging Face data set.

    A folder holds ``train.tsv`` and ``dev.tsv`` with a header; by default the text is the column
    ``sentence`` (else ``text``), pairs are ``sentence1``/``sentence2``, and the label is ``label``.
    Other columns are named with a mapping: ``{"path": folder, "text": "review", "label":
    "stars", "text_pair": None, "name": "reviews"}``. A Hugging Face data set
    (``hf:glue/sst2``, ``hf:FOLDER?label=stars``) has the same columns, in its ``train`` and
    ``validation`` (else ``dev``) splits, or those its ``train=`` and ``dev=`` options name; the
    mapping may give ``"path": "hf:..."`` and those options as keys. Every dev label must occur in
    train, and train needs two classes.
    """
    if is_hf(source):
        return _user_task(*hf_task_splits(source))
    if not isinstance(source, Mapping) and not Path(source).expanduser().exists():
        try:
            name = glue_task_name(str(source))
        except DataNotFoundError:
            raise DataNotFoundError(
                f"{source!r} is neither a GLUE task ({', '.join(GLUE_TASKS)}) nor an existing task folder",
                what=str(source),
            ) from None
        return Task(name, load_dataset(f"glue/{name}", "train"), load_dataset(f"glue/{name}", "dev"), glue=True)
    options: dict = dict(source) if isinstance(source, Mapping) else {"path": source}
    unknown = set(options) - {"path", "text", "text_pair", "label", "name"}
    if unknown or "path" not in options:
        raise DataFormatError(
            f"a task is a name or a folder, or a mapping with 'path' and optionally text, text_pair, label, name; "
            f"got {source!r}"
        )
    given = options["path"]
    folder = Path(given).expanduser()
    if not folder.is_dir():
        raise DataNotFoundError(
            f"{folder}: no such task folder (it should hold train.tsv and dev.tsv)", what=str(folder)
        )
    name = str(options.get("name") or folder.name)
    splits = {}
    for split in ("train", "dev"):
        path = folder / f"{split}.tsv"
        if not path.is_file():
            raise DataNotFoundError(f"{path}: no such file (a task folder holds train.tsv and dev.tsv)", what=str(path))
        splits[split] = read_classification_tsv(
            path, options.get("text"), options.get("label", "label"), options.get("text_pair"), f"{name}/{split}"
        )
    return _user_task(name, splits["train"], splits["dev"], folder / "train.tsv", folder / "dev.tsv")


def _user_task(
    name: str, train: Corpus, dev: Corpus, train_where: str | os.PathLike | None, dev_where: str | os.PathLike | None
) -> Task:
    """A user's task, checked: two classes in train at least, and every dev label among them.

    ``train_where`` and ``dev_where`` name the two splits in the errors (a file, or a data set's split).
    """
    classes = _class_order(train.labels or ())
    if len(classes) < 2:
        raise DataFormatError(f"one class only ({classes[0]!r}): nothing to classify", train_where)
    unseen = sorted(set(dev.labels or ()) - set(classes))
    if unseen:
        raise DataFormatError(f"labels not in {Path(str(train_where)).name}: {unseen}", dev_where)
    return Task(name, train, dev, classes)
