"""What building the head atlas costs: time against reading the run's files, and the page's size.

Two synthetic runs shaped like a 12 x 12 model's (per-head metrics of notebooks 05, 06 and 07, an
attention store of 16 sentences as notebook 00 writes), built and written as ``bertology atlas`` does:
one run alone, then both side by side with their heads matched. The baseline is reading what the
atlas reads: every metrics.json of the two runs and every map of their stores. The issue's targets: seconds, and under 10 MB
of HTML for two runs of a 144-head model.

    python bench/bench_atlas.py [--layers 12] [--heads 12] [--repeats 3] [--record]

``--record`` writes bench/results/atlas.json and the benchmarks page's table from it.
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
sys.path.insert(0, str(ROOT / "bench"))

from _machine import machine  # noqa: E402

RECORD = ROOT / "bench" / "results" / "atlas.json"
#: The generated block (bertology_utils.present.generated) that shows the recorded run, and its page.
BLOCK = "atlas"
PAGE = ROOT / "docs" / "benchmarks.md"
TARGET_MB = 10.0


def doc_block(record: dict) -> str:
    s = record["settings"]
    lines = [
        f"Two synthetic runs of a {s['layers']} x {s['heads']} model, {s['sentences']} stored sentences each, "
        f"fastest of {s['repeats']} ({record['date']}, {record['machine']}); baseline: reading every "
        f"metrics.json and every stored map of the two runs, {record['baseline_s']:.3f} s. Target: seconds, and under {TARGET_MB:g} MB "
        "of HTML for two runs.",
        "",
        "| atlas | build and write | x baseline | atlas.html |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {r['case']} | {r['seconds']:.2f} s | {r['seconds'] / record['baseline_s']:.1f}x | {r['page_mb']:.2f} MB |"
        for r in record["rows"]
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=3, help="builds per case (the fastest counts)")
    parser.add_argument("--record", action="store_true", help="record the results and the documentation's table")
    args = parser.parse_args()

    from atlas_checks import make_run

    from bertology_utils.attention.store import AttentionStore
    from bertology_utils.present.atlas import PAGE_FILE, build_atlas

    def fastest(work) -> float:
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            work()
            times.append(time.perf_counter() - start)
        return min(times)

    lengths = tuple(range(8, 24))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        runs = [make_run(root, f"run{i}", args.layers, args.heads, seed=i, lengths=lengths) for i in range(2)]

        def read_all():
            for run in runs:
                [json.loads(p.read_text()) for p in run.glob("*/metrics.json")]
                store = AttentionStore.open(run / "00_tour" / "tour.zarr")
                [store.get(i) for i in range(len(store))]

        baseline = fastest(read_all)
        rows = []
        for case, chosen in (("one run", runs[:1]), ("two runs side by side, heads matched", runs)):
            seconds = fastest(lambda chosen=chosen: build_atlas(*chosen).write(root / "out"))
            size = (root / "out" / PAGE_FILE).stat().st_size / 1e6
            rows.append({"case": case, "seconds": seconds, "page_mb": size})
    record = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": machine(),
        "settings": {"layers": args.layers, "heads": args.heads, "sentences": len(lengths), "repeats": args.repeats},
        "baseline_s": baseline,
        "rows": rows,
    }
    print(doc_block(record))
    if args.record:
        RECORD.parent.mkdir(parents=True, exist_ok=True)
        RECORD.write_text(json.dumps(record, indent=2) + "\n")
        from bertology_utils.present.generated import write_block

        write_block(PAGE, BLOCK, doc_block(record))


if __name__ == "__main__":
    main()
