"""Extraction end to end on tiny random models: tokenize, align, forward, convert, store."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch

from bertology_utils.attention import extraction
from bertology_utils.attention.alignment import align
from bertology_utils.attention.extraction import attention_for, extract_attention, extract_cached, shard_range
from bertology_utils.attention.store import AttentionStore, merge_stores
from bertology_utils.attention.word_attention import word_attention_single
from bertology_utils.core.architectures import self_attention_modules
from bertology_utils.core.errors import BertologyError, StoreMismatchError
from bertology_utils.core.models import load_model
from bertology_utils.data import Corpus, Sentence, SentencePair, load_sample


@pytest.fixture(scope="module")
def corpus():
    """Sample sentences, an over-long one (the tiny models take 64 positions) and a pair."""
    sample = list(load_sample()[:12])
    long = Sentence("long", tuple(f"w{i}" for i in range(80)))
    pair = SentencePair("pair", ("the", "cat", "sat"), ("it", "slept", "."))
    return Corpus.from_items(sample[:5] + [long] + sample[5:] + [pair], name="mixed")


@pytest.fixture(scope="module")
def bert(tiny_model_dirs):
    return load_model(tiny_model_dirs["bert"])


def assert_stores_equal(a: AttentionStore, b: AttentionStore):
    assert list(a.status()) == list(b.status())
    for x, y in zip(a.iter_items(dtype=np.float16), b.iter_items(dtype=np.float16), strict=True):
        assert x.index == y.index and x.words == y.words
        np.testing.assert_array_equal(x.attention, y.attention)


def test_every_architecture(tiny_model_dir, corpus, tmp_path):
    loaded = load_model(tiny_model_dir)
    store = extract_attention(corpus, tmp_path / "s.zarr", loaded, batch_size=4, block_size=8, progress=False)
    assert store.is_complete and store.skipped() == {5: store.skipped()[5]}
    assert store.skipped()[5] > loaded.max_tokens
    for item in store:
        source = corpus[item.index]
        n = item.n_words
        assert item.attention.shape == (loaded.num_layers, loaded.num_heads, n, n)
        np.testing.assert_allclose(item.attention.sum(-1), 1.0, atol=4e-3)  # float16 storage
        expected = list(source.words) if isinstance(source, Sentence) else list(source.a) + list(source.b)
        assert [w for w, k in zip(item.words, item.word_kinds) if k == 0] == expected


def test_matches_an_independent_forward(bert, corpus):
    """The stored word map equals converting the plain Hugging Face forward of that one sentence."""
    sentence = corpus[2]
    (item,) = attention_for([sentence], bert, batch_size=1)
    enc = bert.tokenizer(list(sentence.words), is_split_into_words=True, return_tensors="pt")
    with torch.no_grad():
        att = torch.stack(bert.model(**enc, output_attentions=True).attentions, 1)[0].numpy()
    word_ids = enc.word_ids(0)
    t2w = np.cumsum([True] + [w is None or w != p for p, w in zip(word_ids, word_ids[1:])]) - 1
    np.testing.assert_allclose(item.attention, word_attention_single(att, t2w), atol=2e-3)


def test_forward_stops_after_the_last_attention(tiny_model_dir, corpus):
    """Every layer's maps equal the whole forward pass's, but the model's forward never completes:
    the last feed-forward block (and whatever follows it) is skipped."""
    loaded = load_model(tiny_model_dir)
    completed = []
    handle = loaded.model.register_forward_hook(lambda *args: completed.append(True))
    try:
        (item,) = attention_for([corpus[2]], loaded, keep_tokens=True)
        assert not completed
        enc = loaded.tokenizer(list(corpus[2].words), is_split_into_words=True, return_tensors="pt")
        with torch.no_grad():
            full = torch.stack(loaded.model(**enc, output_attentions=True).attentions, 1)[0]
        assert completed  # the hook does fire on a whole forward pass
    finally:
        handle.remove()
    np.testing.assert_array_equal(item.token_attention, full.to(torch.float16).numpy())


def test_whole_forward_when_hooks_see_no_probabilities(bert, corpus, monkeypatch):
    """An architecture whose hooked modules do not return the probabilities gets the whole
    forward pass, with the same results."""
    expected = attention_for(corpus[:4], bert, batch_size=2)
    monkeypatch.setattr(extraction, "self_attention_modules", lambda loaded: [loaded.model.embeddings])
    got = attention_for(corpus[:4], bert, batch_size=2)
    for x, y in zip(expected, got, strict=True):
        np.testing.assert_array_equal(x.attention, y.attention)


def test_threads_sharing_a_model_each_get_their_own_maps(bert, corpus):
    """The stopping hooks live on the shared model, so two threads' forwards run through both
    threads' hooks: each keeps only its own maps and still stops early."""
    parts = [corpus[:4], corpus[6:10]]
    serial = [attention_for(p, bert, batch_size=len(p)) for p in parts]
    barrier = threading.Barrier(2, timeout=30)  # both forwards in flight at once
    completed = []

    def meet(*args):
        barrier.wait()

    hooks = [
        self_attention_modules(bert.model)[0].register_forward_hook(meet),
        bert.model.register_forward_hook(lambda *args: completed.append(True)),
    ]
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            threaded = list(pool.map(lambda p: attention_for(p, bert, batch_size=len(p)), parts))
    finally:
        for h in hooks:
            h.remove()
    assert not completed
    for want, got in zip(serial, threaded):
        for x, y in zip(want, got, strict=True):
            np.testing.assert_array_equal(x.attention, y.attention)


def test_batched_equals_one_at_a_time(bert, corpus):
    together = attention_for(corpus, bert, batch_size=8, too_long="skip")
    alone = attention_for(corpus, bert, batch_size=1, too_long="skip")
    assert [i.index for i in together] == [i.index for i in alone] == [i for i in range(len(corpus)) if i != 5]
    for x, y in zip(together, alone):
        np.testing.assert_allclose(x.attention.astype(np.float32), y.attention.astype(np.float32), atol=2e-3)


def test_token_level_kept(bert, corpus, tmp_path):
    store = extract_attention(corpus[:3], tmp_path / "t.zarr", bert, keep_tokens=True, progress=False)
    item = store[1]
    assert item.token_attention.shape[-1] == item.n_tokens == len(item.tokens)
    np.testing.assert_allclose(
        word_attention_single(item.token_attention, item.token_to_word), item.attention, atol=4e-3
    )


def test_too_long_error_and_max_tokens(bert, corpus, tmp_path):
    with pytest.raises(BertologyError, match="item 5 .* more than the 64"):
        extract_attention(corpus, tmp_path / "e.zarr", bert, too_long="error", progress=False)
    store = extract_attention(corpus[:5], tmp_path / "m.zarr", bert, max_tokens=12, progress=False)
    assert all(n > 12 for n in store.skipped().values()) and store.summary()["extracted"] > 0
    with pytest.raises(BertologyError, match="more than"):
        extract_attention(corpus, tmp_path / "x.zarr", bert, max_tokens=10_000, progress=False)


def test_reuse_with_other_settings_is_refused(bert, corpus, tmp_path):
    path = tmp_path / "s.zarr"
    extract_attention(corpus[:4], path, bert, progress=False)
    with pytest.raises(StoreMismatchError, match="from_rule"):
        extract_attention(corpus[:4], path, bert, from_rule="max", progress=False)
    with pytest.raises(StoreMismatchError, match="corpus"):
        extract_attention(corpus[1:5], path, bert, progress=False)


def test_shards_merge_to_the_unsharded_result(bert, corpus, tmp_path):
    whole = extract_attention(corpus, tmp_path / "whole.zarr", bert, block_size=4, progress=False)
    parts = []
    for i in range(3):
        parts.append(tmp_path / f"part{i}.zarr")
        part = extract_attention(corpus, parts[-1], bert, block_size=4, shard=(i, 3), progress=False)
        assert not part.is_complete and part.done == np.subtract(*shard_range(len(corpus), (i, 3))[::-1])
    merged = merge_stores(tmp_path / "merged.zarr", parts)
    assert merged.is_complete
    assert_stores_equal(merged, whole)


KILLED_RUN = textwrap.dedent("""
    import os, signal, sys
    from bertology_utils.data import load_sample
    from bertology_utils.attention.extraction import extract_attention
    from bertology_utils.attention import shard as shard_module

    model_dir, path, die_after = sys.argv[1], sys.argv[2], int(sys.argv[3])
    original = shard_module.ShardWriter.append
    calls = []

    def append(self, results):
        calls.append(1)
        if len(calls) > die_after:  # half-write this block, then die without committing it
            self.shard.array("attention").append(results[0].attention.reshape(-1)[:100])
            os.kill(os.getpid(), signal.SIGKILL)
        original(self, results)

    shard_module.ShardWriter.append = append
    extract_attention(load_sample(), path, model_dir, batch_size=4, block_size=8, progress=False)
""")


def test_resume_after_kill_equals_uninterrupted_run(tiny_model_dirs, tmp_path):
    model_dir = tiny_model_dirs["bert"]
    path = tmp_path / "killed.zarr"
    proc = subprocess.run(
        [sys.executable, "-c", KILLED_RUN, str(model_dir), str(path), "2"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    partial = AttentionStore.open(path)
    assert partial.done == 16 and not partial.is_complete  # two committed blocks of 8

    resumed = extract_attention(load_sample(), path, model_dir, batch_size=4, block_size=8, progress=False)
    fresh = extract_attention(
        load_sample(), tmp_path / "fresh.zarr", model_dir, batch_size=4, block_size=8, progress=False
    )
    assert resumed.is_complete
    assert_stores_equal(resumed, fresh)


@pytest.mark.slow
def test_kill_from_outside_at_any_moment(tiny_model_dirs, tmp_path):
    """kill -9 sent by another process while extraction runs; the resumed store is exact."""
    model_dir = tiny_model_dirs["bert"]
    path = tmp_path / "k.zarr"
    code = (
        "import sys; from bertology_utils.data import load_sample; "
        "from bertology_utils.attention.extraction import extract_attention; "
        "c = load_sample(); c = type(c).from_items(list(c) * 5, name='x5'); "
        "extract_attention(c, sys.argv[2], sys.argv[1], batch_size=2, block_size=4, progress=False)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(model_dir), str(path)])
    deadline = time.time() + 120
    while time.time() < deadline:  # wait for the first commits, then kill mid-run
        if (path / "shards").exists() and any((path / "shards").iterdir()):
            try:
                if AttentionStore.open(path).done >= 8:
                    break
            except Exception:
                pass
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    corpus = load_sample()
    corpus = type(corpus).from_items(list(corpus) * 5, name="x5")
    done_before = AttentionStore.open(path).done
    assert 0 < done_before < len(corpus)
    resumed = extract_attention(corpus, path, model_dir, batch_size=2, block_size=4, progress=False)
    fresh = extract_attention(corpus, tmp_path / "f.zarr", model_dir, batch_size=2, block_size=4, progress=False)
    assert_stores_equal(resumed, fresh)


@pytest.mark.slow
def test_default_model_on_the_sample(default_model_dir, tmp_path):
    loaded = load_model(default_model_dir)
    store = extract_attention(load_sample(), tmp_path / "d.zarr", loaded, progress=False)
    assert (loaded.num_layers, loaded.num_heads) == (6, 12)
    assert store.is_complete and store.summary()["extracted"] == 40
    item = store[0]
    assert item.words[0] == "[CLS]" and item.words[-1] == "[SEP]"
    assert item.attention.shape[:2] == (6, 12)


def test_align_indexes_follow_the_corpus(bert, corpus):
    aligned = align(bert.tokenizer, corpus[3:6], start_index=3)
    assert [a.index for a in aligned] == [3, 4, 5]


def test_extract_cached_reuses_and_separates(bert, corpus, tmp_path):
    first = extract_cached(corpus[:4], bert, cache_dir=tmp_path, progress=False)
    again = extract_cached(corpus[:4], bert, cache_dir=tmp_path, progress=False)
    other = extract_cached(corpus[:4], bert, cache_dir=tmp_path, from_rule="first", progress=False)
    assert first.path == again.path != other.path
    assert len(list(tmp_path.glob("*.zarr"))) == 2
    assert other.metadata["conversion"]["from_rule"] == "first"


def test_batches_respect_the_attention_budget(bert, corpus):
    from bertology_utils.core.batching import plan_batches

    fits = sorted(align(bert.tokenizer, [c for i, c in enumerate(corpus) if i != 5]), key=lambda a: a.n_tokens)
    maps = bert.num_layers * bert.num_heads
    budget = maps * fits[-1].n_tokens ** 2 * 2  # room for two of the longest item
    lengths = [a.n_tokens for a in fits]
    batches = [
        [fits[i] for i in rows] for rows in plan_batches(lengths, 8, max_batch_weights=budget, maps_per_item=maps)
    ]
    assert [a.index for b in batches for a in b] == [a.index for a in fits]  # order kept, nothing lost
    assert all(len(b) <= 8 for b in batches)
    assert all(len(b) == 1 or len(b) * maps * b[-1].n_tokens ** 2 <= budget for b in batches)
    assert len(batches[-1]) <= 2
    assert len(plan_batches(lengths, 8, max_batch_weights=1, maps_per_item=maps)) == len(fits)


def test_extract_cached_runs_in_shards_and_overwrites_without_changing_its_key(bert, corpus, tmp_path):
    whole = extract_cached(corpus[:6], bert, cache_dir=tmp_path / "a", progress=False)
    part = extract_cached(corpus[:6], bert, cache_dir=tmp_path / "b", shard=(0, 2), progress=False)
    assert part.path.name == whole.path.name and not part.is_complete
    done = extract_cached(corpus[:6], bert, cache_dir=tmp_path / "b", shard=(1, 2), progress=False)
    assert done.is_complete
    for a, b in zip(whole, done):
        np.testing.assert_array_equal(a.attention, b.attention)
    again = extract_cached(corpus[:6], bert, cache_dir=tmp_path / "a", overwrite=True, progress=False)
    assert again.path == whole.path and again.is_complete
