"""ALTI (Ferrando et al. 2022) against its formula, post-LN and pre-LN."""

import torch

from bertology_utils.core import architectures
from bertology_utils.interventions import mixing


def test_alti_transformed_vectors_account_for_the_layer_norm_output(traced):
    """sum_j T_i(x_j) + L_i(b_O) + beta = y_i, the attention block's output, to 1e-5 (relative to |y|)."""
    loaded, _, traces = traced
    for layer, t in enumerate(traces):
        norm, _ = architectures.layer_norms(loaded.model, layer)
        bias = architectures.attention_output(loaded.model, layer).bias
        z = t.hidden + t.dense
        sigma = torch.sqrt(z.var(-1, unbiased=False, keepdim=True) + norm.eps)
        bias_part = norm.weight * (bias - bias.mean()) / sigma
        tokens = t.hidden.shape[1]
        total = mixing.transformed_vectors(loaded.model, layer, t, slice(0, tokens)).sum(2) + bias_part + norm.bias
        scale = float(t.normed.abs().max())
        torch.testing.assert_close(total / scale, t.normed / scale, atol=1e-5, rtol=0)


def test_alti_contributions_follow_the_papers_formula(traced):
    loaded, inputs, traces = traced
    real = inputs["attention_mask"].float()
    t = traces[-1]
    layer = len(traces) - 1
    contributions = mixing.alti_contributions(loaded.model, layer, t, real)
    b = 0
    n = int(real[b].sum())
    transformed = mixing.transformed_vectors(loaded.model, layer, t, slice(0, n))[b, :, :n]  # (n, n, D)
    y = t.normed[b, :n]
    raw = (y.abs().sum(-1)[:, None] - (y[:, None] - transformed).abs().sum(-1)).clamp_min(0)
    torch.testing.assert_close(contributions[b, :n, :n], raw / raw.sum(-1, keepdim=True), atol=1e-5, rtol=1e-5)
    assert torch.all(contributions[b, :, n:] == 0)


def test_alti_vectors_rebuild_the_attention_blocks_output_pre_ln_and_post_ln(family_traced):
    """Pre-LN (ModernBERT): sum_j T_i(x_j) + b_O = x_i + W_O ctx_i + b_O; post-LN as on the other models."""
    loaded, _, traces = family_traced
    pre_ln = architectures.is_pre_layer_norm(loaded.model)
    assert pre_ln == (loaded.model.config.model_type == "modernbert")
    for layer, t in enumerate(traces):
        bias = architectures.attention_output(loaded.model, layer).bias
        bias = torch.zeros_like(t.hidden[0, 0]) if bias is None else bias
        tokens = t.hidden.shape[1]
        summed = mixing.transformed_vectors(loaded.model, layer, t, slice(0, tokens)).sum(2)
        if pre_ln:
            torch.testing.assert_close(summed + bias, t.hidden + t.dense, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(t.normed, t.hidden + t.dense)
        else:
            norm, _ = architectures.layer_norms(loaded.model, layer)
            z = t.hidden + t.dense
            sigma = torch.sqrt(z.var(-1, unbiased=False, keepdim=True) + norm.eps)
            total = summed + norm.weight * (bias - bias.mean()) / sigma + norm.bias
            scale = float(t.normed.abs().max())
            torch.testing.assert_close(total / scale, t.normed / scale, atol=1e-5, rtol=0)
