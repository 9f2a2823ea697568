"""Hugging Face data sets as data sources: ``hf:`` parameters, read with the optional ``datasets`` package.

A source is ``hf:WHERE`` with options as a query string, ``hf:WHERE?split=test&text=review``:

* ``WHERE`` is a folder written by ``Dataset.save_to_disk`` or ``DatasetDict.save_to_disk``; or
  another local folder that ``datasets.load_dataset`` reads, e.g. data files named by split
  (``train.csv``, ``validation.csv``; a dataset script only where the installed ``datasets``
  still runs scripts, before 4.0); or, online only, a data set on the Hub:
  ``NAME``, ``OWNER/NAME``, ``NAME/CONFIG`` or ``OWNER/NAME/CONFIG``. A two-part name is the
  repository ``OWNER/NAME`` when the Hub has it, else ``NAME`` with its configuration ``CONFIG``
  (so ``hf:glue/sst2`` is GLUE's SST-2); ``config=`` names the configuration outright.
* The options (:data:`OPTIONS`) pick the split and map columns. A task may also be the mapping
  task folders take, ``{"path": "hf:WHERE", "label": "stars", ...}``, with the same keys.

Rows are checked as the TSV and CoNLL-U readers check lines, with the same one-line errors,
naming ``hf:WHERE[split]`` and the row (counted from 0, as ``dataset[split][i]``).
"""

from __future__ import annotations

import dataclasses
import re
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeGuard

from bertology_utils.core import settings
from bertology_utils.core.errors import DataFormatError, DataNotFoundError
from bertology_utils.data._items import Corpus, Sentence
from bertology_utils.data._readers import (
    GAP_HEADER,
    TableLayout,
    check_tree,
    classification_layout,
    gap_row,
    parse_rows,
    require_columns,
)
from bertology_utils.data._sources import no_split

if TYPE_CHECKING:
    from datasets import Dataset, DatasetDict

__all__ = ["PREFIX", "OPTIONS", "HfSource", "is_hf", "parse_hf", "hf_corpus", "hf_one_split", "hf_task_splits"]

PREFIX = "hf:"
#: Every option of an ``hf:`` source, and what it sets.
OPTIONS = {
    "split": "the split a corpus is read from (default: the one the notebook asks for)",
    "train": "a task's training split (default: train)",
    "dev": "a task's evaluation split (default: validation, else dev)",
    "config": "the configuration of a Hub data set",
    "name": "the name results use (default: the folder's name, or the Hub name and configuration)",
    "text": "the text column (default: sentence1 and sentence2 as a pair, else sentence, else text)",
    "text_pair": "the second text of a pair",
    "label": "the label column (default: label; a task needs one)",
    "tokens": "a treebank's words, a list per row (default: tokens, as in universal_dependencies)",
    "head": "a treebank's heads, a list per row, 0 for the root (default: head)",
    "deprel": "a treebank's relations, a list per row (default: deprel)",
    "upos": "a treebank's part-of-speech tags, a list per row (default: upos, when present)",
    "id": "the column of item ids (default: sent_id, idx or id, when present; else the row)",
}
# The same split under the two names in use (UD and GLUE files say dev, Hugging Face says validation).
_ALIASES = {"dev": "validation", "validation": "dev"}
# A Hub name: one to three parts of letters, digits, '-', '_' and '.'.
_HUB_NAME = re.compile(r"[\w.-]+(/[\w.-]+){0,2}")
_HOW_TO_INSTALL = "pip install 'bertology-utils[hf]' (the datasets package)"


@dataclass(frozen=True)
class HfSource:
    """A parsed ``hf:`` source: where the data set is, and its options."""

    where: str
    options: Mapping[str, str]

    @property
    def label(self) -> str:
        return PREFIX + self.where

    @property
    def name(self) -> str:
        if "name" in self.options:
            return self.options["name"]
        path = Path(self.where).expanduser()
        if path.exists():
            return path.resolve().name
        return "-".join(part for part in (*self.where.split("/")[-2:], self.options.get("config")) if part)

    def at(self, split: str) -> str:
        """How errors name a split of the data set."""
        return f"{self.label}[{split}]"


def is_hf(source: object) -> TypeGuard[str | Mapping]:
    """Whether a data parameter names a Hugging Face data set (an ``hf:`` string, or a mapping with one as path)."""
    if isinstance(source, Mapping):
        source = source.get("path")
    return isinstance(source, str) and source.startswith(PREFIX)


def parse_hf(source: str | Mapping) -> HfSource:
    """The :class:`HfSource` of ``hf:WHERE?KEY=VALUE&...``, or of a mapping with it as ``path`` and more options."""
    given = dict(source) if isinstance(source, Mapping) else {"path": source}
    where, _, query = str(given.pop("path")).removeprefix(PREFIX).partition("?")
    try:
        options = dict(urllib.parse.parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query)))
    except ValueError:
        raise DataFormatError(f"{source!r}: options are KEY=VALUE joined by '&' after '?'") from None
    options.update({key: str(value) for key, value in given.items() if value is not None})
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown or not where:
        raise DataFormatError(
            f"{source!r}: a Hugging Face source is hf:FOLDER or hf:HUB_NAME, with the options {', '.join(OPTIONS)}"
            + (f"; unknown: {', '.join(unknown)}" if unknown else "")
        )
    return HfSource(where, options)


# --------------------------------------------------------------------------- loading


def _datasets() -> ModuleType:
    """The ``datasets`` package, imported on first use: only ``hf:`` sources need it."""
    try:
        import datasets
    except ImportError:
        raise DataNotFoundError(
            f"reading Hugging Face data sets needs the datasets package: {_HOW_TO_INSTALL}",
            what="the datasets package",
            how_to_get=_HOW_TO_INSTALL,
        ) from None
    return datasets


def _load(source: HfSource) -> Dataset | DatasetDict:
    """The Dataset or DatasetDict a source names (local folders as they are; the Hub only online)."""
    datasets = _datasets()
    cache = str(settings.cache_dir() / "data" / "hf")
    folder = Path(source.where).expanduser()
    if folder.exists():
        try:
            if (folder / "dataset_dict.json").is_file() or (folder / "state.json").is_file():
                return datasets.load_from_disk(str(folder))
            return datasets.load_dataset(str(folder), source.options.get("config"), cache_dir=cache)
        except (OSError, ValueError, TypeError, RuntimeError) as error:  # RuntimeError: a script datasets won't run
            raise DataFormatError(
                f"not readable as a Hugging Face data set: {_one_line(error)}", source.label
            ) from None
    how = f"go online, or (online) save it with save_to_disk and pass {PREFIX}<that folder>"
    if not _HUB_NAME.fullmatch(source.where):
        raise DataNotFoundError(f"{source.label}: no such folder", what=source.label)
    if settings.is_offline():
        raise DataNotFoundError(
            f"{source.label} is a data set on the Hugging Face Hub, which needs the network, and this session is "
            f"offline (${settings.OFFLINE_ENV}, HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE is set): {how}",
            what=source.label,
            how_to_get=how,
        )
    tried = []
    for path, config in _hub_candidates(source):
        try:
            return datasets.load_dataset(path, config, cache_dir=cache)
        except FileNotFoundError as error:  # no such data set on the Hub (datasets' DatasetNotFoundError)
            tried.append(f"{path}" + (f" (configuration {config})" if config else "") + f": {_one_line(error)}")
        except (OSError, ValueError, RuntimeError) as error:
            raise DataNotFoundError(f"{source.label}: {_one_line(error)}", what=source.label) from None
    raise DataNotFoundError(f"{source.label} is not on the Hub: {'; '.join(tried)}", what=source.label)


def _hub_candidates(source: HfSource) -> list[tuple[str, str | None]]:
    """(repository, configuration) pairs a Hub name may stand for, in the order they are tried."""
    parts = source.where.split("/")
    if "config" in source.options:
        return [(source.where, source.options["config"])]
    if len(parts) == 3:
        return [("/".join(parts[:2]), parts[2])]
    if len(parts) == 2:
        return [(source.where, None), (parts[0], parts[1])]
    return [(source.where, None)]


def _one_line(error: Exception) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def _pick_split(
    loaded: Dataset | Mapping[str, Dataset], source: HfSource, split: str, any_one: bool
) -> tuple[Dataset, str]:
    """(rows, split name): ``split``, or its other name (dev, validation).

    With ``any_one``, a data set of one split is read whatever is asked (as registered ones are);
    a task's two splits, or a split named in the source, must be there.
    """
    if not isinstance(loaded, Mapping):  # a Dataset, not a DatasetDict: one split
        name = str(loaded.split or "all")
        if any_one or name == split:
            return loaded, name
        loaded = {name: loaded}
    for name in (split, _ALIASES.get(split, split)):
        if name in loaded:
            return loaded[name], name
    if any_one and len(loaded) == 1:
        (name,) = loaded
        return loaded[name], name
    raise no_split(source.label, split, loaded)


def _id_column(options: Mapping[str, str], header: Sequence[str], where: str) -> str | None:
    if "id" in options:
        require_columns(header, [options["id"]], "the id", where)
        return options["id"]
    return _first_present(header, "sent_id", "idx", "id")


# --------------------------------------------------------------------------- rows


def _decoder(feature: object) -> Callable[[Any], Any]:
    """A function turning a column's stored values into what they mean: class labels into their names."""
    datasets = _datasets()
    if isinstance(feature, datasets.ClassLabel):
        return lambda value: _class_name(feature, value)
    inner = getattr(feature, "feature", None)  # a sequence of values
    if isinstance(inner, datasets.ClassLabel):
        return lambda values: [_class_name(inner, value) for value in values]
    return lambda value: value


def _class_name(feature: Any, value: int | None) -> str | None:
    """A class label's name; None for the -1 (or missing) of unlabelled rows, e.g. GLUE's test splits."""
    return feature.int2str(value) if value is not None and 0 <= value < feature.num_classes else None


def _columns(rows: Dataset, names: Iterable[str | None]) -> list[list]:
    """The values of each named column (None for a name that is None), decoded."""
    return [
        [None] * len(rows) if name is None else list(map(_decoder(rows.features[name]), rows[name])) for name in names
    ]


def _field(value: object) -> str:
    """A value as a TSV field holds it: GAP's booleans as TRUE/FALSE, a missing value as empty."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str | int | float):
        return str(value)
    raise ValueError(f"{value!r} is not a text, a number or a class")


def _first_present(header: Sequence[str], *names: str) -> str | None:
    return next((name for name in names if name in header), None)


def _table(rows: Dataset, layout: TableLayout, where: str, id_column: str | None) -> tuple[list, list]:
    """Items and labels of a table of texts, each row read as a TSV line of the same ``layout`` is."""
    header = layout.header
    assert header is not None  # classification_layout names every column
    used = sorted({*layout.texts, *([] if layout.label is None else [layout.label])})
    if id_column is not None:
        layout = dataclasses.replace(layout, ids=(header.index(id_column),))
        used.append(header.index(id_column))
    values = _columns(rows, [header[i] for i in used])

    def row(fields: list, index: int) -> tuple[object, object]:
        full = [""] * len(header)
        for i, value in zip(used, fields):
            full[i] = _field(value)
        return layout.row(full, index)

    return parse_rows(enumerate(map(list, zip(*values))), row, where)


def _head(value: str | int | None) -> int | None:
    """A head as a number; None where there is none ('_', or None: multiword tokens, empty nodes)."""
    if value is None or str(value) in ("_", "None", ""):
        return None
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"HEAD {value!r} is not a number") from None


def _treebank(rows: Dataset, options: Mapping[str, str], where: str, id_column: str | None, trees: bool) -> list:
    """Sentences of a treebank in the ``universal_dependencies`` schema (a list per row for each column).

    As :func:`read_conllu` keeps the syntactic words, tokens without a head (the multiword tokens and
    empty nodes that schema lists with the words) are left out; each tree is checked as there.
    """
    header = rows.column_names
    tokens, head, deprel = (options.get(key, key) for key in ("tokens", "head", "deprel"))
    named = [options[key] for key in ("upos", "text") if key in options]
    wanted = [tokens, head, deprel] if trees else [tokens]
    require_columns(header, wanted + named, "the tokens, head and deprel", where)
    upos = options.get("upos") or _first_present(header, "upos")
    text = options.get("text") or _first_present(header, "text")
    present = [head if head in header else None, deprel if deprel in header else None, upos, text, id_column]
    columns = _columns(rows, [tokens, *present])

    def row(fields: list, index: int) -> tuple[object, object]:
        forms, heads, relations, tags, sentence_text, item_id = fields
        for column, values in (("head", heads), ("deprel", relations), ("upos", tags)):
            if values is not None and len(values) != len(forms):
                raise ValueError(f"{len(values)} {column} values for {len(forms)} tokens")
        given = [] if heads is None else [i for i, h in enumerate(heads) if _head(h) is not None]
        keep = given or range(len(forms))
        words = tuple(str(forms[i]) for i in keep)
        if not words or not all(words):
            raise ValueError("a sentence without words, or an empty token")
        tree = None
        if given:
            tree = check_tree([_head(heads[i]) for i in given], [index] * len(given), where, index)
        return Sentence(
            str(item_id) if item_id is not None else f"{where}:{index}",
            words,
            heads=tree,
            relations=_annotation(relations, keep),
            upos=_annotation(tags, keep),
            text=sentence_text,
        ), None

    return parse_rows(enumerate(map(list, zip(*columns))), row, where)[0]


def _annotation(values: Sequence | None, keep: Iterable[int]) -> tuple[str, ...] | None:
    """One column's tags of the kept words; None when there are none ('_' throughout, as CoNLL-U's reader)."""
    if values is None:
        return None
    tags = tuple(str(values[i]) for i in keep)
    return None if all(tag in ("_", "None") for tag in tags) else tags


# --------------------------------------------------------------------------- corpora and tasks


def hf_corpus(source: str, kind: str, split: str) -> Corpus:
    """The corpus of ``kind`` (see :func:`~bertology_utils.data.resolve_corpus`) in one split of a data set.

    ``split=`` in the source wins over ``split``. A treebank needs the tokens, head and deprel
    columns; sentences are those, or a text column; pairs two text columns; GAP its own columns.
    """
    parsed = parse_hf(source)
    rows, split = _pick_split(_load(parsed), parsed, parsed.options.get("split", split), "split" not in parsed.options)
    where, header, options = parsed.at(split), rows.column_names, parsed.options
    id_column = _id_column(options, header, where)
    labels = None
    if kind == "gap":
        require_columns(header, GAP_HEADER, "the GAP", where)
        values = _columns(rows, GAP_HEADER)
        items, _ = parse_rows(
            enumerate(map(list, zip(*values))), lambda fields, i: gap_row([_field(v) for v in fields], i), where
        )
    elif kind == "treebank" or (
        kind == "sentences" and "text" not in options and options.get("tokens", "tokens") in header
    ):  # sentences of words as given, when a tokens column is there and no text column named
        items = _treebank(rows, options, where, id_column, trees=kind == "treebank")
    else:
        label = options.get("label") or _first_present(header, "label")
        layout = classification_layout(tuple(header), options.get("text"), label, options.get("text_pair"), where)
        items, found = _table(rows, layout, where, id_column)
        labels = None if label is None else found
    return _corpus(parsed, split, items, labels)


def _corpus(source: HfSource, split: str, items: Iterable, labels: Iterable | None) -> Corpus:
    path = Path(source.where).expanduser()
    corpus = Corpus(
        tuple(items),
        f"{source.name}/{split}",
        path.resolve() if path.exists() else None,
        labels=None if labels is None else tuple(labels),
    )
    return dataclasses.replace(corpus, description=f"Hugging Face data set {source.label} — {corpus.description}")


def hf_one_split(source: str | Mapping) -> bool:
    """Whether a treebank source is one split to cut into train/dev/test: a split named, or the only one."""
    parsed = parse_hf(source)
    loaded = _load(parsed)
    return "split" in parsed.options or not hasattr(loaded, "keys") or len(loaded) == 1


def hf_task_splits(source: str | Mapping) -> tuple[str, Corpus, Corpus, str, str]:
    """(name, train, dev, where train is, where dev is) of a task: labelled texts of two splits."""
    parsed = parse_hf(source)
    loaded = _load(parsed)
    corpora, wheres = [], []
    for role, default in (("train", "train"), ("dev", "validation")):
        rows, split = _pick_split(loaded, parsed, parsed.options.get(role, default), any_one=False)
        where, header, options = parsed.at(split), tuple(rows.column_names), parsed.options
        layout = classification_layout(
            header, options.get("text"), options.get("label", "label"), options.get("text_pair"), where
        )
        items, labels = _table(rows, layout, where, _id_column(options, header, where))
        corpora.append(_corpus(parsed, split, items, labels))
        wheres.append(where)
    return parsed.name, corpora[0], corpora[1], wheres[0], wheres[1]
