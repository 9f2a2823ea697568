"""Two notebooks side by side that need the same fine-tuned classifiers: each waiting in order, or the busy ones last.

Two child processes start together (after both have imported and loaded what they need), one torch thread each, on
an empty cache, and each fine-tunes the default model on SST-2 with seeds 0 to --seeds - 1
(``run.fine_tune_seeds``: --train-examples examples, one epoch, --eval-examples dev examples scored), as notebooks
02 and 08 do with their three classifiers when ``bertology run --jobs 2`` starts them together.

  in order    each takes the seeds in order and waits while the other trains one (fine_tune_seeds as it was)
  busy last   a seed the other process is training is left for after the others (fine_tune_seeds now)

Prints, per variant, the pair's wall time (start to the later child's end), each child's seconds and the seeds it
trained rather than reused, and the ratio. The variants alternate for --rounds rounds, each on a new empty cache;
the fastest pair of each is kept. Needs the GLUE SST-2 data ($BERTOLOGY_DATA_DIR).

    python bench/bench_shared_checkpoints.py [--seeds 3] [--train-examples 600] [--eval-examples 200] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from _machine import machine  # noqa: E402

VARIANTS = ("in order", "busy last")


def child(variant: str, seeds: int, train_examples: int, eval_examples: int, go: Path) -> None:
    """Fine-tune the seeds once ``go`` exists; print the seconds and the seeds trained here as JSON."""
    import torch

    from bertology_utils.core.models import load_model
    from bertology_utils.run import tasks

    torch.set_num_threads(1)
    if variant == "in order":  # every seed in order, waiting where the other process trains it (as before)

        def in_order(keys: Iterable, build: Callable) -> Iterator[tuple]:
            for key in keys:
                yield key, build(key, True)

        tasks.busy_last = in_order
    model = load_model(None, device="cpu")
    print("ready", flush=True)
    while not go.exists():
        time.sleep(0.01)
    start = time.perf_counter()
    found = tasks.fine_tune_seeds("SST-2", model, list(range(seeds)), section="bench", progress=False,
                                  train_examples=train_examples, epochs=1, eval_examples=eval_examples)  # fmt: skip
    seconds = time.perf_counter() - start
    trained = [seed for seed, run in found.items() if not run.tuned.from_cache]
    print(json.dumps({"seconds": seconds, "trained": trained}), flush=True)


def pair(variant: str, args: argparse.Namespace) -> dict:
    """Both children of one variant on a new empty cache: the pair's wall seconds and each child's record."""
    with tempfile.TemporaryDirectory(prefix="bench-shared-") as folder:
        go = Path(folder) / "go"
        env = {**os.environ, "BERTOLOGY_CACHE_DIR": str(Path(folder) / "cache"), "OMP_NUM_THREADS": "1"}
        command = [sys.executable, __file__, "--child", variant, "--seeds", str(args.seeds),
                   "--train-examples", str(args.train_examples), "--eval-examples", str(args.eval_examples),
                   "--go", str(go)]  # fmt: skip
        children = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env) for _ in range(2)]
        for process in children:
            if process.stdout is None or process.stdout.readline().strip() != "ready":
                raise SystemExit(f"a {variant!r} child failed before it started")
        start = time.perf_counter()
        go.touch()
        records = []
        for process in children:
            out, _ = process.communicate()
            if process.returncode:
                raise SystemExit(f"a {variant!r} child failed (exit {process.returncode})")
            records.append(json.loads(out.strip().splitlines()[-1]))
        return {"wall": time.perf_counter() - start, "children": records}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0 .. N-1, the same in both processes")
    parser.add_argument("--train-examples", type=int, default=600, help="SST-2 training examples per classifier")
    parser.add_argument("--eval-examples", type=int, default=200, help="SST-2 dev examples scored per classifier")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of both variants, in turns")
    parser.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--go", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.seeds, args.train_examples, args.eval_examples, args.go)
        return
    print(f"{machine()}; 2 processes, 1 thread each; SST-2, seeds 0-{args.seeds - 1}, "
          f"{args.train_examples} training examples x 1 epoch, {args.eval_examples} dev examples")  # fmt: skip
    best: dict[str, dict] = {}
    for _ in range(args.rounds):
        for variant in VARIANTS:
            result = pair(variant, args)
            if variant not in best or result["wall"] < best[variant]["wall"]:
                best[variant] = result
    for variant in VARIANTS:
        result = best[variant]
        each = "; ".join(f"{c['seconds']:.1f} s, trained seeds {c['trained']}" for c in result["children"])
        print(f"{variant:>10}: {result['wall']:6.1f} s  ({each})")
    print(f"ratio in order / busy last: {best['in order']['wall'] / best['busy last']['wall']:.2f}x")


if __name__ == "__main__":
    main()
