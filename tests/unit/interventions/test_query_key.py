"""Queries and keys of every head (one capture for the neuron view and Vig's dimension count), and the count."""

import numpy as np
import pytest
import torch
from tiny_models import ARCHS

from bertology_utils.core.errors import BertologyError
from bertology_utils.core.models import load_model
from bertology_utils.data import Corpus
from bertology_utils.interventions.editing import capture_attention
from bertology_utils.interventions.objectives import CLS, KINDS, SEP, token_batches
from bertology_utils.interventions.query_key import (
    QueryKeyDimensions,
    capture_query_key,
    dimensions_needed,
    query_key_dimensions,
)

TEXTS = [
    "The old sailor reads a heavy wooden box near the station.",
    "Hello world!",
    "Where did you put the keys? I think they're on the kitchen table.",
    "Children learn languages quickly because they listen carefully.",
]


@pytest.fixture(scope="module")
def loaded_models(tiny_model_dirs):
    return {arch: load_model(folder) for arch, folder in tiny_model_dirs.items()}


def _reference_count(q: np.ndarray, keys: np.ndarray, keep: float) -> tuple[int, float]:
    """The count the plain way: Python loops over keys and dimensions."""
    logits = [sum(float(q[d]) * float(key[d]) for d in range(len(q))) for key in keys]
    order = sorted(range(len(keys)), key=lambda j: -logits[j])
    best, second = order[0], order[1]
    contributions = [float(q[d]) * (float(keys[best][d]) - float(keys[second][d])) for d in range(len(q))]
    margin = sum(contributions)
    if margin <= 0:
        return 0, margin
    running, count = 0.0, 0
    for c in sorted(contributions, reverse=True):
        running += c
        count += 1
        if running >= keep * margin - 1e-9 * sum(abs(x) for x in contributions):
            break
    return count, margin


@pytest.mark.parametrize("arch", ARCHS)
def test_captured_queries_and_keys_reproduce_the_models_attention(loaded_models, arch):
    loaded = loaded_models[arch]
    (batch,), _ = token_batches(loaded, Corpus.from_texts(TEXTS), batch_size=len(TEXTS))
    assert not batch.real.all()  # padded: the mask term matters
    with torch.no_grad(), capture_query_key(loaded) as qk, capture_attention(loaded, retain_grad=False) as captured:
        loaded.model(**batch.model_inputs())
    real = batch.real
    rows = real[:, None, :, None] & real[:, None, None, :]
    for layer in range(loaded.num_layers):
        heads = loaded.num_heads
        q, k = qk.queries[layer], qk.keys[layer]
        assert q.shape == k.shape == (len(TEXTS), heads, real.shape[1], loaded.config.hidden_size // heads)
        rebuilt, own = qk.probabilities(layer), captured.probs[layer].float()
        difference = (rebuilt - own).abs().masked_fill(~rows, 0)
        assert difference.max() < 1e-4, f"{arch} layer {layer}: {difference.max():.1e}"
        content = torch.softmax(qk.content_logits(layer) * qk.scaling[layer], -1)
        masked = (content - own).abs().masked_fill(~rows, 0).max()
        assert masked > 1e-4  # without the mask (and MPNet's bias) the softmax spreads onto padding
        if arch == "mpnet":  # MPNet's relative position bias: more than a mask
            bias = qk.bias(layer).masked_fill(~rows, 0)
            assert bias.abs().max() > 0
    assert all(term is not None for term in qk.terms)


def test_capture_watches_only_the_layers_asked_and_removes_its_hooks(loaded_models):
    loaded = loaded_models["roberta"]
    (batch,), _ = token_batches(loaded, Corpus.from_texts(TEXTS[:1]))
    with torch.no_grad(), capture_query_key(loaded, layers=[1]) as qk:
        loaded.model(**batch.model_inputs())
    assert qk.queries[0] is None and qk.queries[1] is not None and qk.queries[2] is None
    with pytest.raises(BertologyError, match="not captured"):
        qk.scores(0)
    with torch.no_grad():
        loaded.model(**batch.model_inputs())
    assert qk.queries[1] is not None  # kept, and not replaced by a pass outside the block
    with pytest.raises(ValueError, match="out of range"):
        with capture_query_key(loaded, layers=[loaded.num_layers]):
            pass


def test_planted_margins():
    # one key wins by one dimension alone: a count of 1 whatever keep is
    q = torch.tensor([[1.0, 0.3, -0.2, 0.5]])
    keys = torch.tensor([[5.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0], [0.0, 1.0, 1.0, 1.0]])
    everything = torch.ones(3, dtype=torch.bool)
    for keep in (0.5, 0.9, 1.0):
        count, margin, winner = dimensions_needed(q, keys, everything, keep)
        assert count.tolist() == [1] and winner.tolist() == [0] and margin.item() == pytest.approx(4.0)
    # four equal positive contributions: keep of the margin needs ceil(4 keep) of them
    q, keys = torch.ones(1, 4), torch.tensor([[2.0] * 4, [1.0] * 4])
    for keep, expected in ((0.25, 1), (0.5, 2), (0.9, 4), (1.0, 4)):
        assert dimensions_needed(q, keys, torch.ones(2, dtype=torch.bool), keep)[0].tolist() == [expected]
    # contributions 3, 2, -1, 0 (margin 4): keep=1 needs the two positive ones, never the negative one
    q, keys = torch.tensor([[3.0, 2.0, 1.0, 1.0]]), torch.tensor([[1.0, 1.0, -1.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    count, margin, _ = dimensions_needed(q, keys, torch.ones(2, dtype=torch.bool), 1.0)
    assert count.tolist() == [2] and margin.item() == pytest.approx(4.0)
    # masked keys cannot win; two equal keys tie (margin 0, count 0)
    q, keys = torch.ones(1, 2), torch.tensor([[9.0, 9.0], [1.0, 1.0], [1.0, 1.0]])
    count, margin, winner = dimensions_needed(q, keys, torch.tensor([False, True, True]), 0.9)
    assert count.tolist() == [0] and margin.item() == 0 and winner.item() in (1, 2)
    with pytest.raises(ValueError, match="keep"):
        dimensions_needed(q, keys, torch.tensor([False, True, True]), 0.0)


@pytest.mark.parametrize("arch", ["bert", "mpnet", "distilbert"])
@pytest.mark.parametrize("keep", [0.9, 1.0])
def test_counts_match_a_plain_loop(loaded_models, arch, keep):
    loaded = loaded_models[arch]
    corpus = Corpus.from_texts(TEXTS)
    result = query_key_dimensions(loaded, corpus, keep=keep, batch_size=3, progress=False)
    (batch,), _ = token_batches(loaded, corpus, batch_size=len(TEXTS))
    with torch.no_grad(), capture_query_key(loaded) as qk:
        loaded.model(**batch.model_inputs())
    rng = np.random.default_rng(0)
    positions = {(int(i), int(t)): n for n, (i, t) in enumerate(zip(result.query_items, result.query_positions))}
    for _ in range(12):
        layer, head = int(rng.integers(loaded.num_layers)), int(rng.integers(loaded.num_heads))
        b = int(rng.integers(len(TEXTS)))
        item = batch.items[b]
        n_real = int(batch.real[b].sum())
        candidates = [t for t in range(n_real) if int(batch.kinds[b, t]) not in (SEP, CLS)]
        t = int(rng.choice(candidates))
        q = qk.queries[layer][b, head, t].double().numpy()
        keys = qk.keys[layer][b, head, :n_real].double().numpy()
        expected, margin = _reference_count(q, keys, keep)
        got = int(result.counts[layer, head, positions[(item.index, t)]])
        assert got == expected, f"{arch} layer {layer} head {head} item {item.index} token {t}: {got} vs {expected}"
        if keep == 1.0 and margin > 0:
            order = np.sort(q * (keys[np.argmax(keys @ q)] - keys[np.argsort(-(keys @ q))[1]]))[::-1]
            assert got <= int((order > 0).sum())  # only positive contributions are ever needed
            assert order[:got].sum() >= margin - 1e-9 and order[: got - 1].sum() < margin


def test_result_shapes_queries_and_batching(loaded_models):
    loaded = loaded_models["roberta"]
    corpus = Corpus.from_texts(TEXTS)
    whole = query_key_dimensions(loaded, corpus, batch_size=len(TEXTS), progress=False)
    one_by_one = query_key_dimensions(loaded, corpus, batch_size=1, progress=False)
    assert isinstance(whole, QueryKeyDimensions)
    layers, heads = loaded.num_layers, loaded.num_heads
    assert whole.head_dim * heads == loaded.config.hidden_size
    assert whole.median.shape == whole.mean.shape == whole.n_queries.shape == (layers, heads)
    (batch,), _ = token_batches(loaded, corpus, batch_size=len(TEXTS))
    expected = int((batch.real & (batch.kinds != SEP) & (batch.kinds != CLS)).sum())
    assert whole.counts.shape == (layers, heads, expected) and whole.n_items == len(TEXTS) and whole.n_skipped == 0
    assert (whole.n_queries + whole.n_ties == expected).all()
    kinds = {
        (it.index, t): int(batch.kinds[b, t]) for b, it in enumerate(batch.items) for t in range(batch.kinds.shape[1])
    }
    assert all(kinds[(int(i), int(t))] not in (SEP, CLS, -1) for i, t in zip(whole.query_items, whole.query_positions))
    # padding changes nothing: the same counts query by query, in whatever order the batches ran
    order_a = np.lexsort((whole.query_positions, whole.query_items))
    order_b = np.lexsort((one_by_one.query_positions, one_by_one.query_items))
    same = whole.counts[..., order_a] == one_by_one.counts[..., order_b]
    assert same.mean() > 0.99
    assert ((whole.median > 0) & (whole.median <= 1)).all() and (whole.mean <= 1).all()
    assert np.allclose(sum(whole.winner_share(kind) for kind in KINDS), 1)
    table = whole.head_table()
    assert len(table) == layers * heads and table["layer"].min() == 1 and table["head"].max() == heads
    assert "content logits only" in whole.method.lower()
    # a batch (or batches) made elsewhere is measured as it is
    assert query_key_dimensions(loaded, batch, progress=False).counts.shape == whole.counts.shape
    with pytest.raises(ValueError, match="keep"):
        query_key_dimensions(loaded, batch, keep=1.5, progress=False)
    with pytest.raises(BertologyError, match="no items"):
        query_key_dimensions(loaded, corpus, max_tokens=3, progress=False)
