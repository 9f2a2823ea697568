"""The still a bertviz view shows when its JavaScript is missing offline: a note saying which libraries are missing
and how to install them, over the view's figure, both sized for a slide (the note as large as a slide's smallest
text, the figure fitted for and drawn at the size it is shown, carrying its measured text for the page audit).
"""

from __future__ import annotations

import base64
import hashlib
import html as html_lib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from bertology_utils.core.figure_text import (
    MIN_TEXT_PX,
    SLIDE_BOX,
    FigureText,
    fitted_for_slide,
    img_attribute,
    measured_png,
    text_boxes,
)
from bertology_utils.core.figures import DEFAULT_DPI

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["static_html", "number_the_grid"]

# The box (px at slide size) a static fallback's picture is drawn for: the deck's figure box less the lines of its
# note and a caption below it.
_STATIC_BOX = (SLIDE_BOX[0], 400)
# The note as large as the slides' smallest text, and the picture never wider or taller than its box.
_NOTE_STYLE = f"font-size: {MIN_TEXT_PX + 2:g}px; line-height: 1.3; margin: 0.3em 0;"
_STATIC_IMG_STYLE = (
    f"display: block; margin: 0 auto; width: auto; height: auto; max-width: 100%; max-height: {_STATIC_BOX[1]}px;"
)


def _fitted_png(fig: Figure, box: tuple[int, int]) -> tuple[bytes, FigureText]:
    """``fig`` fitted for ``box`` (:func:`fit_for_slide`) as a PNG whose own size is the size it is shown at
    within ``box`` (a browser never scales it up, so its text is as large as the fitting made it), with its
    measured text."""
    with fitted_for_slide(fig, box=box):
        width, height = text_boxes(fig, dpi=DEFAULT_DPI).size
        return measured_png(fig, dpi=DEFAULT_DPI * min(box[0] / width, box[1] / height))


def number_the_grid(fig: Figure, layers: Sequence[int], heads: Sequence[int]) -> None:
    """Make a model view's grid (:func:`~bertology_utils.core.figures.plot_attention_thumbnails`) readable within a
    slide's box: its panels numbered by layer (rows) and head (columns) in place of the token labels, which no
    slide-sized grid can hold.

    :param fig: the grid's figure, changed in place.
    :param layers: the layers of its rows, from 0.
    :param heads: the heads of its columns, from 0.
    """
    for k, ax in enumerate(fig.axes):  # plt.subplots' axes, row by row
        row, column = divmod(k, len(heads))
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_title(str(heads[column] + 1) if row == 0 else "")
        ax.set_ylabel(str(layers[row] + 1) if column == 0 else "", rotation=0, ha="right", va="center")
    fig.suptitle("head")
    fig.supylabel("layer")
    # Fitting lays the grid out with tight layout, which refuses a grid spaced by its own wspace/hspace.
    gridspec = fig.axes[0].get_gridspec()
    assert gridspec is not None  # plt.subplots' axes
    gridspec.update(wspace=None, hspace=None)


def static_html(fig: Figure, note: str, alt: str, id_prefix: str) -> tuple[str, str]:
    """A view's still for a page without its JavaScript: ``note`` over ``fig`` as a PNG, both sized for a slide.
    Closes ``fig``.

    :param fig: the view's figure.
    :param note: what is missing and how to install it.
    :param alt: the image's alternative text.
    :param id_prefix: the root element's id, less the image's content hash.
    :returns: the HTML (a ``<div data-fallback="static">``) and its root element's id.
    """
    import matplotlib.pyplot as plt

    try:
        png, text = _fitted_png(fig, _STATIC_BOX)
    finally:
        plt.close(fig)
    image = base64.b64encode(png).decode("ascii")
    element_id = f"{id_prefix}-{hashlib.sha256(image.encode()).hexdigest()[:12]}"
    html = (
        f'<div id="{element_id}" class="bertology-view bertology-static-view" data-fallback="static">\n'
        f'<p style="{_NOTE_STYLE}"><strong>{html_lib.escape(note)}</strong></p>\n'
        f'<img alt="{html_lib.escape(alt)}" style="{_STATIC_IMG_STYLE}"{img_attribute(text)} '
        f'src="data:image/png;base64,{image}">\n</div>'
    )
    return html, element_id
