"""Maps from a map source (extraction's ``maps=``) instead of the model's attention: converted to
words, stored, resumed and keyed like raw attention (tiny random bert: 2 layers, 4 heads)."""

import numpy as np
import pytest
import torch

from bertology_utils.attention import shard as shard_module
from bertology_utils.attention.extraction import (
    MAX_BATCH_WEIGHTS,
    attention_for,
    cached_store_path,
    extract_attention,
    extract_cached,
    store_metadata,
)
from bertology_utils.attention.store import AttentionStore
from bertology_utils.attention.word_attention import word_attention
from bertology_utils.core.cache import entry_name
from bertology_utils.core.errors import BertologyError, StoreMismatchError
from bertology_utils.core.models import load_model
from bertology_utils.data import Corpus, SentencePair, load_sample


class MeanOverHeads:
    """A layer-level source: each layer's attention averaged over its heads (one map per layer)."""

    name = "mean-over-heads"
    heads = 1

    def settings(self) -> dict:
        return {"reduce": "mean"}

    def __call__(self, loaded, inputs):
        with torch.inference_mode():
            attentions = loaded.model(**inputs, output_attentions=True).attentions
        return [a.mean(1, keepdim=True) for a in attentions]


class Sharpened:
    """A per-head source: each head's rows raised to ``power`` and renormalised (the tiny random
    models' attention is nearly uniform: a high power makes maps far from it). It runs with
    gradients on, as extraction leaves them for sources (its maps require grad)."""

    name = "sharpened"
    heads = None

    def __init__(self, power: float = 30.0):
        self.power = power

    def settings(self) -> dict:
        return {"power": self.power}

    def __call__(self, loaded, inputs):
        assert torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
        attentions = loaded.model(**inputs, output_attentions=True).attentions
        return [torch.softmax(self.power * a.log(), -1) for a in attentions]  # padding: log 0 -> weight 0


class Broken:
    """A source whose output is wrong in one way or another."""

    name = "broken"

    def __init__(self, fault: str, heads: int | None = 1):
        self.fault, self.heads = fault, heads

    def settings(self) -> dict:
        return {"fault": self.fault}

    def __call__(self, loaded, inputs):
        maps = MeanOverHeads()(loaded, inputs)
        if self.fault == "layers":
            return maps[:-1]
        if self.fault == "heads":
            return [m.expand(-1, 3, -1, -1) for m in maps]
        if self.fault == "tokens":
            return [m[..., 1:, 1:] for m in maps]
        if self.fault == "dtype":
            return [(m > 0.1).long() for m in maps]
        return maps


@pytest.fixture(scope="module")
def bert(tiny_model_dirs):
    return load_model(tiny_model_dirs["bert"], device="cpu")


@pytest.fixture(scope="module")
def corpus():
    sample = list(load_sample()[:6])
    return Corpus.from_items(sample + [SentencePair("pair", ("the", "cat", "sat"), ("it", "slept", "."))], name="maps")


def independent(source, loaded, item) -> np.ndarray:
    """``source``'s word maps of one item, from a plain tokenization and one unpadded forward."""
    words = list(item.words) if hasattr(item, "words") else [list(item.a), list(item.b)]
    if hasattr(item, "words"):
        enc = loaded.tokenizer(words, is_split_into_words=True, return_tensors="pt")
    else:
        enc = loaded.tokenizer(*words, is_split_into_words=True, return_tensors="pt")
    maps = torch.stack([m.detach() for m in source(loaded, dict(enc))], 1)  # (1, L, H', T, T)
    word_ids = enc.word_ids(0)
    t2w = np.cumsum([True] + [w is None or w != p for p, w in zip(word_ids, word_ids[1:])]) - 1
    return word_attention(maps, torch.as_tensor(t2w)[None])[0].numpy()


def assert_stores_equal(a: AttentionStore, b: AttentionStore):
    assert list(a.status()) == list(b.status())
    for x, y in zip(a.iter_items(dtype=np.float16), b.iter_items(dtype=np.float16), strict=True):
        assert x.index == y.index and x.words == y.words
        np.testing.assert_array_equal(x.attention, y.attention)


@pytest.mark.parametrize("source", [MeanOverHeads(), Sharpened()], ids=lambda s: s.name)
def test_attention_for_equals_the_source_converted_to_words(bert, corpus, source):
    items = attention_for(corpus, bert, maps=source, batch_size=4)  # padded batches
    heads = source.heads or bert.num_heads
    assert [i.index for i in items] == list(range(len(corpus)))
    raw = attention_for(corpus, bert, batch_size=4)
    for item, plain in zip(items, raw, strict=True):
        if source.heads == 1:  # the mean rule is linear: the mean of the heads' word maps
            np.testing.assert_allclose(item.attention, plain.attention.mean(1, keepdims=True), atol=2e-3, rtol=0)
        else:  # the source's maps, not the attention
            assert np.abs(item.attention - plain.attention).max() > 0.05
    for item in items:
        assert item.attention.shape == (bert.num_layers, heads, item.n_words, item.n_words)
        want = independent(source, bert, corpus[item.index])
        np.testing.assert_allclose(item.attention.astype(np.float32), want, atol=2e-3, rtol=0)  # float16
        np.testing.assert_allclose(item.attention.sum(-1), 1.0, atol=4e-3)


def test_store_of_layer_maps_reads_back_the_same_values(bert, corpus, tmp_path):
    source = MeanOverHeads()
    kwargs = dict(batch_size=3, block_size=4, keep_tokens=True)
    store = extract_attention(corpus, tmp_path / "m.zarr", bert, maps=source, progress=False, **kwargs)
    assert store.is_complete and store.num_heads == 1 and store.num_layers == bert.num_layers
    assert store.metadata["maps"] == {"name": "mean-over-heads", "heads": 1, "settings": {"reduce": "mean"}}
    assert store.metadata["model"]["num_heads"] == bert.num_heads  # the model's own shape is kept
    reopened = AttentionStore.open(tmp_path / "m.zarr")
    assert (reopened.num_layers, reopened.num_heads) == (bert.num_layers, 1)
    in_memory = attention_for(corpus, bert, maps=source, **kwargs)  # same blocks and batches
    for got, want in zip(reopened.iter_items(dtype=np.float16), in_memory, strict=True):
        assert got.index == want.index and got.words == want.words
        assert got.attention.shape == (bert.num_layers, 1, got.n_words, got.n_words)
        np.testing.assert_array_equal(got.attention, want.attention)
        np.testing.assert_array_equal(got.token_attention, want.token_attention)
        assert got.token_attention.shape == (bert.num_layers, 1, got.n_tokens, got.n_tokens)


def test_per_head_store(bert, corpus, tmp_path):
    store = extract_attention(corpus[:4], tmp_path / "h.zarr", bert, maps=Sharpened(), progress=False)
    assert store.num_heads == store.metadata["maps"]["heads"] == bert.num_heads
    np.testing.assert_allclose(store[2].attention, independent(Sharpened(), bert, corpus[2]), atol=2e-3, rtol=0)


def test_interrupted_then_resumed_equals_uninterrupted(bert, monkeypatch, tmp_path):
    """As tests/integration/test_extraction.py's killed run: the third block is half written, then
    the run dies before committing it; the resumed store is bit for bit the uninterrupted one."""
    corpus, source = load_sample()[:20], MeanOverHeads()
    kwargs = dict(batch_size=3, block_size=4, maps=source, progress=False)
    original, calls = shard_module.ShardWriter.append, []

    class Killed(Exception):
        pass

    def append(self, results):
        calls.append(1)
        if len(calls) > 2:
            self.shard.array("attention").append(results[0].attention.reshape(-1)[:5])
            raise Killed
        original(self, results)

    path = tmp_path / "killed.zarr"
    monkeypatch.setattr(shard_module.ShardWriter, "append", append)
    with pytest.raises(Killed):
        extract_attention(corpus, path, bert, **kwargs)
    monkeypatch.setattr(shard_module.ShardWriter, "append", original)
    partial = AttentionStore.open(path)
    assert partial.done == 8 and not partial.is_complete and partial.num_heads == 1
    resumed = extract_attention(corpus, path, bert, **kwargs)
    fresh = extract_attention(corpus, tmp_path / "fresh.zarr", bert, **kwargs)
    assert resumed.is_complete
    assert_stores_equal(resumed, fresh)


def test_other_maps_are_a_metadata_mismatch(bert, corpus, tmp_path):
    raw, mapped = tmp_path / "raw.zarr", tmp_path / "mapped.zarr"
    items = corpus[:3]
    extract_attention(items, raw, bert, progress=False)
    extract_attention(items, mapped, bert, maps=Sharpened(2.0), progress=False)
    with pytest.raises(StoreMismatchError, match=r"metadata\.maps: store has '<missing>'"):
        extract_attention(items, raw, bert, maps=MeanOverHeads(), progress=False)
    with pytest.raises(
        StoreMismatchError, match=r"metadata\.maps: store has \{'name': 'sharpened'.*asked for '<missing>'"
    ):
        extract_attention(items, mapped, bert, progress=False)
    with pytest.raises(StoreMismatchError, match=r"metadata\.maps\.settings\.power: store has 2\.0, asked for 3\.0"):
        extract_attention(items, mapped, bert, maps=Sharpened(3.0), progress=False)
    renamed = Sharpened(2.0)
    renamed.name = "sharper"
    with pytest.raises(StoreMismatchError, match=r"metadata\.maps\.name: store has 'sharpened', asked for 'sharper'"):
        extract_attention(items, mapped, bert, maps=renamed, progress=False)
    assert extract_attention(items, mapped, bert, maps=Sharpened(2.0), progress=False).is_complete  # same: reused


def test_raw_metadata_and_cache_path_are_unchanged(bert, corpus, tmp_path):
    """Without maps nothing changes: no "maps" key, and the cache entry is named as it always was
    (``<model>-<corpus>-<digest of the metadata>``), so existing caches stay valid."""
    options = dict(
        from_rule="mean",
        keep_tokens=False,
        max_tokens=bert.max_tokens,
        too_long="skip",
        batch_size=32,
        block_size=512,
        max_batch_weights=MAX_BATCH_WEIGHTS,
    )
    metadata = store_metadata(bert, corpus, **options)
    assert set(metadata) == {"model", "corpus", "conversion", "extraction", "library"}
    assert store_metadata(bert, corpus, maps=None, **options) == metadata
    path = cached_store_path(corpus, bert, cache_dir=tmp_path)
    assert path == tmp_path / f"{entry_name('bert-maps', metadata)}.zarr"
    assert cached_store_path(corpus, bert, cache_dir=tmp_path, maps=None) == path

    with_maps = cached_store_path(corpus, bert, cache_dir=tmp_path, maps=MeanOverHeads())
    assert with_maps.name.startswith("bert-mean-over-heads-maps-") and with_maps != path
    other = cached_store_path(corpus, bert, cache_dir=tmp_path, maps=Sharpened(3.0))
    assert other != cached_store_path(corpus, bert, cache_dir=tmp_path, maps=Sharpened(2.0))

    store = extract_cached(corpus[:3], bert, cache_dir=tmp_path, maps=MeanOverHeads(), progress=False)
    assert store.path == cached_store_path(corpus[:3], bert, cache_dir=tmp_path, maps=MeanOverHeads())
    assert "maps" not in extract_attention(corpus[:2], tmp_path / "raw.zarr", bert, progress=False).metadata


@pytest.mark.parametrize(
    ("fault", "heads", "message"),
    [
        ("layers", 1, "returned 1 maps for a model of 2 layers"),
        ("heads", 1, r"returned \(\d+, 3, \d+, \d+\) torch.float32 for layer 0, not a float tensor of shape"),
        ("tokens", 1, "for layer 0, not a float tensor of shape"),
        ("dtype", 1, r"torch.int64 for layer 0"),
        ("none", None, r"returned \(\d+, 1, \d+, \d+\) .*heads, tokens, tokens"),  # says per head, gives one
        ("none", 0, "heads must be None or a positive int, not 0"),
    ],
)
def test_wrong_output_is_refused(bert, corpus, fault, heads, message):
    with pytest.raises(BertologyError, match=f"map source 'broken'.*{message}"):
        attention_for(corpus[:2], bert, maps=Broken(fault, heads))
