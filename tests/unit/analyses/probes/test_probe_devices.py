"""The probes' ``device``: a CPU fit is today's fit bit for bit, one seed gives one start everywhere, the
weights on disk are CPU tensors, and a fit elsewhere reads nothing back from its device inside an epoch.

Without a GPU, the "meta" device (tensors with shapes and no values) stands in for one: any tensor
left on the CPU fails the first operation that mixes it with the device's, and the first value read
back fails, so where a meta fit fails is the first place a GPU fit would wait for its device.
"""

import dataclasses
import traceback

import numpy as np
import pytest
import safetensors.torch
import torch
from synthetic_probes import synthetic, vectors

from bertology_utils.analyses.probes import (
    AttentionProbe,
    AttentionWordsProbe,
    DistanceWordsProbe,
    ProbeData,
    fit_probes,
)
from bertology_utils.analyses.probes import data as data_module
from bertology_utils.core.errors import BertologyError

FAST = dict(lr=0.1, max_epochs=3, batch_size=8)
PROBES = {
    "attn": lambda **kw: AttentionProbe(**{**FAST, **kw}),
    "words": lambda **kw: AttentionWordsProbe(**{**FAST, **kw}),
    "distances": lambda **kw: DistanceWordsProbe(hidden_size=8, **{**FAST, **kw}),
}


@pytest.fixture(scope="module")
def data():
    vecs = vectors()
    return synthetic(30, 1, vectors=vecs), synthetic(12, 2, vectors=vecs)


def _state(probe):
    return {k: v.detach() for k, v in probe.module_.state_dict().items()}


def _first_read(call):
    """The project's deepest frame where ``call`` failed: on the meta device, the first value read back."""
    with pytest.raises((RuntimeError, NotImplementedError), match="meta") as failure:
        call()
    return [frame for frame in traceback.extract_tb(failure.tb) if "bertology_utils" in frame.filename][-1]


@pytest.mark.parametrize("name", PROBES)
def test_device_none_and_the_cpu_give_the_same_fit_bit_for_bit(name, data):
    train, dev = data
    default = PROBES[name]().fit(train, dev=dev)
    probe = PROBES[name]()
    on_cpu = fit_probes({name: (probe, train, dev)}, device="cpu", progress=False)[name]
    assert on_cpu is probe and probe.device == "cpu" and probe.device_ == torch.device("cpu")
    assert default.device is None and default.device_ == torch.device("cpu")
    assert [{k: v for k, v in row.items() if k != "seconds"} for row in on_cpu.history_] == [
        {k: v for k, v in row.items() if k != "seconds"} for row in default.history_
    ]
    for key, value in _state(default).items():
        torch.testing.assert_close(_state(on_cpu)[key], value, rtol=0, atol=0)
    assert on_cpu.score(dev) == default.score(dev)
    if name == "words":
        mean = default.effective_weights(dev, relations=("det",))
        for key, value in on_cpu.effective_weights(dev, relations=("det",)).items():
            np.testing.assert_array_equal(value, mean[key])


@pytest.mark.parametrize("name", PROBES)
def test_the_initial_weights_are_drawn_on_the_cpu_whatever_the_device(name, data, monkeypatch):
    moved = []
    to = torch.nn.Module.to

    def recording(module, *args, **kwargs):
        moved.append(({k: v.clone() for k, v in module.state_dict().items()}, torch.device(*args)))
        return to(module, *args, **kwargs)

    monkeypatch.setattr(torch.nn.Module, "to", recording)
    PROBES[name](max_epochs=1).fit(data[0])
    with pytest.raises((RuntimeError, NotImplementedError), match="meta"):  # meta has no values to read back
        PROBES[name](max_epochs=1, device="meta").fit(data[0])
    [(cpu_start, cpu), (meta_start, meta)] = moved
    assert (cpu, meta) == (torch.device("cpu"), torch.device("meta"))
    assert all(v.device.type == "cpu" for v in meta_start.values())  # drawn before the move
    for key, value in cpu_start.items():
        torch.testing.assert_close(meta_start[key], value, rtol=0, atol=0)
    if name == "distances":  # a random start (the attention probes start from zeros and ones)
        assert cpu_start["dependent.weight"].std() > 0


@pytest.mark.parametrize("name", PROBES)
def test_a_fit_on_a_device_reads_it_once_an_epoch_and_predictions_once(name, data):
    train, dev = data
    frame = _first_read(lambda: PROBES[name](device="meta").fit(train, dev=dev))
    assert frame.name == "_fit" and "train_loss" in frame.line  # the epoch's loss, after every step ran there
    probe = PROBES[name]().fit(train)
    probe.device_, probe.module_ = torch.device("meta"), probe.module_.to("meta")
    frame = _first_read(lambda: probe.predict(dev))
    assert frame.name == "_run" and "torch.cat(best)" in frame.line  # every batch's heads, in one read
    if name == "words":
        frame = _first_read(lambda: probe.effective_weights(dev, relations=("det", "nsubj")))
        assert "sums[name]" in frame.line and ".cpu()" in frame.line  # the means, once


def test_batches_go_to_a_device_whole_with_their_positions(data):
    batch = next(data[0].batches(8, attention=True, vectors=True))
    assert batch.to(torch.device("cpu")) is batch
    moved = batch.to(torch.device("meta"))
    assert moved.indices is batch.indices
    for name in ("lengths", "heads", "scored", "candidates", "maps", "root", "vectors", "positions"):
        assert getattr(moved, name).device.type == "meta" and getattr(moved, name).shape == getattr(batch, name).shape
    # positions: the real words of the flattened (B, W), what a boolean mask of them would pick
    np.testing.assert_array_equal(batch.positions.numpy(), np.flatnonzero(batch.words.numpy()))


def test_fitted_weights_are_stored_and_loaded_as_cpu_tensors(data, tmp_path):
    train, dev = data
    probe = PROBES["words"](device="cpu").fit(train)
    probe.save_fitted(tmp_path)
    assert {v.device.type for v in safetensors.torch.load_file(tmp_path / "weights.safetensors").values()} == {"cpu"}
    loaded = PROBES["words"]().load_fitted(tmp_path, train)
    assert loaded.device_ == torch.device("cpu")
    for key, value in _state(probe).items():
        assert _state(loaded)[key].device.type == "cpu"
        torch.testing.assert_close(_state(loaded)[key], value, rtol=0, atol=0)
    assert loaded.predict(dev)[0].tolist() == probe.predict(dev)[0].tolist()


def test_a_bad_device_is_refused_at_fit(data):
    probe = AttentionProbe(device="gpu")  # scikit-learn's convention: __init__ stores, fit checks
    with pytest.raises(ValueError, match="device must be None, a torch.device or a device name.*'gpu'"):
        probe.fit(data[0])
    if not torch.cuda.is_available():
        with pytest.raises(BertologyError, match="no CUDA GPU"):
            AttentionProbe(device="cuda").fit(data[0])


#: Parameters added to every candidate's score alike: the softmax does not see them, so their gradient is zero but
#: for rounding, which Adam scales up to whole steps; they wander apart on two devices and decide nothing.
SHIFTS_EVERY_SCORE = {"distances": ("out.bias",)}


@pytest.mark.parametrize("name", PROBES)
def test_the_parameters_left_out_of_the_device_comparison_get_only_rounding_as_gradient(name, data):
    probe = PROBES[name](max_epochs=1).fit(data[0])
    batch = next(data[0].batches(8, attention=probe.uses_attention, vectors=probe.uses_vectors))
    scores = probe.module_(batch).masked_fill(~batch.candidates, -1e4)
    loss = torch.nn.functional.cross_entropy(scores[batch.words], batch.heads[batch.words])
    loss.backward()
    gradients = {key: p.grad.abs().max().item() for key, p in probe.module_.named_parameters()}
    free = SHIFTS_EVERY_SCORE.get(name, ())
    assert all(gradients[key] < 1e-6 for key in free)
    assert all(value > 1e-4 for key, value in gradients.items() if key not in free)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("name", PROBES)
def test_a_cuda_fit_equals_the_cpu_fit_within_tolerance(name, data, tmp_path):
    """A GPU's kernels sum in other orders: the fit is the CPU's within the stated tolerance, dev and test
    UAS within 1e-3 and the weights within rtol 1e-3 (atol 1e-5 for those near zero), those that shift every
    score alike left out; stored, its weights are CPU tensors that a CPU probe loads."""
    train, dev = data
    cpu = PROBES[name]().fit(train, dev=dev)
    cuda = PROBES[name](device="cuda").fit(train, dev=dev)
    assert cuda.device_.type == "cuda" and all(v.device.type == "cuda" for v in _state(cuda).values())
    assert cuda.best_epoch_ == cpu.best_epoch_
    assert abs(cuda.history_[-1]["dev_uas"] - cpu.history_[-1]["dev_uas"]) <= 1e-3
    assert abs(cuda.score(train) - cpu.score(train)) <= 1e-3
    for key, value in _state(cpu).items():
        if key not in SHIFTS_EVERY_SCORE.get(name, ()):
            torch.testing.assert_close(_state(cuda)[key].cpu(), value, rtol=1e-3, atol=1e-5)
    cuda.save_fitted(tmp_path)
    loaded = PROBES[name]().load_fitted(tmp_path, train)
    for key, value in _state(cuda).items():
        torch.testing.assert_close(_state(loaded)[key], value.cpu(), rtol=0, atol=0)


FIELDS = ("lengths", "heads", "scored", "candidates", "positions", "maps", "root", "vectors")


@pytest.mark.parametrize("dtype", [np.float32, np.float16])  # a store's maps are float16
@pytest.mark.parametrize("parts", [(True, True), (True, False), (False, True), (False, False)])
def test_batches_gathered_on_a_device_are_the_host_batches_bit_for_bit(dtype, parts, monkeypatch):
    source = synthetic(40, 3, vectors=vectors())
    items = [
        dataclasses.replace(source._items[i], attention=source._items[i].attention.astype(dtype)) for i in range(40)
    ]
    data = ProbeData(source.corpus, items, source.vectors, block_size=16)
    attention, vecs = parts
    packed = []
    of = data_module._Packed.of
    monkeypatch.setattr(data_module._Packed, "of", classmethod(lambda cls, *a: packed.append(a[1]) or of(*a)))
    for epoch in range(2):  # the second pass reads the blocks kept on the device
        options = dict(batch_size=4, max_pairs=120, attention=attention, vectors=vecs, shuffle=True, seed=epoch)
        expected = list(data.batches(**options))
        gathered = list(data.batches(**options, device="cpu"))
        assert len(gathered) == len(expected) > 3
        for moved, batch in zip(gathered, expected):
            host = moved.host
            assert batch.host is None and host is not None and host.host is None
            assert host.maps is host.root is host.vectors is None  # the host keeps no features
            np.testing.assert_array_equal(host.indices, batch.indices)
            np.testing.assert_array_equal(moved.indices, batch.indices)
            for name in FIELDS:
                want, got = getattr(batch, name), getattr(moved, name)
                assert (got is None) == (want is None), name
                if want is not None:
                    assert got.dtype == want.dtype and got.shape == want.shape, name
                    assert torch.equal(got, want), name
                    if name in ("lengths", "heads", "scored", "positions"):
                        assert torch.equal(getattr(host, name), want), name
    blocks = 3  # 40 sentences in blocks of 16, packed once for both passes
    assert sorted(packed) == ["attention"] * blocks * attention + ["vectors"] * blocks * vecs


def test_blocks_past_the_budget_are_gathered_all_the_same_and_not_kept():
    source = synthetic(40, 3, vectors=vectors())
    data = ProbeData(source.corpus, list(source._items.values()), source.vectors, block_size=16, cache_size=0)
    options = dict(batch_size=4, attention=True, vectors=True, shuffle=True, seed=1)
    for moved, batch in zip(data.batches(**options, device="cpu"), data.batches(**options), strict=True):
        assert all(torch.equal(getattr(moved, name), getattr(batch, name)) for name in FIELDS)
    assert data._device_cache == {} and data._device_bytes == 0
