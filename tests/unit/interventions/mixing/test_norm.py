"""The norm method (Kobayashi et al. 2020) against its definition."""

import torch

from bertology_utils.core import architectures
from bertology_utils.interventions import mixing


def test_norm_weighted_attention_is_the_norm_of_each_weighted_transformed_vector(traced):
    loaded, inputs, traces = traced
    maps = mixing.mixing_maps(loaded, inputs, ("norm", "norm_layer"))
    for layer, t in enumerate(traces):
        weight = architectures.attention_output(loaded.model, layer).weight
        heads, d = t.values.shape[1], t.values.shape[-1]
        b, i, j = 2, 3, 5
        per_head = [t.probs[b, h, i, j] * (weight[:, h * d : (h + 1) * d] @ t.values[b, h, j]) for h in range(heads)]
        expected = torch.stack([v.norm() for v in per_head])
        torch.testing.assert_close(maps["norm"][layer][b, :, i, j], expected, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(maps["norm_layer"][layer][b, 0, i, j], sum(per_head).norm(), atol=1e-5, rtol=1e-5)
