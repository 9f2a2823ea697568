"""The token decompositions' cost: this tree against another revision, measured in the same run.

DecompX (`decompose`: one vector per input token carried through every layer), ALTI and GlobEnc (each layer's
transformed vectors) on the traces of the first --n UD EWT dev sentences of 15 to 35 words, --batch-size at a
time, on one thread; each the fastest of --repeats passes. A child process computes them with this tree's
bertology_utils and one with REV's (a temporary git worktree), in turns for --rounds rounds, on the same model and
sentences. Prints each one's seconds (the fastest over the rounds), the ratio REV / now, and how far the results
are apart: bitwise equal, or the largest difference relative to the largest value.

    python bench/bench_mixing_parts.py --against REV [--n 32] [--batch-size 8] [--repeats 3] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from _timing import fastest_call  # noqa: E402

METHODS = ("decompx", "alti", "globenc")


def child(out: Path, n: int, batch_size: int, repeats: int) -> None:
    """Time the three decompositions with whichever bertology_utils is first on the path; save seconds and results."""
    import torch

    from bertology_utils.core.models import load_model
    from bertology_utils.data import load_treebank
    from bertology_utils.interventions.mixing import alti, decompx, globenc
    from bertology_utils.interventions.mixing.base import trace

    torch.set_num_threads(1)
    loaded = load_model(None, device="cpu")
    model = loaded.model
    sentences = [" ".join(s.words) for s in load_treebank("dev") if 15 <= len(s.words) <= 35][:n]
    batches = [
        dict(loaded.tokenizer(sentences[k : k + batch_size], return_tensors="pt", padding=True))
        for k in range(0, len(sentences), batch_size)
    ]
    methods = {
        "decompx": lambda traces, real: list(decompx.decompose(model, traces)),
        "alti": lambda traces, real: [alti.alti_contributions(model, k, t, real) for k, t in enumerate(traces)],
        "globenc": lambda traces, real: [
            globenc.globenc_contributions(model, k, t, real) for k, t in enumerate(traces)
        ],
    }
    seconds: dict[str, float] = {}
    results = {}
    with torch.no_grad():
        traced = [(trace(model, batch), batch["attention_mask"].bool()) for batch in batches]
        for name, method in methods.items():
            seconds[name], results[name] = fastest_call(
                repeats, lambda method=method: [method(traces, real) for traces, real in traced]
            )
    torch.save(results, out / "results.pt")
    (out / "seconds.json").write_text(json.dumps({**seconds, "module": str(Path(decompx.__file__).parents[3])}))


def _run(tree: Path, out: Path, args: argparse.Namespace) -> dict:
    """The child's seconds, with ``tree``'s bertology_utils."""
    out.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, __file__, "--child", str(out), "--n", str(args.n), "--batch-size", str(args.batch_size)]
    command += ["--repeats", str(args.repeats)]
    subprocess.run(command, check=True, env={**os.environ, "PYTHONPATH": str(tree)})
    found = json.loads((out / "seconds.json").read_text())
    if Path(found.pop("module")).resolve() != tree.resolve():
        raise SystemExit(f"the child did not import bertology_utils from {tree}")
    return found


def _apart(before: list, now: list) -> str:
    """How far two runs' tensors are apart."""
    import torch

    pairs = [(a, b) for xs, ys in zip(before, now) for a, b in zip(xs, ys)]
    if all(torch.equal(a, b) for a, b in pairs):
        return "bitwise equal"
    gap = max(float((a - b).abs().max() / a.abs().max().clamp_min(1e-30)) for a, b in pairs)
    return f"largest difference {gap:.2g} of the largest value"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", help="the git revision to compare with (e.g. HEAD~1)")
    parser.add_argument("--n", type=int, default=32, help="sentences (default 32)")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3, help="passes per child; the fastest counts")
    parser.add_argument("--rounds", type=int, default=2, help="children per tree, in turns")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(Path(args.child), args.n, args.batch_size, args.repeats)
        return
    if not args.against:
        parser.error("--against REV is required")
    import torch

    with tempfile.TemporaryDirectory() as folder:
        other = Path(folder) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(other), args.against], check=True)
        try:
            seconds: dict[str, dict[str, float]] = {"before": {}, "now": {}}
            for _ in range(args.rounds):
                for label, tree in (("before", other), ("now", ROOT)):
                    for name, took in _run(tree, Path(folder) / label, args).items():
                        seconds[label][name] = min(seconds[label].get(name, float("inf")), took)
            results = {label: torch.load(Path(folder) / label / "results.pt") for label in seconds}
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(other)], check=True)
    print(f"{args.n} EWT dev sentences, batches of {args.batch_size}, one thread; {args.against} against this tree")
    for name in METHODS:
        before, now = seconds["before"][name], seconds["now"][name]
        print(
            f"{name}: {before:.2f} s at {args.against}, {now:.2f} s now, {before / now:.2f}x; "
            f"{_apart(results['before'][name], results['now'][name])}"
        )


if __name__ == "__main__":
    main()
