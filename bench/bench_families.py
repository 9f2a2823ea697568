"""Extraction on every encoder family against that family's own bare batched forward, in one run.

Each family's model is built at random by tests/tiny_models.py with a tokenizer of its kind (WordPiece,
SentencePiece or byte-level BPE, trained on the project's sample), in two sizes:

  tiny  the test suite's shape (2-3 layers, 2-4 heads of 8 dimensions)
  base  12 layers x 12 heads of 64 dimensions (hidden 768; the feed-forward block is 2 x hidden, half a
        real checkpoint's, which makes the forward cheaper and the target harder)

Per family and size, best of ``--repeats`` (interleaved, so drifting load hits both alike):

  bare      the batched forward with attentions, tokenized beforehand, length-sorted batches
            (bench_extraction.bare_forward)
  pipeline  extract_attention: tokenize, align, forward, word conversion, store write

and pipeline time / bare time. Target: at most 1.1 for every family.

    python bench/bench_families.py [--sentences 200] [--sizes tiny,base] [--families bert,...] [--record]

``--record`` writes bench/results/families.json and the benchmarks page's table from it.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "tests")]

from _machine import machine  # noqa: E402
from bench_extraction import bare_forward, corpus_of, pipeline  # noqa: E402
from tiny_models import ALL_FAMILIES, build_tiny_model  # noqa: E402

SIZES = {"tiny": {}, "base": {"num_layers": 12, "num_heads": 12, "head_dim": 64}}
TARGET = 1.1
RECORD = ROOT / "bench" / "results" / "families.json"
#: The generated block (bertology_utils.present.generated) that shows the recorded run, and its page.
BLOCK = "families"
PAGE = ROOT / "docs" / "benchmarks.md"


def measure(family: str, size: str, corpus, folder: Path, batch_size: int, repeats: int) -> dict:
    from bertology_utils.core.models import load_model

    loaded = load_model(build_tiny_model(family, folder / f"{family}-{size}", max_positions=512, **SIZES[size]))
    pipeline(loaded, corpus[:16], batch_size)  # warm-up: first-call costs stay out of the numbers
    bare, full = [], []
    for _ in range(repeats):
        bare.append(bare_forward(loaded, corpus, batch_size))
        full.append(pipeline(loaded, corpus, batch_size))
    return {
        "family": family,
        "size": size,
        "shape": f"{loaded.num_layers}x{loaded.num_heads}",
        "bare_s": round(min(bare), 3),
        "pipeline_s": round(min(full), 3),
        "ratio": round(min(full) / min(bare), 3),
    }


def table(rows: list[dict]) -> str:
    lines = [
        "| family | size | layers x heads | bare forward (s) | extraction (s) | extraction / bare |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| `{r['family']}` | {r['size']} | {r['shape']} | {r['bare_s']:.2f} | {r['pipeline_s']:.2f} | {r['ratio']:.2f} |"
        for r in rows
    ]
    return "\n".join(lines)


def doc_block(record: dict) -> str:
    s = record["settings"]
    worst = max(record["rows"], key=lambda r: r["ratio"])
    return (
        f"{s['sentences']} sentences of {s['corpus']}, batch size {s['batch_size']}, best of {s['repeats']} "
        f"({record['date']}, {record['machine']}, {s['threads']} torch threads). Largest ratio: "
        f"{worst['ratio']:.2f} (`{worst['family']}`, {worst['size']}); target at most {TARGET}.\n\n"
        + table(record["rows"])
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sizes", default=",".join(SIZES))
    parser.add_argument("--families", default=",".join(ALL_FAMILIES))
    parser.add_argument("--record", action="store_true", help="record the results and the documentation's table")
    args = parser.parse_args()

    corpus, described = corpus_of(args.sentences)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes.split(","):
            for family in args.families.split(","):
                rows.append(measure(family, size, corpus, Path(tmp), args.batch_size, args.repeats))
                print(table(rows[-1:]).splitlines()[-1], flush=True)
    print(table(rows))
    worst = max(rows, key=lambda r: r["ratio"])
    print(
        f"largest extraction / bare forward: {worst['ratio']:.2f} ({worst['family']}, {worst['size']}); target <= {TARGET}"
    )
    if args.record:
        record = {
            "date": time.strftime("%Y-%m-%d"),
            "machine": machine(),
            "settings": {
                "sentences": len(corpus),
                "corpus": described,
                "batch_size": args.batch_size,
                "repeats": args.repeats,
                "threads": torch.get_num_threads(),
            },
            "rows": rows,
        }
        RECORD.parent.mkdir(parents=True, exist_ok=True)
        RECORD.write_text(json.dumps(record, indent=2) + "\n")
        from bertology_utils.present.generated import write_block

        write_block(PAGE, BLOCK, doc_block(record))


if __name__ == "__main__":
    main()
