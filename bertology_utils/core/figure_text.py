"""A figure's text as drawn, measured and made readable at the size a slide shows it.

:func:`text_boxes` records every text a figure draws (tick labels, axis labels, titles, legends, annotations,
colour-bar labels) as a box in the saved image's pixels, origin top-left, with its font size in pixels; the
boxes are taken inside the draw that writes the image, so a ``bbox_inches="tight"`` crop and its pad are
already applied. :func:`text_problems` holds the rules (:data:`MIN_TEXT_PX` at the shown size, no two texts
overlapping by more than :data:`MAX_OVERLAP` of the smaller); the decks' and lecture's browser tests read the
same boxes from the ``<img>``'s ``data-text-boxes`` attribute (:func:`img_attribute`), filled from the PNG's text
chunk (:func:`read_png_text`) or, for inline notebook figures, from the output's ``"bertology/text"`` metadata
(:func:`register_inline`).

:func:`fit_for_slide` changes a figure's presentation, never its data, so that it passes those rules once it is
shown within :data:`SLIDE_BOX`: small text enlarged, crowded tick labels turned or thinned, legends inside the axes
moved beside them.
"""

from __future__ import annotations

import html
import io
import json
import math
import os
import struct
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import wraps
from pathlib import Path
from typing import Any, Literal, NamedTuple, cast
from weakref import WeakSet

import numpy as np
from matplotlib import rcParams
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.backend_bases import DrawEvent, RendererBase
from matplotlib.figure import Figure
from matplotlib.layout_engine import PlaceHolderLayoutEngine
from matplotlib.text import Text
from matplotlib.transforms import Bbox

__all__ = [
    "SLIDE_BOX",
    "MIN_TEXT_PX",
    "MAX_OVERLAP",
    "TEXT_KEY",
    "FigureText",
    "TextBox",
    "TextProblem",
    "text_boxes",
    "measuring",
    "shown_width",
    "text_problems",
    "fit_for_slide",
    "fitted_for_slide",
    "keep_every_label",
    "png_with_text",
    "measured_png",
    "read_png_text",
    "img_attribute",
    "register_inline",
    "load_ipython_extension",
]

#: The largest box (CSS px) a figure is shown in on a 1280 x 720 slide: the decks' CSS caps an image at
#: 540 px high, and the slide's width less reveal.js's margins leaves about 1180 px.
SLIDE_BOX = (1180, 540)
#: The smallest text (px at the shown size) a slide may carry: readable from the back of a room.
MIN_TEXT_PX = 16.0
#: Two texts overlap when they share more than this fraction of the smaller one's box.
MAX_OVERLAP = 0.05
#: Where the boxes travel: the PNG text chunk's key and the inline output's metadata key.
TEXT_KEY = "bertology/text"

# Axes whose every label is content (a map's tokens): enlarged like any text, never thinned or hidden.
_KEEP_EVERY_LABEL: WeakSet[Axes] = WeakSet()

# A text of this many characters or more turns to vertical when an axis's labels collide, before thinning.
_LONG_LABEL = 3


class TextBox(NamedTuple):
    """One drawn text: its box in image pixels (origin top-left), its font size in pixels (both to 0.1 px) and its
    string."""

    x0: float
    y0: float
    x1: float
    y1: float
    font_px: float
    text: str


@dataclass(frozen=True)
class FigureText:
    """The text of one saved image: its ``size`` ``(W, H)`` in pixels and the box of every drawn text."""

    size: tuple[int, int]
    boxes: tuple[TextBox, ...]

    def to_json(self) -> str:
        """``{"size": [W, H], "boxes": [[x0, y0, x1, y1, font_px, "text"], ...]}``, ASCII."""
        return json.dumps({"size": list(self.size), "boxes": [list(b) for b in self.boxes]}, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> FigureText:
        """The inverse of :meth:`to_json`."""
        data = json.loads(text)
        width, height = data["size"]
        return cls((int(width), int(height)), tuple(TextBox(*box) for box in data["boxes"]))


class TextProblem(NamedTuple):
    """A rule a figure's text breaks: ``kind`` is ``"small"`` or ``"overlap"``; ``texts`` the strings involved."""

    kind: str
    texts: tuple[str, ...]
    detail: str


def _points(text: Text) -> float:
    return float(text.get_fontsize())


def _px(renderer: RendererBase, points: float) -> float:
    return float(renderer.points_to_pixels(points))  # type: ignore[arg-type]  # a float for a float


def _tick_in_view(axis: Axis, loc: float) -> bool:
    low, high = sorted(axis.get_view_interval())
    tolerance = 1e-9 * max(abs(high - low), 1.0)
    return bool(low - tolerance <= loc <= high + tolerance)


def _drawn_texts(artist: Artist) -> Iterator[Text]:
    """Every visible, non-empty text under ``artist`` that a draw puts on the canvas (ticks outside the view and
    the axis parts of an ``axis("off")`` axes are not drawn)."""
    if not artist.get_visible():
        return
    if isinstance(artist, Axis):
        if artist.axes is not None and not artist.axes.axison:
            return
        yield from _drawn_texts(artist.label)
        yield from _drawn_texts(artist.offsetText)
        for tick in (*artist.get_major_ticks(), *artist.get_minor_ticks()):
            if tick.get_visible() and _tick_in_view(artist, tick.get_loc()):
                yield from (t for t in (tick.label1, tick.label2) if t.get_visible() and t.get_text())
        return
    if isinstance(artist, Text):
        if artist.get_text().strip():
            yield artist
        return  # an Annotation's children are its arrow
    for child in artist.get_children():
        yield from _drawn_texts(child)


def _measure(fig: Figure, renderer: RendererBase) -> FigureText:
    """The drawn texts' boxes on ``renderer``'s canvas, origin top-left."""
    width, height = (float(v) for v in fig.bbox.size)
    size = (int(getattr(renderer, "width", round(width))), int(getattr(renderer, "height", round(height))))
    px_per_pt = _px(renderer, 1.0)
    boxes = []
    for text in _drawn_texts(fig):
        box = text.get_window_extent(renderer)
        boxes.append(
            TextBox(
                round(float(box.x0), 1),
                round(float(size[1] - box.y1), 1),
                round(float(box.x1), 1),
                round(float(size[1] - box.y0), 1),
                round(_points(text) * px_per_pt, 1),
                text.get_text(),
            )
        )
    return FigureText(size, tuple(boxes))


@contextmanager
def measuring(fig: Figure) -> Iterator[list[FigureText]]:
    """Within the block, every draw of ``fig`` (a save, a display) appends its :class:`FigureText` to the yielded
    list; the last one is the image written."""
    measured: list[FigureText] = []

    def on_draw(event: DrawEvent) -> None:
        if event.renderer is not None:  # a layout-only draw (tight bbox) comes before the one written
            measured.append(_measure(fig, event.renderer))

    # The callbacks live on the figure, so they survive savefig's switch to another canvas.
    cid = fig.canvas.mpl_connect("draw_event", on_draw)
    try:
        yield measured
    finally:
        fig.canvas.mpl_disconnect(cid)


def text_boxes(fig: Figure, *, dpi: float, bbox_inches: str | None = "tight") -> FigureText:
    """The text of ``fig`` as a PNG at ``dpi`` (cropped like :func:`~bertology_utils.core.figures.save_image`)
    shows it: each text's box in the image's pixels, origin top-left, and its font size in pixels.

    :param fig: the figure, drawn once into memory here.
    :param dpi: the resolution of the image the boxes describe.
    :param bbox_inches: savefig's crop (``"tight"`` with its pad, as saved figures and inline displays use).
    :returns: the image's size and its text boxes.
    """
    with measuring(fig) as measured:
        fig.savefig(io.BytesIO(), format="png", dpi=dpi, bbox_inches=bbox_inches)
    return measured[-1]


def shown_width(size: tuple[int, int], box: tuple[int, int] = SLIDE_BOX) -> float:
    """The width (px) an image of ``size`` is shown at when fitted within ``box``, aspect kept.

    :param size: the image's ``(W, H)`` in pixels.
    :param box: the largest ``(width, height)`` it is shown in.
    :returns: the shown width in px.
    """
    return float(min(box[0], size[0] * box[1] / size[1]))


def text_problems(
    text: FigureText, shown_width_px: float, *, min_px: float = MIN_TEXT_PX, overlap: float = MAX_OVERLAP
) -> list[TextProblem]:
    """The texts smaller than ``min_px`` once the image is shown ``shown_width_px`` wide, and the pairs of texts
    sharing more than ``overlap`` of the smaller one's box.

    :param text: the figure's measured text (:func:`text_boxes`).
    :param shown_width_px: the width the image is shown at (:func:`shown_width`).
    :param min_px: the smallest readable font size at the shown size.
    :param overlap: the largest shared fraction of the smaller box two texts may have.
    :returns: one :class:`TextProblem` per small text and per overlapping pair; empty when the text passes.
    """
    scale = shown_width_px / text.size[0]
    problems = [
        TextProblem("small", (box.text,), f"{box.font_px * scale:.1f} px < {min_px:g} px")
        for box in text.boxes
        if box.font_px * scale < min_px - 1e-6
    ]
    boxes = text.boxes
    for i, j, shared in _overlapping_pairs([box[:4] for box in boxes], overlap):
        problems.append(TextProblem("overlap", (boxes[i].text, boxes[j].text), f"{shared:.0%} of the smaller box"))
    return problems


def _shared_fractions(a: Any, b: Any) -> np.ndarray:
    """For boxes ``a`` (m x 4) and ``b`` (n x 4), corners in any order: the (m, n) fractions of the smaller box's area
    that both boxes cover (0 for boxes that only touch, or have no area)."""
    a, b = np.asarray(a, dtype=float).reshape(-1, 4), np.asarray(b, dtype=float).reshape(-1, 4)
    lows_a, highs_a = np.minimum(a[:, :2], a[:, 2:]), np.maximum(a[:, :2], a[:, 2:])
    lows_b, highs_b = np.minimum(b[:, :2], b[:, 2:]), np.maximum(b[:, :2], b[:, 2:])
    sides = np.minimum(highs_a[:, None], highs_b[None]) - np.maximum(lows_a[:, None], lows_b[None])  # (m, n, 2)
    area_a, area_b = np.prod(highs_a - lows_a, axis=1), np.prod(highs_b - lows_b, axis=1)
    smaller = np.minimum(area_a[:, None], area_b[None])
    apart = (sides <= 0).any(axis=2) | (smaller <= 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(apart, 0.0, sides[..., 0] * sides[..., 1] / np.where(apart, 1.0, smaller))


def _overlapping_pairs(boxes: Any, overlap: float) -> list[tuple[int, int, float]]:
    """The pairs ``(i, j, fraction)``, i < j in ``itertools.combinations``' order, of ``boxes`` that share more than
    ``overlap`` of the smaller one's area: every pair at once, since a figure can carry a thousand texts."""
    if len(boxes) < 2:
        return []
    shared = _shared_fractions(boxes, boxes)
    rows, columns = np.nonzero(np.triu(shared > overlap, k=1))
    return [(int(i), int(j), float(shared[i, j])) for i, j in zip(rows, columns, strict=True)]


# ---------------------------------------------------------------------------------------------------------------
# Fitting a figure for a slide


def _renderer(fig: Figure) -> RendererBase:
    fig.draw_without_rendering()
    return fig._get_renderer()  # type: ignore[attr-defined]  # the renderer draw_without_rendering laid out with


def _min_points(fig: Figure, renderer: RendererBase, box: tuple[int, int], min_px: float) -> float:
    """The font size (pt) that shows ``min_px`` tall once the figure's tight crop is fitted within ``box``."""
    tight = fig.get_tightbbox(renderer)
    pad = 2 * float(rcParams["savefig.pad_inches"])  # the crop's pad, each side
    shown_px_per_inch = min(box[0] / (float(tight.width) + pad), box[1] / (float(tight.height) + pad))
    # to half a point, rounded up, with room for the crop to grow a little as the text does
    return math.ceil(2 * 1.03 * min_px * 72 / shown_px_per_inch) / 2


def _enlarge(fig: Figure, renderer: RendererBase, points: float) -> bool:
    changed = False
    for ax in fig.axes:
        for name, axis in ((cast(Literal["x", "y"], "x"), ax.xaxis), (cast(Literal["x", "y"], "y"), ax.yaxis)):
            labels = [t for t in _drawn_texts(axis) if t is not axis.label and t is not axis.offsetText]
            if labels and min(_points(t) for t in labels) < points:
                ax.tick_params(axis=name, which="both", labelsize=points)
                changed = True
    for text in _drawn_texts(fig):
        if _points(text) < points:
            text.set_fontsize(points)
            changed = True
    return changed


def _collides(boxes: list[Bbox], along: int, gap: float) -> bool:
    """Whether neighbouring boxes (sorted along axis ``along``: 0 x, 1 y) come closer than ``gap`` px."""
    spans = sorted((float(b.x0), float(b.x1)) if along == 0 else (float(b.y0), float(b.y1)) for b in boxes)
    return any(lo2 - hi1 < gap for (_, hi1), (lo2, _) in zip(spans, spans[1:], strict=False))


def _thin_axis(axis: Axis, renderer: RendererBase, gap: float) -> bool:
    """Turn an axis's long colliding labels vertical, then keep every k-th tick until none collide."""
    along = 0 if axis.axis_name == "x" else 1  # type: ignore[attr-defined]  # set by XAxis and YAxis
    ticks = [t for t in axis.get_major_ticks() if _tick_in_view(axis, t.get_loc()) and t.label1.get_text()]
    labels = [t.label1 for t in ticks if t.label1.get_visible()]
    if len(labels) < 2 or not _collides([t.get_window_extent(renderer) for t in labels], along, gap):
        return False
    if along == 0 and max(len(t.get_text()) for t in labels) >= _LONG_LABEL and labels[0].get_rotation() != 90:
        axis.set_tick_params(labelrotation=90)
        if not _collides([t.get_window_extent(renderer) for t in labels], along, gap):
            return True
    extents = [(b.width if along == 0 else b.height) for b in (t.get_window_extent(renderer) for t in labels)]
    positions = sorted(
        (b.x0 + b.x1 if along == 0 else b.y0 + b.y1) / 2 for b in (t.get_window_extent(renderer) for t in labels)
    )
    spacing = min(p2 - p1 for p1, p2 in zip(positions, positions[1:], strict=False))
    k = max(2, math.ceil((max(extents) + gap) / max(spacing, 1e-9)))
    # The drawn ticks become fixed ones (categories keep their names; numbers keep their formatted text).
    axis.set_ticks([t.get_loc() for t in ticks][::k], [t.label1.get_text() for t in ticks][::k])
    return True


def _outside_legends(fig: Figure, renderer: RendererBase) -> bool:
    """Move each axes' legend that sits inside its axes to the right of them, in one column."""
    changed = False
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is None or not legend.get_visible():
            continue
        box, frame = legend.get_window_extent(renderer), ax.get_window_extent(renderer)
        if _shared_fractions(box.extents, frame.extents)[0, 0] > 0.5:
            if getattr(legend, "_ncols", 1) > 1:  # beside the axes a row of entries would take the plot's width
                legend = ax.legend(
                    [h for h in legend.legend_handles if h is not None],
                    [t.get_text() for t in legend.get_texts()],
                    title=legend.get_title().get_text() or None,
                    fontsize=legend.get_texts()[0].get_fontsize(),
                    frameon=legend.get_frame_on(),
                )
            legend.set_loc("upper left")
            legend.set_bbox_to_anchor((1.01, 1.0), transform=ax.transAxes)
            changed = True
    return changed


def keep_every_label(ax: Axes) -> Axes:
    """Tell :func:`fit_for_slide` that each of ``ax``'s tick labels and texts is content (the tokens of an attention
    map): it may enlarge them but never thin or hide one.

    :param ax: the axes.
    :returns: ``ax``.
    """
    _KEEP_EVERY_LABEL.add(ax)
    return ax


def fit_for_slide(fig: Figure, *, box: tuple[int, int] = SLIDE_BOX, min_px: float = MIN_TEXT_PX) -> Figure:
    """Make ``fig``'s text readable within ``box``: legends inside an axes moved beside it, text under ``min_px``
    (at the size the figure shows once fitted within ``box``) enlarged, long colliding tick labels turned vertical
    and colliding tick labels thinned to every k-th. Only presentation changes; the plotted data stay as they are.

    :param fig: the figure, changed in place; a second call changes nothing more.
    :param box: the largest ``(width, height)`` in px the figure is shown in.
    :param min_px: the smallest font size at the shown size.
    :returns: ``fig``.
    """
    if not fig.axes and not fig.texts:
        return fig
    renderer = _renderer(fig)
    moved = _outside_legends(fig, renderer)  # laid out by the next relayout, or the last one here
    # Larger text widens the crop, which shrinks the shown scale: a few rounds settle it.
    for _ in range(3):
        if not _enlarge(fig, renderer, _min_points(fig, renderer, box, min_px)):
            break
        renderer, moved = _relayout(fig), False
    for _ in range(3):
        thinned = False
        for ax in fig.axes:
            for axis in (ax.xaxis, ax.yaxis):
                if ax.axison and ax not in _KEEP_EVERY_LABEL:
                    thinned |= _thin_axis(axis, renderer, gap=0.2 * _px(renderer, 10))
        thinned |= _untangle(fig, renderer)
        if not thinned:
            break
        renderer, moved = _relayout(fig), False
    if moved:
        _relayout(fig)
    return fig


@contextmanager
def fitted_for_slide(fig: Figure, *, box: tuple[int, int] = SLIDE_BOX, min_px: float = MIN_TEXT_PX) -> Iterator[Figure]:
    """:func:`fit_for_slide`, then, within the block, the figure's layout held where the fitting left it, its layout
    engine back after the block.

    A figure written as a PNG and an SVG, or saved and shown inline, is drawn twice per image (``bbox_inches="tight"``
    measures in a draw of its own); its layout engine would lay it out again in each draw, at the cost of most of the
    draw. The layout the fitting ended with serves them all: laid out again at another resolution, it would move only
    by what text metrics round to there (a few pixels in a 2,000-pixel image).

    :param fig: the figure, fitted in place.
    :param box: as :func:`fit_for_slide`.
    :param min_px: as :func:`fit_for_slide`.
    :returns: a context manager yielding ``fig``.
    """
    fit_for_slide(fig, box=box, min_px=min_px)  # ends with a draw that laid out its last change
    engine = fig.get_layout_engine()
    if engine is None or isinstance(engine, PlaceHolderLayoutEngine):
        yield fig
        return
    fig.set_layout_engine("none")  # a placeholder with the engine's colour-bar rules: the switch back is allowed
    try:
        yield fig
    finally:
        fig.set_layout_engine(engine)


def _untangle(fig: Figure, renderer: RendererBase) -> bool:
    """Part texts that still collide: a title or axis label is wrapped onto two lines; an axes whose annotations
    mostly collide (a quarter or more: numbers written in heatmap cells too small for them) loses them all, its
    colours carrying the values; otherwise the later of two colliding annotations is hidden, as tick labels are
    thinned."""
    texts = list(_drawn_texts(fig))
    boxes = [t.get_window_extent(renderer).extents for t in texts]
    labels = [(a.title, a.xaxis.label, a.yaxis.label) for a in fig.axes]
    titles = {
        id(t) for t in (*(t for three in labels for t in three), getattr(fig, "_suptitle", None)) if t is not None
    }
    annotations = {id(t): ax for ax in fig.axes if ax not in _KEEP_EVERY_LABEL for t in ax.texts}
    colliding: dict[int, list[Text]] = {}
    wrapped = False
    for i, j, _ in _overlapping_pairs(boxes, MAX_OVERLAP):
        a, b = texts[i], texts[j]
        title = a if id(a) in titles else b if id(b) in titles else None
        if title is not None:
            wrapped |= _wrap(title)
        elif id(b) in annotations or id(a) in annotations:
            later = b if id(b) in annotations else a
            colliding.setdefault(id(annotations[id(later)]), []).append(later)
    for ax in fig.axes:
        hidden = colliding.get(id(ax), [])
        for text in ax.texts if 4 * len({id(t) for t in hidden}) >= len(ax.texts) else hidden:
            text.set_visible(False)
    return wrapped or bool(colliding)


def _wrap(title: Text) -> bool:
    """Break a one-line title or label at the space nearest its middle."""
    words = title.get_text()
    spaces = [i for i, c in enumerate(words) if c == " "]
    if "\n" in words or not spaces:
        return False
    cut = min(spaces, key=lambda i: abs(i - len(words) / 2))
    title.set_text(words[:cut] + "\n" + words[cut + 1 :])
    return True


def _relayout(fig: Figure) -> RendererBase:
    """Lay the figure out again after its text changed: a figure with no layout engine, or one laid out once by
    ``tight_layout()`` (which leaves a placeholder), gets tight layout, unless tight layout can place none of its
    axes (a grid spaced by its own ``wspace``/``hspace``, axes placed by hand), where it would only warn."""
    engine = fig.get_layout_engine()
    if (engine is None or isinstance(engine, PlaceHolderLayoutEngine)) and any(map(_tight_places, fig.axes)):
        fig.set_layout_engine("tight")
    return _renderer(fig)


def _tight_places(ax: Axes) -> bool:
    """Whether tight layout places ``ax``: an axes on a grid (or its locator) that sets no spacing of its own,
    matplotlib's own test."""
    locator = ax.get_axes_locator()
    owner = ax if locator is None else locator
    spec = owner.get_subplotspec() if hasattr(owner, "get_subplotspec") else None
    return spec is not None and not spec.get_topmost_subplotspec().get_gridspec().locally_modified_subplot_params()


# ---------------------------------------------------------------------------------------------------------------
# Carrying the boxes with the image


def png_with_text(png: bytes, text: FigureText) -> bytes:
    """``png`` with ``text`` in a ``tEXt`` chunk under :data:`TEXT_KEY` (JSON, ASCII), before its end.

    :param png: a PNG file's bytes.
    :param text: the figure's measured text.
    :returns: the PNG's bytes with the chunk added.
    """
    data = TEXT_KEY.encode("latin-1") + b"\0" + text.to_json().encode("ascii")
    chunk = struct.pack(">I", len(data)) + b"tEXt" + data + struct.pack(">I", zlib.crc32(b"tEXt" + data))
    end = png.rindex(b"IEND") - 4  # the IEND chunk starts with its 4-byte length
    return png[:end] + chunk + png[end:]


def measured_png(fig: Figure, *, dpi: float) -> tuple[bytes, FigureText]:
    """``fig`` as a PNG at ``dpi`` (cropped tight, as saved figures are) carrying its text, measured in the draw
    that wrote it (:func:`png_with_text`), and that text.

    :param fig: the figure.
    :param dpi: the resolution.
    :returns: the PNG's bytes and its :class:`FigureText`.
    """
    buffer = io.BytesIO()
    with measuring(fig) as measured:
        fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    return png_with_text(buffer.getvalue(), measured[-1]), measured[-1]


def read_png_text(png: str | os.PathLike | bytes) -> FigureText | None:
    """The :class:`FigureText` a PNG (a path or its bytes) carries under :data:`TEXT_KEY`; None if it has none.

    :param png: the file or its bytes.
    :returns: the measured text, or None.
    """
    data = png if isinstance(png, bytes) else Path(png).read_bytes()
    at = 8  # after the signature
    while at + 8 <= len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind, body = data[at + 4 : at + 8], data[at + 8 : at + 8 + length]
        if kind == b"tEXt" and body.startswith(TEXT_KEY.encode("latin-1") + b"\0"):
            return FigureText.from_json(body.split(b"\0", 1)[1].decode("latin-1"))
        if kind == b"IEND":
            break
        at += 12 + length
    return None


def img_attribute(text: FigureText | dict[str, Any] | None) -> str:
    """The ``<img>`` attribute that carries ``text`` to the browser tests: `` data-text-boxes='{...}'``
    (HTML-escaped), or "" for None.

    :param text: the measured text, or its JSON object (an output's ``"bertology/text"`` metadata).
    :returns: the attribute with a leading space, or "".
    """
    if text is None:
        return ""
    value = text.to_json() if isinstance(text, FigureText) else json.dumps(text, separators=(",", ":"))
    return f" data-text-boxes='{html.escape(value, quote=True)}'"


# ---------------------------------------------------------------------------------------------------------------
# Inline notebook figures


def _with_text(formatter: Callable[[Figure], Any]) -> Callable[[Figure], Any]:
    """``formatter`` (matplotlib_inline's PNG formatter) fitting the figure first and returning ``(png, metadata)``
    with the drawn image's :class:`FigureText` under :data:`TEXT_KEY`; the PNG is the one ``formatter`` draws."""

    @wraps(formatter)
    def formatter_with_text(fig: Figure) -> Any:
        with fitted_for_slide(fig), measuring(fig) as measured:
            out = formatter(fig)
        if out is None or not measured:
            return out
        data, metadata = out if isinstance(out, tuple) else (out, {})
        return data, {**(metadata or {}), TEXT_KEY: json.loads(measured[-1].to_json())}

    formatter_with_text.bertology_text = True  # type: ignore[attr-defined]  # marks it wrapped (idempotence)
    return formatter_with_text


def _wrap_png_formatter(shell: Any) -> None:
    formatter = shell.display_formatter.formatters["image/png"]
    current = formatter.type_printers.get(Figure)
    if current is not None and not getattr(current, "bertology_text", False):
        formatter.for_type(Figure, _with_text(current))


def _set_up_inline_backend() -> None:
    """Import matplotlib_inline's backend now when it is the kernel's: importing it registers its PNG formatter,
    which otherwise happens inside the cell that draws the kernel's first figure, and a ``plt.show()`` there
    displays that figure before any hook of ours could wrap the new formatter."""
    import matplotlib

    # the backend as set (MPLBACKEND), without resolving it: asking for the resolved one would import it anyway
    backend = dict.__getitem__(matplotlib.rcParams, "backend")
    if backend in ("inline", "module://matplotlib_inline.backend_inline"):
        import matplotlib_inline.backend_inline  # noqa: F401 (the import sets the backend up)


def register_inline(shell: Any = None) -> bool:
    """Wrap the PNG formatter matplotlib_inline registered for figures so that every inline figure is fitted for a
    slide and its output carries its text boxes (metadata ``"bertology/text"``); its options (``bbox_inches``,
    retina) are kept. Idempotent; re-applied before each cell, since ``%matplotlib inline`` or a change of
    ``InlineBackend`` options registers a new formatter, and after each cell, before the inline backend's
    ``flush_figures`` (registered later) shows the cell's figures. The inline backend, which matplotlib sets up
    only when a kernel draws its first figure, is set up here first, so a ``plt.show()`` in that cell finds
    the wrapped formatter too.

    :param shell: the IPython shell (default: the running one).
    :returns: whether a kernel was found to register in.
    """
    if shell is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return False
        shell = get_ipython()
    if shell is None or not hasattr(shell, "kernel"):  # a terminal IPython shows no PNGs
        return False
    _set_up_inline_backend()
    _wrap_png_formatter(shell)
    if not getattr(shell, "_bertology_text_hook", False):
        shell.events.register("pre_run_cell", lambda *_: _wrap_png_formatter(shell))
        shell.events.register("post_execute", lambda *_: _wrap_png_formatter(shell))
        shell._bertology_text_hook = True
    return True


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext bertology_utils.core.figure_text``: :func:`register_inline` in this kernel.

    :param ipython: the shell IPython passes.
    """
    register_inline(ipython)
