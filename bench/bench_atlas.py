"""What building the head atlas costs: time against reading the run's files, and the page's size.

Two synthetic runs shaped like a 12 x 12 model's (every notebook's per-head metrics, an attention
store of 16 sentences, as notebook 00 writes), built as ``bertology atlas`` does: one run alone, then
both side by side with their heads matched. The baseline is reading every metrics.json of the runs
(what any joining must do). The issue's targets: seconds, and under 10 MB of HTML for two runs.

    python bench/bench_atlas.py [--layers 12] [--heads 12] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=3, help="builds per case (the fastest counts)")
    args = parser.parse_args()

    from atlas_checks import make_run

    from bertology_utils.present.atlas import build_atlas

    def fastest(work) -> float:
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            work()
            times.append(time.perf_counter() - start)
        return min(times)

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        runs = [
            make_run(root, f"run{i}", args.layers, args.heads, seed=i, lengths=tuple(range(8, 24))) for i in range(2)
        ]
        read = fastest(lambda: [json.loads(p.read_text()) for run in runs for p in run.glob("*/metrics.json")])
        print(f"{args.layers} x {args.heads} heads; baseline (read every metrics.json of two runs): {read:.3f} s")
        for label, chosen in (("one run", runs[:1]), ("two runs", runs)):
            seconds = fastest(lambda chosen=chosen: build_atlas(*chosen).write(root / "out"))
            size = (root / "out" / "atlas.html").stat().st_size / 1e6
            print(f"{label}: build + write {seconds:.2f} s ({seconds / read:.0f}x the baseline), page {size:.2f} MB")


if __name__ == "__main__":
    main()
