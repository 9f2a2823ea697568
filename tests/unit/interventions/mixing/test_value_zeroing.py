"""Value zeroing (Mohebbi et al. 2023) against zeroing a token's values in a full forward pass, on every family."""

import torch
from mixing_checks import layer_output

from bertology_utils.core import architectures
from bertology_utils.interventions import mixing


def test_value_zeroing_matches_zeroing_each_token_in_a_full_forward_pass(traced):
    loaded, inputs, traces = traced
    real = inputs["attention_mask"].float()
    b = 0
    n = int(real[b].sum())
    one = {k: v[b : b + 1, :n] for k, v in inputs.items()}
    for layer, t in enumerate(traces):
        scores = mixing.value_zeroing(loaded.model, layer, t, real)
        clean = torch.nn.functional.normalize(layer_output(loaded.model, layer, one), dim=-1)
        distance = torch.stack(
            [
                (torch.nn.functional.normalize(layer_output(loaded.model, layer, one, j), dim=-1) - clean)
                .square()
                .sum(-1)
                / 2
                for j in range(n)
            ],
            dim=1,
        )  # (n receiving, n zeroed): 1 - cos
        expected = distance / distance.sum(-1, keepdim=True)
        torch.testing.assert_close(scores[b, :n, :n].double(), expected, atol=1e-4, rtol=1e-3)
        assert torch.all(scores[b, :, n:] == 0)


def test_value_zeroing_on_every_family_equals_zeroing_in_a_full_forward_pass(family_traced):
    """One item alone (DeBERTa's batch-independent relative positions must not be repeated), fused or not."""
    loaded, inputs, _ = family_traced
    n = int(inputs["attention_mask"][0].sum())
    one = {k: v[:1, :n] for k, v in inputs.items()}
    traces = mixing.trace(loaded, one)
    fused = architectures.fused_qkv(loaded.model, 0) is not None

    def output(layer, zero_token=None):
        kept = {}

        def zero(_m, _a, out):
            out = out.clone()
            out[:, zero_token, (2 * out.shape[-1] // 3 if fused else 0) :] = 0
            return out

        handles = [architectures.layers(loaded.model)[layer].register_forward_hook(lambda m, a, o: kept.update(o=o))]
        if zero_token is not None:
            handles.append(mixing.base.value_projection(loaded.model, layer).register_forward_hook(zero))
        try:
            with torch.no_grad():
                loaded.model(**one)
        finally:
            for h in handles:
                h.remove()
        out = kept["o"][0] if isinstance(kept["o"], tuple) else kept["o"]
        return torch.nn.functional.normalize(out[0].double(), dim=-1)

    for layer, t in enumerate(traces):
        scores = mixing.value_zeroing(loaded.model, layer, t, one["attention_mask"].float())
        clean = output(layer)
        distance = torch.stack([(output(layer, j) - clean).square().sum(-1) / 2 for j in range(n)], dim=1)
        torch.testing.assert_close(scores[0].double(), distance / distance.sum(-1, keepdim=True), atol=1e-4, rtol=1e-3)
