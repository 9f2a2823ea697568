"""The atlas's JupyterLab widget, on a small run folder built here (2 layers x 3 heads, no store)."""

import base64
import json

import numpy as np
import pytest

from bertology_utils.present.atlas import build_atlas
from bertology_utils.present.atlas_view import BOOL_COLOURS, MISSING_COLOUR, _decode, atlas_widget, head_colours

pytest.importorskip("ipywidgets")

IMPORTANCE = [[0.1, 0.9, None], [0.5, 0.3, 0.7]]
SPECIALISED = [[True, False, False], [False, True, None]]
TYPES = [["vertical", "diagonal", "block"], ["vertical", "vertical", "heterogeneous"]]


def _notebook(run, name, metrics):
    (run / name).mkdir(parents=True)
    (run / name / "metrics.json").write_text(json.dumps(metrics))


@pytest.fixture
def run(tmp_path):
    run = tmp_path / "small"
    shape = {"layers": 2, "heads": 3, "model": "tiny-model"}
    _notebook(run, "01_patterns", {**{f"patterns.{k}": v for k, v in shape.items()}, "patterns.head.type": TYPES})
    _notebook(
        run, "06_pruning", {**{f"pruning.{k}": v for k, v in shape.items()}, "pruning.SST-2.importance": IMPORTANCE}
    )
    _notebook(
        run,
        "07_head_roles",
        {**{f"head_roles.{k}": v for k, v in shape.items()}, "head_roles.specialised": SPECIALISED},
    )
    return run


@pytest.fixture
def widget(run):
    return atlas_widget(build_atlas(run))


def test_the_menu_lists_every_column_with_its_label(widget):
    assert [value for _, value in widget.column.options] == widget.atlas.columns
    assert set(widget.atlas.columns) == {"pattern_type", "importance.SST-2", "specialised"}
    assert "importance (SST-2) (importance.SST-2)" in [label for label, _ in widget.column.options]
    assert widget.run is None  # one run: no run menu
    assert len(widget.buttons) == 6


def test_the_buttons_colours_follow_the_column(widget):
    from matplotlib import colormaps

    def colour(x):
        return "#{:02x}{:02x}{:02x}".format(*(int(round(255 * c)) for c in colormaps["viridis"](x)[:3]))

    widget.column.value = "importance.SST-2"
    assert widget.buttons[1, 2].style.button_color == colour(1.0)  # the largest
    assert widget.buttons[1, 1].style.button_color == colour(0.0)  # the smallest
    assert widget.buttons[2, 1].style.button_color == colour(0.5)
    assert widget.buttons[1, 3].style.button_color == MISSING_COLOUR
    unit = widget.atlas.dictionary.set_index("column").loc["importance.SST-2", "unit"]  # the declaration's
    assert "0.1" in widget.legend.value and "0.9" in widget.legend.value and unit in widget.legend.value
    widget.column.value = "specialised"
    assert [widget.buttons[1, h].style.button_color for h in (1, 2)] == [BOOL_COLOURS[True], BOOL_COLOURS[False]]
    assert widget.buttons[2, 3].style.button_color == MISSING_COLOUR
    widget.column.value = "pattern_type"
    colours = {widget.buttons[1, h].style.button_color for h in (1, 2, 3)}
    assert len(colours) == 3 and widget.buttons[2, 1].style.button_color == widget.buttons[1, 1].style.button_color


def test_clicking_a_head_opens_its_card(widget):
    assert "Layer" not in widget.card.value
    widget.buttons[2, 3].click()
    card = widget.card.value
    assert "Layer 2, head 3" in card
    unit = widget.atlas.dictionary.set_index("column").loc["importance.SST-2", "unit"]
    assert "0.7" in card and unit in card and "heterogeneous" in card
    assert "a few heads carry most of the importance" in card  # the paper's value
    assert "no attention store" in card  # why there are no pattern images


def test_several_runs_get_a_run_menu_and_pattern_images_are_drawn(run, tmp_path):
    import shutil

    other = tmp_path / "other"
    shutil.copytree(run, other)
    widget = atlas_widget(build_atlas(run, other, maps=False, compare=False))
    assert list(widget.run.options) == ["small", "other"]
    widget.run.value = "other"
    widget.buttons[1, 1].click()
    assert "other: tiny-model" in widget.card.value
    # the payload's images, as atlas.py encodes them
    maps = np.zeros((2, 3, 4, 4))
    maps[1, 0] = np.eye(4)
    encoded = base64.b64encode(np.rint(maps * 255).astype(np.uint8).tobytes()).decode("ascii")
    assert np.array_equal(_decode(encoded, (2, 3, 4, 4))[1, 0], np.eye(4))
    widget.payload["runs"][1]["maps"] = {
        "mean": {"size": 4, "labels": list("abcd"), "data": encoded},
        "examples": [{"words": list("abcd"), "data": encoded}],
    }
    widget.buttons[2, 1].click()
    assert '<img alt="attention patterns" src="data:image/png;base64,' in widget.card.value


def test_head_colours_without_values():
    assert head_colours([None, float("nan")], "number") == ([MISSING_COLOUR] * 2, "no head has a value")
