"""Surface statistics on hand-built attention maps whose answers are known."""

import math

import numpy as np
import pytest

from bertology_utils.analyses.patterns import head_table, max_row_sum_error, surface_statistics
from bertology_utils.attention.alignment import LEADING_SPECIAL, SEPARATOR, WORD
from bertology_utils.attention.word_attention import ItemAttention

L, H = 3, 5


def item(n_words: int, maps: np.ndarray | None = None, index: int = 0, dtype=np.float32) -> ItemAttention:
    """[CLS] w1 .. wk [SEP] with ``maps`` (L, H, n, n); uniform attention by default."""
    n = n_words + 2
    kinds = np.array([LEADING_SPECIAL] + [WORD] * n_words + [SEPARATOR], dtype=np.int8)
    if maps is None:
        maps = np.full((L, H, n, n), 1.0 / n)
    return ItemAttention(
        index=index,
        item_id=f"s{index}",
        words=("[CLS]", *[f"w{i}" for i in range(n_words)], "[SEP]"),
        word_kinds=kinds,
        segments=np.zeros(n, dtype=np.int8),
        attention=maps.astype(dtype),
        n_tokens=n,
    )


def one_hot_maps(n: int, column: int) -> np.ndarray:
    maps = np.zeros((L, H, n, n))
    maps[..., column] = 1.0
    return maps


def test_shapes_come_from_the_data_and_shares_sum_to_one():
    rng = np.random.default_rng(0)
    items = []
    for i, n_words in enumerate((3, 7, 1)):
        logits = rng.normal(size=(L, H, n_words + 2, n_words + 2)) * 2
        maps = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
        items.append(item(n_words, maps, i))
    stats = surface_statistics(items)
    for name in ("cls", "sep", "other"):
        assert stats[name].shape == (L, H)
        assert ((stats[name] >= 0) & (stats[name] <= 1)).all()
    np.testing.assert_allclose(stats["cls"] + stats["sep"] + stats["other"], 1.0, atol=1e-12)
    assert (stats["entropy"] <= stats.uniform_entropy + 1.0).all()


def test_a_head_on_cls_and_a_head_on_sep():
    n_words = 4
    n = n_words + 2
    maps = np.full((L, H, n, n), 1.0 / n)
    maps[0, 1] = one_hot_maps(n, 0)[0, 0]  # layer 1, head 2: everything on [CLS]
    maps[2, 4] = one_hot_maps(n, n - 1)[0, 0]  # layer 3, head 5: everything on [SEP]
    stats = surface_statistics([item(n_words, maps)])
    assert stats["cls"][0, 1] == pytest.approx(1.0)
    assert stats["sep"][0, 1] == pytest.approx(0.0)
    assert stats["sep"][2, 4] == pytest.approx(1.0)
    assert stats["other"][2, 4] == pytest.approx(0.0)
    # Uniform heads: 1/n on [CLS], 1/n on [SEP], the rest on words.
    assert stats["cls"][1, 0] == pytest.approx(1 / n)
    assert stats["sep"][1, 0] == pytest.approx(1 / n)
    assert stats["other"][1, 0] == pytest.approx(n_words / n)


def test_rows_weigh_the_same_across_items():
    # Item A (3 rows) puts everything on [CLS]; item B (6 rows) everything on [SEP].
    a, b = item(1, one_hot_maps(3, 0), 0), item(4, one_hot_maps(6, 5), 1)
    stats = surface_statistics([a, b])
    np.testing.assert_allclose(stats["cls"], 3 / 9)
    np.testing.assert_allclose(stats["sep"], 6 / 9)


def test_entropy_of_uniform_and_one_hot_heads():
    n_words = 5
    n = n_words + 2
    maps = np.full((L, H, n, n), 1.0 / n)
    maps[1, 3] = one_hot_maps(n, 2)[0, 0]
    stats = surface_statistics([item(n_words, maps)])
    expected = np.full((L, H), math.log(n))
    expected[1, 3] = 0.0
    np.testing.assert_allclose(stats["entropy"], expected, atol=1e-9)
    assert stats.uniform_entropy == pytest.approx(math.log(n))


def test_uniform_reference_averages_over_rows():
    stats = surface_statistics([item(1), item(4)])  # 3 rows of length 3, 6 rows of length 6
    assert stats.uniform_entropy == pytest.approx((3 * math.log(3) + 6 * math.log(6)) / 9)
    np.testing.assert_allclose(stats["entropy"], stats.uniform_entropy)


def test_float16_rows_are_renormalised():
    x = item(6, dtype=np.float16)  # 1/8 is exact; make rows slightly off
    x.attention[..., 1] += np.float16(0.001)
    assert 0 < max_row_sum_error([x]) < 2e-3
    stats = surface_statistics([x])
    np.testing.assert_allclose(stats["cls"] + stats["sep"] + stats["other"], 1.0, atol=1e-12)
    assert stats["entropy"].max() <= math.log(8) + 1e-12


def test_rejects_empty_and_mismatched_input():
    with pytest.raises(ValueError, match="no items"):
        surface_statistics(iter([]))
    other = item(2, np.full((2, H, 4, 4), 0.25), 1)
    with pytest.raises(ValueError, match="layers x heads"):
        surface_statistics([item(2), other])


def test_head_table_counts_from_one():
    values = np.arange(L * H, dtype=float).reshape(L, H)
    table = head_table({"x": values, "y": -values})
    assert list(table.columns) == ["layer", "head", "x", "y"]
    assert len(table) == L * H
    row = table[(table["layer"] == 2) & (table["head"] == 4)].iloc[0]
    assert row.x == values[1, 3] and row.y == -values[1, 3]
    with pytest.raises(ValueError):
        head_table({"x": values, "y": values[:, :2]})


# --------------------------------------------------------------------------- surface statistics, Vig's patterns

from bertology_utils.analyses.patterns import STATISTICS, VIG_PATTERNS, _surface_statistics_loop, vig_patterns  # noqa: E402


def offset_maps(n: int, offset: int) -> np.ndarray:
    """Every row on position i + offset (clipped to the sentence)."""
    maps = np.zeros((L, H, n, n))
    for i in range(n):
        maps[..., i, min(max(i + offset, 0), n - 1)] = 1.0
    return maps


def test_previous_token_map_scores_one_for_previous():
    stats = surface_statistics([item(5, offset_maps(7, -1))])
    assert np.allclose(stats["previous"], 1.0)
    assert np.allclose(stats["next"], 0.0)
    nxt = surface_statistics([item(5, offset_maps(7, +1))])
    assert np.allclose(nxt["next"], 1.0) and np.allclose(nxt["previous"], 0.0)
    assert np.allclose(surface_statistics([item(5, offset_maps(7, 0))])["self"], 1.0)


def test_special_tokens_punctuation_and_sep_to_sep():
    it = item(4, one_hot_maps(6, 5))  # every row on [SEP]
    it.words = ("[CLS]", "a", ",", "b", ".", "[SEP]")
    stats = surface_statistics([it])
    assert np.allclose(stats["sep"], 1.0) and np.allclose(stats["sep_to_sep"], 1.0) and np.allclose(stats["cls"], 0)
    it.attention = one_hot_maps(6, 4).astype(np.float32)
    stats = surface_statistics([it])
    assert np.allclose(stats["period"], 1.0) and np.allclose(stats["comma"], 0.0) and np.allclose(stats["punct"], 1.0)
    assert np.allclose(stats["sep_to_sep"], 0.0)


def test_entropy_and_cls_row_entropy_with_uniform_reference():
    stats = surface_statistics([item(6)])  # uniform over 8
    assert np.allclose(stats["entropy"], math.log(8)) and np.allclose(stats["cls_entropy"], math.log(8))
    assert stats.uniform_entropy == pytest.approx(math.log(8)) == stats.uniform_cls_entropy


def test_vectorised_equals_loop_and_token_level():
    rng = np.random.default_rng(1)
    items = []
    for i, n_words in enumerate((2, 5)):
        n = n_words + 2
        logits = rng.normal(size=(L, H, n, n))
        it = item(n_words, np.exp(logits) / np.exp(logits).sum(-1, keepdims=True), i)
        it.words = it.words[:2] + (".",) + it.words[3:]
        t = n + 1  # word 1 split in two pieces
        it.token_to_word = np.array([0, 1, 1] + list(range(2, n)))
        it.tokens = ("[CLS]", "w", "##0", *it.words[2:])
        tl = rng.normal(size=(L, H, t, t))
        it.token_attention = (np.exp(tl) / np.exp(tl).sum(-1, keepdims=True)).astype(np.float32)
        items.append(it)
    for level in ("word", "token"):
        fast, slow = surface_statistics(items, level), _surface_statistics_loop(items, level)
        assert set(fast.values) == set(STATISTICS)
        for name in STATISTICS:
            assert np.allclose(fast[name], slow[name], atol=1e-9), (level, name)
    assert surface_statistics(items, "token").rows["self"] == sum(len(i.token_to_word) for i in items)
    vig = vig_patterns(items)
    assert vig.rows["same_word_pieces"] == 2 * len(items)
    with pytest.raises(ValueError):
        surface_statistics([item(3)], "token")


def test_vig_patterns_on_known_maps():
    it = item(5, offset_maps(7, -1))
    vig = vig_patterns([it])
    assert set(vig.values) == set(VIG_PATTERNS)
    assert np.allclose(vig.values["previous_word"], 1.0) and np.allclose(vig.values["next_word"], 0.0)
    assert np.allclose(vig_patterns([item(5)]).values["bag_of_words"], 1.0)
    # identical words across two segments, each attending to its twin
    n = 6
    maps = np.zeros((L, H, n, n))
    twin = {0: 0, 1: 4, 2: 2, 3: 3, 4: 1, 5: 5}
    for i, j in twin.items():
        maps[..., i, j] = 1.0
    pair = ItemAttention(
        0,
        "p",
        ("[CLS]", "cat", "[SEP]", "dog", "cat", "[SEP]"),
        np.array([LEADING_SPECIAL, WORD, SEPARATOR, WORD, WORD, SEPARATOR], np.int8),
        np.array([0, 0, 0, 1, 1, 1], np.int8),
        maps,
        n,
    )
    vig = vig_patterns([pair])
    assert np.allclose(vig.values["identical_word"], 1.0) and np.allclose(vig.values["identical_word_across"], 1.0)
    assert vig.top("identical_word", 3).shape == (3, 3)
    assert np.allclose(vig.values["delimiter"], 3 / 6)


def test_bootstrap_draws_resample_whole_items_with_their_rows():
    """Every draw is the statistics of items drawn with replacement: an item of 30 rows on [SEP] and one of 3 rows
    on [CLS] give [SEP] shares of 0, 30/33 or 1 only; the draws centre on the row-weighted mean; seeded."""
    on_sep = item(28, one_hot_maps(30, 29), 0)
    on_cls = item(1, one_hot_maps(3, 0), 1)
    stats = surface_statistics([on_sep, on_cls])
    assert stats["sep"][0, 0] == pytest.approx(30 / 33)
    draws = stats.bootstrap(n_resamples=400, seed=1)
    assert draws["sep"].shape == (400, L, H) and draws.over == "2 sentences"
    assert set(np.round(np.unique(draws["sep"]), 6)) <= {0.0, round(30 / 33, 6), 1.0}
    assert np.isclose(draws["sep"] + draws["cls"] + draws["other"], 1.0).all()
    np.testing.assert_array_equal(draws["sep"], stats.bootstrap(n_resamples=400, seed=1)["sep"])
    # many alike items: the draws' mean is the statistic, their spread shrinks like 1/sqrt(items)
    rng = np.random.default_rng(0)
    items = [item(5, rng.dirichlet(np.ones(7), size=(L, H, 7)), i) for i in range(60)]
    many = surface_statistics(items)
    spread = many.bootstrap(n_resamples=1000)
    np.testing.assert_allclose(spread["sep"].mean(0), many["sep"], atol=0.01)
    per_item_sep = np.array([surface_statistics([x])["sep"] for x in items])
    np.testing.assert_allclose(spread["sep"].std(0), per_item_sep.std(0) / np.sqrt(60), rtol=0.2)
    np.testing.assert_allclose(spread["uniform_entropy"], np.log(7))


def test_bootstrap_needs_the_per_item_sums():
    stats = surface_statistics([item(3)])
    stats.per_item.clear()
    with pytest.raises(ValueError, match="per-item"):
        stats.bootstrap()
