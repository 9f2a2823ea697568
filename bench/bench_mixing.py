"""Context-mixing maps: their cost against plain extraction, flow's growth with length, memory.

1. Cost (seconds for the first --n sentences of UD EWT dev, best of --repeats, after a warm-up):
   plain extraction (the model's attention) against rollout and norm-weighted maps (MixingMaps
   "rollout", "norm") through the same pipeline: iter_attention with the same batch size and
   word conversion, consumed without keeping the results. Target: each < 2 x plain.
   Informative, on smaller subsets (--subset, --vz-subset), each against plain extraction of the
   same sentences: ALTI ("alti"), GlobEnc ("globenc", ALTI's vectors through the second layer norm),
   DecompX ("decompx", one vector per input token through every layer: about T forward passes for T tokens)
   and value zeroing ("value_zeroing", one layer pass per token).
2. Attention flow (O(n^4) per item: L n^2 maximum flows), limited to mixing.FLOW_MAX_TOKENS tokens:
   seconds per item of attention_flow for real EWT sentences of about --flow-lengths tokens
   (capacities from the default model's attention, as MixingMaps("flow") builds them), for all
   rows and for the [CLS] row only (rows=[0]); the fitted log-log slope next to the theory
   (n^4; n^3 for one row). Also how many EWT dev sentences the limit admits, and that the
   pipeline skips and counts the others.
3. Memory: peak RSS of a fresh process (this script, --child mode) extracting rollout maps
   into a store (extract_attention) for the first --memory-n sentences, the same ten times over
   (same lengths) and the first 10 x --memory-n (longer sentences too); plain extraction the
   same way, for reference. Target: < 20% growth. Read from VmHWM (reset after loading the
   model): getrusage's ru_maxrss in a child starts at the parent's peak (Linux carries it over
   exec), which here, with the model loaded in the parent, would hide any growth.

    python bench/bench_mixing.py [--n 1000] [--repeats 2] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from _memory import peak_mb, reset_peak, status_kb


def corpus_of(n: int):
    """The first n sentences of UD EWT dev (the default treebank), or it repeated when smaller."""
    from bertology_utils.data import Corpus, default_treebank

    corpus = default_treebank("dev")
    if len(corpus) < n:  # only the sample is here: repeat it, and say so
        items = [corpus[i % len(corpus)] for i in range(n)]
        return Corpus.from_items(items, name=f"{corpus.name} repeated"), f"{corpus.name} repeated to {n}"
    return corpus[:n], f"the first {n} of {corpus.name}"


def consume(corpus, loaded, batch_size: int, maps=None) -> float:
    """Seconds to extract ``corpus`` (maps of ``maps``, else the model's attention), results dropped."""
    from bertology_utils.attention.extraction import iter_attention

    start = time.perf_counter()
    for _ in iter_attention(corpus, loaded, batch_size=batch_size, too_long="skip", progress=False, maps=maps):
        pass
    return time.perf_counter() - start


def timed(corpus, loaded, batch_size: int, sources: dict, repeats: int) -> dict[str, float]:
    """Best of ``repeats`` seconds per source (None = plain), interleaved so drifting load hits all alike."""
    times: dict[str, list[float]] = {name: [] for name in sources}
    for _ in range(repeats):
        for name, maps in sources.items():
            times[name].append(consume(corpus, loaded, batch_size, maps))
    return {name: min(t) for name, t in times.items()}


def flow_capacities(loaded, aligned) -> np.ndarray:
    """(L, T, T) flow capacities of one aligned item: Abnar & Zuidema's residual attention per layer."""
    from bertology_utils.core.batching import Padding
    from bertology_utils.interventions.mixing import residual_attention, trace

    inputs = Padding.of(loaded).pad([aligned.input_ids], [aligned.token_type_ids]).inputs(loaded.device)
    real = inputs["attention_mask"].to(torch.float32)
    traces = trace(loaded, inputs)
    return torch.stack([residual_attention(t.probs, real)[0] for t in traces]).double().cpu().numpy()


def slope(lengths, seconds) -> float:
    return float(np.polyfit(np.log(lengths), np.log(seconds), 1)[0])


def child_memory(n: int, batch_size: int, repeat: int = 1, method: str = "rollout") -> None:
    """--child mode: extract ``method``'s maps ("plain": the model's attention) of the first n
    sentences (``repeat`` times over) into a temporary store; print RSS (MB).

    After loading, the peak is reset (Linux: ``5`` into /proc/self/clear_refs) and the extraction's
    own peak is read as well as the process's.
    """
    from bertology_utils.attention.alignment import align
    from bertology_utils.attention.extraction import extract_attention
    from bertology_utils.core.models import load_model
    from bertology_utils.data import Corpus
    from bertology_utils.interventions.mixing import MixingMaps

    loaded = load_model(None)
    corpus, _ = corpus_of(n)
    if repeat > 1:
        corpus = Corpus.from_items(list(corpus) * repeat, name=f"{corpus.name} x {repeat}")
    load_peak = peak_mb()  # model and corpus loaded
    before = (status_kb("VmRSS") or 0) / 1024
    reset = reset_peak()  # the extraction's own peak from here on
    with tempfile.TemporaryDirectory() as tmp:
        store = extract_attention(
            corpus,
            Path(tmp) / "s.zarr",
            loaded,
            batch_size=batch_size,
            progress=False,
            maps=None if method == "plain" else MixingMaps(method),
        )
        items = store.n_items
    after = peak_mb()
    longest = max(a.n_tokens for a in align(loaded.tokenizer, corpus.items, 0))
    print(
        json.dumps(
            {
                "n": n,
                "repeat": repeat,
                "items": items,
                "longest": longest,
                "load_peak_mb": load_peak,
                "before_mb": before,
                "peak_mb": max(load_peak, after),
                "extract_peak_mb": after if reset else None,
            }
        )
    )


def peak_rss(n: int, batch_size: int, repeat: int = 1, method: str = "rollout") -> dict:
    command = [sys.executable, __file__, "--child", str(n), "--child-repeat", str(repeat), "--child-maps", method]
    out = subprocess.run(
        [*command, "--batch-size", str(batch_size)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1000, help="sentences for the rollout / norm cost (default 1000)")
    parser.add_argument(
        "--subset", type=int, default=200, help="sentences for the ALTI, GlobEnc and DecompX cost (default 200)"
    )
    parser.add_argument("--only", default=None, help="comma-separated informative methods to time (default: all)")
    parser.add_argument("--vz-subset", type=int, default=64, help="sentences for value zeroing (default 64)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=2, help="runs per measurement; the fastest counts")
    parser.add_argument("--flow-lengths", default="8,16,24,32,48", help="token counts for the flow timings")
    parser.add_argument(
        "--memory-n", type=int, default=512, help="N of the N vs 10 x N memory check (default: one store block)"
    )
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run of every part")
    parser.add_argument("--skip-flow", action="store_true")
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child-repeat", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--child-maps", default="rollout", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child is not None:
        child_memory(args.child, args.batch_size, args.child_repeat, args.child_maps)
        return
    if args.quick:
        args.n, args.subset, args.vz_subset, args.repeats, args.memory_n = 64, 16, 8, 1, 20
        args.flow_lengths = "8,16,24"

    from bertology_utils.attention.alignment import align
    from bertology_utils.attention.extraction import iter_attention
    from bertology_utils.attention.word_attention import SkippedItem
    from bertology_utils.core.models import load_model
    from bertology_utils.data import default_treebank
    from bertology_utils.interventions import mixing
    from bertology_utils.interventions.mixing import MixingMaps

    began = time.perf_counter()
    loaded = load_model(None)
    corpus, described = corpus_of(args.n)
    n, bs = len(corpus), args.batch_size
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(
        f"machine: {platform.machine()}, {cpus} CPUs available ({os.cpu_count()} total), torch {torch.__version__} "
        f"with {torch.get_num_threads()} threads, load average {os.getloadavg()[0]:.1f} at start"
    )
    print(f"model {loaded.name} ({loaded.num_layers}x{loaded.num_heads}) on {loaded.device}; batch size {bs}")
    summary = []

    # ---- 1. cost against plain extraction
    print(f"\n1. cost: {described}, best of {args.repeats}, iter_attention(too_long='skip') consumed")
    warm = corpus[: min(64, n)]
    for maps in (None, MixingMaps("rollout"), MixingMaps("norm")):  # first-call costs stay out of the numbers
        consume(warm, loaded, bs, maps)
    main_t = timed(
        corpus, loaded, bs, {"plain": None, "rollout": MixingMaps("rollout"), "norm": MixingMaps("norm")}, args.repeats
    )
    plain = main_t["plain"]
    print(f"  plain extraction  {plain:7.2f} s  ({n / plain:6.1f} sentences/s)")
    for name in ("rollout", "norm"):
        ratio = main_t[name] / plain
        print(
            f"  {name:17s} {main_t[name]:7.2f} s  ({n / main_t[name]:6.1f} sentences/s)  {ratio:.2f}x plain (target < 2)"
        )
        summary.append(
            f"| {name} maps, {n:,} EWT dev sentences | {main_t[name]:.1f} s vs {plain:.1f} s plain | "
            f"**{ratio:.2f}x** plain extraction (target < 2x) |"
        )
    informative = (
        ("alti", args.subset),
        ("globenc", args.subset),
        ("decompx", args.subset),
        ("value_zeroing", args.vz_subset),
    )
    for name, size in informative:
        if args.only and name not in args.only.split(","):
            continue
        sub = corpus[: min(size, n)]
        consume(sub[: min(8, len(sub))], loaded, bs, MixingMaps(name))  # warm-up
        t = timed(sub, loaded, bs, {"plain": None, name: MixingMaps(name)}, args.repeats)
        ratio = t[name] / t["plain"]
        print(
            f"  {name:17s} {t[name]:7.2f} s vs plain {t['plain']:.2f} s on the first {len(sub)} sentences only "
            f"(best of {args.repeats}): {ratio:.1f}x plain (informative)"
        )
        summary.append(
            f"| {name} maps, first {len(sub)} EWT dev sentences | {t[name]:.1f} s vs {t['plain']:.1f} s "
            f"plain | {ratio:.1f}x plain extraction (informative) |"
        )

    # ---- 2. attention flow against length
    if not args.skip_flow:
        limit = mixing.FLOW_MAX_TOKENS
        dev = default_treebank("dev")
        aligned = align(loaded.tokenizer, dev.items, 0)
        counts = np.array([a.n_tokens for a in aligned])
        fits = int((counts <= limit).sum())
        print(
            f"\n2. attention flow: limit mixing.FLOW_MAX_TOKENS = {limit} tokens; {fits} of {len(dev)} {dev.name} "
            f"sentences ({100 * fits / len(dev):.0f}%) fit, the other {len(dev) - fits} are skipped and counted"
        )
        check = dev[:40]
        results = list(
            iter_attention(
                check,
                loaded,
                batch_size=bs,
                too_long="skip",
                max_tokens=limit,
                progress=False,
                maps=MixingMaps("flow", flow_rows=(0,)),
            )
        )
        skipped = [r for r in results if isinstance(r, SkippedItem)]
        expected = int((counts[:40] > limit).sum())
        print(
            f"  pipeline check on the first {len(check)}: MixingMaps('flow', flow_rows=(0,)) with max_tokens={limit}: "
            f"{len(results) - len(skipped)} computed, {len(skipped)} SkippedItem (expected {expected})"
            + (f", e.g. {skipped[0].reason!r}" if skipped else "")
        )
        wanted = [int(x) for x in args.flow_lengths.split(",")]
        picks = [int(np.argmin(np.abs(counts - w) + 1e-3 * np.arange(len(counts)))) for w in wanted]
        lengths, full, cls = [], [], []
        print(
            f"  seconds per item (best of {args.repeats}, one run past 2 s), real sentences, {loaded.num_layers} layers:"
        )
        print("    tokens   all rows   [CLS] row   maximum flows (all rows)")
        for k in picks:
            capacities = flow_capacities(loaded, aligned[k])
            tokens = capacities.shape[-1]
            f = _best(args.repeats, mixing.attention_flow, capacities)
            c = _best(args.repeats, mixing.attention_flow, capacities, rows=[0])
            lengths.append(tokens)
            full.append(f)
            cls.append(c)
            print(f"    {tokens:6d}   {f:8.3f}   {c:9.4f}   {loaded.num_layers * tokens**2:,}")
        s_full, s_cls = slope(lengths, full), slope(lengths, cls)
        print(f"  fitted growth: all rows ~ n^{s_full:.2f} (theory n^4), [CLS] row ~ n^{s_cls:.2f} (theory n^3)")
        if len(lengths) > 2:  # per-call overheads weigh on short items: the slope between the two longest
            top_full, top_cls = slope(lengths[-2:], full[-2:]), slope(lengths[-2:], cls[-2:])
            print(
                f"  between the two longest ({lengths[-2]} and {lengths[-1]} tokens): all rows ~ n^{top_full:.2f}, "
                f"[CLS] row ~ n^{top_cls:.2f}"
            )
        # projected cost of every admitted dev sentence, from the fit through the measured points
        within = counts[counts <= limit]
        project = lambda secs, s: float(sum(secs[-1] * (within / lengths[-1]) ** s))  # noqa: E731
        p_full, p_cls = project(full, s_full), project(cls, s_cls)
        print(
            f"  projected for all {fits} admitted dev sentences: {p_full / 60:.0f} min all rows, "
            f"{p_cls / 60:.1f} min [CLS] row (from the fit)"
        )
        summary.append(
            f"| flow, per item of {lengths[-1]} tokens (limit {limit}) | {full[-1]:.2f} s all rows, "
            f"{cls[-1]:.3f} s [CLS] row | growth n^{s_full:.1f} (theory n^4), n^{s_cls:.1f} for [CLS] (theory n^3) |"
        )

    # ---- 3. memory: bounded by the batch
    if not args.skip_memory:
        import inspect

        from bertology_utils.attention.extraction import extract_attention

        block = inspect.signature(extract_attention).parameters["block_size"].default
        m = args.memory_n
        _, described = corpus_of(10 * m)  # says so when the treebank is shorter and is cycled
        labels = (f"first {m:,}", f"first {m:,} x 10", f"first {10 * m:,}")
        print(f"  the {10 * m:,} sentences: {described}")
        print(
            f"\n3. memory: peak RSS (MB) of a fresh process extracting into a store "
            f"(extract_attention, batch size {bs}, blocks of {block} items)"
        )
        print(f"  {'':18s}" + "".join(f"{label:>16s}" for label in labels) + "   growth (x 10 / first 10N)")
        runs, growth = {}, {}
        for method in ("plain", "rollout"):
            runs[method] = [
                peak_rss(m, bs, method=method),
                peak_rss(m, bs, repeat=10, method=method),
                peak_rss(10 * m, bs, method=method),
            ]
            peaks = [r["peak_mb"] for r in runs[method]]
            growth[method] = (peaks[1] / peaks[0] - 1, peaks[2] / peaks[0] - 1)
            name = "plain attention" if method == "plain" else "rollout maps"
            print(
                f"  {name:18s}"
                + "".join(f"{p:16.0f}" for p in peaks)
                + f"   +{100 * growth[method][0]:.1f}% / +{100 * growth[method][1]:.1f}%"
            )
        over = [r["peak_mb"] - p["peak_mb"] for r, p in zip(runs["rollout"], runs["plain"])]
        print(f"  {'rollout - plain':18s}" + "".join(f"{d:+16.0f}" for d in over))
        small, repeated, large = runs["rollout"]
        print(
            f"  {small['before_mb']:.0f} MB resident after loading the model (loading's own peak "
            f"{small['load_peak_mb']:.0f} MB); longest sentence {small['longest']} tokens in the first {m:,}, "
            f"{large['longest']} in the first {10 * m:,}"
        )
        print(
            f"  rollout: +{100 * growth['rollout'][0]:.1f}% for the same {m:,} sentences ten times over (same "
            f"lengths), +{100 * growth['rollout'][1]:.1f}% for the first {10 * m:,} "
            f"(target < 20%)"
        )
        if m < block:
            print(
                f"  note: the first {m:,} fit in one block of {block} items"
                + (f" and in one batch of {bs}" if m < bs else "")
                + f"; a larger run overlaps a block's forward with the next block's alignment and the previous "
                f"block's write, and plain extraction grows alike ({'+' if over[2] >= 0 else ''}{over[2]:.0f} MB "
                f"between rollout and plain at {10 * m:,})"
            )
        summary.append(
            f"| peak RSS, rollout store of {labels[0]} / {labels[1]} / {labels[2]} EWT dev sentences | "
            f"{small['peak_mb']:.0f} / {repeated['peak_mb']:.0f} / {large['peak_mb']:.0f} MB (plain extraction: "
            + " / ".join(f"{r['peak_mb']:.0f}" for r in runs["plain"])
            + f" MB; {small['before_mb']:.0f} MB with the model loaded) | **+{100 * growth['rollout'][0]:.1f}%** "
            f"x 10, **+{100 * growth['rollout'][1]:.1f}%** first {10 * m:,} (plain: +{100 * growth['plain'][0]:.1f}%, "
            f"+{100 * growth['plain'][1]:.1f}%) (target < 20%) |"
        )

    print(f"\ntotal {time.perf_counter() - began:.0f} s")
    print(f"\nsummary ({cpus} CPUs, {torch.get_num_threads()} torch threads, {loaded.name}, batch size {bs}):\n")
    print("| measurement | result | ratio |")
    print("|---|---|---|")
    print("\n".join(summary))


def _best(repeats: int, fn, *a, **kw) -> float:
    """Fastest of ``repeats`` calls; one call is enough once a call takes over 2 s (timer noise is negligible)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*a, **kw)
        best = min(best, time.perf_counter() - start)
        if best > 2:
            break
    return best


if __name__ == "__main__":
    main()
