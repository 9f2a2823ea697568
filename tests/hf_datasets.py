"""Small Hugging Face data sets built from the project's own test data and written with save_to_disk.

The unit tests (tests/unit/data/test_hf_datasets.py) and the notebook runs (tests/notebooks/test_hf_notebooks.py)
read them through ``hf:<folder>`` sources, offline.
"""

from __future__ import annotations

from pathlib import Path

import conllu
import datasets

DATA = Path(__file__).resolve().parent / "data"
GERMAN = DATA / "de_mini.conllu"
USER_TASK = DATA / "user_task"
SAMPLE_PAIRS = Path(__file__).resolve().parents[1] / "data" / "sample" / "pairs.tsv"

#: The UPOS classes of the Hub's universal_dependencies data set, in its order ("_": multiword tokens).
UD_UPOS = (
    "NOUN",
    "PUNCT",
    "ADP",
    "NUM",
    "SYM",
    "SCONJ",
    "ADJ",
    "PART",
    "DET",
    "CCONJ",
    "PROPN",
    "PRON",
    "X",
    "_",
    "ADV",
    "INTJ",
    "VERB",
    "AUX",
)


def ud_rows(path: Path) -> list[dict]:
    """A CoNLL-U file's sentences as universal_dependencies rows: multiword tokens listed with the words
    (head "None"), heads and relations as strings, UPOS as class names."""
    rows = []
    for sentence in conllu.parse(path.read_text(encoding="utf-8")):
        rows.append(
            {
                "idx": sentence.metadata["sent_id"],
                "text": sentence.metadata["text"],
                "tokens": [token["form"] for token in sentence],
                "upos": [token["upos"] or "_" for token in sentence],
                "head": [str(token["head"]) for token in sentence],
                "deprel": [str(token["deprel"]) for token in sentence],
            }
        )
    return rows


UD_FEATURES = datasets.Features(
    {
        "idx": datasets.Value("string"),
        "text": datasets.Value("string"),
        "tokens": datasets.Sequence(datasets.Value("string")),
        "upos": datasets.Sequence(datasets.ClassLabel(names=list(UD_UPOS))),
        "head": datasets.Sequence(datasets.Value("string")),
        "deprel": datasets.Sequence(datasets.Value("string")),
    }
)


def ud_dataset(rows: list[dict]) -> datasets.Dataset:
    return datasets.Dataset.from_list(rows, features=UD_FEATURES)


def tsv_columns(path: Path) -> dict[str, list[str]]:
    """A headed TSV file's columns."""
    header, *lines = path.read_text(encoding="utf-8").splitlines()
    names = header.split("\t")
    return {name: [line.split("\t")[i] for line in lines] for i, name in enumerate(names)}


def labelled(columns: dict[str, list[str]], classes: list[str], label: str = "label") -> datasets.Dataset:
    """Columns of texts and a label, the label stored as a ClassLabel of ``classes`` (as the Hub's GLUE)."""
    feature = datasets.ClassLabel(names=classes)
    features = {name: datasets.Value("string") for name in columns if name != label} | {label: feature}
    return datasets.Dataset.from_dict(
        {**columns, label: [feature.str2int(value) for value in columns[label]]}, features=datasets.Features(features)
    )


def save(data: datasets.Dataset | datasets.DatasetDict, folder: Path) -> str:
    """Write ``data`` with save_to_disk; returns its ``hf:`` source."""
    data.save_to_disk(str(folder))
    return f"hf:{folder}"


def german_treebank(folder: Path) -> str:
    """de_mini.conllu as a DatasetDict with its one split called validation (what a notebook's "dev" finds)."""
    return save(datasets.DatasetDict({"validation": ud_dataset(ud_rows(GERMAN))}), folder)


def user_task(folder: Path) -> str:
    """tests/data/user_task as a DatasetDict of train and validation, labels as a ClassLabel."""
    train, dev = (tsv_columns(USER_TASK / f"{split}.tsv") for split in ("train", "dev"))
    classes = sorted(set(train["label"]))
    return save(datasets.DatasetDict({"train": labelled(train, classes), "validation": labelled(dev, classes)}), folder)


def sample_pairs(folder: Path) -> str:
    """The project's sample pairs (data/sample/pairs.tsv) as one Dataset, RTE's labels as a ClassLabel."""
    return save(labelled(tsv_columns(SAMPLE_PAIRS), ["entailment", "not_entailment"]), folder)
