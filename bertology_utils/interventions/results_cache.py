"""The results cache: arrays a model computed on some data, stored under ``$BERTOLOGY_CACHE_DIR/results``.

Logits of gate configurations, head importances and attributions, trained L0 gates, ablation curves
and word-level references cost minutes and depend only on the model's weights, the data and the
settings; with ``cache=True`` they are stored (npz, no pickle) and read back by a later run that
asks for the same, so a re-run of a notebook redoes only the cheap steps.

* :func:`cached_results` — a dict of arrays, keyed by the weights, a digest of the data, the
  caller's fields, :data:`RESULTS_VERSION`, torch's version and the model's precision;
* :func:`cached_tables` — tables, under the same key;
* :func:`cached_result` — one array computed on a :class:`~bertology_utils.interventions.dev_sets.DevSet`
  (an entry of :func:`cached_results` named after the task, so the two share one layout).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import torch

from bertology_utils.core import settings
from bertology_utils.core.cache import cached_arrays, cached_frames, entry_name
from bertology_utils.core.models import LoadedModel
from bertology_utils.interventions.dev_sets import DevSet

__all__ = ["RESULTS_VERSION", "cached_results", "cached_result", "cached_tables"]

#: Bump when gating or scoring changes what it computes: stored logits and importances stop matching.
RESULTS_VERSION = 1


def cached_results(
    label: str, loaded: LoadedModel, data: str, fields: dict, compute: Callable[[], dict], cache: bool
) -> dict[str, np.ndarray]:
    """``compute()``, arrays computed by ``loaded`` on the data whose digest is ``data``, with ``fields``;
    stored under ``$BERTOLOGY_CACHE_DIR/results`` and reused with ``cache``.

    :param label: the entry's name (a readable prefix of its file name).
    :param loaded: the model: its weights (not its name) and precision are part of the key.
    :param data: a digest of the data ``compute`` reads.
    :param fields: the caller's settings that change the result (JSON-able).
    :param compute: makes the arrays, name -> array.
    :param cache: read a stored entry with the same key, or store this one; without it, just ``compute()``.
    :returns: name -> array.
    """
    if not cache:
        return {name: np.asarray(value) for name, value in compute().items()}
    key = _key(loaded, data, fields)
    return cached_arrays(settings.cache_dir() / "results" / entry_name(label, key), key, compute)[0]


def cached_tables(
    label: str,
    loaded: LoadedModel,
    data: str,
    fields: dict,
    compute: Callable[[], dict[str, pd.DataFrame]],
    cache: bool,
) -> dict[str, pd.DataFrame]:
    """:func:`cached_results` for tables (:func:`~bertology_utils.core.cache.cached_frames`), under the same key.

    :param label: the entry's name.
    :param loaded: the model.
    :param data: a digest of the data ``compute`` reads.
    :param fields: the caller's settings that change the result.
    :param compute: makes the tables, name -> table.
    :param cache: read or store the entry.
    :returns: name -> table.
    """
    if not cache:
        return compute()
    key = _key(loaded, data, fields)
    return cached_frames(settings.cache_dir() / "results" / entry_name(label, key), key, compute)[0]


def _key(loaded: LoadedModel, data: str, fields: dict) -> dict:
    """A results entry's key: the weights, the data's digest, the caller's fields, the versions and the precision."""
    return {
        "model": loaded.weights_fingerprint(),
        "dev": data,
        **fields,
        "version": RESULTS_VERSION,
        "torch": torch.__version__,
        **loaded.precision_key(),
    }


def cached_result(
    label: str, loaded: LoadedModel, dev: DevSet, fields: dict, compute: Callable[[], np.ndarray], cache: bool
) -> np.ndarray:
    """``compute()``, an array computed by ``loaded`` on ``dev`` with ``fields``; stored and reused with ``cache``
    (an entry of :func:`cached_results` named after ``label`` and the task, keyed by ``dev``'s fingerprint).

    :param label: the entry's name and its one array's.
    :param loaded: the model.
    :param dev: the encoded dev set ``compute`` reads.
    :param fields: the caller's settings that change the result.
    :param compute: makes the array.
    :param cache: read or store the entry.
    :returns: the array.
    """
    digest = dev.fingerprint() if cache else ""  # it reads every batch back from the device: only for a key
    return cached_results(f"{label}-{dev.task}", loaded, digest, fields, lambda: {label: compute()}, cache)[label]
