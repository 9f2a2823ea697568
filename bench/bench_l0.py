"""L0 gate training (Voita et al. 2019) on SST-2: seconds per lambda against the 180 s target.

One lambda of :func:`bertology_utils.interventions.l0.train_gates` at the default settings, with the
default model's cached SST-2 classifier (``fine_tune("SST-2")``; trained and cached first when
absent) on the training examples fine-tuning drew (:func:`~bertology_utils.interventions.l0.training_set`).
Two baselines in the same run, the same number of steps on the same batches (each epoch in a
seeded order): plain forward passes (no gradients) and plain forward + backward passes with
gradients for the weights (a fine-tuning step without the optimiser). The ratios are what training
gates costs against each. Peak resident memory of each phase is read with ``bench/_memory.py``.
The same lambda is then trained in bf16 precision (:attr:`~bertology_utils.core.models.LoadedModel.precision`):
its time against fp32's, and how far its keep mask and the pruned dev score agree with fp32's.
Last, a sweep over ``--lambdas`` (notebook 07's) trained together, as :func:`~bertology_utils.interventions.l0.l0_sweep`
does (each step's batch repeated once per lambda), against the same lambdas trained one after another: the
ratio of times, the largest gap in ``log_alpha`` and how many heads each decides differently.
``--settle`` instead asks whether fewer steps would do: the sweep of ``--lambdas`` on ``--task``, as notebook 07
trains it (``--precision``, batches of ``--batch-size``), with each lambda's keep mask read after every step: the
last step that changed it, and how many heads the mask after a fifth, two fifths, ... of the default steps
decides otherwise than the last one; with ``--steps`` above the default, whether the default's mask had settled.
``--record`` keeps it in ``bench/results/l0-settle.json``, by task, and writes the benchmarks page's table.
``--casts`` times that sweep with the linear weights held as bfloat16 for the whole training (``frozen``, as the
package trains) against the float32 weights only frozen (autocast then copies them to bfloat16 again at every step,
as before), two rounds in alternation, and checks that the gates come out the same.
Skipped, with the reason, when the task's data or the default model are missing.

    python bench/bench_l0.py [--lam 0.03] [--steps N] [--threads 2] [--lambdas 0.01 0.03 0.1] [--only-sweep]
    python bench/bench_l0.py --settle [--task MRPC] [--precision auto] [--batch-size 16] [--threads 1] [--record]
    python bench/bench_l0.py --casts [--task MRPC] [--precision auto] [--steps 100] [--threads 1]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from _machine import machine  # noqa: E402
from _memory import peak_mb, reset_peak  # noqa: E402

TARGET_SECONDS = 180.0
#: ``--settle --record``: each task's latest run, and the benchmarks page's block made from them.
SETTLE_RECORD = ROOT / "bench" / "results" / "l0-settle.json"
SETTLE_BLOCK = "l0-settle"
PAGE = ROOT / "docs" / "benchmarks.md"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lam", type=float, default=0.03, help="the L0 penalty's weight")
    parser.add_argument("--steps", type=int, default=None, help="default: l0.DEFAULT_STEPS")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--lambdas", type=float, nargs="+", default=[0.01, 0.03, 0.1], help="the sweep's penalties")
    parser.add_argument("--only-sweep", action="store_true", help="time only the sweep, together vs one by one")
    parser.add_argument("--settle", action="store_true", help="when each lambda's keep mask stops changing")
    parser.add_argument("--task", default="SST-2", help="--settle: the classifier's task")
    parser.add_argument("--precision", default="fp32", help="--settle: fine-tuning's and the gates' (07: auto)")
    parser.add_argument("--batch-size", type=int, default=16, help="--settle: examples per step (07's 16)")
    parser.add_argument("--record", action="store_true", help="--settle: record it and the benchmarks page's table")
    parser.add_argument("--casts", action="store_true", help="bf16 weights held for the sweep vs copied every step")
    args = parser.parse_args()

    import numpy as np
    import torch

    from bertology_utils.core.errors import DataNotFoundError, ModelNotAvailableError
    from bertology_utils.data import load_glue
    from bertology_utils.interventions.finetuning import fine_tune
    from bertology_utils.interventions.hard_concrete import HardConcreteGates
    from bertology_utils.interventions.l0 import DEFAULT_LR, DEFAULT_STEPS, _trainings, train_gates, training_set

    torch.set_num_threads(args.threads)
    steps = args.steps or DEFAULT_STEPS
    if args.settle:
        settle(args, steps)
        return
    if args.casts:
        casts(args, args.steps or 100)
        return
    try:
        run = fine_tune("SST-2", progress=False)
        train = training_set(run.loaded, "SST-2")
        dev_corpus = load_glue("SST-2", "dev")
    except (DataNotFoundError, ModelNotAvailableError) as missing:
        print(f"skipped: {missing}")
        return
    loaded = run.loaded
    print(run.describe())
    print(
        f"{loaded.num_layers} layers x {loaded.num_heads} heads; {len(train)} training examples in "
        f"{len(train.batches)} batches; lambda {args.lam:g}, {steps} steps, lr {DEFAULT_LR:g}; "
        f"{torch.get_num_threads()} thread(s)"
    )

    if not args.only_sweep:
        one_lambda(args, loaded, train, dev_corpus, steps)
    settings = {"steps": steps, "lr": DEFAULT_LR, "seed": 0, "batch_size": None, "init": HardConcreteGates.INIT}
    reset_peak()
    apart = [train_gates(loaded, train, lam, steps=steps, progress=False) for lam in args.lambdas]
    apart_peak = peak_mb()
    reset_peak()
    together = _trainings(loaded, train, args.lambdas, cache=False, progress=False, **settings)
    together_peak = peak_mb()
    seconds_apart = sum(t.seconds for t in apart)
    gap = max(float(np.abs(a.log_alpha - b.log_alpha).max()) for a, b in zip(apart, together))
    differ = [int((a.keep_mask() != b.keep_mask()).sum()) for a, b in zip(apart, together)]
    print(
        f"sweep of lambdas {', '.join(f'{lam:g}' for lam in args.lambdas)} ({steps} steps each): together "
        f"{together[0].seconds:.1f} s vs one after another {seconds_apart:.1f} s, x{seconds_apart / together[0].seconds:.2f} "
        f"(peak RSS {together_peak:.0f} vs {apart_peak:.0f} MB); largest log_alpha gap {gap:.2g}, heads decided "
        f"differently per lambda {differ}, kept {[t.kept for t in together]} vs {[t.kept for t in apart]}"
    )


def casts(args, steps: int) -> None:
    """The sweep of ``--lambdas`` with bfloat16 weights held for the training against float32 weights only frozen."""
    import numpy as np
    import torch

    from bertology_utils.core.errors import DataNotFoundError, ModelNotAvailableError
    from bertology_utils.core.models import frozen
    from bertology_utils.interventions import l0
    from bertology_utils.interventions.finetuning import fine_tune
    from bertology_utils.interventions.hard_concrete import HardConcreteGates

    try:
        run = fine_tune(args.task, precision=args.precision, progress=False)
        train = l0.training_set(run.loaded, args.task, batch_size=args.batch_size)
    except (DataNotFoundError, ModelNotAvailableError) as missing:
        print(f"skipped: {missing}")
        return
    print(run.describe())
    variants = {"held": frozen, "cast": lambda loaded: frozen(loaded, "fp32")}  # "cast": the code before
    best: dict[str, float] = {}
    gates: dict[str, list[np.ndarray]] = {}
    try:
        for _ in range(2):
            for name, freeze in variants.items():
                l0.frozen = freeze  # the one name _train looks up
                trainings = l0._trainings(
                    run.loaded, train, args.lambdas, steps=steps, lr=l0.DEFAULT_LR, seed=0, batch_size=None,
                    init=HardConcreteGates.INIT, cache=False, progress=False,
                )  # fmt: skip
                best[name] = min(best.get(name, np.inf), trainings[0].seconds)
                gates[name] = [t.log_alpha for t in trainings]
    finally:
        l0.frozen = frozen
    gap = max(float(np.abs(a - b).max()) for a, b in zip(gates["held"], gates["cast"]))
    print(
        f"{args.task} sweep of lambdas {', '.join(f'{lam:g}' for lam in args.lambdas)}, {steps} steps, precision "
        f"{run.loaded.precision}, {torch.get_num_threads()} thread(s), faster of two rounds: float32 weights frozen "
        f"{best['cast']:.1f} s ({best['cast'] / steps * 1e3:.0f} ms a step), bfloat16 weights held "
        f"{best['held']:.1f} s ({best['held'] / steps * 1e3:.0f} ms a step), x{best['cast'] / best['held']:.2f}; "
        f"largest log_alpha gap {gap:.2g}"
    )


def doc_block(record: dict) -> str:
    """The benchmarks page's block for the recorded ``--settle`` runs."""
    tasks = list(record["tasks"].values())
    checks = tasks[0]["checkpoints"]
    head = (
        "Each task's sweep trained as notebook 07 trains it, its keep masks read after every step "
        f"(`bench/bench_l0.py --settle --steps {tasks[0]['steps']} --record`; 07 trains "
        f"{tasks[0]['default_steps']}): the last step that changed a lambda's mask, and how many heads the mask "
        "after fewer steps decides otherwise than the last step's. "
        + " ".join(
            f"{t['task']}: {t['describe']}, {t['steps']} steps in {t['seconds']:.0f} s on {t['threads']} "
            f"thread{'s' if t['threads'] != 1 else ''} "
            f"of {t['machine']} ({t['date']})."
            for t in tasks
        )
    )
    after = " / ".join(str(c) for c in checks)
    table = [
        f"| task | lambda | heads kept | the mask last changed at step | heads otherwise after {after} steps |",
        "|---|---|---|---|---|",
    ]
    for t in tasks:
        for row in t["lambdas"]:
            differ = " / ".join(str(d) for d in row["differ"])
            table.append(
                f"| {t['task']} | {row['lambda']:g} | {row['kept']} of {row['heads']} | {row['last']} | {differ} |"
            )
    return "\n".join([head, "", *table])


def settle(args, steps: int) -> None:
    """Each lambda's keep mask after every step of a sweep trained as notebook 07 trains it."""
    import json

    import numpy as np
    import torch
    from torch.optim.optimizer import register_optimizer_step_post_hook

    from bertology_utils.core.errors import DataNotFoundError, ModelNotAvailableError
    from bertology_utils.interventions.finetuning import fine_tune
    from bertology_utils.interventions.hard_concrete import HardConcreteGates
    from bertology_utils.interventions.l0 import DEFAULT_LR, DEFAULT_STEPS, _trainings, training_set

    try:
        run = fine_tune(args.task, precision=args.precision, progress=False)
        train = training_set(run.loaded, args.task, batch_size=args.batch_size)
    except (DataNotFoundError, ModelNotAvailableError) as missing:
        print(f"skipped: {missing}")
        return
    print(run.describe())
    masks: list[np.ndarray] = []

    def read_masks(optimizer, _args, _kwargs) -> None:  # after each Adam step: (lambdas, L, H) heads kept
        with torch.no_grad():  # the gates' rule is elementwise: every lambda's log_alpha at once
            stacked = torch.stack(optimizer.param_groups[0]["params"])
            gates = HardConcreteGates(tuple(stacked.shape))
            gates.log_alpha.copy_(stacked)
            masks.append(gates.keep_mask().cpu().numpy())

    handle = register_optimizer_step_post_hook(read_masks)
    try:
        trainings = _trainings(
            run.loaded, train, args.lambdas, steps=steps, lr=DEFAULT_LR, seed=0, batch_size=None,
            init=HardConcreteGates.INIT, cache=False, progress=False,
        )  # fmt: skip
    finally:
        handle.remove()
    kept = np.stack(masks)  # (steps, lambdas, L, H)
    checkpoints = [c for c in (DEFAULT_STEPS * k // 5 for k in range(1, 6)) if c < steps]
    rows = []
    for k, training in enumerate(trainings):
        flat = kept[:, k].reshape(steps, -1)
        changed = np.flatnonzero((flat[1:] != flat[:-1]).any(1))
        rows.append(
            {
                "lambda": training.lam,
                "kept": training.kept,
                "heads": int(flat.shape[1]),
                "last": int(changed[-1]) + 2 if len(changed) else 1,  # the first step whose mask is the final one
                "differ": [int((flat[c - 1] != flat[-1]).sum()) for c in checkpoints],
            }
        )
    result = {
        "task": args.task,
        "describe": f"{len(train)} training examples in batches of {args.batch_size}, precision {run.loaded.precision}",
        "steps": steps,
        "default_steps": DEFAULT_STEPS,
        "checkpoints": checkpoints,
        "seconds": trainings[0].seconds,
        "threads": torch.get_num_threads(),
        "machine": machine(),
        "date": time.strftime("%Y-%m-%d"),
        "lambdas": rows,
    }
    record = json.loads(SETTLE_RECORD.read_text()) if args.record and SETTLE_RECORD.exists() else {"tasks": {}}
    record["tasks"][args.task] = result
    print(doc_block({"tasks": {args.task: result}}))
    if args.record:
        SETTLE_RECORD.parent.mkdir(parents=True, exist_ok=True)
        SETTLE_RECORD.write_text(json.dumps(record, indent=2) + "\n")
        from bertology_utils.present.generated import write_block

        write_block(PAGE, SETTLE_BLOCK, doc_block(record))


def one_lambda(args, loaded, train, dev_corpus, steps: int) -> None:
    """One lambda against plain passes on the same batches, then in bf16."""
    import numpy as np
    import torch

    from bertology_utils.interventions.dev_sets import dev_set
    from bertology_utils.interventions.finetuning import default_budget
    from bertology_utils.interventions.gated_logits import scores_for_gates
    from bertology_utils.interventions.l0 import _pieces, train_gates

    model = loaded.model
    reset_peak()
    gates = train_gates(loaded, train, args.lam, steps=steps)
    gate_peak = peak_mb()

    pieces = _pieces(train, None)
    generator = torch.Generator().manual_seed(0)
    schedule = torch.cat([torch.randperm(len(pieces), generator=generator) for _ in range(-(-steps // len(pieces)))])
    batches = [pieces[int(i)][0] for i in schedule[:steps]]

    def forward_only() -> None:
        with torch.no_grad():
            for batch in batches:
                model(**batch)

    def forward_backward() -> None:
        for batch in batches:
            model(**batch).logits.float().logsumexp(-1).sum().backward()
        model.zero_grad(set_to_none=True)

    model.eval()
    seconds = {}
    peaks = {}
    for name, fn in (("forward", forward_only), ("forward+backward (weights)", forward_backward)):
        reset_peak()
        start = time.perf_counter()
        fn()
        seconds[name] = time.perf_counter() - start
        peaks[name] = peak_mb()

    mask = gates.keep_mask()
    dev = dev_set(loaded, dev_corpus, "SST-2", max_tokens=default_budget("SST-2").max_tokens)
    base, pruned = scores_for_gates(loaded, dev, np.stack([np.ones(mask.shape), mask.astype(float)]))
    late = gates.expected_l0_history[-steps // 5 :]
    print(
        f"gates: kept {gates.kept} of {mask.size}, expected L0 {gates.expected_l0:.2f} (change over the last fifth "
        f"{late[-1] - late[0]:+.2f}), undecided {gates.undecided()}; dev accuracy {pruned:.3f} vs {base:.3f} "
        f"with every head ({len(dev)} examples)"
    )
    verdict = "within" if gates.seconds <= TARGET_SECONDS else "OVER"
    print(
        f"train_gates: {gates.seconds:.1f} s per lambda ({gates.seconds / steps * 1e3:.0f} ms/step), "
        f"{verdict} the {TARGET_SECONDS:.0f} s target ({gates.seconds / TARGET_SECONDS:.2f} of it); "
        f"peak RSS {gate_peak:.0f} MB"
    )
    for name, base_seconds in seconds.items():
        print(
            f"  vs {steps} plain {name} passes on the same batches: {base_seconds:.1f} s, "
            f"ratio x{gates.seconds / base_seconds:.2f} (peak RSS {peaks[name]:.0f} MB)"
        )

    half = dataclasses.replace(loaded, precision="bf16")
    fast = train_gates(half, train, args.lam, steps=steps)
    fast_mask = fast.keep_mask()
    fast_score = scores_for_gates(loaded, dev, fast_mask.astype(float)[None])[0]  # scored in fp32, as fp32's mask
    print(
        f"bf16: {fast.seconds:.1f} s per lambda, x{gates.seconds / fast.seconds:.2f} faster than fp32; kept "
        f"{fast.kept} (fp32 {gates.kept}), {int((fast_mask != mask).sum())} heads decided differently; pruned dev "
        f"accuracy {fast_score:.3f} (fp32's mask {pruned:.3f})"
    )


if __name__ == "__main__":
    main()
