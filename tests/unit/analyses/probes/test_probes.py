"""Probing classifiers on synthetic attention whose answers are known, and on a tiny model's store."""

import math

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from synthetic_probes import DOG, POINTING, H, L, item, random_tree, synthetic, vectors

from bertology_utils.analyses.probes import (
    N_DISTANCE_FEATURES,
    PAPER_TABLE3,
    TABLE3_ROWS,
    AttentionProbe,
    AttentionWordsProbe,
    DistanceWordsProbe,
    ProbeData,
    ProbeEvaluation,
    RightBranching,
    distance_features,
    fit_probes,
    fitting,
    plot_probe_weights,
    plot_tree_comparison,
    scorers,
    table3,
)
from bertology_utils.analyses.probes import data as probe_data
from bertology_utils.analyses.word_vectors import StaticVectors
from bertology_utils.attention.alignment import LEADING_SPECIAL, SEPARATOR
from bertology_utils.attention.word_attention import ItemAttention
from bertology_utils.core.errors import BertologyError
from bertology_utils.data import Corpus, Sentence
from bertology_utils.papers import clark
from bertology_utils.papers.claims import Verdict

FAST = dict(lr=0.1, max_epochs=15, patience=3, batch_size=8)


# --------------------------------------------------------------------------- what the probes learn


@pytest.mark.parametrize("root_to", [LEADING_SPECIAL, SEPARATOR])
def test_a_head_pointing_at_the_gold_head_gives_uas_one_and_the_weight_goes_to_it(root_to):
    train, test = synthetic(40, 1, root_to=root_to), synthetic(15, 3, root_to=root_to)
    probe = AttentionProbe(**FAST).fit(train)  # no dev: every epoch runs, the weight keeps growing
    evaluation = probe.evaluate(test)
    assert evaluation.uas >= 0.99
    assert evaluation.uas_with_punctuation >= 0.99
    assert probe.w_.shape == probe.u_.shape == (L, H)
    assert np.unravel_index(np.abs(probe.w_).argmax(), probe.w_.shape) == POINTING
    others = np.delete(np.abs(probe.w_).ravel(), np.ravel_multi_index(POINTING, (L, H)))
    assert probe.w_[POINTING] > 3 * others.max()
    # The root is found through the special token the pointing head attends to.
    cls_weight, sep_weight = probe.root_scale_
    assert (cls_weight > sep_weight) == (root_to == LEADING_SPECIAL)
    assert probe.score(test) == evaluation.uas


def test_attention_and_words_probe_learns_the_pointing_head_too():
    vecs = vectors()
    train, test = synthetic(80, 1, vectors=vecs), synthetic(15, 3, vectors=vecs)
    probe = AttentionWordsProbe(**FAST).fit(train)
    assert probe.score(test) >= 0.99
    weights = probe.effective_weights(test, relations=("nsubj", "absent"))
    assert set(weights) == {"all", "nsubj"} and weights["all"].shape == (2, L, H)
    w = np.abs(weights["all"][0])
    assert np.unravel_index(w.argmax(), w.shape) == POINTING


def test_without_a_pointing_head_the_probe_does_not_find_the_trees():
    train, dev, test = (synthetic(n, seed, pointing=None) for n, seed in ((40, 1), (10, 2), (30, 3)))
    assert AttentionProbe(**FAST).fit(train, dev=dev).score(test) < 0.6


def test_distances_and_words_baseline_learns_a_positional_rule():
    rng = np.random.default_rng(0)
    chains = [
        Sentence(
            f"c{i}",
            tuple(f"w{rng.integers(0, 30)}" for _ in range(n)),
            tuple(list(range(2, n + 1)) + [0]),
            tuple(["dep"] * (n - 1) + ["root"]),
        )
        for i, n in enumerate(rng.integers(2, 10, size=40))
    ]
    data = ProbeData(Corpus.from_items(chains, "chains"), None, vectors())
    probe = DistanceWordsProbe(hidden_size=16, **FAST).fit(data)
    assert probe.score(data) == 1.0


def test_right_branching_on_a_hand_made_tree():
    data = ProbeData(Corpus.from_items([DOG], "dog"), None)
    baseline = RightBranching().fit(data)
    [heads] = baseline.predict(data)
    assert heads.tolist() == [2, 3, 4, 5, 6, 7, 0]
    evaluation = baseline.evaluate(data)
    # Scored: every word but the punctuation; right: old->dog, dog->chased, a->cat.
    assert evaluation.n_scored == 6
    assert evaluation.uas == pytest.approx(3 / 6)
    assert evaluation.uas_with_punctuation == pytest.approx(3 / 7)
    by_relation = evaluation.by_relation()
    assert by_relation.loc["det", "count"] == 2 and by_relation.loc["det", "uas"] == 0.5
    assert "punct" not in by_relation.index


# --------------------------------------------------------------------------- determinism, conventions


@pytest.mark.parametrize(
    "make",
    [
        lambda: AttentionProbe(max_epochs=2, batch_size=4, lr=0.05),
        lambda: AttentionWordsProbe(max_epochs=2, batch_size=4, lr=0.05),
        lambda: DistanceWordsProbe(hidden_size=8, max_epochs=2, batch_size=4, lr=0.05),
    ],
)
def test_fit_twice_with_the_same_seed_gives_identical_probes(make):
    train, dev = synthetic(24, 1, vectors=vectors()), synthetic(8, 2, vectors=vectors())
    first, second = make().fit(train, dev=dev), make().fit(train, dev=dev)
    for (name, a), (_, b) in zip(first.module_.state_dict().items(), second.module_.state_dict().items()):
        assert torch.equal(a, b), name
    assert [h["train_loss"] for h in first.history_] == [h["train_loss"] for h in second.history_]
    for a, b in zip(first.predict(dev), second.predict(dev)):
        np.testing.assert_array_equal(a, b)
    other = make().set_params(seed=7).fit(train, dev=dev)
    assert [h["train_loss"] for h in other.history_] != [h["train_loss"] for h in first.history_]


def test_scikit_learn_conventions():
    probe = AttentionWordsProbe(lr=0.01, max_epochs=3)
    assert probe.get_params()["lr"] == 0.01
    assert probe.set_params(max_epochs=4) is probe and probe.max_epochs == 4
    copy = clone(probe)
    assert copy.get_params() == probe.get_params() and copy is not probe
    assert "max_epochs=4" in repr(probe)
    with pytest.raises(NotFittedError):
        probe.predict(synthetic(3, 1, vectors=vectors()))
    with pytest.raises(TypeError, match="ProbeData"):
        AttentionProbe().fit([1, 2, 3])
    with pytest.raises(ValueError, match="max_epochs"):
        AttentionProbe(max_epochs=0).fit(synthetic(3, 1))


def test_predictions_do_not_depend_on_how_sentences_are_batched():
    train, test = synthetic(30, 1), synthetic(20, 3)
    probe = AttentionProbe(max_epochs=2, lr=0.05).fit(train)
    alone = probe.set_params(batch_size=1).predict(test)
    together = probe.set_params(batch_size=64).predict(test)
    assert len(alone) == len(test) == 20
    for a, b in zip(alone, together):
        np.testing.assert_array_equal(a, b)


def test_batches_cover_every_sentence_once_with_padding_masked():
    data = synthetic(40, 1, vectors=vectors())
    seen = []
    for batch in data.batches(batch_size=5, max_pairs=200, vectors=True, shuffle=True, seed=3):
        B, N = batch.heads.shape
        assert B <= 5 and (B * N * N <= 200 or B == 1)
        assert batch.maps.shape == (B, N, N, L * H) and batch.root.shape == (B, N, 2, 2 * L * H)
        assert batch.vectors.shape == (B, N, 5)
        for b, n in enumerate(batch.lengths.tolist()):
            assert batch.candidates[b, :n, 0].all()  # ROOT is always a candidate
            assert not batch.candidates[b, :, n + 1 :].any()  # padding never is
            assert not batch.candidates[b, torch.arange(n), torch.arange(n) + 1].any()  # nor the word itself
            assert (batch.heads[b, n:] == -100).all() and (batch.heads[b, :n] >= 0).all()
            assert not batch.maps[b, n:].any()
        seen += batch.indices.tolist()
    assert sorted(seen) == list(range(40))
    again = [b.indices.tolist() for b in data.batches(batch_size=5, max_pairs=200, shuffle=True, seed=3)]
    assert sum(again, []) == seen
    in_order = sum((b.indices.tolist() for b in data.batches(batch_size=5)), [])
    assert sorted(in_order) == list(range(40))


def test_root_features_come_from_cls_and_sep():
    rng = np.random.default_rng(0)
    sentence = random_tree(rng, 4, 0)
    it = item(sentence, 0, rng)
    data = ProbeData(Corpus.from_items([sentence], "one"), [it])
    [batch] = data.batches()
    att = it.attention.reshape(L * H, 6, 6)
    for j in range(4):
        np.testing.assert_allclose(batch.root[0, j, 0, : L * H], att[:, j + 1, 0], rtol=1e-6)  # j -> [CLS]
        np.testing.assert_allclose(batch.root[0, j, 1, : L * H], att[:, j + 1, 5], rtol=1e-6)  # j -> [SEP]
        np.testing.assert_allclose(batch.root[0, j, 0, L * H :], att[:, 0, j + 1], rtol=1e-6)  # [CLS] -> j
        np.testing.assert_allclose(batch.root[0, j, 1, L * H :], att[:, 5, j + 1], rtol=1e-6)  # [SEP] -> j
        np.testing.assert_allclose(batch.maps[0, j, :, :], att[:, j + 1, 1:5].T, rtol=1e-6)


def test_distance_features():
    features = distance_features(torch.tensor([3]), 3)
    assert features.shape == (1, 3, 4, N_DISTANCE_FEATURES)
    root = features[0, :, 0]
    assert (root[:, -1] == 1).all() and (root[:, :-1] == 0).all()
    # dependent 0, candidate word 2 (column 3): two ahead of a 3-word sentence.
    assert features[0, 0, 3].tolist() == pytest.approx([2 / 3, 0, 0, 1, 0, 0, 0])
    # dependent 2, candidate word 1 (column 2): one behind.
    assert features[0, 2, 2].tolist() == pytest.approx([0, 1 / 3, 0, 0, 1, 0, 0])


@pytest.mark.parametrize("chunk", [1 << 18, 200, 60])  # hidden 4 x 7 candidates: all, one sentence, two rows
def test_distance_scorer_is_its_formula(monkeypatch, chunk):
    """The fused, chunked scorer gives the module docstring's formula and its exact gradients."""
    monkeypatch.setattr(scorers, "_PAIR_CHUNK", chunk)
    torch.manual_seed(0)
    scorer = scorers.DistanceWordsScorer(dim=5, hidden=4)
    lengths = torch.tensor([6, 3, 5])
    vectors = torch.randn(3, 6, 5)
    batch = probe_data.Batch(np.arange(3), lengths, torch.zeros(3, 6, dtype=torch.long), None, None, vectors=vectors)
    weights = torch.randn(3, 6, 7)

    def formula():
        root_vector = torch.zeros(3, 1, 5)
        cand = scorer.candidate(torch.cat([root_vector, vectors], 1))
        hidden = scorer.dependent(vectors)[:, :, None] + cand[:, None] + scorer.distance(distance_features(lengths, 6))
        return scorer.out(torch.tanh(hidden)).squeeze(-1)

    expected, got = formula(), scorer(batch)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    params = list(scorer.parameters())
    want = torch.autograd.grad((formula() * weights).sum(), params)
    have = torch.autograd.grad((scorer(batch) * weights).sum(), params)
    for a, b in zip(have, want):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    scores = scorer(batch).sum()
    scores.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="runs once"):  # its saved activations were overwritten
        scores.backward()


@pytest.mark.parametrize("chunk", [1 << 20, 100, 1])  # 3 sentences x 6 x 6 x 4: all, 4 rows of one, 1 row
def test_attention_words_scorer_is_its_formula(monkeypatch, chunk):
    """The fused scorer gives Σ_k (w_jk + w'_ik) a_k[j, i] + (u_jk + u'_ik) a_k[i, j] and its exact gradients."""
    monkeypatch.setattr(scorers, "_PAIR_CHUNK", chunk)
    torch.manual_seed(0)
    scorer = scorers.AttentionWordsScorer(n_features=8, dim=5)  # 2K features, K = 4
    for layer in (scorer.dependent, scorer.candidate):  # zeros at init: random weights test more
        torch.nn.init.normal_(layer.weight)
    torch.nn.init.normal_(scorer.dependent.bias)
    maps, vectors = torch.rand(3, 6, 6, 4), torch.randn(3, 6, 5)
    batch = probe_data.Batch(
        np.arange(3), torch.tensor([6, 3, 5]), torch.zeros(3, 6, dtype=torch.long), None, None,
        maps=maps, root=torch.rand(3, 6, 2, 8), vectors=vectors,
    )  # fmt: skip
    weights = torch.randn(3, 6, 7)

    def formula():
        dep, cand = scorer.dependent(vectors), scorer.candidate(vectors)
        w = dep[:, :, None] + cand[:, None]  # (B, j, i, 2K): the weights of the pair (j, i)
        words = (maps * w[..., :4]).sum(-1) + (maps.transpose(1, 2) * w[..., 4:]).sum(-1)
        root = (torch.einsum("bjsc,s->bjc", batch.root, scorer.root_scale) * dep).sum(-1)
        return torch.cat([root.unsqueeze(-1), words], -1)

    torch.testing.assert_close(scorer(batch), formula(), atol=1e-5, rtol=1e-5)
    params = list(scorer.parameters())
    want = torch.autograd.grad((formula() * weights).sum(), params)
    have = torch.autograd.grad((scorer(batch) * weights).sum(), params)
    for a, b in zip(have, want):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("device, chunks", [("cpu", 18), ("meta", 1)])
def test_the_fused_scorers_cut_a_batch_in_chunks_on_the_cpu_only(monkeypatch, device, chunks):
    """On the CPU a pass goes chunk by chunk (the cache); on any other device (meta, shapes only, stands for a GPU)
    the whole batch is one chunk, each chunk being another round of kernel launches there."""
    monkeypatch.setattr(scorers, "_PAIR_CHUNK", 4)  # the attention scorer's maps: one row of 4 features a chunk
    cut, split = [], scorers._pair_chunks

    def counted(*args):
        cut.append(split(*args))
        return cut[-1]

    monkeypatch.setattr(scorers, "_pair_chunks", counted)
    lengths, vectors = torch.tensor([6, 3, 5], device=device), torch.randn(3, 6, 5).to(device)
    heads = torch.zeros(3, 6, dtype=torch.long, device=device)
    maps, root = torch.rand(3, 6, 6, 4).to(device), torch.rand(3, 6, 2, 8).to(device)
    attention = probe_data.Batch(np.arange(3), lengths, heads, None, None, maps=maps, root=root, vectors=vectors)
    distance = probe_data.Batch(np.arange(3), lengths, heads, None, None, vectors=vectors)
    for scorer, batch in ((scorers.AttentionWordsScorer(n_features=8, dim=5), attention),
                          (scorers.DistanceWordsScorer(dim=5, hidden=4), distance)):  # fmt: skip
        scorer.to(device)(batch).sum().backward()
    # each scorer's forward and backward pass; on the CPU a row (of 6 x 4 maps, of 7 x 4 hidden units) at a time,
    # larger than the 4-element chunk, so 3 sentences x 6 rows
    assert [len(c) for c in cut] == [chunks] * 4


# --------------------------------------------------------------------------- clear errors


def test_bad_shapes_give_clear_errors():
    rng = np.random.default_rng(0)
    sentences = [random_tree(rng, 4, i) for i in range(3)]
    corpus = Corpus.from_items(sentences, "three")
    good = [item(s, i, rng) for i, s in enumerate(sentences)]

    wrong_size = list(good)
    wrong_size[1] = ItemAttention(**{**good[1].__dict__, "attention": good[1].attention[:, :, :5, :5]})
    with pytest.raises(BertologyError, match=r"item 1 .*shape \(2, 3, 5, 5\).*expected \(layers, heads, 6, 6\)"):
        AttentionProbe(max_epochs=1).fit(ProbeData(corpus, wrong_size))

    mixed = list(good)
    mixed[2] = item(sentences[2], 2, rng, pointing=None, shape=(3, 3))
    with pytest.raises(BertologyError, match="3 x 3 layers x heads, earlier items 2 x 3"):
        AttentionProbe(max_epochs=1).fit(ProbeData(corpus, mixed))

    probe = AttentionProbe(max_epochs=1).fit(ProbeData(corpus, good))
    other_model = [item(s, i, rng, pointing=None, shape=(4, 2)) for i, s in enumerate(sentences)]
    with pytest.raises(BertologyError, match="fit on 2 x 3 layers x heads.*has 4 x 2"):
        probe.predict(ProbeData(corpus, other_model))

    other_words = list(good)
    other_words[0] = ItemAttention(**{**good[0].__dict__, "words": ("[CLS]", "x", "y", "z", "w", "[SEP]")})
    with pytest.raises(BertologyError, match="word 1 is 'x' in the attention map"):
        probe.predict(ProbeData(corpus, other_words))
    skipping = ProbeData(corpus, other_words, on_mismatch="skip")
    assert len(probe.predict(skipping)) == 2 and skipping.skipped["words differ from the treebank"] == 1

    with pytest.raises(BertologyError, match="needs word vectors"):
        AttentionWordsProbe(max_epochs=1).fit(ProbeData(corpus, good))
    words_probe = AttentionWordsProbe(max_epochs=1).fit(ProbeData(corpus, good, vectors(5)))
    with pytest.raises(BertologyError, match="dimension 5.*have 7"):
        words_probe.predict(ProbeData(corpus, good, vectors(7)))
    with pytest.raises(BertologyError, match="reads attention"):
        probe.predict(ProbeData(corpus, None))
    with pytest.raises(BertologyError, match="outside the corpus"):
        ProbeData(corpus[:2], good)
    with pytest.raises(BertologyError, match="no sentence of .* can be used"):
        ProbeData(Corpus.from_items([Sentence("x", ("a", "b"))], "no trees"), None)


# --------------------------------------------------------------------------- a real store


def test_probes_on_a_tiny_models_store(tiny_model_dirs, tmp_path):
    from bertology_utils.analyses.word_vectors import ModelEmbeddingVectors
    from bertology_utils.attention.extraction import extract_attention
    from bertology_utils.core.models import load_model
    from bertology_utils.data import load_sample

    corpus = load_sample()[:12]
    for arch in ("bert", "roberta"):
        loaded = load_model(tiny_model_dirs[arch])
        store = extract_attention(corpus, tmp_path / f"{arch}.zarr", loaded, progress=False)
        data = ProbeData(corpus, store, ModelEmbeddingVectors(loaded), block_size=5)
        assert data.shape == (loaded.num_layers, loaded.num_heads)
        for probe in (
            AttentionProbe(max_epochs=2),
            AttentionWordsProbe(max_epochs=2),
            DistanceWordsProbe(max_epochs=1, hidden_size=8),
            RightBranching(),
        ):
            probe.fit(data, dev=data)
            predicted = probe.predict(data)
            assert [len(p) for p in predicted] == [len(s.words) for s in corpus]
            assert all(((p >= 0) & (p <= len(p))).all() for p in predicted)
            assert all((p != np.arange(1, len(p) + 1)).all() for p in predicted)  # never its own head
            assert 0 <= probe.score(data) <= 1
        probe = AttentionProbe(max_epochs=1).fit(data)
        assert probe.w_.shape == (loaded.num_layers, loaded.num_heads)


# --------------------------------------------------------------------------- tables and pictures


def fake_evaluation(name: str, uas: float) -> ProbeEvaluation:
    n = 100
    gold = np.ones(n, dtype=np.int64)
    predicted = np.where(np.arange(n) < round(uas * n), 1, 2)
    return ProbeEvaluation(
        name,
        np.zeros(n, dtype=np.int64),
        np.arange(n),
        gold,
        predicted,
        np.array(["dep"] * n, dtype=object),
        np.ones(n, dtype=bool),
    )


def test_table3_puts_ours_beside_the_paper():
    assert set(PAPER_TABLE3) == set(TABLE3_ROWS)
    ours = {
        "Right-branching": 0.3,
        "Distances + words": 0.6,
        "Random-init Attn + words": 0.5,
        "Attn": 0.55,
        "Attn + words": 0.7,
    }
    test = {name: fake_evaluation(name, uas) for name, uas in ours.items()}
    table = table3(test, test)
    assert list(table.index) == list(TABLE3_ROWS)
    assert table.loc["Attn", "test"] == pytest.approx(55.0)
    assert table.loc["Attn", "test - paper"] == pytest.approx(55.0 - 61.0)


def sentence_evaluation(name: str, right, words: int = 10) -> ProbeEvaluation:
    """Sentence i has ``words`` scored words, ``right[i]`` of them predicted right, and an unscored full stop."""
    n = words + 1
    sentence = np.repeat(np.arange(len(right)), n)
    position = np.tile(np.arange(n), len(right))
    hit = np.concatenate([np.arange(n) < r for r in right])  # the full stop is right when a sentence is all right
    scored = position < words
    gold = np.ones(len(sentence), dtype=np.int64)
    relation = np.where(scored, "dep", "punct").astype(object)
    return ProbeEvaluation(name, sentence, position, gold, np.where(hit, 1, 2), relation, scored)


def test_by_sentence_counts_scored_words_and_right_ones():
    index, right, scored = sentence_evaluation("Attn", [3, 10, 0]).by_sentence()
    assert (index.tolist(), right.tolist(), scored.tolist()) == ([0, 1, 2], [3, 10, 0], [10, 10, 10])


def test_table3_claims_are_decided_by_an_interval_over_test_sentences():
    rows = {"Right-branching": 5, "Distances + words": 5, "Attn": 3, "Attn + words": 8}
    test = {name: sentence_evaluation(name, [right] * 30) for name, right in rows.items()}
    dev = {name: sentence_evaluation(name, [right - 1] * 5) for name, right in rows.items()}
    claims = {c.id: c for c in clark.table3_claims(test, dev)}
    better = claims["table3.attn_words_beats_distances"]
    assert better.values == {"test_margin": pytest.approx(30.0), "dev_margin": pytest.approx(30.0)}
    assert better.interval.method == "bootstrap over 30 test sentences"
    assert better.interval.low == pytest.approx(30.0) == better.interval.high  # every sentence gains 3 of 10
    assert better.verdict is Verdict.HOLDS and "inconclusive" in better.rule
    assert claims["table3.attn_beats_right_branching"].verdict is Verdict.DIFFERS  # -20 points on every sentence
    assert claims["table3.trained_beats_random_init"].verdict is Verdict.NOT_TESTABLE  # no random-init row
    assert claims["table3.trained_beats_random_init"].ours == "not testable: no Random-init Attn + words row"
    assert claims["table3.trained_beats_random_init"].interval is None
    # varied sentences: the interval is around the margin, above 0
    rng = np.random.default_rng(0)
    varied = {"Attn + words": rng.integers(4, 11, 40), "Attn": rng.integers(0, 7, 40)}
    gain = clark.probe_margin("words_help_attn", {k: sentence_evaluation(k, v) for k, v in varied.items()})
    assert 0 < gain.interval.low < gain.values["test_margin"] < gain.interval.high and gain.verdict is Verdict.HOLDS
    # one more word right of 60, or a tie, or two sentences
    for right, verdict in (([5] * 5 + [6], Verdict.INCONCLUSIVE), ([5] * 6, Verdict.DIFFERS), ([6, 6], None)):
        rows = {"Attn + words": sentence_evaluation("", right), "Attn": sentence_evaluation("", [5] * len(right))}
        claim = clark.probe_margin("words_help_attn", rows)
        assert claim.verdict is (verdict or Verdict.NOT_TESTABLE) and claim.interval.finite is (verdict is not None)
    assert claim.values["test_margin"] == pytest.approx(10.0) and math.isnan(claim.values["dev_margin"])


def test_pictures_draw():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    axes = plot_probe_weights(np.random.default_rng(0).normal(size=(2, L, H)), title="test")
    assert len(axes) == 2
    ax = plot_tree_comparison(DOG.words, DOG.heads, [2, 3, 4, 0, 6, 4, 4], title="dog")
    assert ax.get_title() == "dog"
    with pytest.raises(ValueError):
        plot_tree_comparison(DOG.words, DOG.heads, [1, 2])
    with pytest.raises(ValueError):
        plot_probe_weights(np.zeros((L, H)))
    plt.close("all")


# --------------------------------------------------------------------------- prepared blocks kept, fits side by side


def _batches_as_arrays(data, **kwargs):
    return [
        (b.indices.tolist(), b.maps.numpy().copy(), b.root.numpy().copy(), b.vectors.numpy().copy())
        for b in data.batches(8, attention=True, vectors=True, **kwargs)
    ]


def test_kept_blocks_serve_later_passes_with_the_same_batches(monkeypatch):
    vecs = vectors()
    kept, streamed = synthetic(40, 1, vectors=vecs), synthetic(40, 1, vectors=vecs)
    streamed.cache_size = 0
    reads = {"kept": 0, "streamed": 0}
    for name, data in (("kept", kept), ("streamed", streamed)):
        original = data._items_of

        def counting(indices, original=original, name=name):
            reads[name] += len(indices)
            return original(indices)

        monkeypatch.setattr(data, "_items_of", counting)
    for seed in (0, 1, 0):  # shuffled passes, as training makes them; the cache never reorders
        a, b = _batches_as_arrays(kept, shuffle=True, seed=seed), _batches_as_arrays(streamed, shuffle=True, seed=seed)
        assert [x[0] for x in a] == [x[0] for x in b]
        for x, y in zip(a, b):
            for u, v in zip(x[1:], y[1:]):
                np.testing.assert_array_equal(u, v)
    assert reads == {"kept": 40, "streamed": 120}  # read once, against once per pass
    assert 0 < kept._cached_bytes <= kept.cache_size * 2**20 and streamed._cached_bytes == 0
    # A probe without attention gets no maps from records that hold them.
    batch = next(kept.batches(8, attention=False, vectors=True))
    assert batch.maps is None and batch.vectors is not None


def test_cache_budget_is_respected_and_validated():
    data = synthetic(40, 1, vectors=vectors())
    one_block = sum(probe_data._nbytes(r) for r in data._block(0, data.indices // 16 == 0, True, True))
    data._cache.clear()
    data._cached_bytes = 0
    data.cache_size = one_block / 2**20  # room for the first of the three blocks, no more
    for _ in data.batches(8, attention=True, vectors=True):
        pass
    assert list(data._cache) == [0] and data._cached_bytes == one_block
    with pytest.raises(ValueError, match="cache_size"):
        ProbeData(data.corpus, None, cache_size=-1)


@pytest.mark.parametrize("budget_blocks", [0.5, 1.2, 10])
def test_kept_bytes_always_count_what_is_kept(budget_blocks):
    """Passes that need different parts (vectors only, maps only, both) replace a block's records or keep them."""
    full = synthetic(40, 1, vectors=vectors())
    one_block = sum(probe_data._nbytes(r) for r in full._block(0, full.indices // 16 == 0, True, True))
    data = synthetic(40, 1, vectors=vectors())
    data.cache_size = budget_blocks * one_block / 2**20
    for attention, vecs in ((False, True), (True, False), (True, True), (False, True), (True, True)):
        batches = list(data.batches(8, attention=attention, vectors=vecs))
        assert sum(len(b.indices) for b in batches) == len(data)
        assert all((b.maps is not None) == attention and (b.vectors is not None) == vecs for b in batches)
        kept = sum(probe_data._nbytes(r) for records in data._cache.values() for r in records)
        assert data._cached_bytes == kept <= data.cache_size * 2**20
    if budget_blocks >= 10:  # room for everything: the last passes left every block with maps and vectors
        assert len(data._cache) == 3
        assert all(r.maps is not None and r.vectors is not None for rs in data._cache.values() for r in rs)


def test_fit_probes_side_by_side_equals_fitting_one_by_one():
    vecs = vectors()
    train, dev = synthetic(60, 1, vectors=vecs), synthetic(20, 2, vectors=vecs)
    made = {
        "attn": lambda: AttentionProbe(**FAST),
        "words": lambda: AttentionWordsProbe(**FAST),
        "distances": lambda: DistanceWordsProbe(hidden_size=8, **FAST),
        "right": RightBranching,
    }
    alone = {
        name: make().fit(synthetic(60, 1, vectors=vecs), dev=synthetic(20, 2, vectors=vecs))
        for name, make in made.items()
    }
    together = fit_probes({name: (make(), train, dev) for name, make in made.items()}, n_jobs=2)
    assert list(together) == list(made)
    for name in made:
        if hasattr(alone[name], "history_"):
            assert together[name].history_[-1]["dev_uas"] == alone[name].history_[-1]["dev_uas"]
            for key, value in alone[name].module_.state_dict().items():
                torch.testing.assert_close(together[name].module_.state_dict()[key], value, rtol=0, atol=0)
        assert [p.tolist() for p in together[name].predict(dev)] == [p.tolist() for p in alone[name].predict(dev)]
    with pytest.raises(ValueError, match="one thread"):
        fit_probes({"attn": (AttentionProbe(n_jobs=2), train, dev)})


def test_fitted_probes_are_cached_by_data_and_parameters(tiny_model_dirs, tmp_path):
    from bertology_utils.analyses.word_vectors import ModelEmbeddingVectors
    from bertology_utils.attention.extraction import extract_attention
    from bertology_utils.core.cache import CacheWarning
    from bertology_utils.core.models import load_model
    from bertology_utils.data import load_sample

    corpus = load_sample()[:12]
    loaded = load_model(tiny_model_dirs["bert"])
    store = extract_attention(corpus, tmp_path / "bert.zarr", loaded, progress=False)
    data = ProbeData(corpus, store, ModelEmbeddingVectors(loaded), block_size=5)
    cache = tmp_path / "probes"

    def jobs(seed=0):
        return {
            "attn": (AttentionProbe(max_epochs=2, seed=seed), data, data),
            "distances": (DistanceWordsProbe(max_epochs=1, hidden_size=8), data, None),
            "right": (RightBranching(), data, None),
        }

    first = fit_probes(jobs(), cache=True, cache_dir=cache)
    assert not first["attn"].from_cache_ and not first["distances"].from_cache_
    assert len([p for p in cache.iterdir() if not p.name.startswith(".")]) == 2  # right-branching learns nothing
    again = fit_probes(jobs(), cache=True, cache_dir=cache)
    for name in ("attn", "distances"):
        assert again[name].from_cache_
        assert again[name].history_ == first[name].history_ and again[name].best_epoch_ == first[name].best_epoch_
        for key, value in first[name].module_.state_dict().items():
            torch.testing.assert_close(again[name].module_.state_dict()[key], value, rtol=0, atol=0)
        assert [p.tolist() for p in again[name].predict(data)] == [p.tolist() for p in first[name].predict(data)]
    np.testing.assert_array_equal(again["attn"].w_, first["attn"].w_)
    assert not fit_probes(jobs(seed=1), cache=True, cache_dir=cache)["attn"].from_cache_  # another key
    # A CPU fit's key names no device (the entries made before there was one still match); another device's does.
    on_cpu = fit_probes(jobs(), cache=True, cache_dir=cache, device=torch.device("cpu"))
    assert on_cpu["attn"].from_cache_ and on_cpu["distances"].from_cache_
    folder, key = fitting._cache_entry(cache, AttentionProbe(max_epochs=2, device="meta"), data, data)
    assert key["device"] == "meta" and folder != fitting._cache_entry(cache, jobs()["attn"][0], data, data)[0]

    for entry in cache.glob("AttentionProbe-*/weights.safetensors"):
        entry.write_bytes(b"not safetensors")
    with pytest.warns(CacheWarning, match="corrupt"):
        refit = fit_probes({"attn": jobs()["attn"]}, cache=True, cache_dir=cache)["attn"]
    assert not refit.from_cache_
    assert fit_probes({"attn": jobs()["attn"]}, cache=True, cache_dir=cache)["attn"].from_cache_  # rebuilt whole

    # In-memory attention has no fingerprint: trained every time, nothing written.
    vecs = vectors()
    fit_probes(
        {"attn": (AttentionProbe(**FAST), synthetic(20, 1, vectors=vecs), None)}, cache=True, cache_dir=tmp_path / "x"
    )
    assert not (tmp_path / "x").exists() or not any((tmp_path / "x").iterdir())


def test_word_vector_fingerprints_follow_the_table():
    words = ["a", "b"]
    one = StaticVectors(words, np.eye(2)).fingerprint()
    assert one == StaticVectors(words, np.eye(2)).fingerprint()
    assert one != StaticVectors(words, 2 * np.eye(2)).fingerprint()
    assert one != StaticVectors(words[::-1], np.eye(2)).fingerprint()
