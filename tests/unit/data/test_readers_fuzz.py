"""Readers on mutated and random files: each input parses, or raises DataFormatError naming the file (and line)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bertology_utils.core.errors import DataFormatError
from bertology_utils.data import (
    Corpus,
    read_conllu,
    read_gap_tsv,
    read_pairs_tsv,
    read_text_lines,
    resolve_task,
)

FIXTURES = Path(__file__).resolve().parents[2] / "data"
USER_TASK = FIXTURES / "user_task"

BOM = b"\xef\xbb\xbf"
HUGE = 1 << 20  # a "huge line": 1 MB
INVALID_UTF8 = (b"\xff", b"\xc3", b"\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80")  # bad byte, lone lead, surrogate...
# Errors about the whole file (or task) rather than one of its lines.
WHOLE_FILE = re.compile(r"no sentences|no data rows|one class only|labels not in train\.tsv")


def gap_row(id_: str, text: str, pronoun: str, a: str, a_coref: str, b: str, b_coref: str) -> str:
    fields = [id_, text, pronoun, text.find(pronoun), a, text.find(a), a_coref, b, text.find(b), b_coref, "http://x"]
    return "\t".join(map(str, fields))


GAP = "\n".join(
    [
        "ID\tText\tPronoun\tPronoun-offset\tA\tA-offset\tA-coref\tB\tB-offset\tB-coref\tURL",
        gap_row("g-1", "Anna met Bea before she left.", "she", "Anna", "TRUE", "Bea", "FALSE"),
        gap_row("g-2", "Carl called Dirk, and his dog barked.", "his", "Carl", "FALSE", "Dirk", "TRUE"),
    ]
)
PAIRS = "id\tsentence1\tsentence2\tlabel\n1\tA cat sleeps.\tAn animal rests.\tentailment\n2\tIt rains.\tIt is dry.\tnot_entailment"
TEXT = "Die kleine Katze schläft.\n\nÉté, hiver: 東京 は.\nOne more line"

# name -> (reader, file name, a valid file's bytes)
READERS = {
    "conllu": (read_conllu, "f.conllu", (FIXTURES / "de_mini.conllu").read_bytes()),
    "text": (read_text_lines, "f.txt", TEXT.encode()),
    "pairs": (read_pairs_tsv, "f.tsv", PAIRS.encode()),
    "gap": (read_gap_tsv, "f.tsv", GAP.encode()),
}
TASK_FILES = {name: (USER_TASK / name).read_bytes() for name in ("train.tsv", "dev.tsv")}

FUZZ = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,  # the same inputs every run: CI is never flaky
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)


# --------------------------------------------------------------------------- mutations of a valid file


def _splice(draw, data: bytes, new: bytes) -> bytes:
    i = draw(st.integers(0, len(data)))
    j = draw(st.integers(i, min(len(data), i + 8)))
    return data[:i] + new + data[j:]


def _insert(draw, data: bytes, new: bytes) -> bytes:
    i = draw(st.integers(0, len(data)))
    return data[:i] + new + data[i:]


def _edit_line(draw, data: bytes, edit) -> bytes:
    """``edit(fields)`` applied to the tab-separated fields of one line."""
    lines = data.split(b"\n")
    k = draw(st.integers(0, len(lines) - 1))
    fields = lines[k].split(b"\t")
    i = draw(st.integers(0, len(fields) - 1))
    lines[k] = b"\t".join(edit(fields, i))
    return b"\n".join(lines)


def _edit_lines(draw, data: bytes, edit) -> bytes:
    lines = data.split(b"\n")
    k = draw(st.integers(0, len(lines) - 1))
    return b"\n".join(edit(lines, k))


_FIELD_VALUES = st.one_of(
    st.sampled_from(["", "_", "0", "-1", "99", "1-2", "1.1", "TRUE", "nan", "1e9", "entailment", "label", "#"]),
    st.text(max_size=8),
).map(str.encode)

MUTATIONS = {
    "truncate": lambda draw, data: data[: draw(st.integers(0, len(data)))],
    "BOM": lambda draw, data: BOM + data,
    "CRLF": lambda draw, data: data.replace(b"\n", b"\r\n"),
    "NUL byte": lambda draw, data: _insert(draw, data, b"\0"),
    "invalid UTF-8": lambda draw, data: _insert(draw, data, draw(st.sampled_from(INVALID_UTF8))),
    "random bytes": lambda draw, data: _splice(draw, data, draw(st.binary(max_size=16))),
    "random text": lambda draw, data: _splice(draw, data, draw(st.text(max_size=8)).encode()),
    "drop column": lambda draw, data: _edit_line(draw, data, lambda f, i: f[:i] + f[i + 1 :]),
    "duplicate column": lambda draw, data: _edit_line(draw, data, lambda f, i: f[: i + 1] + f[i:]),
    "insert column": lambda draw, data: _edit_line(draw, data, lambda f, i: [*f[:i], draw(_FIELD_VALUES), *f[i:]]),
    "replace field": lambda draw, data: _edit_line(draw, data, lambda f, i: [*f[:i], draw(_FIELD_VALUES), *f[i + 1 :]]),
    "drop line": lambda draw, data: _edit_lines(draw, data, lambda lines, k: lines[:k] + lines[k + 1 :]),
    "duplicate line": lambda draw, data: _edit_lines(draw, data, lambda lines, k: lines[: k + 1] + lines[k:]),
    "huge line": lambda draw, data: _edit_lines(
        draw, data, lambda lines, k: [*lines[:k], b"word " * (HUGE // 5), *lines[k:]]
    ),
    "huge field": lambda draw, data: _edit_line(draw, data, lambda f, i: [*f[:i], f[i] + b"x" * HUGE, *f[i + 1 :]]),
}


@st.composite
def mutants(draw, valid: bytes) -> bytes:
    """A valid file after one to three random mutations, or (one time in ten) random bytes."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(max_size=300))
    data = valid
    for name in draw(st.lists(st.sampled_from(sorted(MUTATIONS)), min_size=1, max_size=3)):
        data = MUTATIONS[name](draw, data)
    return data


def assert_names_file_and_line(error: DataFormatError, files: dict[Path, bytes]) -> None:
    """The error names one of ``files``, and a line of it unless the problem is the whole file's."""
    path = Path(error.path)
    assert path in files, f"{error} names {error.path}, not one of the files read"
    assert str(error).startswith(f"{path}: " if error.line is None else f"{path}:{error.line}: ")
    if error.line is None:
        assert WHOLE_FILE.search(str(error)), f"no line in {error}"
    else:
        assert 1 <= error.line <= files[path].count(b"\n") + 1


# --------------------------------------------------------------------------- properties


@pytest.mark.parametrize("reader", READERS)
@FUZZ
@given(data=st.data())
def test_reader_parses_or_names_file_and_line(reader, data, tmp_path, count_inputs):
    read, name, valid = READERS[reader]
    content = data.draw(mutants(valid), label="file")
    count_inputs()
    path = tmp_path / name
    path.write_bytes(content)
    try:
        corpus = read(path)
    except DataFormatError as error:
        assert_names_file_and_line(error, {path: content})
    else:
        assert isinstance(corpus, Corpus) and len(corpus) > 0


@FUZZ
@given(data=st.data())
def test_task_folder_parses_or_names_file_and_line(data, tmp_path, count_inputs):
    damaged = data.draw(st.sampled_from(sorted(TASK_FILES)), label="damaged file")
    files = {tmp_path / "task" / name: content for name, content in TASK_FILES.items()}
    files[tmp_path / "task" / damaged] = data.draw(mutants(TASK_FILES[damaged]), label="file")
    count_inputs()
    (tmp_path / "task").mkdir(exist_ok=True)
    for path, content in files.items():
        path.write_bytes(content)
    try:
        task = resolve_task(tmp_path / "task")
    except DataFormatError as error:
        assert_names_file_and_line(error, files)
    else:
        assert len(task.train) > 0 and len(task.dev) > 0 and len(task.label_names) >= 2


@pytest.mark.parametrize("reader", READERS)
@FUZZ
@given(data=st.data())
def test_nul_bytes_and_invalid_utf8_are_reported_at_their_line(reader, data, tmp_path, count_inputs):
    read, name, valid = READERS[reader]
    lines = valid.split(b"\n")
    k = data.draw(st.integers(0, len(lines) - 1), label="line index")
    at = data.draw(st.integers(0, len(lines[k])), label="position in line")
    bad = data.draw(st.sampled_from((b"\0", *INVALID_UTF8)), label="bad bytes")
    lines[k] = lines[k][:at] + bad + lines[k][at:]
    ending = data.draw(st.sampled_from([b"\n", b"\r\n"]), label="line ending")
    content = data.draw(st.sampled_from([b"", BOM]), label="BOM") + ending.join(lines)
    count_inputs()
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(DataFormatError) as caught:
        read(path)
    assert caught.value.line == k + 1 and str(caught.value).startswith(f"{path}:{k + 1}: ")


# --------------------------------------------------------------------------- BOM and CRLF are legitimate


def _as_saved_by_windows(content: bytes, bom: bool, crlf: bool) -> bytes:
    return (BOM if bom else b"") + (content.replace(b"\n", b"\r\n") if crlf else content)


@pytest.mark.parametrize(("bom", "crlf"), [(True, False), (False, True), (True, True)])
@pytest.mark.parametrize("reader", READERS)
def test_bom_and_crlf_parse_like_the_clean_file(reader, bom, crlf, tmp_path):
    read, name, valid = READERS[reader]
    (tmp_path / "clean").mkdir()
    (tmp_path / "windows").mkdir()
    (tmp_path / "clean" / name).write_bytes(valid)
    (tmp_path / "windows" / name).write_bytes(_as_saved_by_windows(valid, bom, crlf))
    clean, windows = read(tmp_path / "clean" / name), read(tmp_path / "windows" / name)
    assert windows.items == clean.items and windows.labels == clean.labels


def test_a_task_folder_saved_with_bom_and_crlf_reads_like_the_clean_one(tmp_path):
    shutil.copytree(USER_TASK, tmp_path / "windows")
    for name, content in TASK_FILES.items():
        (tmp_path / "windows" / name).write_bytes(_as_saved_by_windows(content, bom=True, crlf=True))
    clean, windows = resolve_task(USER_TASK), resolve_task(tmp_path / "windows")
    assert windows.label_names == clean.label_names
    for split in ("train", "dev"):
        assert getattr(windows, split).items == getattr(clean, split).items
        assert getattr(windows, split).labels == getattr(clean, split).labels
