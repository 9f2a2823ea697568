"""Surface statistics on hand-built attention maps whose answers are known."""
import math

import numpy as np
import pytest

from bertology_utils.alignment import LEADING_SPECIAL, SEPARATOR, WORD
from bertology_utils.patterns import attention_entropy, attention_to_kinds, head_table, max_row_sum_error
from bertology_utils.word_attention import ItemAttention

L, H = 3, 5


def item(n_words: int, maps: np.ndarray | None = None, index: int = 0, dtype=np.float32) -> ItemAttention:
    """[CLS] w1 .. wk [SEP] with ``maps`` (L, H, n, n); uniform attention by default."""
    n = n_words + 2
    kinds = np.array([LEADING_SPECIAL] + [WORD] * n_words + [SEPARATOR], dtype=np.int8)
    if maps is None:
        maps = np.full((L, H, n, n), 1.0 / n)
    return ItemAttention(index=index, item_id=f"s{index}", words=("[CLS]", *[f"w{i}" for i in range(n_words)], "[SEP]"),
                         word_kinds=kinds, segments=np.zeros(n, dtype=np.int8), attention=maps.astype(dtype),
                         n_tokens=n)


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
    kinds = attention_to_kinds(items)
    assert set(kinds) == {"cls", "sep", "other"}
    for value in kinds.values():
        assert value.shape == (L, H)
        assert ((value >= 0) & (value <= 1)).all()
    np.testing.assert_allclose(kinds["cls"] + kinds["sep"] + kinds["other"], 1.0, atol=1e-12)
    stats = attention_entropy(items)
    assert stats.entropy.shape == (L, H)
    assert (stats.entropy <= stats.uniform_entropy + 1.0).all()


def test_a_head_on_cls_and_a_head_on_sep():
    n_words = 4
    n = n_words + 2
    maps = np.full((L, H, n, n), 1.0 / n)
    maps[0, 1] = one_hot_maps(n, 0)[0, 0]        # layer 1, head 2: everything on [CLS]
    maps[2, 4] = one_hot_maps(n, n - 1)[0, 0]    # layer 3, head 5: everything on [SEP]
    kinds = attention_to_kinds([item(n_words, maps)])
    assert kinds["cls"][0, 1] == pytest.approx(1.0)
    assert kinds["sep"][0, 1] == pytest.approx(0.0)
    assert kinds["sep"][2, 4] == pytest.approx(1.0)
    assert kinds["other"][2, 4] == pytest.approx(0.0)
    # Uniform heads: 1/n on [CLS], 1/n on [SEP], the rest on words.
    assert kinds["cls"][1, 0] == pytest.approx(1 / n)
    assert kinds["sep"][1, 0] == pytest.approx(1 / n)
    assert kinds["other"][1, 0] == pytest.approx(n_words / n)


def test_rows_weigh_the_same_across_items():
    # Item A (3 rows) puts everything on [CLS]; item B (6 rows) everything on [SEP].
    a, b = item(1, one_hot_maps(3, 0), 0), item(4, one_hot_maps(6, 5), 1)
    kinds = attention_to_kinds([a, b])
    np.testing.assert_allclose(kinds["cls"], 3 / 9)
    np.testing.assert_allclose(kinds["sep"], 6 / 9)


def test_entropy_of_uniform_and_one_hot_heads():
    n_words = 5
    n = n_words + 2
    maps = np.full((L, H, n, n), 1.0 / n)
    maps[1, 3] = one_hot_maps(n, 2)[0, 0]
    stats = attention_entropy([item(n_words, maps)])
    expected = np.full((L, H), math.log(n))
    expected[1, 3] = 0.0
    np.testing.assert_allclose(stats.entropy, expected, atol=1e-9)
    assert stats.uniform_entropy == pytest.approx(math.log(n))
    assert stats.mean_row_length == pytest.approx(n)
    entropy, uniform, length = stats  # unpacks as a tuple
    assert uniform == stats.uniform_entropy


def test_uniform_reference_averages_over_rows():
    stats = attention_entropy([item(1), item(4)])  # 3 rows of length 3, 6 rows of length 6
    assert stats.uniform_entropy == pytest.approx((3 * math.log(3) + 6 * math.log(6)) / 9)
    np.testing.assert_allclose(stats.entropy, stats.uniform_entropy)
    assert stats.mean_row_length == pytest.approx((9 + 36) / 9)


def test_float16_rows_are_renormalised():
    x = item(6, dtype=np.float16)  # 1/8 is exact; make rows slightly off
    x.attention[..., 1] += np.float16(0.001)
    assert 0 < max_row_sum_error([x]) < 2e-3
    kinds = attention_to_kinds([x])
    np.testing.assert_allclose(kinds["cls"] + kinds["sep"] + kinds["other"], 1.0, atol=1e-12)
    assert attention_entropy([x]).entropy.max() <= math.log(8) + 1e-12


def test_rejects_empty_and_mismatched_input():
    with pytest.raises(ValueError, match="no items"):
        attention_to_kinds([])
    with pytest.raises(ValueError, match="no items"):
        attention_entropy(iter([]))
    other = item(2, np.full((2, H, 4, 4), 0.25), 1)
    with pytest.raises(ValueError, match="layers x heads"):
        attention_to_kinds([item(2), other])


def test_head_table_counts_from_one():
    values = np.arange(L * H, dtype=float).reshape(L, H)
    table = head_table({"x": values, "y": -values})
    assert list(table.columns) == ["layer", "head", "x", "y"]
    assert len(table) == L * H
    row = table[(table["layer"] == 2) & (table["head"] == 4)].iloc[0]
    assert row.x == values[1, 3] and row.y == -values[1, 3]
    with pytest.raises(ValueError):
        head_table({"x": values, "y": values[:, :2]})
