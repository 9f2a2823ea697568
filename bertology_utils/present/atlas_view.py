"""The head atlas in JupyterLab: a layers x heads grid of buttons coloured by one column, and a head's card.

:func:`atlas_widget` (what :meth:`~bertology_utils.present.atlas.Atlas.show` returns) is an ipywidgets
VBox: a menu of the atlas's columns (labelled from its dictionary), a run menu when the atlas joins
several runs, the grid (numbers in viridis, yes/no and categories in distinct colours, missing values
grey), a legend line and, once a head is clicked, its card: the head's values with their units and the
paper's value, its nearest heads (notebook 05), the heads that match it in the other runs, and its
attention-pattern images, drawn from the payload the HTML page reads. ipywidgets is imported only when
a widget is made.
"""

from __future__ import annotations

import base64
import functools
import html
import io
import math
from typing import TYPE_CHECKING, Protocol

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from ipywidgets import VBox

__all__ = ["MISSING_COLOUR", "BOOL_COLOURS", "AtlasSource", "head_colours", "atlas_widget"]

#: A head without a value.
MISSING_COLOUR = "#d0d0d0"
#: yes / no heads.
BOOL_COLOURS = {True: "#e6550d", False: "#9ecae1"}
_CELL = "2.4em"


class AtlasSource(Protocol):
    """What the widget reads of an atlas (:class:`~bertology_utils.present.atlas.Atlas` is one): the atlas
    imports the widget, so the widget names only what it needs."""

    #: One row per column: its ``column`` name and its ``label``, among others.
    dictionary: pd.DataFrame

    @property
    def columns(self) -> list[str]: ...

    def payload(self) -> dict: ...

    def card(self, run: str, layer: int, head: int) -> dict: ...


def _missing(v: object) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def head_colours(values: list, kind: str) -> tuple[list[str], str]:
    """One colour per value (``kind``: number, bool or category, as the atlas's dictionary says) and the
    legend's HTML: numbers in viridis from their min to their max, the others one colour per value."""
    from matplotlib import colormaps
    from matplotlib.colors import to_hex as _hex

    present = [v for v in values if not _missing(v)]
    if not present:
        return [MISSING_COLOUR] * len(values), "no head has a value"
    if kind == "number":
        low, high = float(min(present)), float(max(present))
        span = high - low or 1.0
        viridis = colormaps["viridis"]
        colours = [MISSING_COLOUR if _missing(v) else _hex(viridis((float(v) - low) / span)) for v in values]
        ends = (_swatch(_hex(viridis(0.0)), f"{low:.3g}"), _swatch(_hex(viridis(1.0)), f"{high:.3g}"))
        return colours, f"{ends[0]} to {ends[1]}"
    if kind == "bool":
        palette = {str(k).lower(): c for k, c in BOOL_COLOURS.items()}
        names = {"true": "yes", "false": "no"}
        colours = [MISSING_COLOUR if _missing(v) else palette[str(v).lower()] for v in values]
        legend = [_swatch(palette[k], names[k]) for k in ("true", "false") if k in {str(v).lower() for v in present}]
        return colours, " ".join(legend)
    tab = colormaps["tab10" if len(set(map(str, present))) <= 10 else "tab20"]
    order = sorted({str(v) for v in present})
    palette = {name: _hex(tab(i % tab.N)) for i, name in enumerate(order)}
    colours = [MISSING_COLOUR if _missing(v) else palette[str(v)] for v in values]
    return colours, " ".join(_swatch(palette[name], name) for name in order)


def _swatch(colour: str, text: str) -> str:
    return (
        f'<span style="display:inline-block;width:1em;height:1em;background:{colour};vertical-align:middle">'
        f"</span> {html.escape(text)}"
    )


def _format(value: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _decode(data: str, shape: tuple[int, ...]) -> np.ndarray:
    """A payload image (:func:`~bertology_utils.present.atlas_stores.pattern_images`): base64 uint8 -> floats in
    [0, 1]."""
    return np.frombuffer(base64.b64decode(data), dtype=np.uint8).reshape(shape) / 255.0


def _pattern_images(maps: dict, layers: int, heads: int, layer: int, head: int) -> str:
    """The head's mean map and example sentences' maps as one PNG <img> (layer and head from 0)."""
    from matplotlib.figure import Figure

    size = maps["mean"]["size"]
    panels = [("mean map", maps["mean"]["labels"], _decode(maps["mean"]["data"], (layers, heads, size, size)))]
    for i, example in enumerate(maps["examples"]):
        n = len(example["words"])
        panels.append((f"example {i + 1}", example["words"], _decode(example["data"], (layers, heads, n, n))))
    # a Figure outside pyplot: nothing for the inline backend to show a second time
    fig = Figure(figsize=(3.4 * len(panels), 3.4), dpi=72)
    for i, (title, labels, images) in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), i + 1)
        ax.imshow(images[layer, head], cmap="viridis", vmin=0, vmax=1)
        ax.set_xticks(range(len(labels)), labels, rotation=90, fontsize=7)
        ax.set_yticks(range(len(labels)), labels, fontsize=7)
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    encoded = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f'<img alt="attention patterns" src="data:image/png;base64,{encoded}">'


@functools.cache
def _widget_class() -> type[VBox]:
    import ipywidgets as widgets

    class AtlasWidget(widgets.VBox):
        """The atlas's grid, column menu and card; see :func:`atlas_widget`.

        ``column`` (Dropdown), ``run`` (Dropdown, None for one run), ``buttons`` ({(layer, head): Button},
        both from 1, of the run shown), ``legend`` and ``card`` (HTML); :meth:`select` is what a click does.
        """

        def __init__(self, atlas: AtlasSource):
            self.atlas = atlas
            self.payload = atlas.payload()
            self.labels = dict(zip(atlas.dictionary["column"], atlas.dictionary["label"]))
            self.column = widgets.Dropdown(
                options=[(f"{self.labels.get(c, c)} ({c})", c) for c in atlas.columns],
                description="column",
                layout=widgets.Layout(width="32em"),
            )
            names = [run["name"] for run in self.payload["runs"]]
            self.run = widgets.Dropdown(options=names, description="run") if len(names) > 1 else None
            self.grid = widgets.GridBox()
            self.legend = widgets.HTML()
            self.card = widgets.HTML("<i>click a head for its card</i>")
            self.buttons: dict[tuple[int, int], widgets.Button] = {}
            self.column.observe(self.recolour, names="value")
            if self.run is not None:
                self.run.observe(self.rebuild, names="value")
            controls = [self.column] + ([self.run] if self.run is not None else [])
            super().__init__([widgets.HBox(controls), self.legend, self.grid, self.card])
            self.add_class("bertology-atlas")
            self.rebuild()

        @property
        def run_name(self) -> str:
            return self.run.value if self.run is not None else self.payload["runs"][0]["name"]

        def _run(self) -> dict:
            return next(run for run in self.payload["runs"] if run["name"] == self.run_name)

        def rebuild(self, _change: object = None) -> None:
            """The grid of the run chosen (runs may differ in shape)."""
            run = self._run()
            header = [widgets.Label("")] + [widgets.Label(f"H{h}") for h in range(1, run["heads"] + 1)]
            cells: list = list(header)
            self.buttons = {}
            for layer in range(1, run["layers"] + 1):
                cells.append(widgets.Label(f"L{layer}"))
                for head in range(1, run["heads"] + 1):
                    button = widgets.Button(layout=widgets.Layout(width=_CELL, height="1.8em", padding="0"))
                    button.add_class("bertology-atlas-head")
                    button.on_click(lambda _b, layer=layer, head=head: self.select(layer, head))
                    self.buttons[layer, head] = button
                    cells.append(button)
            self.grid.children = cells
            self.grid.layout = widgets.Layout(grid_template_columns=f"3em repeat({run['heads']}, {_CELL})")
            self.card.value = "<i>click a head for its card</i>"
            self.recolour()

        def recolour(self, _change: object = None) -> None:
            column = self.column.value
            if column is None:
                self.legend.value = "no per-head column in this atlas"
                return
            rows, run = self.payload["rows"], self._run()
            mine = [i for i, r in enumerate(rows["run"]) if r == run["id"]]
            values = [rows["values"][column][i] for i in mine]
            kind = next(c["kind"] for c in self.payload["columns"] if c["name"] == column)
            colours, legend = head_colours(values, kind)
            for i, value, colour in zip(mine, values, colours):
                button = self.buttons[rows["layer"][i], rows["head"][i]]
                button.style.button_color = colour
                button.tooltip = f"{rows['layer'][i]}-{rows['head'][i]}: " + (
                    "-" if _missing(value) else _format(value)
                )
            unit = next(c["unit"] for c in self.payload["columns"] if c["name"] == column)
            self.legend.value = (
                f"<b>{html.escape(self.labels.get(column, column))}</b> ({html.escape(unit)}): {legend}; "
                f"{_swatch(MISSING_COLOUR, 'no value')}"
            )

        def select(self, layer: int, head: int) -> None:
            """Open the card of head ``layer``-``head`` (from 1) of the run shown."""
            run = self._run()
            card = self.atlas.card(run["name"], layer, head)
            columns = {c["name"]: c for c in self.payload["columns"]}
            rows = "".join(
                f"<tr><td>{html.escape(columns[name]['label'])}</td><td><b>{html.escape(_format(value))}</b></td>"
                f"<td>{html.escape(columns[name]['unit'])}</td>"
                f"<td>{html.escape(columns[name]['paper_value'] or '')}</td></tr>"
                for name, value in card["values"].items()
            )
            parts = [
                f"<h4>Layer {layer}, head {head}</h4><p>{html.escape(run['name'])}: {html.escape(run['model'])}</p>",
                "<table><tr><th>column</th><th>value</th><th>unit</th><th>paper</th></tr>" + rows + "</table>"
                if rows
                else "<p>no value recorded for this head</p>",
            ]
            if card["nearest"]:
                nearest = ", ".join(f"{name} ({distance:.3f})" for name, distance in card["nearest"])
                parts.append(f"<p>nearest heads (Jensen-Shannon distance): {html.escape(nearest)}</p>")
            names = {r["id"]: r["name"] for r in self.payload["runs"]}
            for other, (match, distance) in card["match"].items():
                parts.append(f"<p>in {html.escape(names[other])}: head {html.escape(match)} ({distance:.3f})</p>")
            if run["maps"]:
                parts.append(_pattern_images(run["maps"], run["layers"], run["heads"], layer - 1, head - 1))
            else:
                parts.append(f"<p><i>{html.escape(run['maps_note'])}</i></p>")
            self.card.value = "".join(parts)

    return AtlasWidget


def atlas_widget(atlas: AtlasSource) -> VBox:
    """The atlas as an ipywidgets VBox (class ``bertology-atlas``): see the module's docstring."""
    return _widget_class()(atlas)
