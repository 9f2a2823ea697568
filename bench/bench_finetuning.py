"""Fine-tuning with length-grouped batches vs plain random batches: training time and dev score.

Each task is fine-tuned twice from the same start (same examples, seed and budget but for
``group_by_length``), nothing cached, in the same run: the ratio of training seconds is the
speed-up, the dev scores show what grouping costs or not (one seed: differences of a point or
two are within seed noise at these budgets).

    python bench/bench_finetuning.py [--tasks SST-2,RTE] [--examples 600] [--threads 2]
"""

from __future__ import annotations

import argparse
import dataclasses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", default="SST-2,RTE")
    parser.add_argument(
        "--examples", type=int, default=600, help="training examples per run (the default budgets: 2,000 / 1,000)"
    )
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = parser.parse_args()

    import torch

    from bertology_utils.core.errors import DataNotFoundError
    from bertology_utils.data import resolve_task
    from bertology_utils.interventions.finetuning import default_budget, fine_tune

    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch threads: {torch.get_num_threads()}")
    for name in args.tasks.split(","):
        try:
            task = resolve_task(name)
        except DataNotFoundError as missing:
            print(f"{name}: skipped ({missing.short()})")
            continue
        seconds, scores = {}, {}
        for grouped in (False, True):
            budget = dataclasses.replace(default_budget(task), group_by_length=grouped, train_examples=args.examples)
            run = fine_tune(task, None, budget=budget, cache=False, progress=False)
            seconds[grouped], scores[grouped] = run.train_seconds, run.metrics["score"]
        print(
            f"{task.name}: {args.examples} examples, random batches {seconds[False]:.1f} s, grouped by length "
            f"{seconds[True]:.1f} s: {seconds[False] / seconds[True]:.2f}x; dev score {scores[False]:.3f} vs {scores[True]:.3f}"
        )


if __name__ == "__main__":
    main()
