"""A damaged attention store: opening it and reading everything raises StoreError naming the store, or reads."""

from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bertology_utils.attention.extraction import extract_attention
from bertology_utils.attention.store import AttentionStore
from bertology_utils.core.errors import StoreError
from bertology_utils.data import Corpus

FUZZ = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,  # the same inputs every run: CI is never flaky
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# Small values, so that a damaged count (items, layers, committed...) stays cheap to allocate and loop over.
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 60) | st.floats(-3, 60) | st.text(max_size=4),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3),
    max_leaves=6,
)


@pytest.fixture(scope="module")
def valid_store(tiny_model_dirs, tmp_path_factory) -> Path:
    """A store of two shards with token maps and a skipped item (too long), extracted once."""
    texts = ["The cat sat on the mat .", "It rained .", "A long sentence " + "that goes on " * 20, "Birds sing ."]
    path = tmp_path_factory.mktemp("store") / "s.zarr"
    for shard in ((0, 2), (1, 2)):
        extract_attention(
            Corpus.from_texts(texts), path, tiny_model_dirs["bert"], keep_tokens=True, max_tokens=24,
            block_size=1, shard=shard, progress=False,
        )  # fmt: skip
    store = AttentionStore.open(path)
    assert store.is_complete and len(store.shards) == 2 and list(store.status()) == [0, 0, 1, 0]
    return path


def _files(store: Path) -> list[Path]:
    return sorted(p for p in store.rglob("*") if p.is_file())


def _json_paths(value, prefix=()) -> list[tuple]:
    """Every key path into a JSON document (the document itself is the empty path)."""
    paths = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            paths += _json_paths(child, (*prefix, key))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            paths += _json_paths(child, (*prefix, i))
    return paths


def _set_json_value(draw, file: Path) -> None:
    """One value somewhere in a zarr.json (shape, codec, attributes: committed, lengths, n_items...) replaced."""
    try:
        document = json.loads(file.read_bytes())
    except (OSError, ValueError):  # deleted or garbled by an earlier mutation
        return
    where = draw(st.sampled_from(_json_paths(document)))
    value = draw(_JSON)
    if not where:
        document = value
    else:
        parent = document
        for key in where[:-1]:
            parent = parent[key]
        parent[where[-1]] = value
    file.write_text(json.dumps(document))


def _in_a_file(damage, *, json_only: bool = False):
    """A mutation of one file of the store, ``damage(draw, file)``; zarr.json files are picked as often as chunks."""

    def mutate(draw, store: Path) -> None:
        files = _files(store)
        metadata = [f for f in files if f.name == "zarr.json"]
        chunks = [f for f in files if f.name != "zarr.json"]
        kinds = [kind for kind in ([metadata] if json_only else [metadata, chunks]) if kind]
        if kinds:
            damage(draw, draw(st.sampled_from(draw(st.sampled_from(kinds)))))

    return mutate


def _truncate(draw, file: Path) -> None:
    data = file.read_bytes()
    file.write_bytes(data[: draw(st.integers(0, max(0, len(data) - 1)))])


def _flip_byte(draw, file: Path) -> None:
    data = bytearray(file.read_bytes())
    if data:
        data[draw(st.integers(0, len(data) - 1))] ^= draw(st.integers(1, 255))
    file.write_bytes(bytes(data))


def _delete_folder(draw, store: Path) -> None:
    folders = sorted(p for p in store.rglob("*") if p.is_dir())
    if folders:
        shutil.rmtree(draw(st.sampled_from(folders)))


MUTATIONS = {
    "garbage": _in_a_file(lambda draw, file: file.write_bytes(draw(st.binary(max_size=64)))),
    "truncate": _in_a_file(_truncate),
    "flip a byte": _in_a_file(_flip_byte),
    "delete a file": _in_a_file(lambda draw, file: file.unlink()),
    "delete a folder": _delete_folder,
    "change a JSON value": _in_a_file(_set_json_value, json_only=True),
    # The store's own attributes (metadata, n_items) are one zarr.json among many: damaged on their own as well.
    "change a store attribute": lambda draw, store: _set_json_value(draw, store / "zarr.json"),
}


def read_everything(path: Path) -> None:
    """What a reader of a store does: open it, its status, skipped items and shards, every item alone and all in order."""
    store = AttentionStore.open(path)
    store.status()
    store.skipped()
    assert 0 <= store.done and isinstance(store.is_complete, bool) and isinstance(store.shards, list)
    for index in range(len(store)):
        with contextlib.suppress(KeyError):  # skipped or not extracted: the documented answer
            store[index]
    list(store.iter_items())


def test_the_valid_store_reads(valid_store):
    read_everything(valid_store)


@FUZZ
@given(data=st.data())
def test_a_damaged_store_reads_or_raises_store_error(data, valid_store, tmp_path, count_inputs):
    damaged = tmp_path / "damaged.zarr"
    shutil.rmtree(damaged, ignore_errors=True)
    shutil.copytree(valid_store, damaged)
    for name in data.draw(st.lists(st.sampled_from(sorted(MUTATIONS)), min_size=1, max_size=3), label="mutations"):
        MUTATIONS[name](data.draw, damaged)
    count_inputs()
    try:
        read_everything(damaged)
    except StoreError as error:
        assert str(damaged) in str(error), f"the error does not name the store: {error}"
