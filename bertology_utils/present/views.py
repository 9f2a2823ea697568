"""Interactive views that draw offline: bertviz's head and model views, a layer/head explorer, a neuron view.

* :func:`head_view` and :func:`model_view` wrap bertviz 1.4. bertviz's HTML loads require.js,
  d3 and jQuery from a CDN, so offline it draws nothing. Here the npm-installed libraries
  (:mod:`bertology_utils.present.assets`) are inlined and registered as the AMD modules ``d3`` and
  ``jquery`` that bertviz's ``requirejs(['jquery', 'd3'], ...)`` asks for, so the views draw
  with no network in JupyterLab, in exported HTML and in a saved page. Each library runs in a
  CommonJS-style scope: it neither sets page globals nor clashes with a require.js that the
  page (an nbconvert export, an earlier view) already has. A library that is not installed
  comes from its CDN with a warning. Offline, a view that cannot have its libraries says which are
  missing and how to install them, and shows a static figure of the same maps instead (the
  selected layer's heads, or a layer x head grid for the model view; :mod:`~bertology_utils.present.static_view`),
  so a notebook goes on.
* :func:`explorer` is an ipywidgets panel (sentence, layer, head, word/token level) that redraws
  one attention map, from an AttentionStore or from items and a model.
* :func:`neuron_view` shows how one head's attention comes about, after Vig (2019): the
  elementwise products of a query vector with each key vector, their scaled sums (the
  scores) and the softmax, captured with forward hooks during the model's own forward pass.
* :func:`~bertology_utils.present.mixing_maps.mixing_view` (in :mod:`~bertology_utils.present.mixing_maps`) shows
  one item's context-mixing maps (:func:`bertology_utils.interventions.mixing.mixing_for`) side by side.

Every view saves as an image drawn with matplotlib from the data the view shows (``.save("x.svg")``,
``.png`` or ``.pdf``; the bertviz views also ``.html``): the head view as bertviz draws it (two columns
of tokens, a line per weight in the head's colour), the model view as a layer x head grid of heatmaps,
the neuron view as :meth:`NeuronView.figure`. SVGs hold their labels as ``<text>``.

Function arguments count layers, heads and tokens from 0 like array indices; what is shown
(slider readouts, titles) counts layers and heads from 1, as the papers and figures do.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import html as html_lib
import itertools
import json
import os
import re
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
import torch

from bertology_utils.attention.alignment import WORD
from bertology_utils.attention.extraction import attention_for
from bertology_utils.attention.store import AttentionStore
from bertology_utils.attention.word_attention import ItemAttention
from bertology_utils.core.architectures import self_attention_modules
from bertology_utils.core.errors import AssetMissingError, BertologyError, ModelNotAvailableError
from bertology_utils.core.figure_text import MIN_TEXT_PX, TEXT_KEY, measured_png
from bertology_utils.core.figures import (
    DEFAULT_DPI,
    image_format,
    plot_attention_lines,
    plot_attention_map,
    plot_attention_thumbnails,
    save_image,
)
from bertology_utils.core.files import atomic_write_text
from bertology_utils.core.models import LoadedModel
from bertology_utils.data import Corpus, Sentence, SentencePair, words_of
from bertology_utils.interventions.editing import capture_attention
from bertology_utils.interventions.query_key import capture_query_key
from bertology_utils.present.assets import ASSETS, asset_path, script_tag, source_or_cdn
from bertology_utils.present.static_view import number_the_grid, static_html

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "AttentionView",
    "head_view",
    "model_view",
    "AttentionExplorer",  # noqa: F822 (built lazily by __getattr__)
    "explorer",
    "NeuronView",
    "neuron_view",
    "save_and_close",
    "LEVELS",
    "png_output",
]

# What a view draws: a text, a (text_a, text_b) pair, a data item (Sentence, SentencePair, a list of words) or an
# ItemAttention; and the model that reads it (a LoadedModel, a name or a folder; None: the default model).
_Item: TypeAlias = "Sentence | SentencePair | Sequence[str] | ItemAttention"
_Source: TypeAlias = "str | tuple[str, str] | _Item"
_Model: TypeAlias = "LoadedModel | str | os.PathLike | None"

#: Resolutions a map can be drawn at: the model's tokens, or words (Clark et al.'s conversion).
LEVELS = ("token", "word")

# The libraries bertviz's views load (require.js, then the AMD modules it asks for).
_BERTVIZ_ASSETS = ("require", "d3", "jquery")
# bertviz 1.4's CDN loader and require.config, replaced by the inlined libraries.
_BERTVIZ_REQUIRE_TAG = '<script src="https://cdnjs.cloudflare.com/ajax/libs/require.js/2.3.6/require.min.js"></script>'
_BERTVIZ_CONFIG = re.compile(r"require\.config\(\{\s*paths:\s*\{[^}]*\}\s*\}\);")
_BERTVIZ_ID = re.compile(r"bertviz-[0-9a-f]{32}")
# bertviz's template marker also sits in a comment, which its substitution fills with a second copy of the data.
_BERTVIZ_PARAMS_COMMENT = re.compile(r"// HACK: .* is a template marker that is replaced by actual params\.")
# bertviz draws its tokens and head numbers at 13-15 px, under the slides' smallest readable text.
_BERTVIZ_TEXT_SIZE = re.compile(r"(const (?:HEADING_)?TEXT_SIZE = )(\d+(?:\.\d+)?);")
#: How long a view waits for require.js from a CDN before saying it cannot draw (only without npm libraries).
_REQUIRE_WAIT_MS = 15000


# --------------------------------------------------------------------------- inputs


def _as_item(source: _Source) -> _Item:
    """A text, a pair of texts, or a data item -> something :func:`attention_for` takes."""
    if isinstance(source, str):
        return Corpus.from_texts(source, name="text")[0]
    if isinstance(source, tuple) and len(source) == 2 and all(isinstance(s, str) for s in source):
        a, b = (words_of(s) for s in source)
        if not a or not b:
            raise BertologyError(f"both texts of a pair need words: {source!r}")
        return SentencePair("pair", tuple(a), tuple(b))
    return source


def _item_attention(source: _Source, model: _Model, from_rule: str = "mean") -> ItemAttention:
    """ItemAttention for a text, a text pair, a data item, or an ItemAttention (returned as is)."""
    if isinstance(source, ItemAttention):
        return source
    return attention_for([_as_item(source)], model, keep_tokens=True, from_rule=from_rule)[0]


def _maps(item: ItemAttention, level: str) -> tuple[np.ndarray, list[str], np.ndarray]:
    """(layers, heads, n, n) maps, their labels and each label's segment (0: first text, 1: second)."""
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}, not {level!r}")
    if level == "word":
        return item.attention, list(item.words), np.asarray(item.segments)
    if item.token_attention is None or item.tokens is None or item.token_to_word is None:
        raise BertologyError(
            f"item {item.item_id} has word-level attention only (a store extracted without "
            "keep_tokens); use level='word', or pass the item's text and a model"
        )
    return item.token_attention, list(item.tokens), np.asarray(item.segments)[item.token_to_word]


# --------------------------------------------------------------------------- bertviz views


def save_and_close(fig: Figure, path: str | os.PathLike, dpi: int) -> Path:
    """Save a figure a view drew for the purpose, then close it (a notebook would otherwise show it too); returns
    the path."""
    import matplotlib.pyplot as plt

    try:
        return save_image(fig, path, dpi=dpi)
    finally:
        plt.close(fig)


@dataclass(frozen=True)
class AttentionView:
    """A self-contained HTML view: displays in Jupyter; :meth:`save` writes it as a page or an image."""

    html: str = field(repr=False)  # the text/plain output of a notebook cell would repeat it
    #: id of the view's root ``<div>`` (classes ``bertology-view bertology-<kind>-view``).
    element_id: str
    title: str
    kind: str  #: "head" or "model"
    #: What the view draws: ``(layers, heads, n, n)`` maps, the n labels (tokens or words) and each one's
    #: segment (0: first text, 1: second), and the bertviz options (selected layer and heads, grid).
    maps: np.ndarray = field(repr=False, compare=False)
    labels: tuple[str, ...] = field(repr=False)
    segments: np.ndarray = field(repr=False, compare=False)
    options: dict = field(repr=False, compare=False)

    def _repr_html_(self) -> str:
        return self.html

    def figure(self) -> Figure:
        """The view as a matplotlib figure: the selected layer and heads as bertviz draws them (head
        view), or the grid of every (or the included) layer x head map (model view)."""
        import matplotlib.pyplot as plt

        if self.kind == "model":
            return plot_attention_thumbnails(
                self.maps,
                self.labels,
                layers=self.options.get("include_layers"),
                heads=self.options.get("include_heads"),
                title=self.title,
            )
        layer = self.options.get("layer") or 0
        fig, ax = plt.subplots(figsize=(5.5, 0.26 * len(self.labels) + 1.4))
        plot_attention_lines(
            self.maps[layer],
            self.labels,
            heads=self.options.get("heads"),
            segments=self.segments.tolist(),
            ax=ax,
            title=f"{self.title}\nlayer {layer + 1}",
        )
        return fig

    def save(self, path: str | os.PathLike, *, dpi: int = DEFAULT_DPI) -> Path:
        """Write the view by the suffix of ``path``: ``.html`` a standalone page that draws offline, ``.png``,
        ``.svg`` or ``.pdf`` :meth:`figure` (``dpi`` for PNG and the grid's heatmaps); returns the path."""
        if image_format(path, also=(".html",)) != ".html":
            return save_and_close(self.figure(), path, dpi)
        path = Path(path)
        atomic_write_text(
            path,
            '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f"<title>{html_lib.escape(self.title)}</title>\n</head>\n<body>\n{self.html}\n</body>\n</html>\n",
        )
        return path


def _amd_module(name: str) -> str:
    """JavaScript registering asset ``name`` as the AMD module bertviz requires, inlined or from its CDN."""
    text, url = source_or_cdn(name)
    if text is None:
        assert url is not None  # source_or_cdn gives the text or, when not installed, the CDN url
        return f"requirejs.config({{paths: {{{json.dumps(name)}: {json.dumps(url.removesuffix('.js'))}}}}});\n"
    # The library sees `module`/`exports` and no `define`, so it exports itself here, touching no
    # page globals. A page that already has the module keeps its own (require.js skips redefinitions).
    text = text.replace("</script", "<\\/script")  # would end the <script> element early
    return (
        f"define({json.dumps(name)}, [], function () {{\n  var module = {{exports: {{}}}};\n"
        f"  (function (define, module, exports) {{\n{text}\n  }}).call(window, undefined, module, module.exports);\n"
        "  return module.exports;\n});\n"
    )


def _static_fallback(view: AttentionView, missing: Sequence[str]) -> AttentionView:
    """The view's image (:meth:`AttentionView.figure`) under a note saying which libraries are missing and how to
    install them: the offline view without JavaScript."""
    fig = view.figure()
    if view.kind == "model":
        layers = view.options.get("include_layers") or range(view.maps.shape[0])
        number_the_grid(fig, layers, view.options.get("include_heads") or range(view.maps.shape[1]))
        shown = "every head's map as a static grid"
    else:
        shown = f"layer {(view.options.get('layer') or 0) + 1} as a static figure"
    note = (
        f"The interactive {view.kind} view cannot draw here: {', '.join(missing)} "
        f"{'is' if len(missing) == 1 else 'are'} not installed "
        f"(`bertology assets --install`, or `make setup` in a checkout). Showing {shown} instead."
    )
    warnings.warn(note, stacklevel=4)  # the caller of head_view or model_view
    title = view.title.replace(" view:", " view (static):", 1)
    html, element_id = static_html(fig, note, title, f"bertology-{view.kind}-view-static")
    return replace(view, html=html, element_id=element_id, title=title)


def _bertviz_view(
    kind: str,
    source: _Source,
    model: _Model,
    level: str,
    from_rule: str,
    element_id: str | None,
    decimals: int,
    options: dict,
) -> AttentionView:
    item = _item_attention(source, model, from_rule)
    maps, labels, segments = _maps(item, level)
    # The data of the view; its HTML comes next, from bertviz.
    title = f"{kind} view: {item.item_id} ({level} level)"
    view = AttentionView("", "", title, kind, maps, tuple(labels), segments, options)
    try:
        return _bertviz_html(view, level, element_id, decimals)
    except AssetMissingError:
        missing = [f"{ASSETS[n].package}@{ASSETS[n].version}" for n in _BERTVIZ_ASSETS if asset_path(n) is None]
        return _static_fallback(view, missing)


def _bertviz_html(view: AttentionView, level: str, element_id: str | None, decimals: int) -> AttentionView:
    import bertviz

    kind, maps, segments = view.kind, view.maps, view.segments
    second = np.flatnonzero(segments == 1)
    # float64 after rounding, so the JSON holds 0.1234 rather than float32's 0.12340000271797180.
    rounded = torch.from_numpy(np.round(np.asarray(maps, dtype=np.float64), decimals))
    draw = bertviz.head_view if kind == "head" else bertviz.model_view
    with warnings.catch_warnings():
        # bertviz reads its .js templates without closing them.
        warnings.simplefilter("ignore", ResourceWarning)
        page = draw(
            list(rounded.unsqueeze(1)),
            list(view.labels),
            sentence_b_start=int(second[0]) if len(second) else None,
            html_action="return",
            **view.options,
        ).data
    if (
        _BERTVIZ_REQUIRE_TAG not in page
        or len(_BERTVIZ_CONFIG.findall(page)) != 1
        or len(_BERTVIZ_PARAMS_COMMENT.findall(page)) != 1
    ):
        raise BertologyError(
            f"bertviz {getattr(bertviz, '__version__', '')} writes HTML this module does not "
            "know how to make offline; bertology expects bertviz 1.4"
        )
    page = _BERTVIZ_PARAMS_COMMENT.sub("", _BERTVIZ_CONFIG.sub("", page.replace(_BERTVIZ_REQUIRE_TAG, "")))
    page = _BERTVIZ_TEXT_SIZE.sub(lambda m: f"{m[1]}{max(float(m[2]), MIN_TEXT_PX):g};", page)
    # bertviz names its root with a random uuid; a content hash keeps the HTML deterministic. (The
    # placeholder cannot clash with a token: JSON escapes control characters.)
    body = _BERTVIZ_ID.sub("\0root\0", page)
    if element_id is None:
        element_id = f"bertology-{kind}-view-{hashlib.sha256(body.encode()).hexdigest()[:12]}"
    body = body.replace("\0root\0", f"{element_id}-bertviz")
    scripts = body.split('<script type="text/javascript">', 1)
    if len(scripts) != 2:
        raise BertologyError("bertviz's HTML has no script; bertology expects bertviz 1.4")
    # A token such as "</script>" in the embedded JSON must not end the element ("<\/" is "</" to JS).
    markup, script = scripts[0], scripts[1].rsplit("</script>", 1)[0].replace("</", "<\\/")
    loader = "".join(_amd_module(name) for name in ("d3", "jquery"))
    missing = "The view needs require.js, d3 and jQuery: they are not installed and could not be loaded from their CDN."
    # Wait for require.js only when it comes from a CDN (scripts added to a notebook load asynchronously).
    script = (
        f"(function whenRequire(tries) {{\n  if (typeof window.requirejs !== 'function') {{\n"
        f"    if (tries * 50 < {_REQUIRE_WAIT_MS}) {{ setTimeout(whenRequire, 50, tries + 1); }}\n"
        f"    else {{ document.getElementById({json.dumps(element_id)}).append({json.dumps(missing)}); }}\n"
        f"    return;\n  }}\n{loader}{script}\n}})(0);"
    )
    html = (
        f'<div id="{element_id}" class="bertology-view bertology-{kind}-view" data-level="{level}" '
        f'data-layers="{maps.shape[0]}" data-heads="{maps.shape[1]}" data-length="{maps.shape[2]}">\n'
        f"{script_tag('require')}\n{markup.strip()}\n<script>\n{script}\n</script>\n</div>"
    )
    return replace(view, html=html, element_id=element_id)


def head_view(
    source: _Source,
    model: _Model = None,
    *,
    level: str = "token",
    layer: int | None = None,
    heads: Sequence[int] | None = None,
    from_rule: str = "mean",
    element_id: str | None = None,
    decimals: int = 4,
) -> AttentionView:
    """bertviz's head view of one sentence or sentence pair, drawing offline.

    ``source`` is a text, a ``(text_a, text_b)`` pair, a data item (Sentence, SentencePair,
    a list of words) or an ItemAttention (e.g. ``store[i]``, which is word level unless the
    store kept tokens). ``model`` is a LoadedModel, a name or a folder (None: the default
    model). ``level`` is "token" or "word"; ``layer`` and ``heads`` (from 0) are the layer
    and heads selected at first. Weights are rounded to ``decimals``. ``element_id`` names
    the root ``<div>``; by default it is a hash of the content, so the same view gives the
    same HTML.
    """
    options = {"layer": layer, "heads": None if heads is None else [int(h) for h in heads]}
    return _bertviz_view("head", source, model, level, from_rule, element_id, decimals, options)


def model_view(
    source: _Source,
    model: _Model = None,
    *,
    level: str = "token",
    layers: Sequence[int] | None = None,
    heads: Sequence[int] | None = None,
    display_mode: str = "light",
    from_rule: str = "mean",
    element_id: str | None = None,
    decimals: int = 4,
) -> AttentionView:
    """bertviz's model view (every head of every layer as a thumbnail), drawing offline.

    Arguments as for :func:`head_view`; ``layers`` and ``heads`` (from 0) restrict the grid
    (fewer thumbnails draw faster for long inputs); ``display_mode`` is "light" or "dark".
    """
    options = {
        "include_layers": None if layers is None else [int(x) for x in layers],
        "include_heads": None if heads is None else [int(h) for h in heads],
        "display_mode": display_mode,
    }
    return _bertviz_view("model", source, model, level, from_rule, element_id, decimals, options)


# --------------------------------------------------------------------------- explorer


class _Items:
    """Items for the explorer by position: (label, ItemAttention) from a store (read on demand) or from memory."""

    def __init__(self, source: AttentionStore | Iterable[_Source], model: _Model, from_rule: str, limit: int) -> None:
        self.store: AttentionStore | None
        self.items: list[ItemAttention] | None
        if isinstance(source, AttentionStore):
            self.store, self.items = source, None
            rows = [
                (it.index, it.item_id, it.words, it.word_kinds) for it in itertools.islice(source.iter_items(), limit)
            ]
            self.has_tokens = any(s.has_tokens() for s in source.shards)
        else:
            given = list(source)[:limit]
            items = [it for it in given if isinstance(it, ItemAttention)]
            if len(items) < len(given):
                items = attention_for([_as_item(it) for it in given], model, keep_tokens=True, from_rule=from_rule)
            self.store, self.items = None, items
            rows = [(it.index, it.item_id, it.words, it.word_kinds) for it in items]
            self.has_tokens = bool(items) and all(it.token_attention is not None for it in items)
        if not rows:
            raise BertologyError("the explorer has no items to show (an empty or unextracted store?)")
        self.indices = [index for index, *_ in rows]
        self.labels = [f"{index}: {' '.join(_first_words(words, kinds))}" for index, _, words, kinds in rows]
        self._cached: ItemAttention | None = None

    def __getitem__(self, position: int) -> ItemAttention:
        if self.items is not None:
            return self.items[position]
        assert self.store is not None  # __init__ sets the store or the items
        if self._cached is None or self._cached.index != self.indices[position]:
            self._cached = self.store.get(self.indices[position])
        return self._cached


def _first_words(words: Sequence[str], kinds: Sequence[str] | np.ndarray, n: int = 7) -> list[str]:
    real = [w for w, kind in zip(words, kinds) if kind == WORD]
    return real[:n] + (["..."] if len(real) > n else [])


def png_output(fig: Figure) -> dict:
    """An Output-widget display record of a figure as PNG (set directly: works with or without a kernel).

    The PNG carries its measured text (:func:`~bertology_utils.core.figure_text.measured_png`) in its own bytes,
    where the page audit finds it: a widget's JavaScript draws the image, and no ``data-text-boxes`` with it.
    """
    png, text = measured_png(fig, dpi=fig.dpi)
    return {
        "output_type": "display_data",
        "metadata": {"image/png": {TEXT_KEY: json.loads(text.to_json())}},
        "data": {"image/png": base64.b64encode(png).decode("ascii"), "text/plain": "<attention map>"},
    }


@functools.cache
def _explorer_class() -> type:
    import ipywidgets as widgets

    class AttentionExplorer(widgets.VBox):
        """Sentence, layer, head and level controls above one attention map; see :func:`explorer`.

        ``current`` is the map drawn last, ``state`` what it shows (item index, layer and head
        from 0, level); ``output`` is the Output widget holding the PNG.
        """

        def __init__(self, items: _Items, *, level: str, layer: int, head: int, dpi: int) -> None:
            first = items[0]
            layers, heads = first.attention.shape[:2]
            levels = [lv for lv in ("word", "token") if lv == "word" or items.has_tokens]
            if level not in levels:
                raise BertologyError(
                    f"level {level!r} is not available here (available: {levels}); "
                    "token maps need a store extracted with keep_tokens, or items and a model"
                )
            for what, value, n in (("layer", layer, layers), ("head", head, heads)):
                if not 0 <= value < n:
                    raise ValueError(f"{what} {value} is out of range: the model has {n} (counted from 0)")
            self.items, self.dpi = items, dpi
            self.sentence = widgets.Dropdown(
                options=list(zip(items.labels, range(len(items.labels)))),
                value=0,
                description="sentence",
                style={"description_width": "initial"},  # the default width cuts "sentence" to "sente…"
                # within a slide narrower than 32em, its 2 px margins included
                layout=widgets.Layout(width="32em", max_width="calc(100% - 4px)"),
            )
            self.layer = widgets.IntSlider(
                value=layer + 1, min=1, max=layers, description="layer", continuous_update=False
            )
            self.head = widgets.IntSlider(value=head + 1, min=1, max=heads, description="head", continuous_update=False)
            self.level = widgets.ToggleButtons(
                options=levels, value=level, description="level", style={"button_width": "5em"}
            )
            self.output = widgets.Output()
            self.current: np.ndarray | None = None
            self.state: dict | None = None
            for control in (self.sentence, self.layer, self.head, self.level):
                control.observe(self.redraw, names="value")
            controls = widgets.HBox([self.layer, self.head, self.level], layout=widgets.Layout(flex_flow="row wrap"))
            super().__init__([self.sentence, controls, self.output])
            self.add_class("bertology-explorer")
            self.redraw()

        def redraw(self, _change: object = None) -> None:
            from matplotlib.figure import Figure

            item = self.items[self.sentence.value]
            maps, labels, segments = _maps(item, self.level.value)
            layer, head = self.layer.value - 1, self.head.value - 1
            self.current = np.asarray(maps[layer, head], dtype=np.float32)
            self.state = {"index": item.index, "layer": layer, "head": head, "level": self.level.value}
            side = max(3.0, 0.3 * len(labels) + 1.5)
            # A Figure outside pyplot: nothing for the inline backend to display a second time.
            fig = Figure(figsize=(side + 1, side), dpi=self.dpi)
            ax = plot_attention_map(
                self.current,
                labels,
                ax=fig.add_subplot(),
                title=f"{item.item_id}: layer {layer + 1}, head {head + 1} ({self.level.value}s)",
            )
            for boundary in (np.flatnonzero(np.diff(segments)) + 1).tolist():
                ax.axhline(boundary, color="red", linewidth=1)
                ax.axvline(boundary, color="red", linewidth=1)
            self.output.outputs = (png_output(fig),)

    return AttentionExplorer


def explorer(
    source: AttentionStore | Iterable[_Source],
    model: _Model = None,
    *,
    level: str = "word",
    layer: int = 0,
    head: int = 0,
    from_rule: str = "mean",
    max_items: int = 200,
    dpi: int = 80,
) -> Any:  # an AttentionExplorer, a class built when ipywidgets is first needed
    """An ipywidgets panel to browse attention maps by sentence, layer and head.

    ``source`` is an AttentionStore (read item by item; token level only if it was
    extracted with ``keep_tokens``), a list of ItemAttention, or items (a Corpus, Sentences,
    pairs) that ``model`` is run on (both levels). At most ``max_items`` items are offered.
    ``layer`` and ``head`` (from 0) are shown first; the sliders count from 1. Returns an
    :class:`AttentionExplorer` (an ipywidgets VBox with the class ``bertology-explorer``).
    """
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}, not {level!r}")
    items = _Items(source, model, from_rule, max_items)
    return _explorer_class()(items, level=level, layer=int(layer), head=int(head), dpi=dpi)


def __getattr__(name: str) -> type:  # AttentionExplorer is built lazily: ipywidgets is imported only when used
    if name == "AttentionExplorer":
        return _explorer_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --------------------------------------------------------------------------- neuron view


@dataclass(frozen=True)
class NeuronView:
    """How one head's attention from one query token comes about (Vig, 2019).

    ``scores = products.sum(-1) * scaling + bias`` and ``attention = softmax(scores)``;
    ``model_attention`` is the row the model itself computed in the same forward pass.
    """

    tokens: tuple[str, ...]
    layer: int  #: from 0
    head: int  #: from 0
    query_index: int  #: the attending token, from 0
    query: np.ndarray  #: (head_dim,) the query vector of that token
    keys: np.ndarray  #: (tokens, head_dim) the key vector of every token
    products: np.ndarray  #: (tokens, head_dim) query * key, elementwise
    scaling: float  #: 1 / sqrt(head_dim)
    bias: np.ndarray  #: (tokens,) added to the scores: attention mask, MPNet's relative position bias
    scores: np.ndarray  #: (tokens,)
    attention: np.ndarray  #: (tokens,) softmax of the scores
    model_attention: np.ndarray  #: (tokens,) the model's own attention for this head and query

    def figure(self, *, max_dims: int | None = None) -> Figure:
        """q*k per key and dimension (diverging colours), then the scores and the attention per key."""
        import matplotlib.pyplot as plt
        import seaborn as sns

        products = self.products if max_dims is None else self.products[:, :max_dims]
        n, dims = products.shape
        height = max(3.0, 0.3 * n + 1.5)
        fig = plt.figure(figsize=(min(0.18 * dims, 14) + 6.5, height))
        grid = fig.add_gridspec(1, 4, width_ratios=[max(dims / 8, 3), 1, 1, 0.12])
        ax_p = fig.add_subplot(grid[0])
        ax_s, ax_a = fig.add_subplot(grid[1], sharey=ax_p), fig.add_subplot(grid[2], sharey=ax_p)
        limit = max(float(np.abs(products).max()), 1e-9)
        # The colour bar goes last, so the three panels keep the same height and their rows line up.
        sns.heatmap(
            products,
            ax=ax_p,
            cbar_ax=fig.add_subplot(grid[3]),
            cmap="RdBu_r",
            center=0,
            vmin=-limit,
            vmax=limit,
            yticklabels=self.tokens,
            xticklabels=max(1, dims // 16),
            cbar_kws={"label": "query x key (left panel)"},
        )
        ax_s.tick_params(labelleft=False)
        ax_a.tick_params(labelleft=False)
        ax_p.set(
            xlabel="dimension of the head",
            ylabel="key token",
            title=f"query: {self.tokens[self.query_index]!r} (token {self.query_index})",
        )
        rows = np.arange(n) + 0.5
        ax_s.barh(rows, self.scores, color=np.where(self.scores >= 0, "tab:red", "tab:blue"))
        ax_s.axvline(0, color="grey", linewidth=0.8)
        ax_s.set(xlabel="score (q·k / √d + bias)", title="scores")
        ax_a.barh(rows, self.attention, color="tab:blue")
        ax_a.set(xlabel="attention", xlim=(0, 1), title="softmax")
        fig.suptitle(f"layer {self.layer + 1}, head {self.head + 1} (counted from 1)")
        fig.tight_layout()
        return fig

    def save(self, path: str | os.PathLike, *, dpi: int = DEFAULT_DPI, max_dims: int | None = None) -> Path:
        """Write :meth:`figure` as ``.png``, ``.svg`` or ``.pdf`` by the suffix of ``path``; returns the path."""
        image_format(path)  # an unknown suffix fails before the figure is drawn
        return save_and_close(self.figure(max_dims=max_dims), path, dpi)


def neuron_view(
    source: _Source, model: _Model = None, *, layer: int = 0, head: int = 0, query: int | str | None = None
) -> NeuronView:
    """Query, keys, their elementwise products, scores and softmax for one head and query token.

    ``source`` is a text, a ``(text_a, text_b)`` pair or a data item; ``layer``, ``head`` and
    ``query`` count from 0 (``query`` may also be a token string: its first occurrence; None:
    the first token of the first word). The vectors are captured during the model's own forward
    pass by :func:`bertology_utils.interventions.query_key.capture_query_key` (forward hooks on
    the layer's query and key projections); the scores add
    whatever the layer adds before its softmax (attention mask, MPNet's position bias). A
    model whose attention is not reproduced by them (to 1e-4) raises ModelNotAvailableError.
    """
    loaded = LoadedModel.of(model)
    if not 0 <= layer < loaded.num_layers or not 0 <= head < loaded.num_heads:
        raise ValueError(
            f"layer {layer}, head {head} out of range: {loaded.name} has {loaded.num_layers} layers "
            f"x {loaded.num_heads} heads (counted from 0)"
        )
    module = self_attention_modules(loaded)[layer]
    with capture_query_key(loaded, layers=[layer]) as qk, capture_attention(loaded, retain_grad=False) as captured:
        item = attention_for([_as_item(source)], loaded, keep_tokens=True)[0]
    assert item.tokens is not None and item.token_to_word is not None  # keep_tokens=True keeps them
    tokens = tuple(item.tokens)
    if query is None:
        query = int(np.flatnonzero(np.asarray(item.word_kinds)[item.token_to_word] == WORD)[0])
    elif isinstance(query, str):
        if query not in tokens:
            raise BertologyError(f"token {query!r} is not among the tokens {list(tokens)}")
        query = tokens.index(query)
    if not 0 <= query < len(tokens):
        raise ValueError(f"query {query} out of range: the input has {len(tokens)} tokens (counted from 0)")

    scaling = qk.scaling[layer]
    q, k = qk.queries[layer][0, head, query].float(), qk.keys[layer][0, head].float()
    products = q[None, :] * k
    bias = qk.bias(layer)[0, head, query]  # attention mask, MPNet's relative position bias
    scores = products.sum(-1) * scaling + bias
    attention = torch.softmax(scores, -1)
    own = captured.probs[layer][0, head, query].float()
    if not torch.allclose(attention, own, atol=1e-4):
        raise ModelNotAvailableError(
            f"{type(module).__name__}: softmax(q·k) differs from the model's own attention by "
            f"{(attention - own).abs().max():.1e}; this architecture changes its scores in a way the neuron view "
            "does not model"
        )
    as_np = lambda t: t.cpu().numpy()  # noqa: E731
    return NeuronView(
        tokens=tokens,
        layer=layer,
        head=head,
        query_index=query,
        query=as_np(q),
        keys=as_np(k),
        products=as_np(products),
        scaling=scaling,
        bias=as_np(bias),
        scores=as_np(scores),
        attention=as_np(attention),
        model_attention=as_np(own),
    )
