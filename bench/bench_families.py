"""Extraction on every encoder family against that family's own bare batched forward, in one run.

Each family's model is built at random by tests/tiny_models.py with a tokenizer of its kind (WordPiece,
SentencePiece or byte-level BPE, trained on the project's sample), in two sizes:

  tiny  the test suite's shape (2-3 layers, 2-4 heads of 8 dimensions)
  base  12 layers x 12 heads of 64 dimensions (hidden 768; the feed-forward block is 2 x hidden, half a
        real checkpoint's, which makes the forward cheaper and the target harder)

Per family and size, best of ``--repeats`` (interleaved, so drifting load hits both alike):

  bare      the batched forward with attentions, tokenized beforehand, length-sorted batches
            (bench_extraction.bare_forward)
  tokenize  the same sentences through the tokenizer in one batched call, nothing else
  pipeline  extract_attention: tokenize, align, forward, word conversion, store write

and pipeline time / bare time. Target: at most 1.1 for every family. An extraction from words cannot go
below (tokenize + bare) / bare, printed as the floor: where that is above the target (a model so small that
tokenizing costs more than a tenth of its forward), the target cannot be met by any extraction from words.

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

from bertology_utils.present.readable import format_number  # noqa: E402

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
    bare, tok, full = [], [], []
    for _ in range(repeats):
        bare.append(bare_forward(loaded, corpus, batch_size))
        tok.append(tokenize(loaded, corpus))
        full.append(pipeline(loaded, corpus, batch_size))
    return {
        "family": family,
        "size": size,
        "shape": f"{loaded.num_layers}x{loaded.num_heads}",
        "bare_s": round(min(bare), 4),
        "tokenize_s": round(min(tok), 4),
        "pipeline_s": round(min(full), 4),
        "floor": round((min(tok) + min(bare)) / min(bare), 3),
        "ratio": round(min(full) / min(bare), 3),
    }


def tokenize(loaded, corpus) -> float:
    """Seconds to tokenize the sentences in one batched call: the least any extraction from words spends
    beside the forward (the bare forward is given its inputs tokenized)."""
    words = [list(s.words) for s in corpus]
    start = time.perf_counter()
    loaded.tokenizer(words, is_split_into_words=True)
    return time.perf_counter() - start


def table(rows: list[dict]) -> str:
    lines = [
        "| family | size | layers x heads | bare forward (s) | tokenizing (s) | extraction (s) "
        "| floor: (tokenizing + bare) / bare | extraction / bare |",
        "|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| `{r['family']}` | {r['size']} | {r['shape']} | {format_number(r['bare_s'])} | {format_number(r['tokenize_s'])} "
        f"| {format_number(r['pipeline_s'])} | {r['floor']:.2f} | {r['ratio']:.2f} |"
        for r in rows
    ]
    return "\n".join(lines)


def verdict(rows: list[dict]) -> str:
    """The target per size: met, or missed, and whether the floor already rules it out."""
    out = []
    for size in dict.fromkeys(r["size"] for r in rows):
        of_size = [r for r in rows if r["size"] == size]
        worst = max(of_size, key=lambda r: r["ratio"])
        missed = [r for r in of_size if r["ratio"] > TARGET]
        if not missed:
            out.append(f"{size}: met by every family (largest {worst['ratio']:.2f}, `{worst['family']}`)")
            continue
        below = [r for r in missed if r["floor"] > TARGET]
        out.append(
            f"{size}: missed by {len(missed)} of {len(of_size)} (largest {worst['ratio']:.2f}, `{worst['family']}`)"
            + (
                f"; for {len(below)} of them tokenizing alone costs more than {TARGET - 1:.0%} of the forward "
                f"(floor {min(r['floor'] for r in below):.2f} to {max(r['floor'] for r in below):.2f})"
                if below
                else ""
            )
        )
    return "; ".join(out)


def doc_block(record: dict) -> str:
    s = record["settings"]
    return (
        f"{s['sentences']} sentences of {s['corpus']}, batch size {s['batch_size']}, best of {s['repeats']} "
        f"({record['date']}, {record['machine']}, {s['threads']} torch threads). Target: extraction / bare "
        f"at most {TARGET}. {verdict(record['rows'])}.\n\n" + table(record["rows"])
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
    print(verdict(rows))
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
