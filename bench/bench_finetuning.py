"""Fine-tuning with length-grouped batches vs plain random batches, with AdamW's fused step vs
torch's per-tensor loop, and in bf16 vs fp32 precision: training time and dev score.

Each task is fine-tuned twice from the same start (same examples, seed and budget but for
``group_by_length``), nothing cached, in the same run: the ratio of training seconds is the
speed-up, the dev scores show what grouping costs or not (one seed: differences of a point or
two are within seed noise at these budgets). bf16 is several times faster only where the CPU has
bfloat16 units (AVX512-BF16, AMX) or on a GPU; elsewhere it is slower.

    python bench/bench_finetuning.py [--tasks SST-2,RTE] [--examples 600] [--threads 2]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
from unittest import mock


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

    adamw = torch.optim.AdamW

    def per_tensor(params, **kwargs):
        return adamw(params, **{**kwargs, "fused": None})

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
        for variant in ("random", "grouped", "loop", "bf16"):
            budget = dataclasses.replace(
                default_budget(task), group_by_length=variant != "random", train_examples=args.examples
            )
            # "loop": grouped batches, but AdamW as torch runs it unless told to fuse (one loop over the tensors)
            with mock.patch.object(torch.optim, "AdamW", per_tensor) if variant == "loop" else contextlib.nullcontext():
                precision = "bf16" if variant == "bf16" else "fp32"
                run = fine_tune(task, None, budget=budget, cache=False, precision=precision, progress=False)
            seconds[variant], scores[variant] = run.train_seconds, run.metrics["score"]
        print(
            f"{task.name}: {args.examples} examples, random batches {seconds['random']:.1f} s, grouped by length "
            f"{seconds['grouped']:.1f} s: {seconds['random'] / seconds['grouped']:.2f}x; dev score "
            f"{scores['random']:.3f} vs {scores['grouped']:.3f}"
        )
        print(
            f"{task.name}: AdamW per-tensor loop {seconds['loop']:.1f} s, fused {seconds['grouped']:.1f} s: "
            f"{seconds['loop'] / seconds['grouped']:.2f}x; dev score {scores['loop']:.3f} vs {scores['grouped']:.3f}"
        )
        print(
            f"{task.name}: fp32 {seconds['grouped']:.1f} s, bf16 {seconds['bf16']:.1f} s: "
            f"{seconds['grouped'] / seconds['bf16']:.2f}x; dev score {scores['grouped']:.3f} vs {scores['bf16']:.3f}"
        )


if __name__ == "__main__":
    main()
