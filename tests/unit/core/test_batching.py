"""Padding, attention masks, token types and batch plans: the one place inputs become batches."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from bertology_utils.core.batching import Padding, length_grouped_batches, pad_rows, plan_batches, to_device
from bertology_utils.core.models import load_model


def test_pad_rows():
    np.testing.assert_array_equal(pad_rows([[1, 2, 3], [4], []], -1), [[1, 2, 3], [4, -1, -1], [-1, -1, -1]])
    out = pad_rows([np.array([7, 8], dtype=np.int32)], 0, width=4)
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, [[7, 8, 0, 0]])


def test_padding_ids_masks_and_token_types():
    padded = Padding(pad_id=1, token_types=True).pad([[5, 6, 7], np.array([8])], [[0, 0, 1], [0]])
    np.testing.assert_array_equal(padded.input_ids, [[5, 6, 7], [8, 1, 1]])
    np.testing.assert_array_equal(padded.attention_mask, [[1, 1, 1], [1, 0, 0]])
    np.testing.assert_array_equal(padded.token_type_ids, [[0, 0, 1], [0, 0, 0]])
    np.testing.assert_array_equal(padded.lengths, [3, 1])
    inputs = padded.inputs("cpu")
    assert list(inputs) == ["input_ids", "attention_mask", "token_type_ids"]
    assert all(t.dtype == torch.int64 for t in inputs.values())
    assert torch.equal(inputs["input_ids"], torch.tensor([[5, 6, 7], [8, 1, 1]]))
    # No token types for a model that does not take them, nor when the inputs have none.
    assert Padding(0, token_types=False).pad([[5, 6]], [[0, 1]]).token_type_ids is None
    assert Padding(0, token_types=True).pad([[5, 6]], [None]).token_type_ids is None
    assert "token_type_ids" not in Padding(0, token_types=True).pad([[5, 6]]).inputs()


def test_collate_reads_encodings():
    encodings = [{"input_ids": [2, 9, 3], "token_type_ids": [0, 0, 0]}, {"input_ids": [2, 3], "token_type_ids": [0, 1]}]
    batch = Padding(0, token_types=True).collate(encodings)
    assert batch["input_ids"].tolist() == [[2, 9, 3], [2, 3, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 1, 0]]
    assert batch["token_type_ids"].tolist() == [[0, 0, 0], [0, 1, 0]]
    assert list(Padding(0, token_types=False).collate(encodings)) == ["input_ids", "attention_mask"]


@pytest.mark.parametrize(
    "arch, pad_id, token_types",
    [
        ("bert", 0, True),
        ("roberta", 1, True),
        ("distilbert", 0, False),
        ("electra", 0, True),
        ("mpnet", 1, False),
    ],
)
def test_padding_of_each_model(tiny_model_dirs, arch, pad_id, token_types):
    loaded = load_model(tiny_model_dirs[arch])
    assert Padding.of(loaded) == Padding(pad_id, token_types)
    # A tokenizer without a pad token: the config's pad id; neither: 0.
    assert Padding.of(loaded.model, SimpleNamespace(pad_token_id=None)).pad_id == loaded.config.pad_token_id == pad_id
    assert Padding.of(SimpleNamespace(model_type=arch), SimpleNamespace(pad_token_id=None)).pad_id == 0


@pytest.mark.parametrize("arch", ["roberta", "bert"])
def test_padded_batch_gives_each_item_what_it_gets_alone(tiny_model_dirs, arch):
    """Padding with the model's pad id under the mask changes no real token's output (RoBERTa numbers its
    positions from the pad id, so a wrong pad id would show); pairs keep their token types."""
    loaded = load_model(tiny_model_dirs[arch])
    texts = [("Hello world", "welcome back"), ("The old sailor reads a heavy wooden box near the station", "Yes")]
    encodings = [dict(loaded.tokenizer(a, b)) for a, b in texts]
    padding = Padding.of(loaded)
    batch = padding.collate(encodings)
    assert ("token_type_ids" in batch) == (arch == "bert")
    if arch == "bert":
        assert batch["token_type_ids"][0].tolist()[: len(encodings[0]["input_ids"])] == encodings[0]["token_type_ids"]
    with torch.no_grad():
        together = loaded.model(**batch).last_hidden_state
        for b, encoding in enumerate(encodings):
            alone = loaded.model(**padding.collate([encoding])).last_hidden_state[0]
            torch.testing.assert_close(together[b, : len(encoding["input_ids"])], alone, atol=1e-5, rtol=1e-5)


def test_plan_batches_sorts_by_length_and_keeps_ties_in_order():
    plan = plan_batches([5, 3, 9, 3, 1], 2)
    assert [rows.tolist() for rows in plan] == [[4, 1], [3, 0], [2]]
    assert plan_batches([], 4) == []
    assert [rows.tolist() for rows in plan_batches([2, 2, 2], 8)] == [[0, 1, 2]]


def test_plan_batches_budgets():
    lengths = [5, 3, 9, 3, 1]
    # padded tokens (items x longest) <= 10: 1,3,3 make 9; 5 and 9 alone (9 is over the budget by itself)
    assert [r.tolist() for r in plan_batches(lengths, 8, max_batch_tokens=10)] == [[4, 1, 3], [0], [2]]
    # attention weights (items x 2 maps x longest^2) <= 50: 1 and 3 make 36; the rest alone
    assert [r.tolist() for r in plan_batches(lengths, 8, max_batch_weights=50, maps_per_item=2)] == [
        [4, 1],
        [3],
        [0],
        [2],
    ]
    for rows in plan_batches(lengths, 3, max_batch_tokens=12, max_batch_weights=100):
        longest = max(lengths[i] for i in rows)
        assert len(rows) <= 3 and (len(rows) == 1 or (len(rows) * longest <= 12 and len(rows) * longest**2 <= 100))


def test_length_grouped_batches_cover_every_item_once_with_little_padding():
    rng = np.random.default_rng(0)
    lengths = rng.integers(5, 120, size=1000)
    batches = length_grouped_batches(lengths, 16, torch.Generator().manual_seed(3), group=10)
    plain = torch.randperm(1000, generator=torch.Generator().manual_seed(3)).split(16)
    assert len(batches) == len(plain)  # as many optimizer steps as plain random batches
    assert sorted(torch.cat(batches).tolist()) == list(range(1000))
    assert all(1 <= len(b) <= 16 for b in batches)

    def padded(parts):
        return sum(len(b) * int(lengths[b.numpy()].max()) for b in parts)

    assert padded(batches) < 0.75 * padded(plain)  # the point of grouping
    # Deterministic for a seed, random across seeds: the batches' order and their items.
    again = length_grouped_batches(lengths, 16, torch.Generator().manual_seed(3), group=10)
    other = length_grouped_batches(lengths, 16, torch.Generator().manual_seed(4), group=10)
    assert [b.tolist() for b in again] == [b.tolist() for b in batches]
    assert [b.tolist() for b in other] != [b.tolist() for b in batches]
    # The long batches are not all first: their order is shuffled.
    longest = [int(lengths[b.numpy()].max()) for b in batches]
    assert longest != sorted(longest, reverse=True)


def test_to_device_keeps_values_and_dtype():
    array = np.arange(6, dtype=np.int64).reshape(2, 3)
    on_cpu = to_device(array, None)
    assert on_cpu.dtype == torch.int64 and np.array_equal(on_cpu.numpy(), array)
    floats = torch.tensor([0.5, 1.5])
    assert to_device(floats, "cpu") is floats  # nothing to copy on the host
    assert to_device(floats, "meta").device.type == "meta"


def test_to_device_queues_a_copy_to_a_gpu_from_pinned_memory(monkeypatch):
    """A copy to a GPU from pageable memory waits for the device: the host copy is pinned and not waited for."""
    calls = []
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self: calls.append("pin") or self)
    monkeypatch.setattr(torch.Tensor, "to", lambda self, *args, **kwargs: calls.append((args, kwargs)) or self)
    to_device(np.ones(3), "cuda:0")
    assert calls == ["pin", ((torch.device("cuda:0"),), {"non_blocking": True})]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_to_device_on_a_gpu_gives_the_values():
    array = np.random.default_rng(0).normal(size=(64, 33)).astype(np.float32)
    batches = [to_device(array + k, "cuda") for k in range(4)]  # queued one after another, none waited for
    for k, batch in enumerate(batches):
        assert np.array_equal(batch.cpu().numpy(), array + k)
