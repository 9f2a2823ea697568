"""Where data sets are found: the registry, search order, downloads checked by sha256, loaders."""

from __future__ import annotations

import dataclasses
import functools
import os
import shutil
import urllib.request
import warnings
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from bertology_utils.core import settings
from bertology_utils.core.errors import DataNotFoundError
from bertology_utils.core.files import atomic_path, scratch_path
from bertology_utils.data._items import Corpus
from bertology_utils.data._readers import (
    GLUE_TASKS,
    file_sha256,
    glue_task_name,
    read_conllu,
    read_gap_tsv,
    read_glue_tsv,
    read_pairs_tsv,
)

__all__ = [
    "DataFile",
    "DatasetSpec",
    "DATASETS",
    "DataVersionWarning",
    "resolve_data_file",
    "available_datasets",
    "no_split",
    "load_dataset",
    "load_treebank",
    "load_glue",
    "load_gap",
    "load_sample",
    "load_sample_pairs",
    "default_treebank",
]


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
_MRPC_HOW = (
    "MRPC has no single canonical download file: GLUE's download_glue_data.py "
    "(https://github.com/nyu-mll/GLUE-baselines, `--tasks MRPC`) builds MRPC/train.tsv and "
    "MRPC/dev.tsv from the Microsoft Research Paraphrase Corpus; put them in "
    "glue/MRPC/ in a data folder and point BERTOLOGY_DATA_DIR to it"
)


def _glue_spec(task: str) -> DatasetSpec:
    url = None if task == "MRPC" else _GLUE_URL.format(task=task)
    files = {
        split: DataFile(
            f"glue/{task}/{split}.tsv",
            _GLUE_SHA[task, split],
            url,
            member=None if url is None else f"{task}/{split}.tsv",
        )
        for split in ("train", "dev")
    }
    return DatasetSpec(
        f"glue/{task}",
        _GLUE_TITLES[task],
        "glue",
        functools.partial(read_glue_tsv, task=task),
        files,
        "dev",
        _MRPC_HOW if task == "MRPC" else "",
    )


#: Every data set the package knows, by name. Paths are relative to a data directory laid out
#: like ../shared/data; the sample files ship in the project's own data/ folder (and inside a built wheel).
DATASETS: dict[str, DatasetSpec] = {
    "ud-english-ewt": DatasetSpec(
        "ud-english-ewt",
        "UD English Web Treebank v2.16",
        "treebank",
        read_conllu,
        {
            split: DataFile(f"ud-english-ewt/en_ewt-ud-{split}.conllu", sha, f"{_UD_URL}en_ewt-ud-{split}.conllu")
            for split, sha in _EWT_SHA.items()
        },
        "dev",
    ),
    "gap-coreference": DatasetSpec(
        "gap-coreference",
        "GAP coreference (Webster et al. 2018)",
        "gap",
        read_gap_tsv,
        {
            split: DataFile(f"gap-coreference/gap-{split}.tsv", sha, f"{_GAP_URL}gap-{split}.tsv")
            for split, sha in _GAP_SHA.items()
        },
        "development",
    ),
    **{f"glue/{task}": _glue_spec(task) for task in GLUE_TASKS},
    "sample": DatasetSpec(
        "sample",
        "Project sample treebank (40 sentences written and annotated for this project)",
        "treebank",
        read_conllu,
        {
            "all": DataFile(
                "sample/sample.conllu", "a7caa66bcd4f163473886285499b1616d8e345a7c624c78089aaa0d5951f5508", None
            )
        },
        "all",
        "it ships with the package (data/ in a checkout, bertology_utils/_data in a wheel); reinstall it",
    ),
    "sample-pairs": DatasetSpec(
        "sample-pairs",
        "Project sample sentence pairs (12 pairs written for this project)",
        "pairs",
        read_pairs_tsv,
        {"all": DataFile("sample/pairs.tsv", "e76f7fe33711b71220ad58ee018afe40adf91e92209c8ae0c7b628bac55d638d", None)},
        "all",
        "it ships with the package (data/ in a checkout, bertology_utils/_data in a wheel); reinstall it",
    ),
}


def _spec(name: str) -> DatasetSpec:
    if name in DATASETS:
        return DATASETS[name]
    raise DataNotFoundError(f"unknown data set {name!r}; known: {', '.join(DATASETS)}")


def _file(spec: DatasetSpec, split: str) -> DataFile:
    if split in spec.files:
        return spec.files[split]
    raise no_split(spec.name, split, spec.files)


def no_split(name: str, split: str, splits: Iterable[str]) -> DataNotFoundError:
    """The error for a split a data set lacks, registered or not."""
    return DataNotFoundError(f"data set {name!r} has no split {split!r}; splits: {', '.join(splits)}")


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


def _download(file: DataFile, url: str, target: Path) -> Path:
    """Download ``file`` from ``url`` (or extract it from the zip there) to ``target``, checking its sha256.

    Everything goes through temporary files beside the target and one rename
    (:mod:`bertology_utils.core.files`), so a failed, refused or killed download leaves nothing in its place.
    """
    with atomic_path(target) as partial, scratch_path(target) as archive:
        try:
            fetched = archive if file.member else partial
            with urllib.request.urlopen(url, timeout=60) as response, fetched.open("wb") as out:
                shutil.copyfileobj(response, out)
            if file.member:
                with zipfile.ZipFile(archive) as zipped, zipped.open(file.member) as src, partial.open("wb") as out:
                    shutil.copyfileobj(src, out)
        except (OSError, ValueError, zipfile.BadZipFile, KeyError) as error:
            raise DataNotFoundError(f"could not download {url}: {error}") from error
        got = file_sha256(partial)
        if file.sha256 and got != file.sha256:
            raise DataNotFoundError(f"refused the download of {url}: sha256 {got} is not the expected {file.sha256}")
    return target


def resolve_data_file(dataset: str, split: str, path: str | os.PathLike | None = None, download: bool = True) -> Path:
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
            warnings.warn(
                DataVersionWarning(
                    f"{found} (for {dataset}/{split}, found in {where}) has sha256 {file_sha256(found)}, "
                    f"not the expected {file.sha256}; using it anyway"
                ),
                stacklevel=2,
            )
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
            return _download(file, file.url, target)
        except DataNotFoundError as error:
            reason = str(error)
    if file.url is not None:
        what = f"the file {file.member} inside {file.url}" if file.member else file.url
        # no placeholder path ("<dir>/..."): the reason is shown on slides, where a path reads as a machine's
        how = f"download {what} as {file.path} in a data folder and point {settings.DATA_DIR_ENV} to it, or go online"
    else:
        how = spec.how_to_get
    raise DataNotFoundError(
        f"{dataset}/{split} ({file.path}) not found. Looked in: {'; '.join(looked)}. "
        f"Not downloaded: {reason}. To get it: {how}.",
        what=f"{dataset}/{split}",
        how_to_get=how,
    )


def available_datasets() -> list[dict]:
    """One row per data set and split: name, split, kind, path (or None), where it was found, url."""
    rows = []
    for spec in DATASETS.values():
        for split, file in spec.files.items():
            found, where, _ = _find_local(file)
            rows.append(
                {"name": spec.name, "split": split, "kind": spec.kind, "path": found, "where": where, "url": file.url}
            )
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
    return load_dataset(f"glue/{glue_task_name(task)}", split, path)


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
        return dataclasses.replace(
            sample,
            description=(
                f"{sample.description} — used because UD English EWT {split} was not found locally and not "
                f"downloaded (set {settings.DATA_DIR_ENV} or go online)"
            ),
        )
