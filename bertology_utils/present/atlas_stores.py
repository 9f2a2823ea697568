"""What the head atlas reads from a run's attention stores: the model's shape, the cards' pattern images and
the head-to-head matches between runs.

The atlas's columns come from the notebooks' ``metrics.json`` (:mod:`~bertology_utils.present.atlas`); the
only thing it computes itself are these small images and matches, from a store a notebook already wrote
(``00_tour``'s by default). zarr, and the clustering the matches use, are imported only when needed.
"""

from __future__ import annotations

import base64
from pathlib import Path

import numpy as np

from bertology_utils.core.errors import BertologyError

__all__ = ["MAP_POSITIONS", "pattern_store", "store_shape", "resample_word_maps", "pattern_images", "match_heads"]

#: The word positions of a card's mean pattern image.
MAP_POSITIONS = 12
_EXAMPLES = 2  # short sentences whose own maps a card shows beside the mean
_MAP_ITEMS = 64  # sentences averaged at most for a head's mean pattern: bounded, whatever the store holds


def pattern_store(folder: Path) -> Path | None:
    """The store the cards' pattern images come from: the tour's, else any store the run wrote.

    :param folder: a run folder (one sub-folder per notebook).
    :returns: the store's path, or None when the run wrote none.
    """
    stores = sorted(folder.glob("00_*/*.zarr")) + sorted(folder.glob("*/*.zarr"))
    return stores[0] if stores else None


def store_shape(path: Path | None) -> tuple[int, int] | None:
    """(layers, heads) from a store's metadata: for a run whose notebooks did not record the shape.

    :param path: a store, or None.
    :returns: (L, H), or None when there is no store or its metadata cannot be read.
    """
    if path is None:
        return None
    from bertology_utils.attention.store import AttentionStore  # zarr: only when needed

    try:
        model = AttentionStore.open(path).metadata["model"]
        return int(model["num_layers"]), int(model["num_heads"])
    except (OSError, KeyError, TypeError, ValueError, BertologyError):
        return None


def resample_word_maps(attention: np.ndarray, size: int) -> np.ndarray:
    """Word maps of any length onto ``size`` relative positions, so sentences of different lengths average.

    The first and last pseudo-words keep their own row and column; the words between are binned by
    relative position (rows averaged within a bin, columns summed, so each row still sums to what it
    summed to).

    :param attention: word maps, (L, H, W, W).
    :param size: the positions of the result (at least 3).
    :returns: (L, H, size, size).
    """
    n = attention.shape[-1]
    inner = np.minimum(((np.arange(1, n - 1) - 1) * (size - 2)) // max(n - 2, 1), size - 3) + 1
    bins = np.concatenate([[0], inner, [size - 1]])
    member = np.zeros((n, size))
    member[np.arange(n), bins] = 1.0
    counts = member.sum(0)
    summed = np.einsum("ia,lhij,jb->lhab", member, attention, member)
    return summed / np.where(counts > 0, counts, 1.0)[:, None]


def _encode(maps: np.ndarray) -> str:
    """Maps with values in [0, 1] as base64 uint8 (what the page and the widget decode)."""
    return base64.b64encode(np.clip(np.rint(maps * 255), 0, 255).astype(np.uint8).tobytes()).decode("ascii")


def pattern_images(store: Path | None, shape: tuple[int, int]) -> tuple[dict | None, str]:
    """The cards' images: the mean word map over up to 64 stored sentences, resampled onto
    :data:`MAP_POSITIONS` positions, and two short sentences' own maps.

    :param store: the run's store (:func:`pattern_store`), or None.
    :param shape: the run's (L, H); sentences stored for another shape are left out.
    :returns: the images as the page's payload holds them (each map base64 uint8), and ``""``; or None and why
        there are none.
    """
    if store is None:
        return None, "no attention store in this run (notebook 00 writes one): no pattern images"
    from bertology_utils.attention.store import AttentionStore  # zarr: only when images are made

    try:
        opened = AttentionStore.open(store)
        done = np.flatnonzero(opened.status() == 0)
        items = [opened.get(int(i)) for i in done[:_MAP_ITEMS]]
    except (OSError, ValueError, KeyError, BertologyError) as exc:
        return None, f"the store {store.name} could not be read ({exc}): no pattern images"
    items = [it for it in items if it.attention.shape[:2] == shape]
    long_enough = [it for it in items if it.n_words >= MAP_POSITIONS]
    if not long_enough:
        return None, f"no stored sentence has {MAP_POSITIONS} or more words: no pattern images"
    mean = np.mean([resample_word_maps(it.attention.astype(np.float64), MAP_POSITIONS) for it in long_enough], axis=0)
    first, last = long_enough[0].words[0], long_enough[0].words[-1]
    labels = [first, *(f"w{i}" for i in range(1, MAP_POSITIONS - 1)), last]
    shortest = sorted(items, key=lambda it: (abs(it.n_words - MAP_POSITIONS), it.index))[:_EXAMPLES]
    return {
        "note": f"mean of {len(long_enough)} sentences of {store.parent.name}'s store, each resampled onto "
        f"{MAP_POSITIONS} relative word positions",
        "mean": {"size": MAP_POSITIONS, "labels": labels, "data": _encode(mean)},
        "examples": [{"words": list(it.words), "data": _encode(it.attention.astype(np.float64))} for it in shortest],
    }, ""


def match_heads(first: Path | None, second: Path | None, heads: tuple[int, int]) -> tuple[dict, str]:
    """For each head of one run, the head of another with the closest attention: the Jensen-Shannon distance
    summed over the sentences both stores hold (Clark et al. 2019, "What Does BERT Look At?",
    https://arxiv.org/abs/1906.04341).

    :param first: the first run's store, or None.
    :param second: the second run's store, or None.
    :param heads: the heads per layer of the first run and of the second.
    :returns: ``{"layer-head": ["layer-head", distance]}`` (numbered from 1) and ``""``; or {} and why not.
    """
    if first is None or second is None:
        return {}, "a run has no attention store to compare heads on"
    from bertology_utils.analyses.clustering.distances import head_distances
    from bertology_utils.attention.store import AttentionStore

    a, b = AttentionStore.open(first), AttentionStore.open(second)
    if a.metadata["corpus"].get("sha256") != b.metadata["corpus"].get("sha256"):
        return {}, "the runs' stores hold different sentences: no head-to-head match"
    both = np.flatnonzero((a.status() == 0) & (b.status() == 0))
    try:
        distances = head_distances(a, b, indices=both.tolist())
    except ValueError as exc:  # the words of an item differ between the two models
        return {}, f"the runs' stores cannot be compared ({exc})"
    cross = distances.block(0, 1)
    best = cross.argmin(1)
    mine, theirs = heads
    return {
        f"{i // mine + 1}-{i % mine + 1}": [f"{j // theirs + 1}-{j % theirs + 1}", float(cross[i, j])]
        for i, j in enumerate(best)
    }, ""
