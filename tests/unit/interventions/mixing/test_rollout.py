"""Rollout (Abnar & Zuidema 2020) against a reference product."""

import numpy as np
import torch

from bertology_utils.interventions import mixing


def rollout_reference(probs, n):
    """Abnar & Zuidema's rollout written out for one item with numpy (their recipe, loop form)."""
    out = None
    for p in probs:
        a = p[:, :n, :n].mean(0) + np.eye(n)  # 0.5 A + 0.5 I up to a factor the renormalisation removes
        a = a / a.sum(-1, keepdims=True)
        out = a if out is None else a @ out
    return out


def test_rollout_rows_sum_to_one_and_match_the_reference(traced):
    loaded, inputs, traces = traced
    maps = mixing.mixing_maps(loaded, inputs, ("rollout",))["rollout"]
    real = inputs["attention_mask"].bool()
    for b in range(real.shape[0]):
        n = int(real[b].sum())
        expected = rollout_reference([t.probs[b].double().numpy() for t in traces], n)
        np.testing.assert_allclose(maps[-1][b, 0, :n, :n].double().numpy(), expected, atol=1e-5)
        torch.testing.assert_close(maps[-1][b, 0, :n].sum(-1), torch.ones(n), atol=1e-5, rtol=0)
