"""Hugging Face data sets as data sources (hf:...): saved folders, local folders, Hub names, and their errors.

Every data set is built here from the project's own test data and saved to disk (tests/hf_datasets.py);
nothing reaches the network.
"""

from __future__ import annotations

import sys

import pytest

from bertology_utils.core import settings
from bertology_utils.core.errors import DataFormatError, DataNotFoundError
from bertology_utils.data import (
    GapExample,
    read_conllu,
    read_gap_tsv,
    read_pairs_tsv,
    resolve_corpus,
    resolve_task,
    treebank_splits,
)

datasets = pytest.importorskip("datasets", reason="the hf extra is not installed: pip install 'bertology-utils[hf]'")
import hf_datasets as hf  # noqa: E402 (it builds data sets with the datasets package)


@pytest.fixture(autouse=True)
def own_cache(monkeypatch, tmp_path):
    """load_dataset's conversions go to this test's cache, never the user's."""
    monkeypatch.setenv(settings.CACHE_DIR_ENV, str(tmp_path / "cache"))


@pytest.fixture
def online(monkeypatch):
    for variable in (settings.OFFLINE_ENV, "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(variable, raising=False)


def test_a_saved_treebank_reads_as_its_conllu_file(tmp_path):
    """The universal_dependencies schema: multiword tokens listed with the words are left out, as the reader does."""
    source = hf.german_treebank(tmp_path / "de")
    corpus = resolve_corpus(source)  # the notebooks' "dev" is the data set's validation split
    assert corpus.items == read_conllu(hf.GERMAN).items
    assert corpus.name == "de/validation" and "hf:" in corpus.description
    assert len(next(s for s in corpus if s.id == "de_mini-06").words) == 13  # zum = zu + dem
    assert resolve_corpus(source + "?split=validation", kind="sentences").items == corpus.items


def test_treebank_columns_are_named_and_splits_picked(tmp_path):
    rows = [{**row, "words": row["tokens"]} for row in hf.ud_rows(hf.GERMAN)]
    features = hf.UD_FEATURES.copy()
    features["words"] = datasets.Sequence(datasets.Value("string"))
    split = datasets.Dataset.from_list(rows, features=features).remove_columns("tokens")
    source = hf.save(datasets.DatasetDict({"train": split, "dev": split, "test": split.select(range(4))}), tmp_path)
    with pytest.raises(DataFormatError, match=r"\[dev\]: no column 'tokens' in the header"):
        resolve_corpus(source)
    with pytest.raises(DataFormatError, match="no column 'tags' in the header"):
        resolve_corpus(source + "?tokens=words&upos=tags")
    splits, note = treebank_splits(source=source + "?tokens=words")
    assert [len(splits[s]) for s in ("train", "dev", "test")] == [24, 24, 4]
    assert splits["dev"].items == read_conllu(hf.GERMAN).items
    splits, note = treebank_splits(source=source + "?tokens=words&split=train")  # one split, cut 60/20/20
    assert [len(splits[s]) for s in ("train", "dev", "test")] == [14, 5, 5] and "is one split" in note


def test_a_saved_task_is_the_task_folder_it_was_made_from(tmp_path):
    task = resolve_task(hf.user_task(tmp_path / "topics"))
    folder = resolve_task(hf.USER_TASK)
    assert (task.name, task.label_names, task.glue) == ("topics", folder.label_names, False)
    for split in ("train", "dev"):
        ours, theirs = getattr(task, split), getattr(folder, split)
        assert [s.words for s in ours] == [s.words for s in theirs] and ours.labels == theirs.labels


def test_named_columns_and_splits_in_a_query_or_a_mapping(tmp_path):
    columns = hf.tsv_columns(hf.USER_TASK / "train.tsv")
    data = hf.labelled({"review": columns["text"], "stars": columns["label"]}, ["food", "sport", "weather"], "stars")
    source = hf.save(datasets.DatasetDict({"fit": data, "held_out": data.select(range(10))}), tmp_path / "reviews")
    by_query = resolve_task(source + "?text=review&label=stars&train=fit&dev=held_out&name=mine")
    by_mapping = resolve_task(
        {"path": source, "text": "review", "label": "stars", "train": "fit", "dev": "held_out", "name": "mine"}
    )
    assert by_query == by_mapping
    reviews = resolve_corpus(source + "?text=review&split=fit", kind="sentences")  # no label column named: unlabelled
    assert reviews.labels is None and [s.words for s in reviews] == [s.words for s in by_query.train]
    assert by_query.name == "mine" and (len(by_query.train), len(by_query.dev)) == (48, 10)


def test_pairs_and_gap(tmp_path):
    pairs = resolve_corpus(hf.sample_pairs(tmp_path / "pairs"), kind="pairs")  # one Dataset: read whatever split
    expected = read_pairs_tsv(hf.SAMPLE_PAIRS)
    assert pairs.items == expected.items and pairs.labels == expected.labels
    # GAP as the Hub's gap data set holds it: offsets as numbers, coreference as booleans.
    text = "Anna met Bea before she left."
    row = {
        "ID": "g-1", "Text": text, "Pronoun": "she", "Pronoun-offset": text.find("she"), "A": "Anna", "A-offset": 0,
        "A-coref": True, "B": "Bea", "B-offset": text.find("Bea"), "B-coref": False, "URL": "http://x",
    }  # fmt: skip
    gap = resolve_corpus(hf.save(datasets.Dataset.from_list([row]), tmp_path / "gap"), kind="gap")
    tsv = tmp_path / "gap.tsv"
    tsv.write_text(
        "\t".join(row) + "\n" + "\t".join(str(v).upper() if v in (True, False) else str(v) for v in row.values())
    )
    assert gap.items == read_gap_tsv(tsv).items and isinstance(gap[0], GapExample)
    bad = hf.save(datasets.Dataset.from_list([{**row, "A-offset": 3}]), tmp_path / "bad_gap")
    with pytest.raises(DataFormatError, match=r"gap\[.*\]:0: A 'Anna' is not in Text at offset 3"):
        resolve_corpus(bad, kind="gap")


def test_a_local_folder_load_dataset_reads(tmp_path):
    """Data files named by split, as datasets.load_dataset finds them (no save_to_disk)."""
    folder = tmp_path / "csv_task"
    folder.mkdir()
    for split, name in (("train", "train"), ("dev", "validation")):
        columns = hf.tsv_columns(hf.USER_TASK / f"{split}.tsv")
        datasets.Dataset.from_dict(columns).to_csv(folder / f"{name}.csv", index=False)
    task = resolve_task(f"hf:{folder}")
    assert task.name == "csv_task" and task.label_names == ("food", "sport", "weather")
    assert (len(task.train), len(task.dev)) == (48, 15)


def _task_with(tmp_path, train: dict, dev: dict) -> str:
    return hf.save(
        datasets.DatasetDict(
            {"train": datasets.Dataset.from_dict(train), "validation": datasets.Dataset.from_dict(dev)}
        ),
        tmp_path / "task",
    )


@pytest.mark.parametrize(
    ("train", "dev", "message", "tsv_message"),
    [
        (
            {"text": ["a b", "c d"], "label": ["x", "x"]},
            {"text": ["a"], "label": ["x"]},
            r"task\[train\]: one class only \('x'\)",
            r"train.tsv: one class only \('x'\)",
        ),
        (
            {"text": ["a b", "c d"], "label": ["x", "y"]},
            {"text": ["a"], "label": ["z"]},
            r"task\[validation\]: labels not in task\[train\]: \['z'\]",
            r"dev.tsv: labels not in train.tsv: \['z'\]",
        ),
        (
            {"words": ["a b"], "label": ["x"]},
            {"words": ["a"], "label": ["x"]},
            r"task\[train\]: no column 'text' in the header 'words\|label'",
            r"train.tsv:1: no column 'text' in the header 'words\|label'",
        ),
        (
            {"text": ["a b", "c"], "label": ["x", None]},
            {"text": ["a"], "label": ["x"]},
            r"task\[train\]:1: empty label",
            r"train.tsv:3: empty label",
        ),
        (
            {"text": ["a b", " "], "label": ["x", "y"]},
            {"text": ["a"], "label": ["x"]},
            r"task\[train\]:1: a sentence field has no words",
            r"train.tsv:3: a sentence field has no words",
        ),
    ],
)
def test_bad_tasks_get_the_task_folders_errors(tmp_path, train, dev, message, tsv_message):
    """The one-line errors of a TSV task folder, naming the data set's split and row instead of file and line."""
    with pytest.raises(DataFormatError, match=message) as caught:
        resolve_task(_task_with(tmp_path, train, dev))
    assert "\n" not in str(caught.value)
    folder = tmp_path / "folder"
    folder.mkdir()
    for split, columns in (("train", train), ("dev", dev)):
        rows = ["\t".join(columns)] + ["\t".join(value or " " for value in row) for row in zip(*columns.values())]
        (folder / f"{split}.tsv").write_text("\n".join(rows) + "\n")
    with pytest.raises(DataFormatError, match=tsv_message):
        resolve_task(folder)


def test_unlabelled_rows_of_a_class_label_are_empty_labels(tmp_path):
    """GLUE's test splits store -1 for "no label"."""
    feature = datasets.Features({"sentence": datasets.Value("string"), "label": datasets.ClassLabel(names=["n", "p"])})
    split = datasets.Dataset.from_dict({"sentence": ["good", "bad"], "label": [1, -1]}, features=feature)
    source = hf.save(datasets.DatasetDict({"train": split, "test": split}), tmp_path / "glue")
    with pytest.raises(DataFormatError, match=r"glue\[train\]:1: empty label"):
        resolve_task(source + "?dev=test")


@pytest.mark.parametrize(
    ("heads", "message"),
    [
        (["2", "0", "9"], r":0: HEAD 9 is out of range 0..3"),
        (["2", "3", "1"], "no root"),
        (["0", "0", "2"], "more than one root"),
        (["0", "3", "2"], r"cycle in HEADs \(2 -> 3 -> 2\)"),
        (["0", "x", "1"], "HEAD 'x' is not a number"),
        (["0", "1"], "2 head values for 3 tokens"),
    ],
)
def test_bad_trees_get_the_conllu_readers_errors(tmp_path, heads, message):
    row = {
        "idx": "s1",
        "text": "a b c",
        "tokens": ["a", "b", "c"],
        "upos": ["X"] * 3,
        "head": heads,
        "deprel": ["dep"] * 3,
    }
    source = hf.save(hf.ud_dataset([row]), tmp_path / "tb")
    with pytest.raises(DataFormatError, match=message) as caught:
        resolve_corpus(source)
    assert str(caught.value).startswith(f"{source}[all]:0: ") and "\n" not in str(caught.value)


def test_splits_options_and_places_that_do_not_exist(tmp_path):
    source = hf.user_task(tmp_path / "topics")
    with pytest.raises(DataNotFoundError, match=r"has no split 'test'; splits: train, validation"):
        resolve_corpus(source + "?split=test", kind="sentences")
    with pytest.raises(DataNotFoundError, match=r"has no split 'test'; splits: train, validation"):
        resolve_corpus(source, kind="sentences", split="test")
    with pytest.raises(DataNotFoundError, match="has no split 'train'; splits: all"):  # a task needs two splits
        resolve_task(hf.sample_pairs(tmp_path / "pairs"))
    with pytest.raises(DataFormatError, match=r"\[train\]: no column 'key' in the header 'text\|label'"):
        resolve_task(source + "?id=key")
    with pytest.raises(DataFormatError, match="unknown: colour"):
        resolve_task(source + "?colour=red")
    with pytest.raises(DataFormatError, match="KEY=VALUE"):
        resolve_task(source + "?label")
    with pytest.raises(DataFormatError, match="sentence pairs are needed"):
        resolve_corpus(source, kind="pairs")
    with pytest.raises(DataNotFoundError, match="no such folder"):
        resolve_corpus(f"hf:{tmp_path / 'missing'}")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataFormatError, match="not readable as a Hugging Face data set"):
        resolve_corpus(f"hf:{tmp_path / 'empty'}")
    (tmp_path / "script").mkdir()
    (tmp_path / "script" / "script.py").write_text("import datasets\n")
    with pytest.raises(DataFormatError, match="not readable as a Hugging Face data set"):
        resolve_corpus(f"hf:{tmp_path / 'script'}")  # datasets 4 and later run no scripts


def test_a_hub_name_offline_says_it_needs_the_network(monkeypatch):
    monkeypatch.setenv(settings.OFFLINE_ENV, "1")
    with pytest.raises(DataNotFoundError, match="needs the network") as caught:
        resolve_task("hf:glue/sst2")
    assert "save_to_disk" in caught.value.short() and "to get it" in caught.value.short()
    with pytest.raises(DataNotFoundError, match="needs the network"):
        resolve_corpus("hf:universal_dependencies/en_ewt")


def test_hub_names_online(tmp_path, online, monkeypatch):
    """NAME/CONFIG (hf:glue/sst2) is tried as a repository first; OWNER/NAME/CONFIG and config= are taken as said."""
    saved = datasets.load_from_disk(hf.user_task(tmp_path / "topics")[3:])
    calls = []

    def load_dataset(path, config=None, **kwargs):
        calls.append((path, config))
        if (path, config) == ("glue/sst2", None):
            raise datasets.exceptions.DatasetNotFoundError("Dataset 'glue/sst2' doesn't exist on the Hub")
        return saved

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    task = resolve_task("hf:glue/sst2")
    assert calls == [("glue/sst2", None), ("glue", "sst2")] and task.name == "glue-sst2"
    calls.clear()
    resolve_task("hf:nyu-mll/glue/sst2")
    resolve_task("hf:nyu-mll/glue?config=sst2")
    assert calls == [("nyu-mll/glue", "sst2")] * 2


def test_without_the_datasets_package_it_says_how_to_install_it(tmp_path, monkeypatch):
    source = hf.user_task(tmp_path / "topics")
    monkeypatch.setitem(sys.modules, "datasets", None)  # import datasets raises ImportError
    with pytest.raises(DataNotFoundError, match=r"pip install 'bertology-utils\[hf\]'"):
        resolve_task(source)
