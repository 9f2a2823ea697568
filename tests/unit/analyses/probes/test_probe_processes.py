"""fit_probes in processes (its choice on a GPU, where threads take turns at a step's host Python): on the CPU,
forced, every fit is the one a thread gives, bit for bit, with its epochs shown and its word lookups counted here."""

import pickle

import numpy as np
import pytest
import torch
from synthetic_probes import synthetic, vectors

from bertology_utils.analyses.probes import (
    AttentionProbe,
    AttentionWordsProbe,
    DistanceWordsProbe,
    ProbeData,
    RightBranching,
    fit_probes,
    fitting,
)
from bertology_utils.analyses.word_vectors import StaticVectors
from bertology_utils.core.errors import BertologyError

FAST = dict(lr=0.1, max_epochs=4, patience=2, batch_size=8)
MADE = {
    "attn": lambda: AttentionProbe(**FAST),
    "words": lambda: AttentionWordsProbe(**FAST),
    "distances": lambda: DistanceWordsProbe(hidden_size=8, **FAST),
    "right": RightBranching,
}


def _fitted(processes, **kwargs):
    full = vectors()  # w0..w29; a third of the words unknown, so that the unknown share means something
    vecs = StaticVectors(list(full.index)[:20], full.matrix[:20], description="two thirds of the test vectors")
    train, dev = synthetic(40, 1, vectors=vecs), synthetic(16, 2, vectors=vecs)
    given = {name: make() for name, make in MADE.items()}
    fitted = fit_probes(
        {name: (probe, train, dev) for name, probe in given.items()}, n_jobs=2, processes=processes, **kwargs
    )
    assert all(fitted[name] is given[name] for name in MADE)  # fitted in place, as threads do
    return fitted, (vecs.lookups, vecs.unknown), dev


def test_probes_fitted_in_processes_are_those_fitted_in_threads_bit_for_bit():
    threads, (thread_lookups, thread_unknown), dev = _fitted(False, progress=False)
    processes, (process_lookups, process_unknown), _ = _fitted(True, progress=False)
    for name in MADE:
        if name == "right":
            continue
        assert [{k: v for k, v in row.items() if k != "seconds"} for row in processes[name].history_] == [
            {k: v for k, v in row.items() if k != "seconds"} for row in threads[name].history_
        ]
        assert processes[name].best_epoch_ == threads[name].best_epoch_
        assert processes[name].device_ == torch.device("cpu")
        for key, value in threads[name].module_.state_dict().items():
            torch.testing.assert_close(processes[name].module_.state_dict()[key], value, rtol=0, atol=0)
    for name in MADE:
        assert [p.tolist() for p in processes[name].predict(dev)] == [p.tolist() for p in threads[name].predict(dev)]
    # The lookups the processes made are counted here. Each process looks its data's words up itself (threads share
    # the blocks one of them prepared), so there are more of them, the same share unknown.
    assert process_lookups >= thread_lookups > 0 and thread_unknown > 0
    assert process_unknown / process_lookups == pytest.approx(thread_unknown / thread_lookups)


def test_a_fit_in_a_process_shows_its_epochs_here(monkeypatch):
    bars = {}

    class Bar:
        def __init__(self, total, desc, unit, disable):
            self.desc, self.n, self.postfix, self.disable = desc, 0, None, disable
            bars[desc] = self

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def update(self):
            self.n += 1

        def set_postfix(self, postfix):
            self.postfix = postfix

    monkeypatch.setattr(fitting, "tqdm", Bar)
    fitted, _, _ = _fitted(True, progress=True)
    for name in ("attn", "words", "distances"):
        bar = bars[f"probe {name}"]
        assert not bar.disable and bar.n == len(fitted[name].history_) > 0
        assert set(bar.postfix) == {"train_loss", "dev_uas"}


def test_processes_are_chosen_where_two_probes_fit_off_the_cpu(monkeypatch):
    started = []

    class Started(Exception):
        pass

    class Recorder:
        def __init__(self, workers, progress):
            started.append(workers)

        def __enter__(self):
            raise Started

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(fitting, "_ProcessFits", Recorder)
    train = synthetic(10, 1)
    two = lambda: {name: (AttentionProbe(max_epochs=1), train, None) for name in "ab"}  # noqa: E731
    fit_probes(two())
    assert started == []  # on the CPU, threads
    with pytest.raises(Started):  # the meta device stands in for a GPU
        fit_probes(two(), device="meta", n_jobs=2, progress=False)
    assert started == [2]
    with pytest.raises((RuntimeError, NotImplementedError), match="meta"):  # one probe alone: its thread, on meta
        fit_probes({"a": two()["a"]}, device="meta", progress=False)
    assert started == [2]


def test_data_that_cannot_travel_to_a_process_get_a_clear_error():
    vecs = vectors()
    vecs.normalise = lambda word: word.lower()  # a user's table holding a function: it does not pickle
    train = synthetic(10, 1, vectors=vecs)
    jobs = {name: (AttentionWordsProbe(max_epochs=1), train, None) for name in "ab"}
    with pytest.raises(BertologyError, match=r"could not be sent to a process.*processes=False"):
        fit_probes(jobs, processes=True, n_jobs=2, progress=False)


def test_probe_data_and_vectors_travel_without_their_kept_blocks_and_locks():
    data = synthetic(20, 1, vectors=vectors())
    list(data.batches(8, attention=True, vectors=True))
    list(data.batches(8, attention=True, vectors=True, device="cpu"))
    assert data._cache and data._device_cache
    copy = pickle.loads(pickle.dumps(data))
    assert isinstance(copy, ProbeData) and copy._cache == {} and copy._device_cache == {}
    assert copy._cached_bytes == copy._device_bytes == 0
    assert copy.vectors.lookups == data.vectors.lookups and copy.vectors._lock is not data.vectors._lock
    for a, b in zip(copy.batches(8, attention=True, vectors=True), data.batches(8, attention=True, vectors=True)):
        assert torch.equal(a.maps, b.maps) and torch.equal(a.vectors, b.vectors)
    np.testing.assert_array_equal(copy.indices, data.indices)


def test_probes_on_a_store_with_the_models_vectors_fit_in_processes_and_are_cached(tiny_model_dirs, tmp_path):
    from bertology_utils.analyses.word_vectors import ModelEmbeddingVectors
    from bertology_utils.attention.extraction import extract_attention
    from bertology_utils.core.models import load_model
    from bertology_utils.data import load_sample

    corpus = load_sample()[:12]
    loaded = load_model(tiny_model_dirs["bert"])
    store = extract_attention(corpus, tmp_path / "bert.zarr", loaded, progress=False)
    data = ProbeData(corpus, store, ModelEmbeddingVectors(loaded), block_size=5)

    def jobs():
        return {name: (make(), data, data) for name, make in MADE.items() if name != "words"}

    threads = fit_probes(jobs(), processes=False, progress=False)
    apart = fit_probes(jobs(), processes=True, cache=True, cache_dir=tmp_path / "probes", progress=False)
    again = fit_probes(jobs(), processes=True, cache=True, cache_dir=tmp_path / "probes", progress=False)
    for name in ("attn", "distances"):
        assert not apart[name].from_cache_ and again[name].from_cache_
        for fitted in (apart[name], again[name]):
            for key, value in threads[name].module_.state_dict().items():
                torch.testing.assert_close(fitted.module_.state_dict()[key], value, rtol=0, atol=0)
