"""Integrated gradients on tokens: fixed Gauss-Legendre rules vs adaptive panels, against a fine rule.

For the dev sentences of a fine-tuned classifier (the cached checkpoint notebooks 02 and 08 use),
each rule's word-piece attributions are compared with a rule of --reference nodes: the smallest
Spearman rho between an item's attributions and the reference's (the rank agreement notebook 08's
faithfulness table depends on), the largest completeness gap relative to |f(x) - f(x')|, the mean
and largest number of panels (64 is the cap: an item there stopped short of the
tolerance) and the time, with the time ratio to the 32-node rule (notebook 08's rule before
the adaptive one) printed beside it.

    python bench/bench_integrated_gradients.py [--model NAME] [--task SST-2] [--sentences 24] [--reference 512] [--rules 0,2,5]
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import numpy as np
import torch
from scipy.stats import spearmanr

#: (label, integrated_gradients keywords); the first fixed rule is the baseline of the time ratios.
RULES = (
    ("fixed 32 nodes", {"steps": 32}),
    ("fixed 8 nodes", {"steps": 8}),
    ("8-node panels, tolerance 0.01", {"steps": 8, "tolerance": 0.01}),
    ("8-node panels, tolerance 0.001", {"steps": 8, "tolerance": 1e-3}),
    ("16-node panels, tolerance 0.01", {"steps": 16, "tolerance": 0.01}),
    ("4-node panels, tolerance 0.01", {"steps": 4, "tolerance": 0.01}),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="model name or folder (default: the offline MiniLM)")
    parser.add_argument("--task", default="SST-2")
    parser.add_argument("--sentences", type=int, default=24)
    parser.add_argument("--reference", type=int, default=512, help="nodes of the reference rule")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--rules", default=None, help="which rules, by position in RULES: e.g. 0,2,5 (default: all)")
    args = parser.parse_args()

    from bertology_utils.data import resolve_task
    from bertology_utils.interventions.attribution import integrated_gradients, predicted_labels
    from bertology_utils.interventions.finetuning import default_budget, fine_tune
    from bertology_utils.interventions.objectives import token_batches

    data = resolve_task(args.task)
    budget = dataclasses.replace(default_budget(data), train_examples=2000, epochs=1, eval_examples=None)
    tuned = fine_tune(data, args.model, budget=budget, seed=0)
    loaded = tuned.loaded
    batches, skipped = token_batches(loaded, data.dev[: args.sentences], batch_size=args.batch_size, max_tokens=48)
    labels = [predicted_labels(loaded, b) for b in batches]
    print(f"model: {loaded.name} ({loaded.num_layers} x {loaded.num_heads}), {tuned.metrics}")
    print(f"data: {args.task} dev, {sum(len(b.items) for b in batches)} items ({len(skipped)} over 48 tokens skipped)")
    print(f"torch threads: {torch.get_num_threads()}")

    def run(keywords: dict) -> tuple[list, float]:
        start = time.perf_counter()
        out = [integrated_gradients(loaded, b, y, internal_batch_size=256, **keywords) for b, y in zip(batches, labels)]
        return out, time.perf_counter() - start

    def largest_gap(result: list) -> float:
        """The largest |delta| / |f(x) - f(x')| over the items (stricter than the package's max(1, .) scale)."""
        return max(
            float((ig.delta.abs() / (ig.score - ig.baseline_score).abs().clamp_min(1e-9)).max()) for ig in result
        )

    reference, reference_seconds = run({"steps": args.reference})
    own_gap = largest_gap(reference)
    print(
        f"reference: {args.reference} fixed nodes, {reference_seconds:.1f} s, its own largest gap/|change| {own_gap:.4f}"
    )
    print(
        f"{'rule':32s} {'min rho':>8s} {'mean rho':>9s} {'max gap/|change|':>17s} {'panels':>7s} {'max':>4s} {'seconds':>8s} {'ratio':>6s}"
    )
    baseline = None
    chosen = RULES if args.rules is None else [RULES[int(i)] for i in args.rules.split(",")]
    for label, keywords in chosen:
        result, seconds = run(keywords)
        baseline = baseline or seconds
        rho = [
            spearmanr(a[r != 0].numpy(), r[r != 0].numpy())[0]  # content tokens
            for ig, ref in zip(result, reference)
            for a, r in zip(ig.attributions, ref.attributions)
        ]
        panels = torch.cat([ig.panels for ig in result]).double()
        print(
            f"{label:32s} {min(rho):8.4f} {np.mean(rho):9.4f} {largest_gap(result):17.4f} {panels.mean():7.1f} {panels.max():4.0f} "
            f"{seconds:8.1f} {seconds / baseline:6.2f}"
        )


if __name__ == "__main__":
    main()
