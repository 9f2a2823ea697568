"""Attention maps side by side stay readable on a slide: ``map_labels_that_fit`` says how many tokens a panel can
show as rows of MIN_TEXT_PX text, and ``plot_attention_map(max_labels=...)`` shows that many and says so."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from bertology_utils.core.figure_text import fit_for_slide, shown_width, text_boxes, text_problems  # noqa: E402
from bertology_utils.core.figures import DEFAULT_DPI, map_labels_that_fit, plot_attention_map  # noqa: E402

# a treebank pair as notebook 01 shows it: 24 labels, the specials included
PAIR = (
    "[CLS] We 've grown up with the school . [SEP] The teachers knew every one of us and our parents by name . [SEP]"
).split()


def _maps(across: int, down: int, max_labels: int | None, *, crop: bool = True) -> plt.Figure:
    n = len(PAIR)
    # about square panels, as the notebooks draw them
    fig, axes = plt.subplots(down, across, figsize=(5.5 * across, 5.0 * down), layout="constrained")
    rows = np.random.default_rng(0).random((across * down, n, n))
    for ax, attention in zip(np.ravel(axes), rows / rows.sum(-1, keepdims=True), strict=True):
        plot_attention_map(attention, PAIR, ax=ax, title="previous: head 2-3 (0.61)", max_labels=max_labels, crop=crop)
    return fit_for_slide(fig)


def _problems(fig: plt.Figure) -> list:
    text = text_boxes(fig, dpi=DEFAULT_DPI)
    return text_problems(text, shown_width(text.size))


@pytest.mark.parametrize("across, down", [(1, 1), (2, 1), (3, 1)])
def test_the_tokens_that_fit_are_readable_and_the_title_says_the_rest_are_left_out(across: int, down: int) -> None:
    fit = map_labels_that_fit(PAIR, across, down)
    assert 1 < fit < len(PAIR)
    fig = _maps(across, down, fit)
    assert _problems(fig) == []
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == PAIR[:fit]
    assert f"first {fit} of {len(PAIR)} tokens" in ax.get_title()
    plt.close(fig)


def test_every_token_of_three_maps_across_overlaps_its_neighbours() -> None:
    fig = _maps(3, 1, None)
    problems = _problems(fig)
    assert ("overlap", ("[CLS]", "We")) in {(p.kind, p.texts) for p in problems}
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == PAIR
    plt.close(fig)


def test_longer_tokens_leave_room_for_fewer() -> None:
    assert map_labels_that_fit(["a"] * 30, 3) > map_labels_that_fit(["representatives"] * 30, 3) >= 1
    assert map_labels_that_fit(PAIR, 1) > map_labels_that_fit(PAIR, 3) > map_labels_that_fit(PAIR, 3, 2)


def test_a_map_not_cropped_is_shown_whole_and_unlabelled_when_its_tokens_do_not_fit() -> None:
    fit = map_labels_that_fit(PAIR, 3, 2)
    fig = _maps(3, 2, fit, crop=False)
    assert _problems(fig) == []
    ax = fig.axes[0]
    assert ax.collections[0].get_array().shape == (len(PAIR), len(PAIR))
    assert ax.get_xticklabels() == [] and ax.get_yticklabels() == []
    assert f"{len(PAIR)} tokens, unlabelled" in ax.get_title()
    plt.close(fig)
    fig = _maps(1, 1, len(PAIR), crop=False)  # they fit: labelled as ever
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == PAIR
    assert "unlabelled" not in fig.axes[0].get_title()
    plt.close(fig)
