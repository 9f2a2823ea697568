"""Speed and memory of the all-pairs head distances (bertology_utils.analyses.clustering), against the scipy loop.

  tiled     head_distances over every item of the store: all pairs of heads at once, in tiles
  loop      the loop written first: scipy's jensenshannon for every pair of heads and every
            attending row. It would take hours on the full data, so it runs on a subset (the
            first --loop-items items, --loop-pairs random pairs) in the same process, and its
            time per (pair, row) call is scaled to all pairs and all rows. Both are checked to
            give the same distances on that subset.
Target: tiled >= 50 x the scaled loop; all pairs of the default model over 1,000 sentences in
under a minute.

Memory: a simulated 12 x 12 model (random softmax maps on the same sentence lengths; no such
model ships here) run through head_distances in a fresh process: the peak of memory traced by
tracemalloc during the computation and the process's peak RSS. Target: < 2 GB.

    python bench/bench_clustering.py [--sentences 1000] [--loop-items 20] [--loop-pairs 60]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from itertools import combinations
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from bench_extraction import corpus_of  # noqa: E402  (the same sentences as the extraction benchmark)


def scipy_loop(items, pairs) -> tuple[float, int, np.ndarray]:
    """Seconds, number of jensenshannon calls, and the summed divergences for ``pairs`` over ``items``."""
    from scipy.spatial.distance import jensenshannon

    out = np.zeros(len(pairs))
    calls = 0
    start = time.perf_counter()
    for item in items:
        n = item.n_words
        maps = item.attention.reshape(-1, n, n).astype(np.float64)
        maps = 0.999 * maps / maps.sum(-1, keepdims=True) + 0.001 / n  # the same smoothing as the default
        for k, (a, b) in enumerate(pairs):
            for r in range(n):
                out[k] += jensenshannon(maps[a, r], maps[b, r]) ** 2
            calls += n
    return time.perf_counter() - start, calls, out


def simulate(lengths: list[int], layers: int, heads: int, dtype: str) -> dict:
    """head_distances on random maps of a layers x heads model; time and peak memory (run in a fresh process)."""
    import tracemalloc

    from bertology_utils.analyses.clustering import head_distances
    from bertology_utils.attention.word_attention import ItemAttention

    def items():
        rng = np.random.default_rng(0)
        for index, n in enumerate(lengths):
            logits = rng.normal(size=(layers, heads, n, n)).astype(np.float32) * 2
            maps = np.exp(logits)
            maps /= maps.sum(-1, keepdims=True)
            yield ItemAttention(
                index=index,
                item_id=str(index),
                words=("w",) * n,
                word_kinds=np.zeros(n, np.int8),
                segments=np.zeros(n, np.int8),
                attention=maps,
                n_tokens=n,
            )

    tracemalloc.start()
    start = time.perf_counter()
    result = head_distances(items(), dtype=np.dtype(dtype))
    seconds = time.perf_counter() - start
    traced_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {
        "heads": int(result.n_heads),
        "items": result.n_items,
        "seconds": round(seconds, 2),
        "traced_peak_mb": round(traced_peak / 2**20, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--loop-items", type=int, default=20, help="items the scipy loop runs on")
    parser.add_argument("--loop-pairs", type=int, default=60, help="random head pairs the scipy loop runs on")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--skip-simulation", action="store_true", help="skip the 12 x 12 memory run")
    parser.add_argument("--simulate", help=argparse.SUPPRESS)  # internal: the fresh-process memory run
    args = parser.parse_args()
    if args.simulate:
        print(json.dumps(simulate(**json.loads(args.simulate))))
        return

    from bertology_utils.analyses.clustering import head_distances
    from bertology_utils.attention.extraction import extract_cached
    from bertology_utils.core.models import load_model

    loaded = load_model()
    corpus, described = corpus_of(args.sentences)
    start = time.perf_counter()
    store = extract_cached(corpus, loaded, progress=False)
    extraction = time.perf_counter() - start
    k = loaded.num_layers * loaded.num_heads
    print(
        f"model {loaded.name} ({loaded.num_layers}x{loaded.num_heads} = {k} heads); {len(corpus)} sentences of "
        f"{described}; attention store ready in {extraction:.1f} s (extraction, or the cache)"
    )

    timings = {}
    for dtype in (np.float64, np.float32):
        runs = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            result = head_distances(store, dtype=dtype)
            runs.append(time.perf_counter() - start)
        timings[np.dtype(dtype).name] = min(runs)
    rows, n_pairs = result.n_rows, k * (k - 1) // 2
    print(
        f"  tiled, all {n_pairs} pairs over {result.n_items} items ({rows} attending rows), store reading included: "
        + ", ".join(f"{name} {t:.2f} s" for name, t in timings.items())
    )

    rng = np.random.default_rng(0)
    all_pairs = list(combinations(range(k), 2))
    pairs = [
        all_pairs[i] for i in sorted(rng.choice(len(all_pairs), min(args.loop_pairs, len(all_pairs)), replace=False))
    ]
    subset = list(store.iter_items(range(args.loop_items)))
    loop_seconds, calls, loop_values = scipy_loop(subset, pairs)
    ours = head_distances(subset).matrix[tuple(np.array(pairs).T)]
    agreement = float(np.max(np.abs(ours - loop_values) / loop_values))
    per_call = loop_seconds / calls
    loop_scaled = per_call * n_pairs * rows
    ratio = loop_scaled / timings["float64"]
    print(
        f"  scipy loop: {calls} calls ({len(pairs)} pairs x {len(subset)} items) in {loop_seconds:.2f} s = "
        f"{1e6 * per_call:.1f} us per (pair, row); scaled to {n_pairs} pairs x {rows} rows: {loop_scaled:.0f} s"
    )
    print(f"  largest relative difference, tiled vs loop on that subset: {agreement:.1e}")
    print(
        f"tiled (float64) vs scipy loop: {ratio:.0f}x (target >= 50); "
        f"{timings['float64']:.1f} s for all pairs (target < 60 s)"
    )

    out = {
        "sentences": len(corpus),
        "data": described,
        "heads": k,
        "pairs": n_pairs,
        "rows": rows,
        "tiled_seconds": {n: round(t, 3) for n, t in timings.items()},
        "loop_us_per_call": round(1e6 * per_call, 2),
        "loop_scaled_seconds": round(loop_scaled, 1),
        "ratio_vs_loop": round(ratio, 1),
        "max_relative_difference": agreement,
    }
    if not args.skip_simulation:
        lengths = [item.n_words for item in store.iter_items()]
        spec = json.dumps({"lengths": lengths, "layers": 12, "heads": 12, "dtype": "float64"})
        run = subprocess.run([sys.executable, __file__, "--simulate", spec], check=True, capture_output=True, text=True)
        sim = json.loads(run.stdout.strip().splitlines()[-1])
        print(
            f"simulated 12x12 model ({sim['heads']} heads, random maps on the same {sim['items']} sentence "
            f"lengths): {sim['seconds']:.1f} s; peak traced memory {sim['traced_peak_mb']:.0f} MB, "
            f"process peak RSS {sim['peak_rss_mb']:.0f} MB (target < 2048 MB)"
        )
        out["simulated_12x12"] = sim
    print(json.dumps(out))


if __name__ == "__main__":
    main()
