import json

import numpy as np
import pytest

from bertology_utils.attention import shard as shard_module
from bertology_utils.attention import store as store_module
from bertology_utils.attention.store import AttentionStore, merge_stores
from bertology_utils.attention.word_attention import ItemAttention, SkippedItem
from bertology_utils.core.errors import StoreCorruptError, StoreError, StoreMismatchError

L, H = 2, 3


def metadata(**conversion):
    return {
        "model": {"name": "tiny", "num_layers": L, "num_heads": H, "weights_sha256": "abc"},
        "corpus": {"name": "synthetic", "sha256": "def", "items": 10},
        "conversion": {"from_rule": "mean", "max_tokens": 64, **conversion},
        "library": {"bertology_utils": "test"},
    }


def make_item(index, rng, n_words=None, tokens=False):
    n = n_words or int(rng.integers(3, 9))
    att = rng.random((L, H, n, n)).astype(np.float32)
    att /= att.sum(-1, keepdims=True)
    item = ItemAttention(
        index=index,
        item_id=f"s{index}",
        words=tuple(f"w{index}_{k}" for k in range(n)),
        word_kinds=np.array([1] + [0] * (n - 2) + [2], dtype=np.int8),
        segments=np.zeros(n, dtype=np.int8),
        attention=att,
        n_tokens=n + 1,
        replaced=index % 2,
    )
    if tokens:
        t = n + 1
        item.tokens = tuple(f"t{k}" for k in range(t))
        item.token_to_word = np.minimum(np.arange(t), n - 1).astype(np.int32)
        item.token_attention = rng.random((L, H, t, t)).astype(np.float32)
    return item


def items_for(n_items, seed=0, skip=(), tokens=False):
    rng = np.random.default_rng(seed)
    return [
        SkippedItem(i, f"s{i}", 99, "too long") if i in skip else make_item(i, rng, tokens=tokens)
        for i in range(n_items)
    ]


def write(path, results, n_items=10, shard=(0, 10), block=4, tokens=False, meta=None):
    store = AttentionStore.open_or_create(path, meta or metadata(), n_items)
    writer = store.writer(*shard, keep_tokens=tokens)
    for lo in range(0, len(results), block):
        writer.append(results[lo : lo + block])
    store.refresh()
    return store


def assert_same(item, expected):
    assert item.index == expected.index and item.item_id == expected.item_id
    assert item.words == expected.words
    np.testing.assert_array_equal(item.word_kinds, expected.word_kinds)
    np.testing.assert_array_equal(item.attention, expected.attention.astype(np.float16).astype(np.float32))
    assert item.n_tokens == expected.n_tokens and item.replaced == expected.replaced


def test_round_trip_random_access_and_iteration(tmp_path):
    results = items_for(10, skip={3, 7})
    write(tmp_path / "s.zarr", results)
    reopened = AttentionStore.open(tmp_path / "s.zarr")
    assert reopened.is_complete and len(reopened) == 10
    for i in (9, 0, 5):  # out of order on purpose
        assert_same(reopened[i], results[i])
    got = list(reopened.iter_items(span=3))
    assert [g.index for g in got] == [0, 1, 2, 4, 5, 6, 8, 9]
    for g in got:
        assert_same(g, results[g.index])
    assert reopened.skipped() == {3: 99, 7: 99}
    with pytest.raises(KeyError, match="skipped: 99 tokens"):
        reopened[3]
    assert list(reopened.status()) == [0, 0, 0, 1, 0, 0, 0, 1, 0, 0]
    assert [i.index for i in reopened.iter_items(indices=[8, 1, 3])] == [1, 8]
    assert reopened.summary()["skipped"] == 2


def test_token_level_round_trip(tmp_path):
    results = items_for(10, tokens=True)
    store = write(tmp_path / "s.zarr", results, tokens=True)
    item = store[6]
    np.testing.assert_array_equal(
        item.token_attention, results[6].token_attention.astype(np.float16).astype(np.float32)
    )
    assert item.tokens == results[6].tokens
    np.testing.assert_array_equal(item.token_to_word, results[6].token_to_word)


def test_uncommitted_tail_is_invisible_and_cut_on_resume(tmp_path):
    results = items_for(10)
    path = tmp_path / "s.zarr"
    store = write(path, results[:4])
    # A writer killed after appending data but before its commit leaves this behind.
    shard = store.shards[0]
    shard.array("attention").append(np.ones(500, dtype=np.float16))
    shard.array("n_words").append(np.array([7, 7], dtype=np.int32))
    reopened = AttentionStore.open(path)
    assert reopened.done == 4 and not reopened.is_complete
    with pytest.raises(KeyError, match="not been extracted"):
        reopened[4]
    assert_same(reopened[3], results[3])
    resumed = AttentionStore.open_or_create(path, metadata(), 10)
    writer = resumed.writer(0, 10, keep_tokens=False)
    assert writer.next_index == 4
    writer.append(results[4:])
    final = AttentionStore.open(path)
    assert final.is_complete
    for r in results:
        assert_same(final[r.index], r)


def test_appending_out_of_order_is_refused(tmp_path):
    store = AttentionStore.open_or_create(tmp_path / "s.zarr", metadata(), 10)
    writer = store.writer(0, 10, keep_tokens=False)
    with pytest.raises(StoreError, match="in order"):
        writer.append(items_for(10)[1:3])


def test_mismatched_settings_are_refused(tmp_path):
    path = tmp_path / "s.zarr"
    write(path, items_for(10))
    with pytest.raises(StoreMismatchError) as err:
        AttentionStore.open_or_create(path, metadata(from_rule="first"), 10)
    assert "conversion.from_rule: store has 'mean', asked for 'first'" in str(err.value)
    with pytest.raises(StoreMismatchError, match="n_items"):
        AttentionStore.open_or_create(path, metadata(), 11)
    fresh = AttentionStore.open_or_create(path, metadata(from_rule="first"), 10, overwrite=True)
    assert fresh.done == 0 and fresh.metadata["conversion"]["from_rule"] == "first"


def test_not_a_store(tmp_path):
    with pytest.raises(StoreError, match="no attention store"):
        AttentionStore.open(tmp_path / "missing.zarr")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("mine")
    with pytest.raises(StoreError, match="not an attention store"):
        AttentionStore.open_or_create(tmp_path / "full", metadata(), 10)
    assert (tmp_path / "full" / "notes.txt").read_text() == "mine"  # nothing of the user's is lost


def test_corrupt_metadata(tmp_path):
    path = tmp_path / "s.zarr"
    write(path, items_for(10))
    (path / "zarr.json").write_text("{ not json")
    with pytest.raises(StoreCorruptError, match="cannot read"):
        AttentionStore.open(path)


def test_corrupt_chunk_is_detected(tmp_path):
    path = tmp_path / "s.zarr"
    write(path, items_for(10))
    chunks = [p for p in (path / "shards").rglob("attention/c/*") if p.is_file()]
    assert chunks
    data = bytearray(chunks[0].read_bytes())
    data[len(data) // 2] ^= 0xFF
    chunks[0].write_bytes(bytes(data))
    store = AttentionStore.open(path)
    with pytest.raises(StoreCorruptError, match="cannot read items"):
        store[0]


def test_committed_length_longer_than_array_is_corrupt(tmp_path):
    path = tmp_path / "s.zarr"
    store = write(path, items_for(10))
    shard_json = store.shards[0].group.store_path.store.root / "shards" / store.shards[0].name / "zarr.json"
    meta = json.loads(shard_json.read_text())
    meta["attributes"]["lengths"]["attention"] += 1000
    shard_json.write_text(json.dumps(meta))
    with pytest.raises(StoreCorruptError, match="shorter"):
        AttentionStore.open(path).shards


def test_an_array_gone_from_a_shard_is_named(tmp_path):
    path = tmp_path / "s.zarr"
    store = write(path, items_for(10))
    (path / "shards" / store.shards[0].name / "words" / "zarr.json").unlink()
    with pytest.raises(StoreCorruptError, match="has no array words"):
        AttentionStore.open(path).shards


@pytest.mark.parametrize("tokens", [False, True])
def test_a_new_shard_has_every_array_empty_with_its_chunks_and_codecs(tmp_path, tokens):
    """A shard's nodes are written from metadata made once per process: each must still be its own spec."""
    store = AttentionStore.open_or_create(tmp_path / "s.zarr", metadata(), 20)
    shard = store.add_shard(0, 10, keep_tokens=tokens)
    specs = dict(shard_module._ARRAYS, **(shard_module._TOKEN_ARRAYS if tokens else {}))
    assert set(shard.arrays) == set(specs) and shard.has_tokens() == tokens
    assert shard.committed == 0 and dict(shard.lengths) == dict.fromkeys(specs, 0)
    for name, (dtype, chunk, _) in specs.items():
        array = shard.array(name)
        assert array.shape == (0,) and array.chunks == (chunk,), name
        assert array.dtype.kind == ("T" if dtype is str else np.dtype(dtype).kind), name
        codecs = [type(c).__name__ for c in array.metadata.codecs]
        assert (codecs[-1] == "Crc32cCodec") if dtype == "float16" else ("ZstdCodec" in codecs), (name, codecs)
    other = store.add_shard(10, 20, keep_tokens=tokens)  # a second shard: its own group, same layout
    assert other.name != shard.name and set(other.arrays) == set(specs)


def test_merge_disjoint_shards(tmp_path):
    results = items_for(10, skip={2})
    write(tmp_path / "a.zarr", results[:6], shard=(0, 6))
    write(tmp_path / "b.zarr", results[6:], shard=(6, 10))
    merged = merge_stores(tmp_path / "m.zarr", [tmp_path / "a.zarr", tmp_path / "b.zarr"])
    assert merged.is_complete and merged.skipped() == {2: 99}
    for r in results:
        if isinstance(r, ItemAttention):
            assert_same(merged[r.index], r)
    # Merging the same source again is a no-op, not a duplicate.
    again = merge_stores(tmp_path / "m.zarr", [tmp_path / "a.zarr"])
    assert len(again.shards) == 2


def test_merge_refuses_mismatch_and_overlap(tmp_path):
    results = items_for(10)
    write(tmp_path / "a.zarr", results[:6], shard=(0, 6))
    write(tmp_path / "b.zarr", results[6:], shard=(6, 10), meta=metadata(from_rule="max"))
    with pytest.raises(StoreMismatchError, match="from_rule"):
        merge_stores(tmp_path / "m.zarr", [tmp_path / "a.zarr", tmp_path / "b.zarr"])
    write(tmp_path / "c.zarr", results[4:], shard=(4, 10))
    with pytest.raises(StoreError, match="overlaps"):
        merge_stores(tmp_path / "m2.zarr", [tmp_path / "a.zarr", tmp_path / "c.zarr"])


def test_missing_ranges(tmp_path):
    store = AttentionStore.open_or_create(tmp_path / "s.zarr", metadata(), 10)
    store.writer(2, 4, keep_tokens=False)
    store.writer(6, 8, keep_tokens=False)
    store.refresh()
    assert store.missing_ranges() == [(0, 2), (4, 6), (8, 10)]
    assert store.missing_ranges(3, 7) == [(4, 6)]
    with pytest.raises(StoreError, match="overlaps"):
        store.writer(3, 5, keep_tokens=False)


def test_model_named_differently_is_the_same_model(tmp_path):
    path = tmp_path / "s.zarr"
    write(path, items_for(10))
    meta = metadata()
    meta["model"] = {**meta["model"], "name": "./tiny", "source": "/elsewhere/tiny"}
    assert AttentionStore.open_or_create(path, meta, 10).done == 10  # weights hash decides, not the path
    meta["model"]["weights_sha256"] = "other"
    with pytest.raises(StoreMismatchError, match="weights_sha256"):
        AttentionStore.open_or_create(path, meta, 10)


def test_maps_packed_back_to_back_are_written_without_a_copy(tmp_path):
    """Maps that are consecutive views of one buffer (as extraction packs a block) are joined as a
    view; any other layout is copied. Both write the same store."""
    rng = np.random.default_rng(3)
    items = [make_item(i, rng) for i in range(4)]
    sizes = [it.attention.size for it in items]
    flat = np.empty(sum(sizes), dtype=np.float16)
    ends = np.cumsum(sizes)
    packed = []
    for it, end, size in zip(items, ends, sizes):
        view = flat[end - size : end].reshape(it.attention.shape)
        view[...] = it.attention
        packed.append(ItemAttention(**{**it.__dict__, "attention": view}))
    joined = shard_module._concat([p.attention.reshape(-1) for p in packed], np.float16)
    assert np.shares_memory(joined, flat) and joined.size == flat.size
    shuffled = [packed[i].attention.reshape(-1) for i in (1, 0, 2, 3)]
    copied = shard_module._concat(shuffled, np.float16)
    assert not np.shares_memory(copied, flat)
    np.testing.assert_array_equal(copied, np.concatenate(shuffled))
    stores = []
    for name, results in (("packed", packed), ("separate", items)):
        store = AttentionStore.open_or_create(tmp_path / f"{name}.zarr", metadata(), 10)
        store.writer(0, 4, keep_tokens=False).append(results)
        store.refresh()
        stores.append(store)
    for x, y in zip(*(s.iter_items(dtype=np.float16) for s in stores), strict=True):
        np.testing.assert_array_equal(x.attention, y.attention)


def test_a_commit_is_one_write_of_the_shard_record_after_all_its_data(tmp_path, monkeypatch):
    """The commit protocol's order: every array's shape and chunks, then the shard's zarr.json, once."""
    store = AttentionStore.open_or_create(tmp_path / "s.zarr", metadata(), 10)
    writer = store.writer(0, 10, keep_tokens=False)
    written: list[str] = []
    original = store_module.zarr.storage.LocalStore.set

    async def recording(self, key, value):
        written.append(key)
        await original(self, key, value)

    monkeypatch.setattr(store_module.zarr.storage.LocalStore, "set", recording)
    writer.append(items_for(10)[:4])
    record = f"shards/{writer.shard.name}/zarr.json"
    assert written.count(record) == 1 and written[-1] == record
    assert {k.split("/")[2] for k in written[:-1]} == set(shard_module._ARRAYS)  # every array, before it
    reopened = AttentionStore.open(tmp_path / "s.zarr")
    assert reopened.done == 4 and dict(reopened.shards[0].lengths) == dict(writer.shard.lengths)


def test_one_writer_per_shard_and_the_next_resumes_from_its_commit(tmp_path):
    import threading

    results = items_for(10)
    path = tmp_path / "s.zarr"
    first = AttentionStore.open_or_create(path, metadata(), 10).writer(0, 10, keep_tokens=False)
    other = AttentionStore.open(path, mode="r+")
    with pytest.raises(StoreError, match=r"being written by .*-\d+"):
        other.writer(0, 10, keep_tokens=False, wait=False)
    got = {}
    waiting = threading.Thread(target=lambda: got.update(writer=other.writer(0, 10, keep_tokens=False)))
    waiting.start()
    first.append(results[:4])
    waiting.join(0.5)
    assert waiting.is_alive()  # still waiting for the lock
    first.close()
    waiting.join(10)
    second = got["writer"]
    assert second.next_index == 4  # the commit made while it waited, read after taking the lock
    with pytest.raises(StoreError, match="closed"):
        first.append(results[4:6])
    second.append(results[4:])
    second.close()
    final = AttentionStore.open(path)
    assert final.is_complete and all(np.array_equal(final[r.index].words, r.words) for r in results)


def test_a_killed_writer_frees_its_shard_and_its_scratch_is_removed(tmp_path):
    """kill -9 of a process holding a shard's lock: the OS frees the lock; a scratch folder left by a dead
    process of this host (a store or shard being built) is deleted by the next writer."""
    import signal
    import subprocess
    import sys

    path = tmp_path / "s.zarr"
    AttentionStore.open_or_create(path, metadata(), 10)
    code = (
        "import sys, time; from bertology_utils.attention.store import AttentionStore\n"
        "from bertology_utils.core.files import scratch_path\n"
        f"w = AttentionStore.open({str(path)!r}, mode='r+').writer(0, 10, keep_tokens=False)\n"
        # what a store's creation and a shard's staging leave when killed half way
        f"kept = [scratch_path(t, folder=True) for t in [{str(path)!r}, {str(path / '.staging' / '000000000-000000010')!r}]]\n"
        "made = [k.__enter__() for k in kept]\n"
        "print('locked', flush=True); time.sleep(60)"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == "locked"
    with pytest.raises(StoreError, match=f"being written by .*-{child.pid}"):
        AttentionStore.open(path, mode="r+").writer(0, 10, keep_tokens=False, wait=False)
    orphans = [*tmp_path.glob(".s.zarr.*.partial"), *(path / ".staging").glob(".*.partial")]
    assert len(orphans) == 2
    child.send_signal(signal.SIGKILL)
    child.wait()
    AttentionStore.open_or_create(path, metadata(), 10).writer(0, 10, keep_tokens=False, wait=False).close()
    assert not any(o.exists() for o in orphans)


def test_a_full_disk_ends_in_a_clear_error_and_keeps_every_commit(tmp_path, monkeypatch):
    import errno

    results = items_for(10)
    path = tmp_path / "s.zarr"
    store = AttentionStore.open_or_create(path, metadata(), 10)
    writer = store.writer(0, 10, keep_tokens=False)
    writer.append(results[:4])
    original, calls = store_module.zarr.storage.LocalStore.set, []

    async def filling(self, key, value):
        calls.append(key)
        if len(calls) > 3:  # a few files of the next block fit, then the disk is full
            raise OSError(errno.ENOSPC, "No space left on device", key)
        await original(self, key, value)

    monkeypatch.setattr(store_module.zarr.storage.LocalStore, "set", filling)
    with pytest.raises(StoreError, match="items 4..7 .*No space left on device.*committed before them is kept"):
        writer.append(results[4:8])
    monkeypatch.undo()
    writer.close()
    reopened = AttentionStore.open(path)
    assert reopened.done == 4
    for r in results[:4]:
        assert_same(reopened[r.index], r)
    resumed = AttentionStore.open(path, mode="r+").writer(0, 10, keep_tokens=False)
    assert resumed.next_index == 4
    resumed.append(results[4:])
    final = AttentionStore.open(path)
    assert final.is_complete
    for r in results:
        assert_same(final[r.index], r)
