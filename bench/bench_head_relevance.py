"""Head relevance (integrated gradients over head gates, notebook 07): 8-node vs 4-node adaptive panels.

For each task's cached classifier (fine-tuned with the project's default budget, as notebook 07 does)
and notebook 07's dev set (the first --examples dev examples within --tokens tokens), each rule's
attributions are compared with a finer rule (16-node panels at tolerance 1e-4): the largest
difference of Voita's relevance (layer-normalised mean |attribution|) relative to the largest
relevance, the Spearman rho of the relevances, the largest per-example completeness gap relative
to max(1, |F(1) - F(0)|), the mean and largest number of panels, and the time, with the time
ratio to the first rule (notebook 07's rule before 4-node panels) printed beside it.

    python bench/bench_head_relevance.py [--tasks SST-2,MRPC] [--examples 128] [--tokens 4096] [--threads 1]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from scipy.stats import spearmanr

#: (label, head_attribution keywords); the first is the baseline of the time ratios, the last the reference.
RULES = (
    ("8-node panels, tolerance 0.01", {"steps": 8, "tolerance": 0.01}),
    ("4-node panels, tolerance 0.01", {"steps": 4, "tolerance": 0.01}),
    ("reference: 16-node panels, tolerance 1e-4", {"steps": 16, "tolerance": 1e-4}),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="SST-2,MRPC")
    parser.add_argument("--examples", type=int, default=128)
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (notebook 07 runs on one in make run)")
    args = parser.parse_args()

    from bertology_utils.data import resolve_task
    from bertology_utils.interventions.dev_sets import dev_set
    from bertology_utils.interventions.finetuning import default_budget, fine_tune
    from bertology_utils.interventions.head_relevance import head_attribution

    torch.set_num_threads(args.threads)
    for task in args.tasks.split(","):
        data = resolve_task(task)
        budget = default_budget(data)
        run = fine_tune(data, None, budget=budget, seed=0, progress=False)
        dev = dev_set(
            run.loaded,
            data.dev[: args.examples],
            data.name,
            max_tokens=budget.max_tokens,
            batch_size=args.batch_size,
            token_budget=args.tokens,
        )
        results = {}
        for label, keywords in RULES:
            start = time.perf_counter()
            attribution = head_attribution(run.loaded, dev, cache=False, **keywords)
            results[label] = (time.perf_counter() - start, attribution)
        reference = results[RULES[-1][0]][1].relevance()
        baseline = results[RULES[0][0]][0]
        print(f"{run.loaded.name} on {data.name}, {len(dev)} dev examples, {args.threads} thread(s)")
        for label, (seconds, attribution) in results.items():
            relevance = attribution.relevance()
            error = np.abs(relevance - reference).max() / np.abs(reference).max()
            rho = spearmanr(relevance.ravel(), reference.ravel())[0]
            print(
                f"  {label:42s} {seconds:6.1f} s (x{baseline / seconds:.2f})  panels {attribution.panels.mean():.2f}"
                f" (max {attribution.panels.max()})  gap {attribution.relative_gap.max():.1e}"
                f"  relevance vs reference: {error:.1e} of the largest, rho {rho:.5f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
