"""What every per-layer method reads: the traced layer parts, on every family, each against an independent computation."""

import pytest
import torch
from mixing_checks import batch_inputs

from bertology_utils.core import architectures
from bertology_utils.core.errors import UnsupportedArchitectureError
from bertology_utils.core.models import load_model
from bertology_utils.interventions import mixing


def test_weighted_value_vectors_and_the_output_bias_rebuild_the_attention_output(traced):
    loaded, _, traces = traced
    for layer, t in enumerate(traces):
        vectors = mixing.head_vectors(loaded.model, layer, t.values)
        rebuilt = (
            torch.einsum("bhij,bhjd->bid", t.probs, vectors) + architectures.attention_output(loaded.model, layer).bias
        )
        torch.testing.assert_close(rebuilt, t.dense, atol=1e-5, rtol=1e-5)


def test_value_vectors_are_the_value_projection_of_the_layer_input(traced):
    loaded, _, traces = traced
    for layer, t in enumerate(traces):
        _, _, value = architectures.qkv(loaded.model, layer)
        expected = t.hidden @ value.weight.T + value.bias  # (B, T, H*d)
        heads = t.probs.shape[1]
        torch.testing.assert_close(t.values.transpose(1, 2).reshape(expected.shape), expected, atol=1e-5, rtol=1e-5)
        assert t.values.shape[1] == heads == architectures.attention_heads(loaded.model, layer)


def test_weighted_value_vectors_rebuild_the_attention_output_on_every_family(family_traced):
    loaded, _, traces = family_traced
    for layer, t in enumerate(traces):
        bias = architectures.attention_output(loaded.model, layer).bias
        rebuilt = torch.einsum("bhij,bhjd->bid", t.probs, mixing.head_vectors(loaded.model, layer, t.values))
        torch.testing.assert_close(rebuilt + (0 if bias is None else bias), t.dense, atol=1e-5, rtol=1e-5)


def test_a_model_that_is_not_post_ln_is_refused(tiny_model_dirs):
    loaded = load_model(tiny_model_dirs["bert"], device="cpu")
    norm, _ = architectures.layer_norms(loaded.model, 0)
    handle = norm.register_forward_pre_hook(lambda m, args: (args[0] + 1.0,))
    try:
        with pytest.raises(UnsupportedArchitectureError, match="post-LN"):
            mixing.trace(loaded, batch_inputs(loaded))
    finally:
        handle.remove()
