"""Data parameters: registered names, a user's files and folders, tasks, and a non-English treebank."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from bertology_utils.core.errors import BertologyError, DataFormatError, DataNotFoundError
from bertology_utils.data import (
    Sentence,
    SentencePair,
    is_punctuation,
    load_sample,
    punctuation_forms,
    read_classification_tsv,
    read_conllu,
    resolve_corpus,
    resolve_task,
    treebank_splits,
)

FIXTURES = Path(__file__).resolve().parents[2] / "data"
GERMAN = FIXTURES / "de_mini.conllu"
USER_TASK = FIXTURES / "user_task"


@pytest.fixture
def no_data(monkeypatch, tmp_path):
    """No data folder, no network: only the project's own sample is found."""
    from bertology_utils.core import settings

    monkeypatch.delenv(settings.DATA_DIR_ENV, raising=False)
    monkeypatch.setenv(settings.OFFLINE_ENV, "1")
    monkeypatch.setenv(settings.CACHE_DIR_ENV, str(tmp_path / "cache"))


def test_the_german_fixture_is_a_treebank_with_the_four_relations():
    corpus = read_conllu(GERMAN)
    assert len(corpus) == 24 and all(s.has_syntax for s in corpus)
    relations = [r for s in corpus for r in s.relations]
    for relation in ("nsubj", "obj", "amod", "advmod"):
        assert relations.count(relation) >= 8, relation
    assert any("ß" in w or "ü" in w for s in corpus for w in s.words)


def test_registered_names_files_and_folders(tmp_path):
    assert resolve_corpus("sample").name == "sample/all"
    assert resolve_corpus(GERMAN).sha256 == read_conllu(GERMAN).sha256
    assert resolve_corpus(str(GERMAN), kind="sentences").name == "de_mini"
    text = tmp_path / "mine.txt"
    text.write_text("Ein Satz.\nNoch einer hier!\n", encoding="utf-8")
    assert [s.words for s in resolve_corpus(text, kind="sentences")] == [
        ("Ein", "Satz", "."),
        ("Noch", "einer", "hier", "!"),
    ]
    # A treebank folder: UD's file names, or plain split names.
    ud = tmp_path / "UD_German-Mini"
    ud.mkdir()
    for split in ("train", "dev", "test"):
        shutil.copy(GERMAN, ud / f"de_mini-ud-{split}.conllu")
    assert resolve_corpus(ud, split="test").path == ud / "de_mini-ud-test.conllu"
    plain = tmp_path / "plain"
    plain.mkdir()
    shutil.copy(GERMAN, plain / "dev.conllu")
    assert resolve_corpus(plain).path == plain / "dev.conllu"
    with pytest.raises(DataNotFoundError, match="no file for the test split"):
        resolve_corpus(plain, split="test")
    pairs = resolve_corpus("sample-pairs", kind="pairs")
    assert all(isinstance(p, SentencePair) for p in pairs)


@pytest.mark.parametrize(
    ("source", "kind", "error", "message"),
    [
        ("no-such-data", "treebank", DataNotFoundError, "neither a registered data set of kind 'treebank'"),
        ("sample-pairs", "treebank", DataNotFoundError, "neither a registered data set"),
        ("sample", "pairs", DataNotFoundError, "neither a registered data set of kind 'pairs'"),
        ("{text}", "treebank", DataFormatError, "expected a CoNLL-U file"),
        ("{text}", "treebank", DataFormatError, "mine.txt"),
        ("{conllu_no_trees}", "treebank", DataFormatError, "no sentence has a dependency tree"),
        (None, "pairs", DataNotFoundError, "pairs need a source"),
    ],
)
def test_wrong_or_unknown_sources_are_clear_errors(tmp_path, source, kind, error, message):
    (tmp_path / "mine.txt").write_text("one sentence\n")
    (tmp_path / "flat.conllu").write_text("1\tHallo\t_\tINTJ\t_\t_\t_\t_\t_\t_\n\n")
    if source is not None:
        source = source.format(text=tmp_path / "mine.txt", conllu_no_trees=tmp_path / "flat.conllu")
    with pytest.raises(error, match=message):
        resolve_corpus(source, kind=kind)
    with pytest.raises(ValueError, match="kind must be one of"):
        resolve_corpus("sample", kind="trees")


def test_missing_registered_data_says_what_and_how_in_one_line(no_data):
    with pytest.raises(DataNotFoundError) as caught:
        resolve_corpus("ud-english-ewt")
    assert caught.value.what == "ud-english-ewt/dev"
    line = caught.value.short()
    assert line.startswith("ud-english-ewt/dev not found; to get it: download ") and "\n" not in line
    # The default treebank falls back to the sample, and says so.
    default = resolve_corpus(None)
    assert default.sha256 == load_sample().sha256 and "was not found" in default.description


def test_treebank_splits_from_every_kind_of_source(tmp_path, no_data):
    splits, note = treebank_splits()
    assert [len(splits[s]) for s in ("train", "dev", "test")] == [24, 8, 8] and "sample" in note
    splits, note = treebank_splits(source=GERMAN)
    assert [len(splits[s]) for s in ("train", "dev", "test")] == [14, 5, 5]
    assert "de_mini has one file" in note and "say nothing" in note
    mapping = {"train": GERMAN, "dev": GERMAN, "test": load_sample().path}
    splits, note = treebank_splits(2, 3, None, source={k: str(v) for k, v in mapping.items()})
    assert [len(splits[s]) for s in ("train", "dev", "test")] == [2, 3, 40] and note.startswith("own treebank")
    folder = tmp_path / "tb"
    folder.mkdir()
    for split in ("train", "dev", "test"):
        shutil.copy(GERMAN, folder / f"xx-ud-{split}.conllu")
    splits, _ = treebank_splits(n_test=4, source=folder)
    assert [len(splits[s]) for s in ("train", "dev", "test")] == [24, 24, 4]
    with pytest.raises(DataFormatError, match="exactly the keys"):
        treebank_splits(source={"train": GERMAN})


def test_a_users_task_folder(tmp_path):
    task = resolve_task(USER_TASK)
    assert task.name == "user_task" and not task.glue
    assert task.label_names == ("food", "sport", "weather")
    assert (len(task.train), len(task.dev)) == (48, 15)
    assert all(isinstance(s, Sentence) for s in task.train)
    # Named columns and a name, through a mapping; numbers as labels sort as numbers.
    folder = tmp_path / "reviews"
    folder.mkdir()
    for split, rows in (("train", ["great film\t10", "dull plot\t2", "fine\t9"]), ("dev", ["awful\t2"])):
        (folder / f"{split}.tsv").write_text("id\treview\tstars\n" + "".join(f"{i}\t{r}\n" for i, r in enumerate(rows)))
    task = resolve_task({"path": str(folder), "text": "review", "label": "stars", "name": "stars"})
    assert task.name == "stars" and task.label_names == ("2", "9", "10")


@pytest.mark.parametrize(
    ("train", "dev", "error", "message"),
    [
        ("text\tlabel\na b\tx\nc d\tx\n", "text\tlabel\na\tx\n", DataFormatError, "one class only"),
        ("text\tlabel\na b\tx\nc d\ty\n", "text\tlabel\na\tz\n", DataFormatError, r"labels not in train.tsv: \['z'\]"),
        ("words\tlabel\na b\tx\n", "words\tlabel\na\tx\n", DataFormatError, "no column 'text'"),
        ("text\tlabel\na b\t \n", "text\tlabel\na\tx\n", DataFormatError, "empty label"),
        ("text\tlabel\na b\tx\n", None, DataNotFoundError, "dev.tsv: no such file"),
    ],
)
def test_bad_task_folders_are_clear_errors(tmp_path, train, dev, error, message):
    (tmp_path / "train.tsv").write_text(train)
    if dev is not None:
        (tmp_path / "dev.tsv").write_text(dev)
    with pytest.raises(error, match=message):
        resolve_task(tmp_path)


def test_unknown_tasks_and_options(no_data):
    with pytest.raises(DataNotFoundError, match="neither a GLUE task"):
        resolve_task("no-such-task")
    with pytest.raises(DataFormatError, match="a mapping with 'path'"):
        resolve_task({"path": str(USER_TASK), "colour": "red"})
    with pytest.raises(DataNotFoundError) as caught:
        resolve_task("RTE")
    assert caught.value.what == "glue/RTE/train"


def test_classification_tsv_pairs(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text("sentence1\tsentence2\tlabel\nA cat sat.\tA cat was sitting.\tyes\n")
    corpus = read_classification_tsv(path, text="sentence1", text_pair="sentence2")
    assert corpus[0] == SentencePair("0", ("A", "cat", "sat", "."), ("A", "cat", "was", "sitting", "."), "yes")
    (tmp_path / "train.tsv").write_text(path.read_text() + "B\tC\tno\n")
    (tmp_path / "dev.tsv").write_text(path.read_text())
    assert isinstance(resolve_task(tmp_path).dev[0], SentencePair)  # sentence1/sentence2 found by name


def test_a_users_task_fine_tunes_and_scores_by_its_own_classes(tmp_path, tiny_model_dirs):
    from bertology_utils.interventions.finetuning import Budget, fine_tune
    from bertology_utils.interventions.scoring import label_ids, majority_baseline, task_spec

    task = resolve_task(USER_TASK)
    spec = task_spec(task)
    assert spec.num_labels == 3 and spec.metrics == ("accuracy",)
    assert task_spec("user_task") is spec  # known by name from then on, as results name it
    assert label_ids("user_task", ["weather", "food"]).tolist() == [2, 0]
    with pytest.raises(BertologyError, match=r"labels \['hail'\] are not among its classes"):
        label_ids("user_task", ["hail"])
    assert majority_baseline("user_task", task.dev.labels) == pytest.approx(1 / 3)
    run = fine_tune(
        task, tiny_model_dirs["bert"], budget=Budget(train_examples=16, epochs=1, max_tokens=32), cache_dir=tmp_path
    )
    assert run.task == "user_task" and run.metrics["n"] == 15
    assert run.loaded.model.config.num_labels == 3
    again = fine_tune(
        task, tiny_model_dirs["bert"], budget=Budget(train_examples=16, epochs=1, max_tokens=32), cache_dir=tmp_path
    )
    assert again.from_cache and again.metrics == run.metrics
    with pytest.raises(BertologyError, match="cannot be named like a GLUE task"):
        task_spec(type(task)("SST-2", task.train, task.dev, task.label_names))


def test_punctuation_comes_from_the_treebank_when_it_has_tags():
    german = punctuation_forms(read_conllu(GERMAN))
    assert {".", ",", "„", "“"} <= german and "Hund" not in german
    assert is_punctuation("„", german) and not is_punctuation("%", german)
    assert is_punctuation("%") and is_punctuation("„")  # without tags: Unicode's P* categories
    only_relations = [Sentence("r", ("Ja", "!"), heads=(0, 1), relations=("root", "punct"))]
    assert punctuation_forms(only_relations) == frozenset({"!"})
    assert punctuation_forms([Sentence("t", ("no", "tags"))]) is None


def test_surface_statistics_count_the_treebanks_punctuation():
    from bertology_utils.analyses.patterns import _surface_statistics_loop, surface_statistics
    from bertology_utils.attention.alignment import LEADING_SPECIAL, SEPARATOR, WORD
    from bertology_utils.attention.word_attention import ItemAttention

    rng = np.random.default_rng(0)
    words = ("Es", "regnet", "%", "„", ".")
    att = rng.random((1, 2, 7, 7))
    att /= att.sum(-1, keepdims=True)
    kinds = np.array([LEADING_SPECIAL, WORD, WORD, WORD, WORD, WORD, SEPARATOR])
    item = ItemAttention(0, "x", ("[CLS]", *words, "[SEP]"), kinds, np.zeros(7, int), att, n_tokens=7)
    forms = frozenset({"„", "."})
    tagged = surface_statistics([item], punctuation=forms)["punct"]
    unicode = surface_statistics([item])["punct"]
    assert np.allclose(tagged, att[..., [4, 5]].sum(-1).mean(-1))
    assert np.allclose(unicode, att[..., [3, 4, 5]].sum(-1).mean(-1))
    assert np.allclose(_surface_statistics_loop([item], punctuation=forms)["punct"], tagged)
