import numpy as np
import pytest

from bertology_utils.core.heads import Head, all_heads


def test_a_head_is_written_layer_head_from_one_and_read_back():
    assert str(Head(2, 1)) == "3-2"
    assert f"head {Head(0, 11)}" == "head 1-12"
    assert Head.parse("3-2") == Head(2, 1)
    assert Head.parse(str(Head(10, 7))) == Head(10, 7)


@pytest.mark.parametrize("text", ["0-1", "1-0", "L3-H2", "3_2", "3-", "", "-1-2"])
def test_parse_rejects_other_forms(text):
    with pytest.raises(ValueError):
        Head.parse(text)


def test_a_head_indexes_a_grid():
    grid = np.arange(12.0).reshape(3, 4)
    assert grid[Head(1, 2)] == 6.0
    layer, head = Head(1, 2)
    assert (layer, head) == (1, 2)


def test_argmax_skips_nan_and_takes_the_first_of_ties():
    grid = np.array([[0.1, np.nan, 0.7], [0.7, 0.2, np.nan]])
    assert Head.argmax(grid) == Head(0, 2)
    with pytest.raises(ValueError):
        Head.argmax(np.full((2, 2), np.nan))
    with pytest.raises(ValueError):
        Head.argmax(np.zeros(3))


def test_all_heads_follow_the_order_of_ravel():
    heads = all_heads(2, 3)
    assert [str(h) for h in heads] == ["1-1", "1-2", "1-3", "2-1", "2-2", "2-3"]
    grid = np.random.default_rng(0).random((2, 3))
    assert [grid[h] for h in heads] == grid.ravel().tolist()
