"""Head distances against a plain scipy loop, tiling, joint matrices of two stores, the permutation test."""

import math

import numpy as np
import pytest
from scipy.spatial.distance import jensenshannon

from bertology_utils.analyses.clustering import (
    HeadDistances,
    JSAccumulator,
    embed_heads,
    head_distances,
    head_linkage,
    nearest_heads,
    neighbour_attention,
    plot_dendrogram,
    same_layer_statistic,
)
from bertology_utils.attention.alignment import LEADING_SPECIAL, SEPARATOR, WORD
from bertology_utils.attention.store import AttentionStore
from bertology_utils.attention.word_attention import ItemAttention

L, H = 2, 3  # not square, and not 12 x 12


def item(maps: np.ndarray, index: int, words=None) -> ItemAttention:
    """[CLS] w.. [SEP] carrying ``maps`` (layers, heads, n, n), rounded to float16 as a store keeps them."""
    n = maps.shape[-1]
    words = words or ("[CLS]", *[f"w{i}" for i in range(n - 2)], "[SEP]")
    kinds = np.array([LEADING_SPECIAL] + [WORD] * (n - 2) + [SEPARATOR], dtype=np.int8)
    return ItemAttention(
        index=index,
        item_id=f"s{index}",
        words=tuple(words),
        word_kinds=kinds,
        segments=np.zeros(n, dtype=np.int8),
        attention=maps.astype(np.float16).astype(np.float32),
        n_tokens=n,
    )


def random_items(seed: int, lengths=(3, 7, 4, 5), layers=L, heads=H, zeros=True) -> list[ItemAttention]:
    """Peaked random maps; with ``zeros``, some rows are one-hot so exact zeros occur."""
    rng = np.random.default_rng(seed)
    items = []
    for index, n in enumerate(lengths):
        logits = rng.normal(size=(layers, heads, n, n)) * 3
        maps = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
        if zeros:
            maps[0, 0, 0] = np.eye(n)[rng.integers(n)]
            maps[-1, -1, -1] = np.eye(n)[0]
        items.append(item(maps, index))
    return items


def scipy_reference(items, smoothing: float, reduction: str = "sum") -> np.ndarray:
    """The per-pair, per-row loop: scipy's Jensen–Shannon distance squared is the divergence."""
    flat = [np.asarray(it.attention, dtype=np.float64).reshape(-1, it.n_words, it.n_words) for it in items]
    k = flat[0].shape[0]
    out, rows = np.zeros((k, k)), 0
    for maps in flat:
        n = maps.shape[-1]
        maps = maps / maps.sum(-1, keepdims=True)
        smoothed = (1 - smoothing) * maps + smoothing / n
        rows += n
        for a in range(k):
            for b in range(k):
                for r in range(n):
                    out[a, b] += jensenshannon(smoothed[a, r], smoothed[b, r]) ** 2
    return out / rows if reduction == "mean" else out


@pytest.mark.parametrize("smoothing", [1e-3, 0.0, 0.05])
@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_matches_scipy_jensenshannon_loop(smoothing, reduction):
    items = random_items(0)
    result = head_distances(items, smoothing=smoothing, reduction=reduction)
    np.testing.assert_allclose(result.matrix, scipy_reference(items, smoothing, reduction), rtol=1e-5, atol=1e-8)
    assert result.n_rows == sum(it.n_words for it in items) and result.n_items == len(items)
    assert (result.layer.tolist(), result.head.tolist()) == ([0, 0, 0, 1, 1, 1], [0, 1, 2, 0, 1, 2])


def test_symmetric_zero_diagonal_identical_heads_at_zero():
    items = random_items(1)
    for it in items:
        it.attention[1, 2] = it.attention[0, 1]  # head 6 copies head 2 on every item
    d = head_distances(items).matrix
    np.testing.assert_array_equal(d, d.T)
    np.testing.assert_array_equal(np.diag(d), 0.0)
    assert d[1, 5] <= 1e-12 * d.max()
    off = d[~np.eye(len(d), dtype=bool)]
    assert (off[off > 1e-9] > 0).sum() == len(off) - 2  # every other pair differs


def untiled(items, smoothing: float) -> np.ndarray:
    """The whole (heads, heads, entries) tensor at once: the computation tiling must reproduce."""
    x = []
    for it in items:
        n = it.n_words
        maps = np.asarray(it.attention, dtype=np.float64).reshape(-1, n, n)
        maps = (1 - smoothing) * maps / maps.sum(-1, keepdims=True) + smoothing / n
        x.append(maps.reshape(len(maps), -1))
    x = np.concatenate(x, axis=1)
    m = (x[:, None, :] + x[None, :, :]) / 2
    return (0.5 * (x * np.log(x))[:, None, :] + 0.5 * (x * np.log(x))[None, :, :] - m * np.log(m)).sum(-1)


@pytest.mark.parametrize("max_bytes", [3 * L * H * 8, 3 * L * H * 8 * 7, 10_000, 64 << 20])
def test_tiling_matches_the_untiled_computation(max_bytes):
    items = random_items(2, lengths=(9, 2, 13, 5, 3), zeros=False)
    reference = untiled(items, 1e-3)
    result = head_distances(items, max_bytes=max_bytes)
    np.testing.assert_allclose(result.matrix, reference, rtol=1e-10, atol=1e-12)


def test_tile_plan_respects_max_bytes_and_float32_agrees():
    acc = JSAccumulator(144, max_bytes=10 << 20)
    assert acc.working_bytes <= 10 << 20
    with pytest.raises(ValueError, match="too small"):
        JSAccumulator(144, max_bytes=1000)
    items = random_items(3, zeros=False)
    np.testing.assert_allclose(head_distances(items, dtype=np.float32).matrix, untiled(items, 1e-3), rtol=1e-5)


def make_store(path, items, layers, heads, name="m", corpus_sha="c0") -> AttentionStore:
    metadata = {
        "model": {"name": name, "num_layers": layers, "num_heads": heads},
        "corpus": {"name": "toy", "sha256": corpus_sha},
    }
    store = AttentionStore.open_or_create(path, metadata, len(items))
    store.writer(0, len(items), keep_tokens=False).append(items)
    store.refresh()
    return store


def test_two_stores_give_one_joint_matrix(tmp_path):
    first = random_items(4, layers=2, heads=3)
    second = random_items(5, layers=3, heads=2)
    second[0].attention[1, 0] = first[0].attention[0, 2]  # one head shared on item 0 only
    for a, b in zip(first, second):
        b.attention[2, 1] = a.attention[1, 1]  # and one head identical on every item
    stores = make_store(tmp_path / "a.zarr", first, 2, 3, "a"), make_store(tmp_path / "b.zarr", second, 3, 2, "b")
    joint = head_distances(*stores)
    assert isinstance(joint, HeadDistances) and joint.matrix.shape == (12, 12)
    assert joint.source_names == ("a", "b") and joint.source.tolist() == [0] * 6 + [1] * 6
    assert joint.labels()[6] == "b:1-1"
    np.testing.assert_allclose(joint.block(0, 0), head_distances(first).matrix, rtol=1e-12)
    np.testing.assert_allclose(joint.block(1, 1), head_distances(second).matrix, rtol=1e-12)
    stacked = [
        item(
            np.concatenate(
                [a.attention.reshape(6, a.n_words, a.n_words), b.attention.reshape(6, b.n_words, b.n_words)]
            )[None],
            a.index,
        )
        for a, b in zip(first, second)
    ]
    np.testing.assert_allclose(joint.matrix, scipy_reference(stacked, 1e-3), rtol=1e-5, atol=1e-8)
    assert joint.block(0, 1)[4, 5] <= 1e-12 * joint.matrix.max()  # a:2-2 and b:3-2 are the same head


def test_mismatched_sources_are_refused(tmp_path):
    items = random_items(6)
    fewer = make_store(tmp_path / "fewer.zarr", random_items(6, lengths=(3, 7, 4)), L, H)
    with pytest.raises(ValueError, match="ran out of items"):
        head_distances(items, fewer)
    longer = random_items(7, lengths=(3, 8, 4, 5))
    with pytest.raises(ValueError, match="has 7 words in source 0 but 8"):
        head_distances(items, longer)
    shifted = [item(it.attention, it.index + 1) for it in items]
    with pytest.raises(ValueError, match="do not line up"):
        head_distances(items, shifted)
    other_corpus = make_store(tmp_path / "other.zarr", items, L, H, corpus_sha="c1")
    with pytest.raises(ValueError, match="different corpora"):
        head_distances(make_store(tmp_path / "same.zarr", items, L, H), other_corpus)
    # Restricting both to the items they share makes them comparable.
    assert head_distances(items, fewer, indices=[0, 2]).n_items == 2


def planted(groups: int, per_group: int, seed: int, structure: float) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric distances, ``structure`` closer within groups, plus noise; and the group labels."""
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(groups), per_group)
    noise = rng.random((len(labels), len(labels)))
    d = 1.0 + noise + noise.T + structure * (labels[:, None] != labels[None, :])
    np.fill_diagonal(d, 0.0)
    return d, labels


def test_permutation_test_finds_planted_layers_and_not_absent_ones():
    d, labels = planted(5, 4, seed=0, structure=0.5)
    found = same_layer_statistic(d, labels, n_permutations=2000, seed=1)
    assert found.p_value < 0.005 and found.ratio < 1
    same = labels[:, None] == labels[None, :]
    off = ~np.eye(len(d), dtype=bool)
    assert found.same_mean == pytest.approx(d[same & off].mean())
    assert found.other_mean == pytest.approx(d[~same].mean())
    assert len(found.null) == 2000
    reversed_ = same_layer_statistic(*planted(5, 4, seed=0, structure=-0.5), n_permutations=2000, seed=1)
    assert reversed_.p_value > 0.99 and reversed_.ratio > 1  # same-layer heads farther apart: one-sided test
    flat = np.ones_like(d) - np.eye(len(d))
    assert same_layer_statistic(flat, labels, n_permutations=200).p_value == 1.0  # ties count as reached
    # Chunking the permutations changes nothing but memory.
    tiny_chunks = same_layer_statistic(d, labels, n_permutations=2000, seed=1, chunk_bytes=1)
    assert tiny_chunks.same_mean == found.same_mean and len(tiny_chunks.null) == 2000


@pytest.mark.parametrize(("structure", "verdict"), [(0.5, "holds"), (-0.5, "differs"), (0.02, "inconclusive")])
def test_the_claims_decide_by_the_permutation_interval(structure, verdict):
    """Planted closeness gives an interval above 0, planted distance one below, a faint one straddles 0."""
    from bertology_utils.papers import clark

    test = same_layer_statistic(*planted(4, 3, seed=2, structure=structure), n_permutations=2000, seed=1)
    for claim in (clark.same_layer_close(test), clark.heads_cluster_by_behaviour(test)):
        assert claim.verdict.value == verdict and claim.interval.level == 0.95
        assert claim.values["p_value"] == test.p_value and claim.values["ratio"] == test.ratio
        # observed minus the null's central 95%: it holds the observed excess over the null's median
        assert claim.interval.low < test.statistic - np.median(test.null) < claim.interval.high
        assert claim.interval.method == "permutation, 2000 relabellings of the heads"
    assert clark.same_layer_close(test, alpha=0.5).interval.level == 0.5


@pytest.mark.parametrize(
    ("labels", "why"), [(["a"] * 6, "all 6 heads are in one group"), (list("abcdef"), "no group has two heads")]
)
def test_a_degenerate_grouping_is_not_testable_and_says_why(labels, why):
    from bertology_utils.papers import clark
    from bertology_utils.papers.claims import Verdict

    d, _ = planted(3, 2, seed=0, structure=0.5)
    test = same_layer_statistic(d, labels, n_permutations=100)
    assert not test.testable and test.not_testable == why
    assert math.isnan(test.p_value) and math.isnan(test.ratio) and test.n_permutations == 0
    for claim in (clark.same_layer_close(test), clark.heads_cluster_by_behaviour(test)):
        assert claim.verdict is Verdict.NOT_TESTABLE and not claim.interval.finite
        assert why in claim.ours
    assert same_layer_statistic(d, ["a"] * 3 + ["b"] * 3, n_permutations=10).testable


def test_layers_default_to_the_heads_own_layers():
    result = head_distances(random_items(8, layers=4, heads=2))
    assert same_layer_statistic(result, n_permutations=50).n_permutations == 50
    with pytest.raises(ValueError, match="layers="):
        same_layer_statistic(result.matrix)


def test_embedding_and_dendrogram_recover_planted_structure():
    from scipy.cluster.hierarchy import fcluster

    rng = np.random.default_rng(0)
    points = np.concatenate([rng.normal(size=(6, 2)) * 0.1 + centre for centre in ([0, 0], [5, 0], [0, 5])])
    d = np.linalg.norm(points[:, None] - points[None], axis=-1)
    embedding = embed_heads(d, seed=3)
    assert embedding.coords.shape == (18, 2) and embedding.stress < 1e-3
    np.testing.assert_array_equal(embedding.coords, embed_heads(d, seed=3).coords)
    clusters = fcluster(head_linkage(d), 3, criterion="maxclust")
    assert len(set(clusters)) == 3 and all(len(set(clusters[i : i + 6])) == 1 for i in (0, 6, 12))


def test_nearest_heads_are_the_closest_others_nearest_first_ties_by_index():
    # heads on a line at 0, 1, 3, 6, 7: distances are known by hand
    points = np.array([0.0, 1.0, 3.0, 6.0, 7.0])
    d = np.abs(points[:, None] - points[None])
    index, distance = nearest_heads(d, k=2)
    np.testing.assert_array_equal(index, [[1, 2], [0, 2], [1, 0], [4, 2], [3, 2]])
    np.testing.assert_array_equal(distance, [[1, 3], [1, 2], [2, 3], [1, 3], [1, 4]])
    # head 2 (at 3) is 3 from both 0 and 6: the lower index first
    index, distance = nearest_heads(d, k=4)
    np.testing.assert_array_equal(index[2], [1, 0, 3, 4])
    np.testing.assert_array_equal(distance[2], [2, 3, 3, 4])
    # k is capped at heads - 1, a head is never its own neighbour, labels name the rows
    index, distance = nearest_heads(d, k=10)
    assert index.shape == distance.shape == (5, 4) and not (index == np.arange(5)[:, None]).any()
    result = head_distances(random_items(4, layers=2, heads=2))
    index, distance = nearest_heads(result, k=5)
    assert index.shape == (4, 3)
    np.testing.assert_array_equal(distance, np.sort(result.matrix + np.diag([np.inf] * 4), axis=1)[:, :3])
    assert np.asarray(result.labels())[index].reshape(2, 2, 3)[1, 0, 0] in {"1-1", "1-2", "2-2"}
    assert nearest_heads(np.zeros((1, 1)))[0].shape == (1, 0)


def test_neighbour_attention_on_known_heads():
    n = 6
    maps = np.full((1, 3, n, n), 1.0 / n)
    maps[0, 0] = np.eye(n, k=-1) + np.eye(n)[[0]] * (np.arange(n) == 0)[:, None]  # previous word (row 0: itself)
    maps[0, 1] = np.eye(n, k=1) + np.eye(n)[[n - 1]] * (np.arange(n) == n - 1)[:, None]  # next word
    words = ("[CLS]", "Hi", ",", "you", "!", "[SEP]")
    shares = neighbour_attention([item(maps, 0, words)])
    assert shares["previous"][0, 0] == pytest.approx(1.0) and shares["next"][0, 1] == pytest.approx(1.0)
    assert shares["self"][0, 0] == pytest.approx(1 / n)
    assert shares["punct"][0, 2] == pytest.approx(2 / n)  # "," and "!" under uniform attention


def test_one_or_two_heads_embed_exactly_and_one_head_has_no_tree():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    one, two = np.zeros((1, 1)), np.array([[0.0, 3.0], [3.0, 0.0]])
    assert embed_heads(one).coords.tolist() == [[0.0, 0.0]]
    assert embed_heads(two).coords.tolist() == [[-1.5, 0.0], [1.5, 0.0]] and embed_heads(two).stress == 0.0
    assert head_linkage(one).shape == (0, 4) and head_linkage(two).shape == (1, 4)
    assert plot_dendrogram(head_linkage(one), ["1-1"]) == {}
    plt.close(plt.gcf())  # the note it drew: a figure left open would be another test's


def test_plot_two_models_marks_each_model_and_joins_counterparts(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bertology_utils.analyses.clustering import plot_two_models

    first, second = random_items(3, layers=2, heads=2), random_items(4, layers=2, heads=2)
    joint = head_distances(
        make_store(tmp_path / "a.zarr", first, 2, 2, "a"), make_store(tmp_path / "b.zarr", second, 2, 2, "b")
    )
    coords = embed_heads(joint, seed=0).coords
    for counterparts in (False, True):
        ax = plot_two_models(joint, coords, ["a", "b"], counterparts=counterparts).axes[0]
        assert ax.get_title() == "a (circles) and b (triangles)"
        triangles, circles = ax.collections  # one scatter per marker, in np.unique order
        np.testing.assert_allclose(circles.get_offsets(), coords[:4])
        np.testing.assert_allclose(triangles.get_offsets(), coords[4:])
        np.testing.assert_array_equal(circles.get_array(), joint.layer[:4] + 1)
        lines = ax.get_lines()
        assert len(lines) == (4 if counterparts else 0)
        if counterparts:
            np.testing.assert_allclose(np.column_stack(lines[1].get_data()), coords[[1, 5]])
    plt.close("all")
