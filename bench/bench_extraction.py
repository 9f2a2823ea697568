"""Extraction throughput and memory, as ratios against baselines measured in the same run.

Throughput (sentences/s on the same sentences, best of --repeats):
  bare     batched model forward with attentions only (pre-tokenized, length-sorted batches)
  attn-only the same, stopped after the last layer's attention, as the pipeline's forward is
  loop     the loop a user writes first: one sentence at a time, Python word conversion
  pipeline bertology's extract_attention: tokenize, align, forward, word conversion, store write
Targets: pipeline >= 0.85 x bare, pipeline >= 1.3 x loop.

Memory: peak RSS of extracting N sentences against 10 x N, each in a fresh process, two ways:
the same N sentences ten times over (same length distribution: only accumulation can grow the
peak) and the first 10 x N sentences (longer outliers too; the per-batch attention budget,
MAX_BATCH_WEIGHTS, bounds those). Target: the larger run's peak grows by less than 20%.

    python bench/bench_extraction.py [--sentences 500] [--memory-sentences 200]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch


def corpus_of(n: int):
    """The first n sentences of UD EWT dev (train for larger n), or the project sample repeated."""
    from bertology_utils.core.errors import DataNotFoundError
    from bertology_utils.data import Corpus, default_treebank, load_treebank

    corpus = default_treebank("dev")
    if len(corpus) < n:
        try:
            corpus = load_treebank("train")
        except DataNotFoundError:
            pass
    if len(corpus) < n:  # only the sample is here: repeat it, and say so
        items = [corpus[i % len(corpus)] for i in range(n)]
        return Corpus.from_items(items, name=f"{corpus.name} repeated"), f"{corpus.name} repeated to {n}"
    return corpus[:n], corpus[:n].name


def bare_forward(loaded, corpus, batch_size: int, attention_only: bool = False) -> float:
    """Seconds for length-sorted batched forwards with attentions; tokenization done beforehand.

    ``attention_only``: the forward the pipeline runs, stopped after the last layer's attention.
    """
    from bertology_utils.attention.extraction import _Forward

    tok = loaded.tokenizer
    encoded = [tok(list(s.words), is_split_into_words=True) for s in corpus]
    encoded.sort(key=lambda e: len(e["input_ids"]))  # bucket by token count: the least padding
    batches = [tok.pad(encoded[i : i + batch_size], return_tensors="pt") for i in range(0, len(encoded), batch_size)]
    batches = [{k: v.to(loaded.device) for k, v in b.items()} for b in batches]
    forward = (
        _Forward(loaded, "mean", keep_tokens=False)._attentions
        if attention_only
        else (lambda b: loaded.model(**b, output_attentions=True).attentions)
    )
    start = time.perf_counter()
    with torch.inference_mode():
        for b in batches:
            assert len(forward(b)) == loaded.num_layers
    return time.perf_counter() - start


def first_loop(loaded, corpus) -> float:
    """An honest first attempt: batch of one, numpy conversion looping over words."""
    tok = loaded.tokenizer
    start = time.perf_counter()
    results = []
    with torch.inference_mode():
        for s in corpus:
            enc = tok(list(s.words), is_split_into_words=True, return_tensors="pt")
            att = torch.stack(loaded.model(**enc, output_attentions=True).attentions, 1)[0].numpy()
            word_ids = enc.word_ids(0)
            groups, last = [], object()
            for t, w in enumerate(word_ids):  # specials and each word's tokens become one group
                if w is None or w != last:
                    groups.append([])
                groups[-1].append(t)
                last = w if w is not None else object()
            to_words = np.stack([att[..., g].sum(-1) for g in groups], -1)
            results.append(np.stack([to_words[..., g, :].mean(-2) for g in groups], -2).astype(np.float16))
    return time.perf_counter() - start


def pipeline(loaded, corpus, batch_size: int) -> float:
    from bertology_utils.attention.extraction import extract_attention

    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        extract_attention(corpus, Path(tmp) / "s.zarr", loaded, batch_size=batch_size, progress=False)
        return time.perf_counter() - start


def peak_rss_mb(n: int, repeats: int = 1) -> float:
    """Peak RSS of a fresh process extracting the first n sentences, repeated, into a store."""
    code = f"""
import tempfile, sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from _memory import peak_mb
from bench_extraction import corpus_of
from bertology_utils.data import Corpus
from bertology_utils.attention.extraction import extract_attention
from bertology_utils.core.models import load_model
corpus, _ = corpus_of({n})
corpus = Corpus.from_items(list(corpus) * {repeats}, name="repeated")
with tempfile.TemporaryDirectory() as tmp:
    extract_attention(corpus, tmp + "/s.zarr", load_model(), progress=False)
print(peak_mb())  # VmHWM: ru_maxrss would start at this parent's peak
"""
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=500)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--memory-sentences", type=int, default=200, help="N for the N vs 10N memory check")
    parser.add_argument("--skip-memory", action="store_true")
    args = parser.parse_args()

    from bertology_utils.core.models import load_model

    loaded = load_model()
    corpus, described = corpus_of(args.sentences)
    n = len(corpus)
    print(
        f"model {loaded.name} ({loaded.num_layers}x{loaded.num_heads}) on {loaded.device}, "
        f"{torch.get_num_threads()} threads; {n} sentences of {described}"
    )
    pipeline(loaded, corpus[:64], args.batch_size)  # warm-up: first-call costs stay out of the numbers
    times = {"bare": [], "attn-only": [], "loop": [], "pipeline": []}
    for _ in range(args.repeats):  # interleaved, so drifting machine load hits every method alike
        times["bare"].append(bare_forward(loaded, corpus, args.batch_size))
        times["attn-only"].append(bare_forward(loaded, corpus, args.batch_size, attention_only=True))
        times["loop"].append(first_loop(loaded, corpus))
        times["pipeline"].append(pipeline(loaded, corpus, args.batch_size))
    rate = {k: n / min(v) for k, v in times.items()}
    for k, r in rate.items():
        print(f"  {k:9s} {r:8.1f} sentences/s")
    result = {
        "sentences": n,
        "rates": {k: round(v, 1) for k, v in rate.items()},
        "pipeline_vs_bare": round(rate["pipeline"] / rate["bare"], 3),
        "pipeline_vs_loop": round(rate["pipeline"] / rate["loop"], 3),
        "pipeline_vs_attention_only": round(rate["pipeline"] / rate["attn-only"], 3),
    }
    print(f"pipeline / bare forward = {result['pipeline_vs_bare']:.2f}x (target >= 0.85)")
    print(
        f"pipeline / the same forward stopped after the last attention = "
        f"{result['pipeline_vs_attention_only']:.2f}x (what tokenizing, converting and writing cost)"
    )
    print(f"pipeline / first loop   = {result['pipeline_vs_loop']:.2f}x (target >= 1.3)")
    if not args.skip_memory:
        m = args.memory_sentences
        small, repeated, first = peak_rss_mb(m), peak_rss_mb(m, 10), peak_rss_mb(10 * m)
        result["peak_rss_mb"] = {str(m): round(small), f"{m} x 10": round(repeated), str(10 * m): round(first)}
        result["memory_growth"] = {"repeated": round(repeated / small - 1, 3), "first": round(first / small - 1, 3)}
        print(
            f"peak RSS: {small:.0f} MB for {m} sentences; {repeated:.0f} MB for them ten times over "
            f"(+{100 * result['memory_growth']['repeated']:.1f}%); {first:.0f} MB for the first {10 * m} "
            f"(+{100 * result['memory_growth']['first']:.1f}%) (target < 20%)"
        )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
