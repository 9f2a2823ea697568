"""The kernels' allocator settings (``core.allocator``) against glibc's defaults: extraction, fine-tuning and
integrated gradients.

Each round starts two child processes one after the other, one with glibc's defaults and one with
``ALLOCATOR_VARIABLES`` (which goes first alternates from round to round), one torch thread each. A child runs three
stages in turn, each in memory shaped by the ones before, as a notebook's kernel works:

  extraction            the default model's attention maps of the first --sentences UD EWT train sentences, into an
                        attention store of an empty cache of its own (as notebook 04 does)
  fine-tuning           the default model on SST-2, --examples examples, one epoch, seed 0, nothing cached, in
                        --precision (``auto``: bf16 where the CPU has bfloat16 units, the notebooks' default)
  integrated gradients  notebook 08's reference (Gauss-Legendre 4 nodes a panel, adaptive to 0.01, at most 48
                        tokens, batches of 8) on the first --ig-examples SST-2 dev examples, with that classifier

Prints, per stage, the fastest seconds of each setting over the rounds and the ratio, each child's peak resident
memory (VmHWM, read in the child), and whether the two settings stored the same maps, trained the same weights and
gave the same attributions, bit for bit (digests of their bytes). Needs UD EWT and GLUE SST-2 ($BERTOLOGY_DATA_DIR).

    python bench/bench_allocator.py [--sentences 3000] [--examples 1000] [--ig-examples 40] [--rounds 2]
                                    [--precision auto]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from _machine import machine  # noqa: E402
from _memory import peak_mb  # noqa: E402

from bertology_utils.core.allocator import ALLOCATOR_VARIABLES  # noqa: E402

SETTINGS = ("glibc's defaults", "kept for reuse")


def child(examples: int, ig_examples: int, sentences: int, precision: str) -> None:
    """The three stages in turn; print their seconds, the peak memory and the results' digests as JSON."""
    import tempfile

    import numpy as np
    import torch

    from bertology_utils.attention.extraction import extract_cached
    from bertology_utils.core.models import load_model
    from bertology_utils.data import Corpus, load_glue, treebank_splits
    from bertology_utils.interventions.finetuning import Budget, fine_tune
    from bertology_utils.interventions.references import word_references

    torch.set_num_threads(1)
    model = load_model(None, device="cpu")
    train = treebank_splits(None)[0]["train"][:sentences]
    maps = hashlib.sha256()
    with tempfile.TemporaryDirectory(prefix="bench-allocator-") as folder:
        start = time.perf_counter()
        store = extract_cached(train, model, cache_dir=folder, progress=False)
        extracted = time.perf_counter() - start
        for item in store.iter_items():
            maps.update(np.ascontiguousarray(item.attention).tobytes())
    budget = Budget(train_examples=examples, epochs=1, max_tokens=64, eval_examples=100)
    start = time.perf_counter()
    tuned = fine_tune("SST-2", model, budget=budget, seed=0, cache=False, precision=precision, progress=False)
    trained = time.perf_counter() - start
    weights = hashlib.sha256()
    for tensor in tuned.loaded.model.state_dict().values():
        weights.update(tensor.detach().contiguous().numpy().tobytes())
    dev = Corpus.of(load_glue("SST-2", "dev")[:ig_examples])
    start = time.perf_counter()
    found = word_references(tuned.loaded, dev, references=("integrated_gradients",), batch_size=8, max_tokens=48,
                            steps=4, tolerance=0.01, progress=False)  # fmt: skip
    attributed = time.perf_counter() - start
    scores = np.concatenate(found.scores["integrated_gradients"])
    record = {
        "fine-tuning": trained,
        "integrated gradients": attributed,
        "extraction": extracted,
        "peak_mb": peak_mb(),
        "weights": weights.hexdigest()[:16],
        "attributions": hashlib.sha256(scores.tobytes()).hexdigest()[:16],
        "maps": maps.hexdigest()[:16],
    }
    print(json.dumps(record), flush=True)


def run_child(setting: str, args: argparse.Namespace) -> dict:
    """One child with ``setting``'s environment; its JSON record."""
    env = {name: value for name, value in os.environ.items() if name not in ALLOCATOR_VARIABLES}
    if setting == SETTINGS[1]:
        env.update(ALLOCATOR_VARIABLES)
    env["OMP_NUM_THREADS"] = "1"
    command = [sys.executable, __file__, "--child", "--examples", str(args.examples),
               "--ig-examples", str(args.ig_examples), "--sentences", str(args.sentences),
               "--precision", args.precision]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode:
        raise SystemExit(f"the child with {setting} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=1000, help="SST-2 training examples (one epoch)")
    parser.add_argument("--ig-examples", type=int, default=40, help="SST-2 dev examples attributed")
    parser.add_argument("--sentences", type=int, default=3000, help="UD EWT train sentences extracted")
    parser.add_argument("--rounds", type=int, default=2, help="rounds, each setting once a round")
    parser.add_argument("--precision", default="auto", help="fine-tuning precision: auto, fp32 or bf16")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.examples, args.ig_examples, args.sentences, args.precision)
        return
    print(machine())
    print(f"allocator settings: {' '.join(f'{k}={v}' for k, v in ALLOCATOR_VARIABLES.items())}")
    records: dict[str, list[dict]] = {setting: [] for setting in SETTINGS}
    for round_ in range(args.rounds):
        for setting in SETTINGS if round_ % 2 == 0 else SETTINGS[::-1]:
            records[setting].append(run_child(setting, args))
            shown = ", ".join(f"{k} {v:.1f}" for k, v in records[setting][-1].items() if isinstance(v, float))
            print(f"  round {round_ + 1}, {setting}: {shown}", flush=True)
    before, after = SETTINGS
    for stage in ("extraction", "fine-tuning", "integrated gradients"):
        fast = {setting: min(r[stage] for r in records[setting]) for setting in SETTINGS}
        print(f"{stage}: {before} {fast[before]:.1f} s, {after} {fast[after]:.1f} s: "
              f"{fast[before] / fast[after]:.2f}x")  # fmt: skip
    peaks = {setting: max(r["peak_mb"] for r in records[setting]) for setting in SETTINGS}
    print(f"peak memory of a child: {before} {peaks[before]:.0f} MB, {after} {peaks[after]:.0f} MB "
          f"({peaks[after] / peaks[before] - 1:+.1%})")  # fmt: skip
    for field in ("maps", "weights", "attributions"):
        digests = {r[field] for rs in records.values() for r in rs}
        print(f"{field}: {'the same bit for bit' if len(digests) == 1 else 'DIFFERENT: ' + ', '.join(sorted(digests))}")


if __name__ == "__main__":
    main()
