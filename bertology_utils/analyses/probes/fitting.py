"""Fitting several probes side by side, and the disk cache of fitted probes.

The probes are those of Clark et al. (2019, `What Does BERT Look At? <https://arxiv.org/abs/1906.04341>`_,
Section 5 and Table 3).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch

from bertology_utils.analyses.probes.data import ProbeData
from bertology_utils.analyses.probes.estimators import ProbeBase, TrainedProbe
from bertology_utils.core import settings
from bertology_utils.core.cache import cached, entry_name
from bertology_utils.core.threads import torch_threads

__all__ = ["PROBE_VERSION", "fit_probes"]


def fit_probes(
    jobs: Mapping[str, tuple[ProbeBase, ProbeData, ProbeData | None]],
    *,
    n_jobs: int | None = None,
    cache: bool = False,
    cache_dir: str | os.PathLike | None = None,
    progress: bool = True,
    device: str | torch.device | None = None,
) -> dict[str, ProbeBase]:
    """Fit several probes side by side: ``{name: (probe, train, dev)}`` -> ``{name: fitted probe}``.

    Each probe trains on one torch thread (its ``n_jobs`` must be 1 or None), ``n_jobs`` of them
    at a time in threads (None: torch's thread count, one per core unless the process was given
    fewer, as ``bertology run --jobs`` does), in the order given: put the slowest first. Every
    fit is the one ``probe.fit(train, dev=dev)`` would give alone (same seed, same data order,
    same thread count), and probes on the same :class:`ProbeData` share its prepared blocks.
    The probes are fitted in place and returned by name. With ``device`` every trained probe fits
    there (its ``device`` parameter is set); on a GPU they share it, each from its own thread.

    With ``cache``, a trained probe is stored (weights in safetensors, the rest in JSON) under
    ``cache_dir`` (default ``$BERTOLOGY_CACHE_DIR/probes``), keyed by its class and parameters,
    the fingerprints of its train and dev data (:meth:`ProbeData.fingerprint`: corpus, attention
    store, word vectors), the device's type when it is not the CPU (a GPU's fit differs in the last
    digits) and :data:`PROBE_VERSION`; a later call with the same key loads it
    (``from_cache_`` is True) instead of training. Probes whose data have no fingerprint are
    trained every time; a corrupt entry is trained again with a
    :class:`~bertology_utils.core.cache.CacheWarning`.

    :param jobs: ``{name: (probe, train, dev)}``; ``dev`` may be None.
    :param n_jobs: probes fitted at a time; None: torch's thread count.
    :param cache: read and store trained probes on disk.
    :param cache_dir: where; ``$BERTOLOGY_CACHE_DIR/probes`` by default.
    :param progress: a bar of each trained probe's epochs, labelled with its name (none for a probe
        read from the cache).
    :param device: where every trained probe fits (``"cuda"``, a model's ``device``...); None: each
        probe's own ``device``.
    :returns: ``{name: fitted probe}``, the probes given, fitted in place.
    """
    for name, (probe, _, _) in jobs.items():
        if getattr(probe, "n_jobs", None) not in (1, None):
            raise ValueError(
                f"{name}: fit_probes trains each probe on one thread; set its n_jobs to 1, not {probe.n_jobs}"
            )
    workers = torch.get_num_threads() if n_jobs is None else int(n_jobs)
    if workers < 1:
        raise ValueError(f"n_jobs must be at least 1 or None, not {n_jobs}")
    root = Path(cache_dir) if cache_dir is not None else settings.cache_dir() / "probes"
    if device is not None:
        for probe, _, _ in jobs.values():
            if isinstance(probe, TrainedProbe):
                probe.set_params(device=device)

    def fit(name: str, probe: ProbeBase, train: ProbeData, dev: ProbeData | None) -> ProbeBase:
        if not isinstance(probe, TrainedProbe):
            return probe.fit(train, dev=dev)
        train_it = functools.partial(probe.fit, train, dev=dev, progress=progress, desc=f"probe {name}")
        entry = _cache_entry(root, probe, train, dev) if cache else None
        if entry is None:
            return train_it()
        _, probe.from_cache_ = cached(
            *entry,
            train_it,
            TrainedProbe.save_fitted,
            lambda folder: probe.load_fitted(folder, train),
        )
        return probe

    with torch_threads(1), ThreadPoolExecutor(max_workers=min(workers, max(len(jobs), 1))) as pool:
        futures = {name: pool.submit(fit, name, probe, train, dev) for name, (probe, train, dev) in jobs.items()}
        return {name: future.result() for name, future in futures.items()}


#: Bump when training changes in a way that changes fitted probes: old cache entries stop matching.
PROBE_VERSION = 1


def _cache_entry(
    root: Path, probe: TrainedProbe, train: ProbeData, dev: ProbeData | None
) -> tuple[Path, dict[str, Any]] | None:
    """Folder and key of ``probe`` fitted on ``train`` (choosing its epoch on ``dev``); None: not cacheable.

    The key names the probe's class, not its module, and the entry holds no pickle: moving the code keeps entries valid.
    """
    uses = {"attention": probe.uses_attention, "vectors": probe.uses_vectors}
    data = {"train": train.fingerprint(**uses), "dev": None if dev is None else dev.fingerprint(**uses)}
    if data["train"] is None or (dev is not None and data["dev"] is None):
        return None
    # Threads do not change the fit; a CPU fit's key names no device (the keys of the fits before there was one).
    params = {k: v for k, v in probe.get_params().items() if k not in ("n_jobs", "device")}
    key = {
        "probe": type(probe).__name__,
        "params": params,
        **data,
        "version": PROBE_VERSION,
        "torch": torch.__version__,
    }
    if (device := probe._fit_device()).type != "cpu":
        key["device"] = device.type
    return root / entry_name(f"{type(probe).__name__}-{train.name}", key), key
