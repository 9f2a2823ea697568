"""Structural probes (Hewitt and Manning 2019) on vectors whose tree geometry is known, their metrics by hand,
and word-level hidden states of a tiny model."""

import math
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest
import torch
from device_reads import first_read
from scipy.sparse.csgraph import minimum_spanning_tree, shortest_path
from sklearn.base import clone
from synthetic_trees import random_heads

from bertology_utils.analyses.probes import (
    DepthProbe,
    DistanceProbe,
    StructuralData,
    fit_jointly,
    rank_grid,
    spanning_tree_edges,
    spanning_trees,
    structural,
    structural_metrics,
    structural_probe_layers,
    tree_distances,
    word_hidden_states,
)
from bertology_utils.core import models
from bertology_utils.core.cache import CacheWarning
from bertology_utils.core.errors import BertologyError
from bertology_utils.core.models import load_model
from bertology_utils.data import Corpus, Sentence

FAST = dict(lr=0.01, max_epochs=100, patience=5, batch_size=10)
DIM = 14  # longest synthetic sentence


def tree_vectors(heads, coordinates) -> np.ndarray:
    """Word i's vector marks its non-root ancestors-or-self (word j at ``coordinates[j]``): squared distances are
    tree distances, squared norms depths."""
    heads = np.asarray(heads)
    v = np.zeros((len(heads), DIM))
    for i in range(len(heads)):
        j = i
        while heads[j] != 0:
            v[i, coordinates[j]] = 1.0
            j = heads[j] - 1
    return v


def synthetic(n_sentences: int, seed: int, punct: bool = False, noise: bool = False):
    """Sentences of random trees, their vectors mixed by a fixed random invertible map (one layer, layer 3);
    ``noise``: vectors that say nothing of the trees, which no probe learns."""
    rng = np.random.default_rng(seed)
    mix = np.linalg.qr(np.random.default_rng(99).normal(size=(DIM, DIM)))[0] * 2.0  # orthogonal, scaled
    sentences, arrays = [], []
    for k in range(n_sentences):
        n = int(rng.integers(5, DIM + 1))
        heads, relations = random_heads(rng, n)
        if not punct:
            relations = tuple("root" if h == 0 else "dep" for h in heads)
        sentences.append(Sentence(f"s{k}", tuple(f"w{i}" for i in range(n)), heads, relations))
        coordinates = rng.permutation(DIM)  # every coordinate as often, whatever the sentence lengths
        vectors = rng.normal(size=(n, DIM)) if noise else tree_vectors(heads, coordinates) @ np.linalg.inv(mix).T
        arrays.append(vectors[:, None, :])
    return StructuralData(Corpus(tuple(sentences), "synthetic"), arrays, [3])


@pytest.fixture(scope="module")
def train_dev():
    return synthetic(120, 0), synthetic(30, 1)


def tie_ceiling(X, noise=1e-3):
    """DSpr and NSpr of the gold distances and depths plus tiny noise: the gold values tie (a word has many words
    at distance 2), so any inexact prediction breaks the ties at random and scores about 0.95, not 1."""
    rng = np.random.default_rng(0)
    distances, depths = [], []
    for d, root in zip(X.distances, X.roots):
        e = rng.uniform(-noise, noise, d.shape)
        distances.append(d + (e + e.T) / 2)
        depths.append(d[root] + rng.uniform(-noise, noise, len(d)))
    return structural_metrics(X, distances=distances, depths=depths)


def test_vectors_of_a_known_tree_geometry_are_found(train_dev):
    train, dev = train_dev
    ceiling = tie_ceiling(dev)
    distance = DistanceProbe(**FAST).fit(train, dev=dev)
    metrics = distance.evaluate(dev)
    assert metrics["uuas"] == 1.0
    errors = [np.abs(p - d).mean() for p, d in zip(distance.predict(dev), dev.distances)]
    assert np.mean(errors) < 0.02  # the map is found: squared distances within 0.02 of the tree's
    assert metrics["dspr"] == pytest.approx(ceiling["dspr"], abs=0.02)
    depth = DepthProbe(**FAST).fit(train, dev=dev)
    metrics = depth.evaluate(dev)
    assert metrics["root_acc"] == 1.0
    assert metrics["nspr"] == pytest.approx(ceiling["nspr"], abs=0.02)
    assert distance.B_.shape == (DIM, DIM) and distance.rank_ == DIM and distance.layer_ == 3


def test_a_rank_one_probe_cannot_hold_a_tree(train_dev):
    train, dev = train_dev
    assert DistanceProbe(rank=1, **FAST).fit(train, dev=dev).score(dev) < 0.9


def test_same_seed_same_probe_and_cpu_device_is_bit_identical(train_dev):
    train, dev = train_dev
    short = dict(FAST, max_epochs=3)
    a = DistanceProbe(seed=4, **short).fit(train, dev=dev)
    b = DistanceProbe(seed=4, **short).fit(train, dev=dev)
    c = DistanceProbe(seed=4, device="cpu", **short).fit(train, dev=dev)
    d = DistanceProbe(seed=5, **short).fit(train, dev=dev)
    assert np.array_equal(a.B_, b.B_) and np.array_equal(a.B_, c.B_)
    assert not np.array_equal(a.B_, d.B_)
    assert [h["train_loss"] for h in a.history_] == [h["train_loss"] for h in c.history_]


def test_scikit_learn_conventions(train_dev):
    probe = DepthProbe(rank=4, layer=3, max_epochs=2)
    assert probe.get_params()["rank"] == 4
    probe.set_params(rank=2)
    copy = clone(probe)
    assert copy.get_params() == probe.get_params() and not hasattr(copy, "B_")
    copy.fit(train_dev[0])
    assert copy.B_.shape == (2, DIM) and len(copy.history_) == 2
    with pytest.raises(Exception, match="not fitted"):
        probe.predict(train_dev[0])


def test_early_stopping_and_learning_rate_decay_follow_the_dev_loss(train_dev):
    # a dev set whose vectors say nothing of its trees: its loss stops improving once the probe has learnt the
    # train set's map, on any machine (a learnable one kept improving for 40 epochs on one CPU, not on another)
    train, dev = train_dev[0], synthetic(30, 1, noise=True)
    probe = DistanceProbe(lr=0.5, max_epochs=40, patience=2).fit(train, dev=dev)
    lrs = [h["lr"] for h in probe.history_]
    assert len(probe.history_) < 40
    assert min(lrs) < 0.5 and all(b in (a, a * 0.1) for a, b in zip(lrs, lrs[1:]))
    # The epoch kept is the last to lower the dev loss by more than 1e-4; no later one did.
    kept = probe.history_[probe.best_epoch_ - 1]["dev_loss"]
    assert all(h["dev_loss"] > kept - 1e-4 for h in probe.history_[probe.best_epoch_ :])
    assert all(h["dev_loss"] >= kept for h in probe.history_[: probe.best_epoch_ - 1])


def two_layers(n_sentences: int, seed: int) -> StructuralData:
    """``synthetic``'s sentences at layer 3 and, at layer 5, the same vectors plus noise: two layers to fit."""
    one = synthetic(n_sentences, seed)
    rng = np.random.default_rng(seed + 7)
    arrays = [np.stack([v, v + rng.normal(scale=0.3, size=v.shape)], 1) for v in one.vectors[3]]
    return StructuralData(one.corpus, arrays, [3, 5])


def fitted_with_torch(probe, X, dev):
    """The training rule spelt out with torch's own Adam and ReduceLROnPlateau, one probe at a time: the
    reference the joint fit is held to (``B_`` kept, epochs run, learning rates)."""
    layer = X.check_layer(probe.layer)
    rank = X.hidden_size if probe.rank is None else probe.rank
    start = torch.rand((rank, X.hidden_size), generator=torch.Generator().manual_seed(probe.seed)) * 0.1 - 0.05
    B = start.clone().requires_grad_(True)
    optimizer = torch.optim.Adam([B], lr=probe.lr, fused=True)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=probe.lr_decay, patience=0)

    def loss_of(batch):
        return type(probe).losses((batch.vectors @ B.T)[None], batch)[0]

    best, kept, stale, lrs = np.inf, None, 0, []
    for epoch in range(probe.max_epochs):
        lrs.append(optimizer.param_groups[0]["lr"])
        for _, batch in X.batches(layer, probe.batch_size, shuffle=True, seed=probe.seed * 1_000_003 + epoch):
            loss = loss_of(batch)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            watched = sum(float(loss_of(b)) * len(rows) for rows, b in dev.batches(layer, probe.batch_size)) / len(dev)
        scheduler.step(watched)
        if watched < best - 1e-4:
            best, kept, stale = watched, B.detach().clone().numpy(), 0
        else:
            stale += 1
            if stale >= probe.patience:
                break
    return kept, epoch + 1, lrs


@pytest.mark.parametrize("cls", [DistanceProbe, DepthProbe])
def test_the_losses_gradient_is_autograds_through_the_papers_formula(cls):
    """The losses differentiate their predictions by a formula of their own; autograd through the paper's formula
    (||B(h_i - h_j)||^2 or ||B h_i||^2, L1 over pairs or words, over length^2 or length, the mean over
    sentences) is the reference, in float64, on padded batches of two layers, at ranks 3 and 1 (the batch's
    lengths and weights are float32: their rounding bounds the agreement)."""
    X = two_layers(12, 0)
    _, batch = next(X.batches([3, 5], 12, shuffle=True))
    vectors = batch.vectors.double()
    generator = torch.Generator().manual_seed(0)
    for rank in (3, 1):
        start = torch.randn(2, rank, X.hidden_size, dtype=torch.float64, generator=generator)
        weights = start.clone().requires_grad_(True)
        t = torch.einsum("kbwd,krd->kbwr", vectors, weights)
        own = cls.losses(t, batch)
        (grad,) = torch.autograd.grad(own.sum(), weights)
        weights = start.clone().requires_grad_(True)
        t = torch.einsum("kbwd,krd->kbwr", vectors, weights)
        words = batch.words.double()
        if cls is DistanceProbe:
            predicted = ((t[:, :, :, None] - t[:, :, None, :]) ** 2).sum(-1)
            error = (predicted - batch.distances).abs() * words[:, :, None] * words[:, None, :]
        else:
            error = ((t**2).sum(-1) - batch.depths).abs() * words
        paper = (error.flatten(2).sum(2) / batch.lengths.double() ** cls._power).mean(1)
        (expected,) = torch.autograd.grad(paper.sum(), weights)
        torch.testing.assert_close(own, paper, rtol=1e-6, atol=0)
        torch.testing.assert_close(grad, expected, rtol=1e-6, atol=1e-9 * float(expected.abs().max()))


def test_a_fit_follows_torchs_adam_and_plateau_rule(train_dev):
    train, dev = train_dev[0], synthetic(30, 1, noise=True)  # a dev loss that stops improving: decays and a stop
    for cls in (DistanceProbe, DepthProbe):
        probe = cls(lr=0.05, max_epochs=30, patience=3, seed=2).fit(train, dev=dev)
        B, epochs, lrs = fitted_with_torch(probe, train, dev)
        assert len(probe.history_) == epochs < 30 and [h["lr"] for h in probe.history_] == lrs
        assert len(set(lrs)) > 1
        np.testing.assert_allclose(probe.B_, B, rtol=1e-4, atol=1e-6)


def test_probes_fitted_together_equal_probes_fitted_alone():
    train, dev = two_layers(80, 0), two_layers(20, 1)
    settings = [
        (DistanceProbe, 3, None, dict()),
        (DepthProbe, 3, None, dict(patience=2)),
        (DistanceProbe, 5, None, dict(max_epochs=4)),  # leaves the stack early
        (DepthProbe, 5, 2, dict()),  # another rank: another stack
        (DistanceProbe, 5, 2, dict(lr=0.02)),
    ]

    def probes():
        return [cls(layer=layer, rank=rank, **{"max_epochs": 12, **kw}) for cls, layer, rank, kw in settings]

    together = fit_jointly(probes(), train, dev)
    alone = [probe.fit(train, dev=dev) for probe in probes()]
    for a, b in zip(together, alone):
        assert (a.layer_, a.rank_, a.best_epoch_) == (b.layer_, b.rank_, b.best_epoch_)
        assert [h["lr"] for h in a.history_] == [h["lr"] for h in b.history_]
        np.testing.assert_allclose(a.B_, b.B_, rtol=1e-4, atol=1e-6)
    assert len(together[2].history_) == 4 and len(together[0].history_) > 4
    with pytest.raises(BertologyError, match="share batch_size"):
        fit_jointly([DistanceProbe(layer=3), DepthProbe(layer=3, batch_size=7)], train)


def test_precision_sets_the_products_of_the_training_only_and_is_shared(train_dev, monkeypatch):
    """precision="auto" on a device with bfloat16 units: every loss of the training (dev losses too) is computed
    with the fast products set, predictions after it without; probes fitted together share one precision."""
    train, dev = train_dev
    seen = []
    outputs = DistanceProbe._outputs

    def spy(t):
        seen.append(torch.backends.mkldnn.matmul.fp32_precision)
        return outputs(t)

    monkeypatch.setattr(DistanceProbe, "_outputs", staticmethod(spy))
    monkeypatch.setattr(models, "_native_bf16", lambda device: True)
    before = torch.backends.mkldnn.matmul.fp32_precision
    probe = DistanceProbe(**{**FAST, "max_epochs": 2}, precision="auto").fit(train, dev=dev)
    assert len(seen) > 2 and set(seen) == {"bf16"} and probe.B_.dtype == np.float32
    seen.clear()
    probe.predict(dev)
    DistanceProbe(**{**FAST, "max_epochs": 1}).fit(train, dev=dev)
    assert seen and set(seen) == {before} == {torch.backends.mkldnn.matmul.fp32_precision}
    with pytest.raises(BertologyError, match="share precision"):
        fit_jointly([DistanceProbe(layer=3), DepthProbe(layer=3, precision="bf16")], train)
    with pytest.raises(ValueError, match="precision must be one of"):
        DistanceProbe(precision="half").fit(train)


def test_bf16_products_find_the_known_tree_geometry(train_dev):
    """precision="bf16" (products from bfloat16-rounded inputs where this CPU has the units, fp32 elsewhere) fits
    the vectors of known trees as float32 does."""
    train, dev = train_dev
    for cls, metric in ((DistanceProbe, "uuas"), (DepthProbe, "root_acc")):
        probe = cls(**FAST, precision="bf16").fit(train, dev=dev)
        assert probe.B_.dtype == np.float32 and probe.evaluate(dev)[metric] == 1.0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_probes_fitted_together_on_a_gpu_equal_the_cpu_fits_within_tolerance():
    """The batches are gathered on the GPU and its kernels sum in other orders: the same kept epochs, B within
    rtol 1e-3 (atol 1e-5), dev UUAS within 1e-3."""
    train, dev = two_layers(80, 0), two_layers(20, 1)

    def probes(device):
        return [cls(layer=k, max_epochs=12, device=device) for k in (3, 5) for cls in (DistanceProbe, DepthProbe)]

    cpu, cuda = fit_jointly(probes(None), train, dev), fit_jointly(probes("cuda"), train, dev)
    for a, b in zip(cpu, cuda):
        assert b.device_.type == "cuda" and a.best_epoch_ == b.best_epoch_
        np.testing.assert_allclose(b.B_, a.B_, rtol=1e-3, atol=1e-5)
        assert abs(a.score(dev) - b.score(dev)) <= 1e-3


def test_a_fit_on_a_device_reads_it_once_an_epoch():
    train, dev = two_layers(30, 0), two_layers(10, 1)
    probes = [cls(layer=k, max_epochs=3, device="meta") for k in (3, 5) for cls in (DistanceProbe, DepthProbe)]
    frame = first_read(lambda: fit_jointly(probes, train, dev))
    assert frame.name == "train_jointly" and "tolist()" in frame.line  # the epoch's losses, after every step


@pytest.mark.parametrize("cls", [DistanceProbe, DepthProbe])
def test_predictions_on_a_device_are_read_back_after_every_batch_ran(cls, monkeypatch):
    """On a GPU, predict read each batch's lengths from the device with ``numpy()``, which only a CPU tensor has."""
    train, dev = two_layers(30, 0), two_layers(25, 1)
    probe = cls(layer=3, max_epochs=2, batch_size=4).fit(train)
    expected = probe.predict(dev)
    computed = []
    outputs = cls._outputs
    monkeypatch.setattr(cls, "_outputs", staticmethod(lambda t: computed.append(t.device) or outputs(t)))
    probe.device_ = torch.device("meta")
    frame = first_read(lambda: probe.predict(dev))
    assert frame.name == "predict" and "values.cpu()" in frame.line
    assert computed == [torch.device("meta")] * math.ceil(len(dev) / 4)  # every batch ran before the first read
    probe.device_ = torch.device("cpu")
    for a, b in zip(probe.predict(dev), expected, strict=True):
        np.testing.assert_array_equal(a, b)


def test_an_epochs_batches_copy_their_rows_to_the_device_once(monkeypatch):
    """A copy from the host per batch would wait for the device at every training step."""
    X = two_layers(30, 0)
    list(X.batches(3, 4, device="meta"))  # the data itself is copied there on first use
    copies = []
    to = torch.Tensor.to
    monkeypatch.setattr(torch.Tensor, "to", lambda self, *a, **k: copies.append(self.device) or to(self, *a, **k))
    batches = list(X.batches([3, 5], 4, shuffle=True, seed=1, device="meta"))
    assert len(batches) == math.ceil(30 / 4) and copies == [torch.device("cpu")]
    assert all(batch.vectors.device.type == "meta" for _, batch in batches)


def test_batches_of_several_layers_stack_each_layers_batch(train_dev):
    X = two_layers(30, 3)
    for (rows, both), (same, three), (_, five) in zip(
        X.batches([5, 3], 8, shuffle=True, seed=1),
        X.batches(3, 8, shuffle=True, seed=1),
        X.batches(5, 8, shuffle=True, seed=1),
    ):
        assert np.array_equal(rows, same)
        assert torch.equal(both.vectors[0], five.vectors) and torch.equal(both.vectors[1], three.vectors)
        assert torch.equal(both.distances, three.distances) and torch.equal(both.depths, three.depths)
        for b, r in enumerate(rows):
            n = len(X.distances[r])
            assert torch.equal(three.vectors[b, :n], torch.from_numpy(X.vectors[3][r]).float())
            assert not three.vectors[b, n:].any() and not three.distances[b, n:].any()
            assert torch.equal(three.depths[b, :n], torch.from_numpy(X.distances[r][X.roots[r]]).float())


def corpus_of(*trees):
    """Sentences from (heads, relations) pairs."""
    return Corpus(
        tuple(Sentence(f"s{k}", tuple(f"w{i}" for i in range(len(h))), h, r) for k, (h, r) in enumerate(trees)),
        "hand",
    )


def data_of(*trees):
    corpus = corpus_of(*trees)
    return StructuralData(corpus, [np.zeros((len(s.words), 1, 2)) for s in corpus], [0])


def test_tree_distances_by_hand():
    d = tree_distances((2, 0, 2, 3))  # 1 <- 2 -> 3 -> 4
    assert d.tolist() == [[0, 1, 2, 3], [1, 0, 1, 2], [2, 1, 0, 1], [3, 2, 1, 0]]


def test_tree_distances_are_the_shortest_paths_of_any_tree():
    rng = np.random.default_rng(5)
    trees = [random_heads(rng, int(n))[0] for n in rng.integers(1, 60, 200)] + [(0, *range(1, 80))]  # and a chain
    for heads in trees:
        edges = np.zeros((len(heads), len(heads)))
        for word, head in enumerate(heads):
            if head:
                edges[word, head - 1] = 1
        expected = shortest_path(edges, directed=False, unweighted=True)
        assert tree_distances(heads).dtype == np.int16
        np.testing.assert_array_equal(tree_distances(heads), expected)
    for heads in [(2, 1), (0, 0), (0, 3, 2), (0, 4), (-1, 0), ()]:  # no root, two roots, a cycle, out of range, empty
        with pytest.raises(BertologyError, match="not one tree"):
            tree_distances(heads)


def test_spanning_trees_of_many_graphs_at_once_are_each_graphs_own():
    rng = np.random.default_rng(6)
    graphs = []
    for n in [0, 1, 2, *rng.integers(3, 40, 60)]:
        points = rng.normal(size=(int(n), 5))
        graphs.append(((points[:, None] - points[None]) ** 2).sum(-1) - 3.0)  # negative weights too
    for tree, graph in zip(spanning_trees(graphs), graphs, strict=True):
        own = minimum_spanning_tree(np.triu(graph - graph.min() + 1.0, 1) if len(graph) > 1 else graph).tocoo()
        assert tree == {(int(i), int(j)) for i, j in zip(own.row, own.col)} and len(tree) == max(len(graph) - 1, 0)
    assert spanning_trees([]) == []


def test_spearman_correlations_grouped_by_length_equal_each_sentences_own():
    """structural_metrics correlates all sentences of one length in one call: the same numbers as one by one."""
    rng = np.random.default_rng(7)
    trees = [random_heads(rng, int(n)) for n in rng.integers(1, 30, 120)]
    X = data_of(*trees)
    distances = [rng.random((len(h), len(h))) + rng.random((len(h), len(h))).T for h, _ in trees]
    depths = [rng.random(len(h)) for h, _ in trees]
    dspr, nspr = defaultdict(list), defaultdict(list)
    for k in range(len(trees)):
        keep = np.flatnonzero(X.scored[k])
        n = len(keep)
        if 5 <= n <= 50:
            others = ~np.eye(n, dtype=bool)
            gold, predicted = X.distances[k][np.ix_(keep, keep)], distances[k][np.ix_(keep, keep)]
            rows = structural.rowwise_spearman(predicted[others].reshape(n, n - 1), gold[others].reshape(n, n - 1))
            dspr[n].append(rows.mean())
            nspr[n].append(
                structural.rowwise_spearman(depths[k][keep][None], X.distances[k][X.roots[k], keep][None])[0]
            )
    m = structural_metrics(X, distances=distances, depths=depths)
    assert m["dspr"] == np.mean([np.mean(v) for v in dspr.values()])
    assert m["nspr"] == np.mean([np.mean(v) for v in nspr.values()])


def test_uuas_of_a_hand_spanning_tree():
    # Gold edges (0,1), (1,2), (2,3). Predicted distances whose spanning tree is (0,1), (1,2), (1,3): 2 of 3 right.
    predicted = np.array([[0, 1, 5, 6], [1, 0, 2, 3], [5, 2, 0, 4], [6, 3, 4, 0]], dtype=float)
    assert spanning_tree_edges(predicted) == {(0, 1), (1, 2), (1, 3)}
    X = data_of(((2, 0, 2, 3), ("dep", "root", "dep", "dep")))
    assert structural_metrics(X, distances=[predicted])["uuas"] == pytest.approx(2 / 3)


def test_punctuation_is_left_out_of_every_metric():
    # Word 4 is punctuation: its wrong predicted edge and its smallest predicted depth count for nothing.
    tree = ((2, 0, 2, 3, 2), ("dep", "root", "dep", "dep", "punct"))
    gold = tree_distances(tree[0]).astype(float)
    predicted = gold.copy()
    predicted[4, :] = predicted[:, 4] = 0.1
    predicted[4, 4] = 0
    depths = np.array([1, 0, 1, 2, -5.0])
    m = structural_metrics(data_of(tree), distances=[predicted], depths=[depths])
    assert m["uuas"] == 1.0 and m["root_acc"] == 1.0


def test_spearman_is_averaged_within_lengths_then_over_lengths():
    # Two sentences of 5 scored words (+1 and -1), one of 6 (+1): (0 + 1) / 2, not the plain mean 1/3.
    # One of 4 words and one of 51 are outside 5-50 and count for nothing.
    def chain(n):
        return (tuple(range(0, n)), tuple(["root"] + ["dep"] * (n - 1)))

    trees = [chain(5), chain(5), chain(6), chain(4), chain(51)]
    X = data_of(*trees)
    signs = [1, -1, 1, -1, -1]
    gold = [tree_distances(h).astype(float) for h, _ in trees]
    m = structural_metrics(
        X, distances=[s * g for s, g in zip(signs, gold)], depths=[s * g[0] for s, g in zip(signs, gold)]
    )
    assert m["dspr"] == pytest.approx(0.5) and m["nspr"] == pytest.approx(0.5)
    assert m["spearman_sentences"] == 3


def test_one_word_and_all_punctuation_sentences_are_counted_skips():
    trees = [((0,), ("root",)), ((0, 1), ("punct", "punct")), ((2, 0, 2), ("dep", "root", "dep"))]
    X = data_of(*trees)
    m = structural_metrics(
        X,
        distances=[np.zeros((1, 1)), np.zeros((2, 2)), tree_distances((2, 0, 2))],
        depths=[np.zeros(1), np.zeros(2), np.array([1.0, 0, 1])],
    )
    assert m["skipped"] == 2 and m["sentences"] == 3
    assert m["uuas"] == 1.0 and m["root_acc"] == 1.0
    # The probes fit and predict on such sentences too.
    probe = DistanceProbe(max_epochs=2).fit(X)
    assert [p.shape for p in probe.predict(X)] == [(1, 1), (2, 2), (3, 3)]
    assert probe.score(X) == pytest.approx(probe.evaluate(X)["uuas"])


def test_rank_grid_doubles_up_to_full_rank():
    assert rank_grid(384) == [1, 2, 4, 8, 16, 32, 64, 128, 256, 384]
    assert rank_grid(8) == [1, 2, 4, 8]


# --------------------------------------------------------------------------- a tiny model's hidden states


def test_word_vectors_average_the_pieces_at_every_layer(tiny_model_dirs):
    loaded = load_model(tiny_model_dirs["bert"])
    words = ["unbelievably", "tiny", "models", "."]
    ((_, vectors),) = list(word_hidden_states(loaded, [words]))
    L, D = loaded.num_layers, loaded.config.hidden_size
    assert vectors.shape == (len(words), L + 1, D)
    encoded = loaded.tokenizer(words, is_split_into_words=True, return_tensors="pt")
    with torch.no_grad():
        hidden = loaded.model(**encoded, output_hidden_states=True).hidden_states
    ids = encoded.word_ids()
    for w in range(len(words)):
        pieces = [t for t, i in enumerate(ids) if i == w]
        for layer in (0, L):
            expected = hidden[layer][0, pieces].mean(0).numpy()
            np.testing.assert_allclose(vectors[w, layer], expected, rtol=1e-5, atol=1e-5)
    other = load_model(tiny_model_dirs["roberta"])  # another tokenizer, specials and shape
    ((_, vectors),) = list(word_hidden_states(other, [words], layers=[1, 0]))
    assert vectors.shape == (len(words), 2, other.config.hidden_size)


def test_word_vectors_are_read_with_the_products_asked_for(tiny_model_dirs, monkeypatch):
    """precision="auto" where the device has bfloat16 units: the forward passes that read the word vectors run with
    the fast products set, and structural_probe_layers reads them with its fits' precision; fp32 leaves them float32."""
    loaded = load_model(tiny_model_dirs["bert"])
    seen = []
    loaded.model.register_forward_hook(lambda *_: seen.append(torch.backends.mkldnn.matmul.fp32_precision))
    monkeypatch.setattr(models, "_native_bf16", lambda device: True)
    before = torch.backends.mkldnn.matmul.fp32_precision
    words = ["tiny", "models", "."]
    ((_, fast),) = list(word_hidden_states(loaded, [words], precision="auto"))
    assert seen == ["bf16"] and fast.dtype == np.float32
    ((_, plain),) = list(word_hidden_states(loaded, [words]))
    assert seen[-1] == before == torch.backends.mkldnn.matmul.fp32_precision
    np.testing.assert_allclose(fast, plain, rtol=0.05, atol=0.05)  # bfloat16's rounding at most, or none
    seen.clear()
    structural_probe_layers(loaded, tiny_treebank(), tiny_treebank(), layers=[1], max_epochs=1, precision="auto")
    assert seen and set(seen) == {"bf16"}


def tiny_treebank() -> Corpus:
    rng = np.random.default_rng(0)
    trees = [random_heads(rng, n) for n in (3, 6, 4, 7, 5)]
    return Corpus(
        tuple(
            Sentence(f"s{k}", tuple(["the", "dog", "runs", "far", "away", "now", "."][: len(h)]), h, r)
            for k, (h, r) in enumerate(trees)
        ),
        "tiny",
    )


def test_data_from_a_model_in_blocks_and_the_layer_table(tiny_model_dirs):
    loaded = load_model(tiny_model_dirs["bert"])
    corpus = tiny_treebank()
    whole = StructuralData.from_model(corpus, loaded, layers=[0, 2], block_size=10)
    blocks = StructuralData.from_model(corpus, loaded, layers=[0, 2], block_size=2)
    assert whole.hidden_size == loaded.config.hidden_size and whole.layers == (0, 2)
    for layer in (0, 2):
        assert all(np.array_equal(a, b) for a, b in zip(whole.vectors[layer], blocks.vectors[layer]))
    found = structural_probe_layers(loaded, corpus, corpus, max_epochs=2, rank_layer=1, ranks=[1, 2])
    table = found.table
    assert found.split == "dev" and set(found.edges["sentence"]) == set(range(len(corpus)))
    # the per-sentence counts add up to each distance probe's UUAS
    sums = found.edges.groupby(["layer", "rank"])[["found", "edges"]].sum()
    uuas = table[table["metric"] == "uuas"].set_index(["layer", "rank"])["value"]
    np.testing.assert_allclose((sums["found"] / sums["edges"]).loc[uuas.index], uuas)
    full = loaded.config.hidden_size
    layers = table[table["rank"] == full]
    assert sorted(layers["layer"].unique()) == list(range(loaded.num_layers + 1))
    assert set(layers["metric"]) == {"uuas", "dspr", "root_acc", "nspr", "best_epoch"}
    assert sorted(table[table["layer"] == 1]["rank"].unique()) == [1, 2, full]
    uuas = table[table["metric"] == "uuas"]["value"]
    assert ((uuas >= 0) & (uuas <= 1)).all()


def test_layer_scores_are_cached_by_model_data_and_settings(tiny_model_dirs, tmp_path):
    loaded = load_model(tiny_model_dirs["bert"])
    corpus = tiny_treebank()
    cache = tmp_path / "probes"

    def scores(**kwargs):
        settings = dict(max_epochs=2, rank_layer=1, ranks=[1, 2], cache=True, cache_dir=cache)
        return structural_probe_layers(loaded, corpus, corpus[:4], **{**settings, **kwargs})

    first = scores()
    assert not first.from_cache
    again = scores(cache_size=1e-6)  # a layer at a time: the same fits up to rounding, the same entry
    assert again.from_cache and again.split == first.split
    for name in ("table", "edges"):
        pd.testing.assert_frame_equal(getattr(again, name), getattr(first, name), check_exact=True, check_dtype=False)
    uncached = structural_probe_layers(loaded, corpus, corpus[:4], max_epochs=2, rank_layer=1, ranks=[1, 2])
    pd.testing.assert_frame_equal(uncached.table, first.table, check_exact=True)
    # any input the scores depend on makes another entry
    assert not scores(seed=1).from_cache
    assert not scores(ranks=[1]).from_cache
    assert not scores(test=corpus[1:]).from_cache
    # fp32 names no precision (entries stored before it still match); bf16 is another entry
    assert scores(precision="fp32").from_cache and not scores(precision="bf16").from_cache
    assert scores(test=corpus[1:]).split == "test"
    assert not structural_probe_layers(load_model(tiny_model_dirs["roberta"]), corpus, corpus[:4], max_epochs=2,
                                       cache=True, cache_dir=cache).from_cache  # fmt: skip
    # a CPU fit's key names no device; another device's names it (its fit differs in the last digits)
    fields = {"layers": [0], "seed": 0}
    on_cpu = structural._cache_entry(loaded, {"train": corpus, "test": None}, fields, "cpu", cache)[1]
    on_meta = structural._cache_entry(loaded, {"train": corpus, "test": None}, fields, "meta", cache)[1]
    assert "device" not in on_cpu and on_meta["device"] == "meta" and on_cpu["test"] is None
    for entry in cache.glob("structural-*/frames.npz"):
        entry.write_bytes(b"not npz")
    with pytest.warns(CacheWarning, match="corrupt"):
        assert not scores().from_cache
    assert scores().from_cache
