"""A view of one item's context-mixing maps under several methods side by side, as heatmaps labelled with its
words (the maps :func:`bertology_utils.interventions.mixing.mixing_for` computes)."""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from bertology_utils.attention.word_attention import ItemAttention
from bertology_utils.core.errors import BertologyError
from bertology_utils.core.figures import DEFAULT_DPI, image_format
from bertology_utils.present.views import png_output, save_and_close

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["MixingView", "mixing_view"]


@dataclass(frozen=True)
class MixingView:
    """One item's context-mixing maps side by side, as heatmaps labelled with its words; see :func:`mixing_view`."""

    maps: Mapping[str, ItemAttention] = field(repr=False)  #: title -> the item's maps under one method
    layer: int  #: the layer shown, from 0 (-1: the last)

    def figure(self) -> Figure:
        """The heatmaps (heads averaged), drawn by :func:`bertology_utils.interventions.mixing.plot_side_by_side`."""
        from bertology_utils.interventions.mixing.plots import plot_side_by_side  # the package imports scipy

        return plot_side_by_side(self.maps, self.layer)

    def _repr_png_(self) -> bytes:
        import matplotlib.pyplot as plt

        fig = self.figure()
        try:
            return base64.b64decode(png_output(fig)["data"]["image/png"])
        finally:
            plt.close(fig)

    def save(self, path: str | os.PathLike, *, dpi: int = DEFAULT_DPI) -> Path:
        """Write :meth:`figure` as ``.png``, ``.svg`` or ``.pdf`` by the suffix of ``path``; returns the path."""
        image_format(path)
        return save_and_close(self.figure(), path, dpi)


def mixing_view(maps: Mapping[str, ItemAttention], *, layer: int = -1) -> MixingView:
    """The context-mixing maps of one item under several methods, e.g. ``{"rollout": mixing_for(items,
    model)["rollout"][0], ...}``, at ``layer`` (from 0; -1: the last). Any one of them is also an
    ItemAttention that :func:`~bertology_utils.present.views.head_view` and
    :func:`~bertology_utils.present.views.model_view` take (``level="word"``)."""
    if not maps:
        raise BertologyError("mixing_view needs at least one map: {title: ItemAttention}")
    words = {tuple(item.words) for item in maps.values()}
    if len(words) != 1:
        raise BertologyError(f"the maps of a mixing view must be of one item; got {len(words)} different word lists")
    layers = next(iter(maps.values())).attention.shape[0]
    if not -layers <= layer < layers:
        raise ValueError(f"layer {layer} out of range: the maps have {layers} layers (counted from 0)")
    return MixingView(dict(maps), layer)
