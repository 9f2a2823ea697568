"""Gradients w.r.t. attention: one backward pass for all heads vs one pass per head.

Both compute d(loss)/d(attention) for every head of every layer on the same batches with the
same objective:

  one-pass     bertology's batch_attention_gradients: one forward and one backward per batch,
               gradients for all layers x heads at once
  head-by-head what per-head hooks give: for each (layer, head), a forward with a zero
               perturbation added to that head's probabilities and a backward to it

The two results are checked to agree; the ratio of their times (best of --repeats) is printed.
Also: notebook 02's ablation curves ([SEP] and [CLS], both modes, every layer, with the random
control) with the layers below each ablated layer replayed from the unablated pass vs the
whole model run for every setting; the two tables are checked to be equal.
The default model is the offline MiniLM with the masked sentence-embedding objective; a model
with an MLM head uses the masked-LM objective.

    python bench/bench_gradients.py [--model NAME] [--sentences 16] [--batch-size 8] [--repeats 2] [--ablation-sentences 32]
"""

from __future__ import annotations

import argparse
import contextlib
import time
from unittest import mock

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="model name or folder (default: the offline MiniLM)")
    parser.add_argument("--sentences", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--ablation-sentences", type=int, default=32)
    args = parser.parse_args()

    from bertology_utils.core.models import load_model
    from bertology_utils.data import default_treebank
    from bertology_utils.interventions.ablations import ablation_curves
    from bertology_utils.interventions.gradients import _head_gradient, batch_attention_gradients
    from bertology_utils.interventions.objectives import (
        MaskedEmbeddingObjective,
        MaskedLMObjective,
        has_mlm_head,
        token_batches,
    )

    base = load_model(args.model)
    objective = (
        MaskedLMObjective(load_model(args.model, head="masked-lm"))
        if has_mlm_head(base)
        else MaskedEmbeddingObjective(base)
    )
    loaded = objective.loaded
    corpus = default_treebank("dev")[: args.sentences]
    batches, _ = token_batches(loaded, corpus, batch_size=args.batch_size)
    batches = [objective.prepare(b) for b in batches]
    L, H = loaded.num_layers, loaded.num_heads
    print(f"model: {loaded.name} ({L} layers x {H} heads), objective: {objective.name}")
    print(
        f"data: {corpus.name}, {len(batches)} batches of up to {args.batch_size}; "
        f"torch threads: {torch.get_num_threads()}"
    )

    def one_pass():
        return [batch_attention_gradients(objective, b)[1] for b in batches]

    def head_by_head():
        out = []
        for b in batches:
            grads = torch.zeros((len(b.items), L, H) + (b.input_ids.shape[1],) * 2)
            for layer in range(L):
                for head in range(H):
                    grads[:, layer, head] = _head_gradient(objective, b, layer, head)
            out.append(grads)
        return out

    def best(fn):
        times, result = [], None
        for _ in range(args.repeats):
            start = time.perf_counter()
            result = fn()
            times.append(time.perf_counter() - start)
        return min(times), result

    fast_s, fast = best(one_pass)
    slow_s, slow = best(head_by_head)
    worst = max(float((a - b).abs().max() / a.abs().max().clamp_min(1e-30)) for a, b in zip(fast, slow))
    print(f"one-pass:     {fast_s:8.3f} s  ({len(batches)} forward + backward passes)")
    print(f"head-by-head: {slow_s:8.3f} s  ({len(batches) * L * H} forward + backward passes)")
    print(f"largest difference between the two, relative to the largest gradient: {worst:.1e}")
    print(f"ratio head-by-head / one-pass: {slow_s / fast_s:.1f}x")

    ablated = default_treebank("dev")[: args.ablation_sentences]

    def curves():
        return ablation_curves(ablated, objective, batch_size=args.batch_size, progress=False)

    def curves_without_replay():
        nothing = lambda *_args: contextlib.nullcontext()  # noqa: E731
        with mock.patch("bertology_utils.interventions.ablations.replay_layers_below", nothing):
            return curves()

    replay_s, replayed = best(curves)
    full_s, full = best(curves_without_replay)
    print(f"ablation curves, {len(ablated)} sentences, layers below replayed: {replay_s:8.3f} s")
    print(f"ablation curves, the whole model per setting:               {full_s:8.3f} s")
    print(f"tables equal: {replayed.equals(full)}; ratio whole / replayed: {full_s / replay_s:.2f}x")


if __name__ == "__main__":
    main()
