"""Fine-tuning with length-grouped batches vs plain random batches, with AdamW's fused step vs
torch's per-tensor loop, with the last layer's feed-forward block on the first token alone vs on
every token, in bf16 vs fp32 precision, with dropout masks from a CPU generator (the default:
the same on every device) vs torch's own dropout on the device's generator, and with torch's
deterministic mode filling every fresh tensor with NaN (its default) vs not (ours): training time and
dev score.

Each task is fine-tuned once with the default recipe (batches grouped by length, fused step, the
first-token block, fp32) and once per variant, from the same start (same examples, seed and budget),
nothing cached, in the same run: the ratio of training seconds is the speed-up, the dev scores show
what a variant costs or not (one seed: differences of a point or two are within seed noise at these
budgets). bf16 is several times faster only where the CPU has
bfloat16 units (AVX512-BF16, AMX) or on a GPU; elsewhere it is slower.

    python bench/bench_finetuning.py [--tasks SST-2,RTE] [--examples 600] [--threads 2] [--variants full,bf16]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
from unittest import mock

#: What each variant changes, as (the slower side, the faster side) of its printed comparison.
VERSUS = {
    "random": ("random batches", "grouped by length"),
    "loop": ("AdamW per-tensor loop", "fused"),
    "full": ("last block on every token", "on the first token"),
    "bf16": ("fp32", "bf16"),
    "native": ("dropout masks from a CPU generator", "from the device's"),
    "fill": ("bf16 with fresh tensors filled (torch's deterministic default)", "not filled"),
}
#: Variants that are the faster side of their comparison (the others are slower than the default recipe).
FASTER = {"bf16", "native"}
#: Variants compared with another run than the default recipe: the fill matters where autocast makes many fresh
#: tensors, so it is measured in bf16 on both sides.
BASES = {"fill": "bf16"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", default="SST-2,RTE")
    parser.add_argument(
        "--examples", type=int, default=600, help="training examples per run (the default budgets: 2,000 / 1,000)"
    )
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument(
        "--variants",
        default="random,loop,full,bf16,native,fill",
        help="what to compare with the default recipe (grouped)",
    )
    args = parser.parse_args()
    variants = ["grouped", *(v for v in args.variants.split(",") if v != "grouped")]
    variants += [base for v, base in BASES.items() if v in variants and base not in variants]
    unknown = sorted(set(variants[1:]) - set(VERSUS))
    if unknown:
        parser.error(f"unknown variants {unknown}: choose from {sorted(VERSUS)}")

    import torch

    from bertology_utils.core.determinism import deterministic_algorithms
    from bertology_utils.core.errors import DataNotFoundError
    from bertology_utils.data import resolve_task
    from bertology_utils.interventions import finetuning
    from bertology_utils.interventions.finetuning import default_budget, fine_tune

    adamw = torch.optim.AdamW

    def per_tensor(params, **kwargs):
        return adamw(params, **{**kwargs, "fused": None})

    @contextlib.contextmanager
    def every_token(_model):
        yield False

    @contextlib.contextmanager
    def device_dropout(generator):
        torch.manual_seed(generator.initial_seed())  # torch's dropout, on the model's device's generator
        yield None

    @contextlib.contextmanager
    def filling_determinism():
        with deterministic_algorithms() as missing:  # restores the fill setting it found when it ends
            torch.utils.deterministic.fill_uninitialized_memory = True
            yield missing

    patches = {
        # grouped batches, but AdamW as torch runs it unless told to fuse (one loop over the tensors)
        "loop": lambda: mock.patch.object(torch.optim, "AdamW", per_tensor),
        # grouped batches, the last layer's feed-forward block on every token
        "full": lambda: mock.patch.object(finetuning, "first_token_readout", every_token),
        "native": lambda: mock.patch.object(finetuning, "host_dropout", device_dropout),
        "fill": lambda: mock.patch.object(finetuning, "deterministic_algorithms", filling_determinism),
    }

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
        for variant in variants:
            budget = dataclasses.replace(
                default_budget(task), group_by_length=variant != "random", train_examples=args.examples
            )
            with patches.get(variant, contextlib.nullcontext)():
                precision = "bf16" if "bf16" in (variant, BASES.get(variant)) else "fp32"
                run = fine_tune(task, None, budget=budget, cache=False, precision=precision, progress=False)
            seconds[variant], scores[variant] = run.train_seconds, run.metrics["score"]
        for variant in variants[1:]:
            base = BASES.get(variant, "grouped")
            slow, fast = (base, variant) if variant in FASTER else (variant, base)
            names = VERSUS[variant]
            print(
                f"{task.name}: {args.examples} examples, {names[0]} {seconds[slow]:.1f} s, {names[1]} "
                f"{seconds[fast]:.1f} s: {seconds[slow] / seconds[fast]:.2f}x; dev score "
                f"{scores[slow]:.3f} vs {scores[fast]:.3f}"
            )


if __name__ == "__main__":
    main()
