"""Label attention maps with Kovaleva et al.'s pattern types: pictures on one colour scale, a CSV, agreement.

* Every map is drawn the same way (:func:`draw_map`): rows attend, columns are attended to, one fixed
  colour scale for every map (:data:`FIXED_SCALE`, a square-root scale from 0 to 1, so a diagonal
  carrying 20% of a row is as dark on every map) unless ``scale="map"`` asks for the map's own maximum;
  special tokens are ticked in orange and the border between the two segments of a pair is dashed,
  because "vertical" and "block" are read against them. :func:`contact_sheet` lays many maps out.
* Maps to label come from a labelled-set folder (:func:`labelled_set_records`) or from any store or
  list of :class:`~bertology_utils.attention.word_attention.ItemAttention` of any model
  (:func:`sample_records`, seeded).
* :class:`LabelFile` is the annotator's CSV, one row appended and flushed per label, so a session
  resumes where it stopped and nothing is lost; :class:`LabelSession` is the queue of maps still to
  label; :func:`agreement` compares two annotators (Cohen's kappa, confusion, disagreements).
* :func:`label_maps` opens the ipywidgets tool in JupyterLab: the map with its words, the model, layer
  and head, one button and one key per type plus "unsure" and "skip", "back", and a per-map scale box.
"""

from __future__ import annotations

import csv
import datetime
import functools
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.colors import Normalize, PowerNorm
from numpy.typing import ArrayLike

from bertology_utils.analyses.pattern_types import TYPES
from bertology_utils.attention.alignment import WORD
from bertology_utils.core.errors import BertologyError

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from bertology_utils.attention.store import AttentionStore
    from bertology_utils.attention.word_attention import ItemAttention

__all__ = [
    "FIXED_SCALE",
    "SPECIAL_COLOUR",
    "LABELS",
    "KEYS",
    "map_norm",
    "draw_map",
    "contact_sheet",
    "MapRecord",
    "labelled_set_records",
    "sample_records",
    "LabelFile",
    "LabelSession",
    "Agreement",
    "agreement",
    "label_maps",
]

#: What an annotator can answer: a type, "unsure" (the note says the best guess) or "skip" (unreadable).
LABELS = (*TYPES, "unsure", "skip")
#: One key per answer, in :data:`LABELS` order.
KEYS = ("1", "2", "3", "4", "5", "u", "s")

#: The colour scale of every labelled map: attention 0..1 through a square root (gamma 0.5).
FIXED_SCALE = {"vmin": 0.0, "vmax": 1.0, "gamma": 0.5}
SPECIAL_COLOUR = "tab:orange"


def map_norm(attention: np.ndarray, scale: str = "fixed") -> Normalize:
    """The colour normalisation of a map: :data:`FIXED_SCALE`, or 0..its own maximum (``scale="map"``)."""
    if scale == "fixed":
        return PowerNorm(FIXED_SCALE["gamma"], FIXED_SCALE["vmin"], FIXED_SCALE["vmax"])
    if scale == "map":
        return Normalize(0.0, max(float(np.max(attention)), 1e-9))
    raise ValueError(f"scale must be 'fixed' or 'map', not {scale!r}")


def draw_map(
    ax: Axes,
    attention: ArrayLike,
    word_kinds: ArrayLike,
    segments: ArrayLike,
    *,
    words: Sequence[str] | None = None,
    title: str | None = None,
    scale: str = "fixed",
) -> None:
    """Draw one word-level ``(n, n)`` map on ``ax``; ``words`` label the axes when given."""
    att = np.asarray(attention, dtype=np.float32)
    kinds, segments = np.asarray(word_kinds), np.asarray(segments)
    n = att.shape[-1]
    if att.shape != (n, n) or kinds.shape != (n,) or segments.shape != (n,):
        raise ValueError(f"a {att.shape} map needs {n} word kinds and segments, got {kinds.shape} / {segments.shape}")
    ax.imshow(att, cmap="Blues", norm=map_norm(att, scale), interpolation="nearest")
    special = np.flatnonzero(kinds != WORD)
    if words is not None:
        ax.set_xticks(range(n), list(words), rotation=90, fontsize=7)
        ax.set_yticks(range(n), list(words), fontsize=7)
        for i in special:
            ax.get_xticklabels()[i].set_color(SPECIAL_COLOUR)
            ax.get_yticklabels()[i].set_color(SPECIAL_COLOUR)
    else:
        ax.set_xticks(special, [""] * len(special))
        ax.set_yticks(special, [""] * len(special))
        ax.tick_params(length=3, width=1.5, color=SPECIAL_COLOUR)
    # the border between segments: after the last position of the first segment's words
    real = np.flatnonzero(kinds == WORD)
    if len(np.unique(segments[real])) > 1:
        border = real[segments[real] == segments[real][0]].max() + 0.5
        for line in (ax.axvline, ax.axhline):
            line(border, color="grey", lw=0.6, ls="--")
    if title:
        ax.set_title(title, fontsize=10)


def contact_sheet(
    maps: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]],
    ids: Sequence[str],
    *,
    columns: int = 5,
    scale: str = "fixed",
    size: float = 2.4,
) -> Figure:
    """A figure of many maps (``(attention, word_kinds, segments)`` each) titled by ``ids``, ``columns`` a row."""
    if len(maps) != len(ids):
        raise ValueError(f"{len(maps)} maps but {len(ids)} ids")
    if not maps:
        raise ValueError("no maps to draw")
    rows = -(-len(maps) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(size * columns, (size + 0.3) * rows), squeeze=False)
    for ax, (attention, kinds, segments), name in zip(axes.ravel(), maps, ids):
        draw_map(ax, attention, kinds, segments, title=str(name), scale=scale)
    for ax in axes.ravel()[len(maps) :]:
        ax.axis("off")
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- maps to label


@dataclass(frozen=True)
class MapRecord:
    """One map to label and where it comes from (layer and head counted from 1)."""

    map_id: str
    attention: np.ndarray
    word_kinds: np.ndarray
    segments: np.ndarray
    words: tuple[str, ...]
    model: str
    layer: int
    head: int
    dataset: str = ""
    item_id: str = ""

    def __post_init__(self) -> None:
        n = len(self.words)
        if np.shape(self.attention) != (n, n) or np.shape(self.word_kinds) != (n,) or np.shape(self.segments) != (n,):
            raise ValueError(
                f"map {self.map_id}: a {np.shape(self.attention)} map with {n} words, "
                f"{np.shape(self.word_kinds)} word kinds and {np.shape(self.segments)} segments"
            )


def labelled_set_records(folder: str | os.PathLike) -> list[MapRecord]:
    """The maps of a labelled-set folder (``maps.npz`` and ``maps.csv``, as ``data/pattern_labels``)."""
    folder = Path(folder)
    for name in ("maps.npz", "maps.csv"):
        if not (folder / name).is_file():
            raise BertologyError(f"{folder / name} is missing: a labelled set needs maps.npz and maps.csv")
    table = pd.read_csv(folder / "maps.csv", dtype={"item_id": str}, keep_default_na=False)
    records = []
    with np.load(folder / "maps.npz") as z:
        for row in table.itertuples():
            try:
                parts = {k: z[f"{row.map_id}/{k}"] for k in ("attention", "word_kinds", "segments", "words")}
            except KeyError as exc:
                raise BertologyError(f"{folder / 'maps.npz'} has no map {row.map_id} listed in maps.csv") from exc
            records.append(
                MapRecord(
                    str(row.map_id),
                    parts["attention"].astype(np.float32),
                    parts["word_kinds"],
                    parts["segments"],
                    tuple(str(w) for w in parts["words"]),
                    str(row.model),
                    int(row.layer),
                    int(row.head),
                    str(row.dataset),
                    str(row.item_id),
                )
            )
    return records


def sample_records(
    items: Sequence[ItemAttention] | AttentionStore, n: int, seed: int = 0, model: str = "", dataset: str = ""
) -> list[MapRecord]:
    """``n`` (item, layer, head) maps drawn with ``numpy.random.default_rng(seed)`` from ``items``.

    ``items`` is an AttentionStore or a sequence of ItemAttention (of any model and shape); items are
    drawn with replacement, then a layer and a head uniformly within that item's own shape. Ids are
    ``s000``, ``s001``, ...
    """
    if not isinstance(items, Sequence) and not hasattr(items, "__getitem__"):
        items = list(items)
    if len(items) == 0:
        raise ValueError("no items to draw maps from")
    rng = np.random.default_rng(seed)
    records = []
    for k, index in enumerate(rng.integers(0, len(items), n)):
        item = items[int(index)]
        layers, heads = item.attention.shape[:2]
        layer, head = int(rng.integers(layers)), int(rng.integers(heads))
        records.append(
            MapRecord(
                f"s{k:03d}",
                np.asarray(item.attention[layer, head], dtype=np.float32),
                np.asarray(item.word_kinds),
                np.asarray(item.segments),
                tuple(item.words),
                model,
                layer + 1,
                head + 1,
                dataset,
                str(item.item_id),
            )
        )
    return records


# --------------------------------------------------------------------------- the annotator's file


class LabelFile:
    """An annotator's labels: a CSV (``map_id,label,annotator,note,time``), one row appended per label.

    Each row is flushed as it is written, so an interrupted session loses nothing and opening the same
    file again resumes it. A map labelled twice keeps its latest label.
    """

    COLUMNS = ("map_id", "label", "annotator", "note", "time")

    def __init__(self, path: str | os.PathLike, annotator: str) -> None:
        self.path, self.annotator = Path(path), str(annotator)
        self._labels: dict[str, str] = {}
        if self.path.is_file() and self.path.stat().st_size:
            self._labels = {row["map_id"]: row["label"] for row in self._read()}

    def _read(self) -> list[dict]:
        with self.path.open(newline="", encoding="utf-8") as handle:
            reader = csv.reader(handle)
            header = next(reader, None)
            if header is None or tuple(header) != self.COLUMNS:
                raise BertologyError(f"{self.path}: line 1 should be {','.join(self.COLUMNS)}, not {header}")
            rows = []
            for line, row in enumerate(reader, start=2):
                if len(row) != len(self.COLUMNS) or row[1] not in LABELS:
                    raise BertologyError(f"{self.path}: line {line} is not a label row: {row}")
                rows.append(dict(zip(self.COLUMNS, row)))
        return rows

    def record(self, map_id: str, label: str, note: str = "") -> None:
        if label not in LABELS:
            raise ValueError(f"label must be one of {LABELS}, not {label!r}")
        new = not self.path.is_file() or not self.path.stat().st_size
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            if new:
                writer.writerow(self.COLUMNS)
            time = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
            writer.writerow((map_id, label, self.annotator, note, time))
            handle.flush()
        self._labels[str(map_id)] = label

    def labels(self) -> dict[str, str]:
        """``map_id -> label``, the latest row of each map."""
        return dict(self._labels)


class LabelSession:
    """The maps of ``records`` not yet in ``label_file``, in their order or shuffled with ``order_seed``."""

    def __init__(self, records: Sequence[MapRecord], label_file: LabelFile, order_seed: int | None = None):
        ids = [r.map_id for r in records]
        if len(set(ids)) != len(ids):
            raise ValueError("map ids must be unique")
        order = list(records)
        if order_seed is not None:
            order = [order[i] for i in np.random.default_rng(order_seed).permutation(len(order))]
        self.records, self.file = order, label_file
        done = label_file.labels()
        self.queue = [r for r in order if r.map_id not in done]
        self.position = 0
        self.history: list[int] = []

    @property
    def current(self) -> MapRecord | None:
        return self.queue[self.position] if self.position < len(self.queue) else None

    @property
    def remaining(self) -> int:
        return len(self.queue) - self.position

    @property
    def labelled(self) -> int:
        return sum(r.map_id in self.file.labels() for r in self.records)

    def label(self, label: str, note: str = "") -> None:
        """Record ``label`` for the current map and move on."""
        if self.current is None:
            raise BertologyError("every map of this session is labelled")
        self.file.record(self.current.map_id, label, note)
        self.history.append(self.position)
        self.position += 1

    def back(self) -> None:
        """Return to the map labelled last, to label it again (the new label overrides)."""
        if self.history:
            self.position = self.history.pop()


# --------------------------------------------------------------------------- agreement


@dataclass
class Agreement:
    """Two annotators on the maps both gave a type."""

    n: int
    observed: float
    kappa: float
    confusion: pd.DataFrame
    disagreements: pd.DataFrame
    note: str = ""


# A label file (its path or a LabelFile) or the labels themselves, map id -> label.
_Labels: TypeAlias = "LabelFile | Mapping[str, str] | str | os.PathLike"


def _as_labels(source: _Labels) -> dict[str, str]:
    if isinstance(source, LabelFile):
        return source.labels()
    if isinstance(source, Mapping):
        return {str(k): str(v) for k, v in source.items()}
    return LabelFile(source, "").labels()


def agreement(a: _Labels, b: _Labels) -> Agreement:
    """Cohen's kappa and the confusion of two label files (paths or :class:`LabelFile`) or ``id -> label`` dicts.

    Only maps both annotators gave a type (not unsure or skip) count. Kappa is NaN, with the reason in
    ``note``, when fewer than two maps are shared or both annotators used a single type throughout.
    """
    from sklearn.metrics import cohen_kappa_score

    la, lb = _as_labels(a), _as_labels(b)
    shared = [m for m in la if m in lb and la[m] in TYPES and lb[m] in TYPES]
    ya, yb = [la[m] for m in shared], [lb[m] for m in shared]
    confusion = pd.crosstab(
        pd.Categorical(ya, categories=TYPES), pd.Categorical(yb, categories=TYPES), dropna=False
    ).reindex(index=list(TYPES), columns=list(TYPES), fill_value=0)
    confusion.index.name, confusion.columns.name = "a", "b"
    disagreements = pd.DataFrame([(m, x, y) for m, x, y in zip(shared, ya, yb) if x != y], columns=["map_id", "a", "b"])
    observed = float(np.mean(np.asarray(ya) == np.asarray(yb))) if shared else math.nan
    note = ""
    if len(shared) < 2:
        kappa, note = math.nan, f"{len(shared)} map(s) labelled with a type by both: kappa needs at least 2"
    elif len(set(ya) | set(yb)) < 2:
        kappa, note = math.nan, "both annotators used one type only: chance agreement is 1 and kappa undefined"
    else:
        kappa = float(cohen_kappa_score(ya, yb))
    return Agreement(len(shared), observed, kappa, confusion, disagreements, note)


# --------------------------------------------------------------------------- the JupyterLab tool


@functools.cache
def _tool_class() -> type:
    import ipywidgets as widgets

    class LabellingTool(widgets.VBox):
        """The labelling panel of :func:`label_maps`: ``session`` is its :class:`LabelSession`."""

        def __init__(self, session: LabelSession, scale: str = "fixed", dpi: int = 80) -> None:
            map_norm(np.zeros((1, 1)), scale)  # an unknown scale fails here, not at the first draw
            self.session, self.dpi = session, dpi
            self.output = widgets.Output()
            self.info = widgets.HTML()
            self.progress = widgets.HTML()
            self.per_map = widgets.Checkbox(value=scale == "map", description="per-map colour scale")
            self.note = widgets.Text(placeholder="note (for unsure: best: <type>)", description="note")
            self.key = widgets.Text(placeholder="type a key", description="key", continuous_update=True)
            self.buttons = [widgets.Button(description=f"{key} {label}") for key, label in zip(KEYS, LABELS)]
            for button, label in zip(self.buttons, LABELS):
                button.on_click(functools.partial(self._answer, label))
            self.back = widgets.Button(description="back")
            self.back.on_click(self._back)
            self.per_map.observe(lambda _change: self.redraw(), names="value")
            self.key.observe(self._typed, names="value")
            super().__init__(
                [
                    self.progress,
                    self.info,
                    self.output,
                    widgets.HBox(self.buttons[: len(TYPES)]),
                    widgets.HBox([*self.buttons[len(TYPES) :], self.back, self.per_map]),
                    widgets.HBox([self.key, self.note]),
                ]
            )
            self.add_class("bertology-labelling")
            self.redraw()

        @property
        def scale(self) -> str:
            return "map" if self.per_map.value else "fixed"

        def _answer(self, label: str, _button: object = None) -> None:
            if self.session.current is not None:
                self.session.label(label, self.note.value.replace("\n", " "))
                self.note.value = ""
            self.redraw()

        def _typed(self, change: Mapping[str, object]) -> None:
            key = str(change["new"]).strip().lower()
            if not key:
                return
            self.key.value = ""
            if key in KEYS:
                self._answer(LABELS[KEYS.index(key)])

        def _back(self, _button: object = None) -> None:
            self.session.back()
            self.redraw()

        def redraw(self) -> None:
            from matplotlib.figure import Figure

            from bertology_utils.present.views import png_output

            total = len(self.session.records)
            self.progress.value = f"<b>{self.session.labelled} of {total} labelled</b> ({self.session.file.path})"
            record = self.session.current
            if record is None:
                self.info.value = "Every map of this session is labelled."
                self.output.outputs = ()
                return
            self.info.value = (
                f"<b>{record.map_id}</b>: {record.model}, layer {record.layer}, head {record.head}"
                + (f", {record.dataset}" if record.dataset else "")
                + f"<br>{' '.join(record.words)}"
            )
            side = max(4.0, 0.22 * len(record.words) + 2)
            fig = Figure(figsize=(side, side), dpi=self.dpi)
            draw_map(
                fig.add_subplot(),
                record.attention,
                record.word_kinds,
                record.segments,
                words=record.words,
                scale=self.scale,
            )
            fig.tight_layout()
            self.output.outputs = (png_output(fig),)

    return LabellingTool


def label_maps(
    records: Sequence[MapRecord],
    path: str | os.PathLike,
    annotator: str,
    *,
    order_seed: int | None = None,
    scale: str = "fixed",
) -> Any:  # a LabellingTool, a class built when ipywidgets is first needed
    """Open the labelling tool on ``records``, writing ``annotator``'s labels to the CSV at ``path``.

    Opening the same file again resumes where it stopped. Returns the ipywidgets panel (a VBox with
    the class ``bertology-labelling``); its ``session`` is the :class:`LabelSession`.
    """
    session = LabelSession(records, LabelFile(path, annotator), order_seed=order_seed)
    return _tool_class()(session, scale=scale)


def __getattr__(name: str) -> type:  # LabellingTool is built lazily: ipywidgets is imported only when used
    if name == "LabellingTool":
        return _tool_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
