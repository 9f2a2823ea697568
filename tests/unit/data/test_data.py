"""Tests of bertology_utils.data: readers, validation errors, words_of, resolution, downloads."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import unicodedata
import warnings
import zipfile
from pathlib import Path

import conllu
import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from bertology_utils import data
from bertology_utils.core import settings
from bertology_utils.core.errors import BertologyError, DataFormatError, DataNotFoundError
from bertology_utils.data import (
    Corpus,
    DataFile,
    GapExample,
    Sentence,
    SentencePair,
    consecutive_pairs,
    is_punctuation,
    read_conllu,
    read_gap_tsv,
    read_glue_tsv,
    resolve_data_file,
    words_of,
)


def write(tmp_path: Path, name: str, text: str, encoding: str = "utf-8") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode(encoding))
    return path


def row(*fields) -> str:
    return "\t".join(map(str, fields))


def token(i, form, head, rel, upos="NOUN", misc="_") -> str:
    return row(i, form, "_", upos, "_", "_", head, rel, "_", misc)


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    """No data dir, an empty project data dir, a private cache, and offline: nothing is found."""
    for variable in (settings.DATA_DIR_ENV, "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):  # conftest sets the last two
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv(settings.CACHE_DIR_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv(settings.OFFLINE_ENV, "1")
    project = tmp_path / "project-data"
    project.mkdir()
    monkeypatch.setattr(settings, "project_data_dir", lambda: project)
    return tmp_path


# --------------------------------------------------------------------------- CoNLL-U

GOOD_CONLLU = "\n".join(
    [
        "# sent_id = s1",
        "# text = I don't know.",
        token(1, "I", 4, "nsubj", "PRON"),
        row("2-3", "don't", *["_"] * 8),
        token(2, "do", 4, "aux", "AUX"),
        token(3, "n't", 4, "advmod", "PART"),
        token(4, "know", 0, "root", "VERB", "SpaceAfter=No"),
        token(5, ".", 4, "punct", "PUNCT"),
        "",
        "# text = Sue left, Bill too.",
        token(1, "Sue", 2, "nsubj", "PROPN"),
        token(2, "left", 0, "root", "VERB", "SpaceAfter=No"),
        token(3, ",", 4, "punct", "PUNCT"),
        token(4, "Bill", 2, "conj", "PROPN"),
        row("4.1", "left", "leave", "VERB", "_", "_", "_", "_", "2:conj", "_"),
        token(5, "too", 4, "advmod", "ADV", "SpaceAfter=No"),
        token(6, ".", 2, "punct", "PUNCT"),
        "",
    ]
)


def test_read_conllu_skips_multiword_tokens_and_empty_nodes(tmp_path):
    corpus = read_conllu(write(tmp_path, "tiny.conllu", GOOD_CONLLU))
    first, second = corpus
    assert first == Sentence(
        "s1",
        ("I", "do", "n't", "know", "."),
        (4, 4, 4, 0, 4),
        ("nsubj", "aux", "advmod", "root", "punct"),
        ("PRON", "AUX", "PART", "VERB", "PUNCT"),
        "I don't know.",
    )
    assert second.id == "tiny.conllu:2"  # no sent_id: <file>:<n>
    assert second.words == ("Sue", "left", ",", "Bill", "too", ".")
    assert second.heads == (2, 0, 4, 2, 4, 2)
    assert second.has_syntax
    assert corpus.name == "tiny" and corpus.path == tmp_path / "tiny.conllu"
    assert corpus.sha256 == hashlib.sha256(GOOD_CONLLU.encode()).hexdigest()
    assert corpus.labels is None


def test_read_conllu_without_heads_gives_sentences_without_syntax(tmp_path):
    text = "\n".join(row(i, w, *["_"] * 8) for i, w in enumerate(["Hello", "world"], 1)) + "\n"
    (sentence,) = read_conllu(write(tmp_path, "plain.conllu", text))
    assert sentence.words == ("Hello", "world")
    assert sentence.heads is None and sentence.relations is None and sentence.upos is None
    assert not sentence.has_syntax


def sentence_lines(*tokens):
    return ["# sent_id = x", "# text = a b c", *tokens, ""]


# (lines of the file, line number the error must name, words of the message)
BAD_CONLLU = {
    "head out of range": (
        sentence_lines(token(1, "a", 2, "det"), token(2, "b", 0, "root"), token(3, "c", 7, "obj")),
        5,
        "out of range 0..3",
    ),
    "cycle": (sentence_lines(token(1, "a", 0, "root"), token(2, "b", 3, "nmod"), token(3, "c", 2, "nmod")), 4, "cycle"),
    "no root": (sentence_lines(token(1, "a", 2, "det"), token(2, "b", 1, "nmod")), 1, "no root"),
    "two roots": (
        sentence_lines(token(1, "a", 0, "root"), token(2, "b", 1, "obj"), token(3, "c", 0, "root")),
        5,
        "more than one root",
    ),
    "9 columns": (
        sentence_lines(token(1, "a", 0, "root"), token(2, "b", 1, "obj").rsplit("\t", 1)[0]),
        4,
        "expected 10 tab-separated columns, found 9",
    ),
    "non-integer head": (sentence_lines(token(1, "a", 0, "root"), token(2, "b", "x", "obj")), 4, "head"),
    "ids out of order": (
        sentence_lines(token(1, "a", 0, "root"), token(3, "b", 1, "obj")),
        4,
        "word ID 3 where 2 was expected",
    ),
    "missing head": (sentence_lines(token(1, "a", 0, "root"), token(2, "b", "_", "obj")), 4, "HEAD is '_'"),
}


@pytest.mark.parametrize("case", BAD_CONLLU)
def test_read_conllu_errors_name_file_and_line(tmp_path, case):
    lines, line, words = BAD_CONLLU[case]
    # A valid sentence first, so line numbers must count across blocks.
    good = [token(1, "ok", 0, "root"), ""]
    path = write(tmp_path, "bad.conllu", "\n".join(good + lines))
    with pytest.raises(DataFormatError) as caught:
        read_conllu(path)
    assert f"bad.conllu:{line + len(good)}:" in str(caught.value)
    assert caught.value.line == line + len(good)
    assert words in str(caught.value)


@hypothesis_settings(max_examples=150, deadline=None)
@given(st.integers(1, 7).flatmap(lambda n: st.lists(st.integers(0, n), min_size=n, max_size=n)))
def test_read_conllu_accepts_exactly_the_trees(tmp_path_factory, heads):
    """Any heads array: accepted iff one root and every word reaches it (checked independently)."""

    def reaches_root(word):
        for _ in heads:
            word = heads[word - 1]
            if word == 0:
                return True
        return False

    is_tree = heads.count(0) == 1 and all(reaches_root(w) for w in range(1, len(heads) + 1))
    path = tmp_path_factory.mktemp("trees") / "t.conllu"
    path.write_text("\n".join(token(i, f"w{i}", h, "dep") for i, h in enumerate(heads, 1)) + "\n")
    if is_tree:
        assert read_conllu(path)[0].heads == tuple(heads)
    else:
        with pytest.raises(DataFormatError, match=r"t\.conllu:\d+: (no root|more than one root|cycle)"):
            read_conllu(path)


@pytest.mark.parametrize("text", ["", "\n\n", "# just a comment\n"])
def test_read_conllu_rejects_files_without_sentences(tmp_path, text):
    with pytest.raises(DataFormatError, match=r"empty\.conllu"):
        read_conllu(write(tmp_path, "empty.conllu", text))


# --------------------------------------------------------------------------- the project sample


def test_sample_treebank_is_40_valid_sentences():
    corpus = data.load_sample()
    assert len(corpus) == 40 and corpus.name == "sample/all"
    assert [s.id for s in corpus] == [f"sample-{n:02d}" for n in range(1, 41)]
    for sentence in corpus:  # read_conllu already checked one root, ranges and cycles
        assert sentence.has_syntax and sentence.upos is not None
        assert 5 <= len(sentence.words) <= 25
        assert sentence.relations.count("root") == 1 and sentence.heads.count(0) == 1
    relations = {r for s in corpus for r in s.relations}
    assert {
        "nsubj:pass",
        "aux:pass",
        "compound:prt",
        "acl:relcl",
        "nmod:poss",
        "xcomp",
        "ccomp",
        "advcl",
        "conj",
        "cc",
        "case",
        "obl",
        "nmod",
        "compound",
        "mark",
        "punct",
    } <= relations
    assert "Project sample treebank" in corpus.description


def test_sample_tokens_spell_out_their_text():
    """Surface tokens (multiword tokens as written) plus SpaceAfter=No give back each # text."""
    path = settings.PROJECT_ROOT / "data" / "sample" / "sample.conllu"
    for tokens in conllu.parse(path.read_text(encoding="utf-8")):
        rebuilt, skip_to = "", 0
        for t in tokens:
            if isinstance(t["id"], tuple):
                skip_to = t["id"][2]
            elif t["id"] <= skip_to:
                continue
            no_space = (t["misc"] or {}).get("SpaceAfter") == "No"
            rebuilt += t["form"] + ("" if no_space else " ")
        assert rebuilt.rstrip() == tokens.metadata["text"]


def test_sample_files_match_the_registry():
    for name in ("sample", "sample-pairs"):
        file = data.DATASETS[name].files["all"]
        assert data.file_sha256(settings.PROJECT_ROOT / "data" / file.path) == file.sha256, name


def test_sample_pairs():
    corpus = data.load_sample_pairs()
    assert len(corpus) == 12 and all(isinstance(p, SentencePair) for p in corpus)
    assert corpus[0] == SentencePair(
        "pair-01",
        ("A", "woman", "is", "slicing", "tomatoes", "in", "the", "kitchen", "."),
        ("Someone", "is", "preparing", "food", "."),
        "entailment",
    )
    assert sorted(set(corpus.labels)) == ["entailment", "not_entailment"]


# --------------------------------------------------------------------------- GLUE and GAP


def test_cola_without_header_or_final_newline(tmp_path):
    path = write(tmp_path, "dev.tsv", "gj04\t1\t\tThe cat sat.\ngj04\t0\t*\tCat the sat on.")
    corpus = read_glue_tsv(path, "CoLA")
    assert [s.words for s in corpus] == [("The", "cat", "sat", "."), ("Cat", "the", "sat", "on", ".")]
    assert corpus.labels == (1, 0) and corpus[1].text == "Cat the sat on." and corpus[1].id == "1"
    assert corpus.name == "glue/CoLA/dev"


def test_sst2_header_and_trailing_space(tmp_path):
    corpus = read_glue_tsv(write(tmp_path, "dev.tsv", "sentence\tlabel\nit 's a charming journey . \t1\n"), "sst2")
    assert corpus[0].text == "it 's a charming journey ."
    assert corpus[0].words == ("it", "'s", "a", "charming", "journey", ".")
    assert corpus.labels == (1,)


def test_mrpc_bom_header_and_bare_quotes(tmp_path):
    text = '\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t11\t12\tHe said " yes " .\t" Yes , " he said .\n'
    (pair,) = corpus = read_glue_tsv(write(tmp_path, "dev.tsv", text), "MRPC")
    assert pair == SentencePair(
        "11-12", ("He", "said", '"', "yes", '"', "."), ('"', "Yes", ",", '"', "he", "said", "."), 1
    )
    assert corpus.labels == (1,)


def test_stsb_scores_are_floats_and_rte_labels_strings(tmp_path):
    header = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
    sts = read_glue_tsv(
        write(
            tmp_path,
            "sts.tsv",
            header + row(0, "g", "f", "y", "0", "n", "n", "A dog runs.", "A dog is running.", "3.800") + "\n",
        ),
        "STS-B",
    )
    assert sts[0].label == 3.8 and isinstance(sts[0].label, float) and sts[0].id == "0"
    rte = read_glue_tsv(
        write(
            tmp_path, "rte.tsv", "index\tsentence1\tsentence2\tlabel\n7\tA cat slept.\tAn animal slept.\tentailment\n"
        ),
        "glue/RTE",
    )
    assert rte[0] == SentencePair("7", ("A", "cat", "slept", "."), ("An", "animal", "slept", "."), "entailment")


@pytest.mark.parametrize(
    "task,text,line,words",
    [
        ("SST-2", "sentence\tlabel\ngood . \t1\nbad .\t1\t0\n", 3, "expected 2 tab-separated fields, found 3"),
        ("SST-2", "sentence\tlabel\ngood . \tpositive\n", 2, "label 'positive' is not 0 or 1"),
        ("SST-2", "sentence\n", 1, "expected the header"),
        ("RTE", "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tcontradiction\n", 2, "'contradiction'"),
        (
            "STS-B",
            "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
            "0\tg\tf\ty\t0\tn\tn\ta\tb\t7\n",
            2,
            "outside 0..5",
        ),
        ("CoLA", "s\t1\t\tfine\ns\t1\t\t\n", 2, "no words"),
    ],
)
def test_glue_errors_name_the_line(tmp_path, task, text, line, words):
    with pytest.raises(DataFormatError) as caught:
        read_glue_tsv(write(tmp_path, "x.tsv", text), task)
    assert f"x.tsv:{line}:" in str(caught.value) and words in str(caught.value)


GAP_HEADER = "ID\tText\tPronoun\tPronoun-offset\tA\tA-offset\tA-coref\tB\tB-offset\tB-coref\tURL\n"
GAP_TEXT = "Ann met Beth because she was lost."


def test_gap_reader_checks_offsets(tmp_path):
    good = row("d-1", GAP_TEXT, "she", 21, "Ann", 0, "FALSE", "Beth", 8, "TRUE", "http://x")
    (example,) = read_gap_tsv(write(tmp_path, "gap.tsv", GAP_HEADER + good + "\n"))
    assert example == GapExample("d-1", GAP_TEXT, "she", 21, "Ann", 0, False, "Beth", 8, True, "http://x")
    shifted = row("d-2", GAP_TEXT, "she", 21, "Ann", 0, "FALSE", "Beth", 9, "TRUE", "http://x")
    with pytest.raises(DataFormatError, match=r"gap\.tsv:3: B 'Beth' is not in Text at offset 9"):
        read_gap_tsv(write(tmp_path, "gap.tsv", GAP_HEADER + good + "\n" + shifted + "\n"))
    for bad, words in [
        (row("d-3", GAP_TEXT, "she", 21, "Ann", 0, "yes", "Beth", 8, "TRUE", "u"), "A-coref 'yes'"),
        (row("d-4", GAP_TEXT, "she", -1, "Ann", 0, "TRUE", "Beth", 8, "TRUE", "u"), "Pronoun-offset"),
        (row("d-5", GAP_TEXT, "she", 21), "expected 11"),
    ]:
        with pytest.raises(DataFormatError, match=r"gap\.tsv:2: ") as caught:
            read_gap_tsv(write(tmp_path, "gap.tsv", GAP_HEADER + bad + "\n"))
        assert words in str(caught.value)


def test_undecodable_file_names_the_line(tmp_path):
    path = tmp_path / "latin1.tsv"
    path.write_bytes("sentence\tlabel\ncaf\u00e9 .\t1\n".encode("latin-1"))
    with pytest.raises(DataFormatError, match=r"latin1\.tsv:2: not valid UTF-8"):
        read_glue_tsv(path, "SST-2")


# --------------------------------------------------------------------------- Corpus


def test_corpus_from_texts_slicing_and_hashes():
    corpus = Corpus.from_texts(["Hello, world!", "Ça va?"], name="greetings")
    assert [s.words for s in corpus] == [("Hello", ",", "world", "!"), ("Ça", "va", "?")]
    assert corpus[1].id == "greetings:1" and corpus[1].text == "Ça va?"
    assert corpus.sha256 == Corpus.from_texts(["Hello, world!", "Ça va?"], name="greetings").sha256
    assert corpus.sha256 != Corpus.from_texts(["Hello, world!", "Ça va?"], name="other").sha256  # ids differ
    words = Corpus.from_items([["a", "b"], ["c"]], name="items")  # plain word lists are items too
    assert words[1] == ["c"] and words.sha256 != Corpus.from_items([["a", "b"]], name="items").sha256
    part = corpus[1:]
    assert isinstance(part, Corpus) and len(part) == 1 and part[0] == corpus[1]
    assert part.name == "greetings[1:2]" and part.sha256 != corpus.sha256
    assert "greetings" in part.description and "\n" not in part.description
    with pytest.raises(DataFormatError, match="no words"):
        Corpus.from_texts(["ok", " \u200b "])
    assert Corpus.of(corpus) is corpus  # a corpus keeps its name, labels and hash
    loose = Corpus.of(item for item in corpus)  # any iterable of items: a new corpus named "items"
    assert loose.name == "items" and tuple(loose) == tuple(corpus)
    assert loose.sha256 == Corpus.from_items(list(corpus), "items").sha256


def test_slicing_keeps_labels_aligned(tmp_path):
    corpus = read_glue_tsv(write(tmp_path, "dev.tsv", "sentence\tlabel\na .\t0\nb .\t1\nc .\t1\n"), "SST-2")
    assert corpus[::2].labels == (0, 1) and [s.text for s in corpus[::2]] == ["a .", "c ."]


def test_items_are_immutable_tuples():
    sentence = Sentence("x", ["a", "b"], [2, 0], ["det", "root"])
    assert sentence.words == ("a", "b") and sentence.heads == (2, 0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        sentence.words = ("c",)
    with pytest.raises(ValueError, match="1 heads for 2 words"):
        Sentence("y", ("a", "b"), (0,))


# --------------------------------------------------------------------------- words_of


@pytest.mark.parametrize(
    "text,words",
    [
        ("Don't stop, O’Neil!", ["Don't", "stop", ",", "O’Neil", "!"]),
        (
            "Pi is 3.14; a lot is 1,000 (roughly).",
            ["Pi", "is", "3.14", ";", "a", "lot", "is", "1,000", "(", "roughly", ")", "."],
        ),
        ("he doesn 't like it 's taste", ["he", "doesn", "'t", "like", "it", "'s", "taste"]),
        ("'Tis a 'quoted' word", ["'", "Tis", "a", "'", "quoted", "'", "word"]),
        ("cafe\u0301 déjà-vu", ["cafe\u0301", "déjà", "-", "vu"]),  # decomposed accent stays in its word
        ("東京 は", ["東京", "は"]),
        ("I ❤️ 🍕!", ["I", "❤️", "🍕", "!"]),
        (
            "a\u00a0b\u200bc\u00add\x00e\x07f\ufeffg",
            ["a", "b", "cd", "e", "fg"],
        ),  # NBSP, ZWSP, soft hyphen, controls, BOM
        (" \t\u200b\u200d\n", []),
    ],
)
def test_words_of_examples(text, words):
    assert words_of(text) == words


@hypothesis_settings(max_examples=200, deadline=None)
@given(st.text())
def test_words_of_keeps_every_visible_character_in_nonempty_words(text):
    words = words_of(text)
    assert all(word and not any(ch.isspace() for ch in word) for word in words)
    visible = "".join(ch for ch in text if not ch.isspace() and unicodedata.category(ch) not in ("Cc", "Cf"))
    assert "".join(words) == visible


# --------------------------------------------------------------------------- resolution

REL = "ud-english-ewt/en_ewt-ud-dev.conllu"


def place(root: Path, text: str = GOOD_CONLLU) -> Path:
    path = root / REL
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_resolution_order(isolated, monkeypatch):
    env, project, cache = isolated / "env", isolated / "project-data", isolated / "cache" / "data"
    explicit = isolated / "mine.conllu"
    explicit.write_text(GOOD_CONLLU)
    for root in (env, project, cache):
        place(root)
    monkeypatch.setenv(settings.DATA_DIR_ENV, str(env))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", data.DataVersionWarning)  # these files are not the real EWT
        assert resolve_data_file("ud-english-ewt", "dev", path=explicit) == explicit
        assert resolve_data_file("ud-english-ewt", "dev") == env / REL
        (env / REL).unlink()
        assert resolve_data_file("ud-english-ewt", "dev") == project / REL
        (project / REL).unlink()
        assert resolve_data_file("ud-english-ewt", "dev") == cache / REL
        assert [r["where"] for r in data.available_datasets() if r["name"] == "ud-english-ewt"] == [None, "cache", None]
    with pytest.raises(DataNotFoundError, match="no such file"):
        resolve_data_file("ud-english-ewt", "dev", path=isolated / "missing.conllu")


def test_found_file_with_other_sha256_is_used_with_a_warning(isolated, monkeypatch):
    monkeypatch.setenv(settings.DATA_DIR_ENV, str(isolated / "env"))
    path = place(isolated / "env")
    with pytest.warns(data.DataVersionWarning, match="sha256"):
        corpus = data.load_treebank("dev")
    assert corpus.path == path and len(corpus) == 2 and corpus.name == "ud-english-ewt/dev"
    assert corpus.description.startswith("UD English Web Treebank v2.16")


def test_offline_and_missing_says_where_it_looked_and_how_to_get_it(isolated):
    with pytest.raises(DataNotFoundError) as caught:
        data.load_gap("development")
    message = str(caught.value)
    assert (
        "https://raw.githubusercontent.com/google-research-datasets/gap-coreference/master/gap-development.tsv"
        in message
    )
    assert "BERTOLOGY_DATA_DIR" in message and "offline" in message
    assert str(isolated / "project-data" / "gap-coreference" / "gap-development.tsv") in message
    assert str(isolated / "cache" / "data" / "gap-coreference" / "gap-development.tsv") in message


def test_mrpc_explains_how_to_get_it(isolated, monkeypatch):
    monkeypatch.delenv(settings.OFFLINE_ENV)
    with pytest.raises(DataNotFoundError, match="download_glue_data.py"):
        data.load_glue("MRPC")


def test_default_treebank_falls_back_to_the_sample(isolated, monkeypatch):
    monkeypatch.setattr(settings, "project_data_dir", lambda: settings.PROJECT_ROOT / "data")
    corpus = data.default_treebank()
    assert len(corpus) == 40
    assert "Project sample treebank" in corpus.description and "EWT dev was not found" in corpus.description


@pytest.mark.parametrize("zipped", [False, True])
def test_download_from_file_url_checks_sha256(isolated, monkeypatch, zipped):
    monkeypatch.delenv(settings.OFFLINE_ENV)
    source = isolated / "source.conllu"
    source.write_text(GOOD_CONLLU)
    url, member = source.as_uri(), None
    if zipped:
        with zipfile.ZipFile(isolated / "ewt.zip", "w") as archive:
            archive.write(source, "EWT/dev.conllu")
        url, member = (isolated / "ewt.zip").as_uri(), "EWT/dev.conllu"
    spec = data.DATASETS["ud-english-ewt"]
    target = isolated / "cache" / "data" / REL

    def register(sha256):
        files = {**spec.files, "dev": DataFile(REL, sha256, url, member)}
        monkeypatch.setitem(data.DATASETS, "ud-english-ewt", dataclasses.replace(spec, files=files))

    register("0" * 64)
    with pytest.raises(DataNotFoundError, match="refused the download"):
        resolve_data_file("ud-english-ewt", "dev")
    assert not target.exists() and os.listdir(target.parent) == []  # no half file left behind

    register(hashlib.sha256(GOOD_CONLLU.encode()).hexdigest())
    assert resolve_data_file("ud-english-ewt", "dev") == target
    assert target.read_text() == GOOD_CONLLU and os.listdir(target.parent) == [target.name]
    with pytest.raises(DataNotFoundError, match="download=False"):
        target.unlink()
        resolve_data_file("ud-english-ewt", "dev", download=False)


def test_unknown_names():
    with pytest.raises(DataNotFoundError, match="unknown data set"):
        data.load_dataset("penn-treebank")
    with pytest.raises(DataNotFoundError, match="no split 'dev'"):
        resolve_data_file("gap-coreference", "dev")
    with pytest.raises(DataNotFoundError, match="unknown GLUE task"):
        data.load_glue("MNLI")


# --------------------------------------------------------------------------- the real data, when present


def _shared_data() -> Path | None:
    for candidate in (os.environ.get(settings.DATA_DIR_ENV), settings.PROJECT_ROOT.parent / "shared" / "data"):
        if candidate and (Path(candidate) / REL).is_file():
            return Path(candidate)
    return None


@pytest.mark.skipif(_shared_data() is None, reason="the shared gold data (BERTOLOGY_DATA_DIR) is not available")
@pytest.mark.parametrize(
    "name,split,count",
    [
        ("ud-english-ewt", "dev", 2001),
        ("gap-coreference", "development", 2000),
        ("glue/SST-2", "dev", 872),
        ("glue/MRPC", "dev", 408),
        ("glue/RTE", "dev", 277),
        ("glue/STS-B", "dev", 1500),
        ("glue/CoLA", "dev", 1043),
    ],
)
def test_real_data_counts(monkeypatch, name, split, count):
    monkeypatch.setenv(settings.DATA_DIR_ENV, str(_shared_data()))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the shared files must match the registry's sha256
        corpus = data.load_dataset(name, split)
    assert len(corpus) == count
    assert corpus.sha256 == data.DATASETS[name].files[split].sha256
    if name == "ud-english-ewt":
        assert sum(len(s.words) for s in corpus) == 25_147 and all(s.has_syntax for s in corpus)
    if name == "glue/RTE":
        assert corpus.labels.count("entailment") == 146


def test_read_text_lines_keeps_line_numbers(tmp_path):
    from bertology_utils.data import file_sha256, read_text_lines

    path = tmp_path / "notes.txt"
    path.write_text("The cat sat.\n\n  \nIt slept, didn't it?\n", encoding="utf-8")
    corpus = read_text_lines(path)
    assert [s.id for s in corpus] == ["notes:1", "notes:4"]
    assert corpus[1].words == ("It", "slept", ",", "didn't", "it", "?")
    assert corpus.sha256 == file_sha256(path) and corpus.description.startswith("notes: 2 sentences")
    assert f"read from {path.name} (sha256 {corpus.sha256[:12]})" in corpus.description
    assert str(path.parent) not in corpus.description
    (tmp_path / "blank.txt").write_text("\n \n")
    with pytest.raises(DataFormatError, match="blank.txt"):
        read_text_lines(tmp_path / "blank.txt")


def test_consecutive_pairs():
    corpus = Corpus.from_texts(["One two.", "Three four!", "Five six?", "Seven.", "Left over."], name="five")
    pairs = consecutive_pairs(corpus)
    assert len(pairs) == 2 and pairs[0].a == corpus[0].words and pairs[0].b == corpus[1].words
    assert pairs[1].id == f"{corpus[2].id}+{corpus[3].id}" and pairs.name == "five (consecutive pairs)"
    with pytest.raises(BertologyError, match="at least two sentences"):
        consecutive_pairs(corpus[:1])


@pytest.mark.parametrize(
    "word, expected",
    [
        (".", True),
        ("...", True),
        ("«»", True),
        ("—", True),
        ("'s", False),
        ("$", False),
        ("a.", False),
        ("", False),
    ],
)
def test_is_punctuation(word, expected):
    assert is_punctuation(word) is expected
