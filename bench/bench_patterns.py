"""Speed of the per-head surface statistics (bertology_utils.analyses.patterns), against a plain Python loop.

  vectorised  surface_statistics over every item of the store (read from disk included), word level,
              then the same at token level, plus vig_patterns and the Kovaleva classifier
  loop        patterns._surface_statistics_loop: a Python loop over items, heads, rows and columns. It runs on
              the first --loop-items items only and its time is scaled by the number of attention
              entries (sum of n^2 over items) to the whole store. Both are checked to agree there.
Target: 1,000 sentences of the default model in under a minute on 2 cores.

    python bench/bench_patterns.py [--sentences 1000] [--loop-items 10]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from bench_extraction import corpus_of  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--loop-items", type=int, default=10)
    parser.add_argument("--model", default=None)
    args = parser.parse_args()

    from bertology_utils.analyses.pattern_models import classify_items
    from bertology_utils.analyses.patterns import _surface_statistics_loop, surface_statistics, vig_patterns
    from bertology_utils.attention.extraction import extract_cached
    from bertology_utils.core.models import load_model

    model = load_model(args.model)
    corpus, name = corpus_of(args.sentences)
    t0 = time.perf_counter()
    store = extract_cached(corpus, model, keep_tokens=True, progress=False)
    extract_s = time.perf_counter() - t0

    timings = {}
    for level in ("word", "token"):
        t0 = time.perf_counter()
        stats = surface_statistics(store, level)
        timings[f"surface_{level}_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    vig_patterns(store)
    timings["vig_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    classify_items(store, method="template")
    timings["kovaleva_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    items = list(store)
    timings["read_store_s"] = time.perf_counter() - t0

    subset = items[: args.loop_items]
    t0 = time.perf_counter()
    slow = _surface_statistics_loop(subset, "word")
    loop_s = time.perf_counter() - t0
    fast = surface_statistics(subset, "word")
    agree = all(np.allclose(fast[k], slow[k], atol=1e-8, equal_nan=True) for k in slow)
    entries = lambda its: sum(i.attention.shape[-1] ** 2 for i in its)  # noqa: E731
    scaled = loop_s * entries(items) / entries(subset)
    t0 = time.perf_counter()
    surface_statistics(items, "word")
    in_memory = time.perf_counter() - t0
    out = {
        "model": model.name,
        "layers": model.num_layers,
        "heads": model.num_heads,
        "data": name,
        "items": stats.n_items,
        "extract_or_reuse_s": round(extract_s, 1),
        **{k: round(v, 2) for k, v in timings.items()},
        "surface_word_in_memory_s": round(in_memory, 3),
        "loop_items": len(subset),
        "loop_s": round(loop_s, 2),
        "loop_scaled_to_all_s": round(scaled, 1),
        "speedup_vs_loop_from_store": round(scaled / timings["surface_word_s"], 1),
        "speedup_vs_loop_in_memory": round(scaled / in_memory, 1),
        "loop_agrees": bool(agree),
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
