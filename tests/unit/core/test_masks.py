"""Attention masks built ahead of the encoder: the same numbers, and no read of the device in a forward pass."""

import pytest
import torch
from tiny_models import ALL_FAMILIES, MODERNBERT_LOCAL_ATTENTION, build_tiny_model

from bertology_utils.core import architectures
from bertology_utils.core.batching import Padding
from bertology_utils.core.errors import UnregisteredArchitectureWarning
from bertology_utils.core.masks import prepare_attention_masks
from bertology_utils.core.models import HEADS, load_model

#: Longer than ModernBERT's local window, so its sliding-window masks cut rows.
_LONG = MODERNBERT_LOCAL_ATTENTION + 5
#: A padded batch (rows of several lengths) and one without padding (where transformers leaves the mask out).
_BATCHES = {
    "padded": [list(range(5, 5 + _LONG)), [5, 6, 7], list(range(7, 7 + _LONG // 2))],
    "unpadded": [list(range(5, 5 + _LONG)), list(range(8, 8 + _LONG))],
}


def _hooks(module: torch.nn.Module) -> int:
    return len(architectures.base_model(module)._forward_pre_hooks)


def _unhook(module: torch.nn.Module) -> None:
    """The model as transformers runs it: load_model keeps no handle, so its hook leaves through the hooks' dict."""
    architectures.base_model(module)._forward_pre_hooks.clear()


@pytest.mark.parametrize("head", HEADS)
@pytest.mark.parametrize("arch", ALL_FAMILIES)
def test_prepared_masks_change_no_number(arch, head, family_model_dirs):
    labels = {"num_labels": 3} if head == "sequence-classification" else {}
    loaded = load_model(family_model_dirs[arch], head=head, **labels)
    hooked = architectures.arch_spec(loaded).attention_mask is not None
    assert _hooks(loaded.model) == int(hooked)  # load_model hooks every registered family that uses them
    inputs = [Padding.of(loaded).pad(rows).inputs(loaded.device) for rows in _BATCHES.values()]
    with torch.no_grad():
        prepared = [loaded.model(**x, output_attentions=True, output_hidden_states=True) for x in inputs]
        _unhook(loaded.model)
        plain = [loaded.model(**x, output_attentions=True, output_hidden_states=True) for x in inputs]
    for name, ours, theirs in zip(_BATCHES, prepared, plain):
        for key in theirs.keys():  # logits or last hidden state, hidden states, attentions: to the bit
            pairs = zip(*(o[key] if isinstance(o[key], tuple) else (o[key],) for o in (theirs, ours)))
            assert all(torch.equal(a, b) for a, b in pairs), (arch, head, name, key)


@pytest.mark.parametrize("arch", ALL_FAMILIES)
def test_a_forward_reads_nothing_from_the_device(arch, family_model_dirs):
    """On the meta device a read of a value fails: a forward pass of every family runs through without one."""
    loaded = load_model(family_model_dirs[arch], head="sequence-classification", num_labels=2)
    inputs = Padding.of(loaded).pad(_BATCHES["padded"]).inputs("meta")
    loaded.model.to("meta")
    out = loaded.model(**inputs, output_attentions=True)
    assert out.logits.shape == (3, 2) and out.attentions[0].device.type == "meta"
    _unhook(loaded.model)
    if architectures.arch_spec(loaded).attention_mask is not None:  # without the masks, transformers reads one
        with pytest.raises(RuntimeError, match="meta"):
            loaded.model(**inputs, output_attentions=True)


def test_models_without_prepared_masks_are_left_alone(tmp_path):
    with pytest.warns(UnregisteredArchitectureWarning):
        unregistered = load_model(build_tiny_model("roformer", tmp_path / "roformer"))
    assert prepare_attention_masks(unregistered) is None and _hooks(unregistered.model) == 0


def test_a_mask_already_built_is_passed_on(family_model_dirs):
    loaded = load_model(family_model_dirs["bert"])
    inputs = Padding.of(loaded).pad(_BATCHES["padded"]).inputs(loaded.device)
    built = torch.zeros(3, 1, _LONG, _LONG)
    built[1, :, :, 3:] = torch.finfo(torch.float32).min
    built[2, :, :, _LONG // 2 :] = torch.finfo(torch.float32).min
    with torch.no_grad():
        from_2d = loaded.model(**inputs, output_attentions=True).attentions
        given = loaded.model(**(inputs | {"attention_mask": built}), output_attentions=True).attentions
    assert all(torch.equal(a, b) for a, b in zip(from_2d, given))
