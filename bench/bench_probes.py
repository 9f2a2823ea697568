"""Probe speed: training epochs streamed from the store vs from kept blocks, and probes side by side.

  read      two passes over the training data as batches (store read + batch building), no model, no
            kept blocks; the first may read from disk, the second from the OS page cache
  train     each probe on UD EWT train, twice in the same run: on a ProbeData that reads the store on
            every pass (cache_size=0) and on one that keeps its prepared blocks (the default); the
            fastest epoch after the first (which fills the blocks) of each, and their ratio; with a
            --device other than the CPU, a third fit there from the kept blocks, and its ratio to the
            CPU's kept epoch measured just before
  together  every probe fitted by fit_probes, one thread each and as many at a time as there are
            cores, in threads and in processes (fit_probes' choice on a GPU), against the sum of their fits
            one after another (same data, same epochs); with a --device, the same there (whether threads
            overlap there at all, and processes)
  score     predicting UD EWT dev with the trained probe (on --device); part of train
  feed      with a --device other than the CPU: one training epoch's batches (attention and vectors) sent
            there as the fits used to, padded on the host and copied whole (Batch.to), against
            ProbeData.batches(device=...) (each block sent once, each batch gathered there), the second of
            two passes each (the first sends the blocks), their ratio, and whether the first batches are equal
  scorer    one training step (forward and backward) of the Distances + words and the Attn + words
            scorers on the first --scorer-batches training batches: the package's fused, cache-sized
            chunks against the same formula op by op in autograd (how each was computed before), and
            their ratio; with a --device other than the CPU, the fused step there too, each batch one
            chunk (the package's choice on such a device) against the CPU's 4 MB chunks

The extraction (extract_cached) runs first and is not timed. Without EWT the project's sample
treebank is used (and the numbers mean little). Peak memory (max RSS) is printed after each
step: kept blocks take at most the ProbeData's cache_size (about 1.1 GB for EWT train).

    python bench/bench_probes.py [--epochs 2] [--n-train N] [--probes attn,words,distances] [--threads 1]
                                 [--scorer-batches 100] [--device cuda] [--steps read,train,...] [--no-cpu]

--device defaults to the model's (load_model's: cuda when there is one). --steps picks steps (default: all);
--no-cpu leaves out the CPU's fits in together, to time a device alone.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import time

from _timing import best_of


def max_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--epochs", type=int, default=2, help="training epochs per fit (at least 2: the first fills the blocks)"
    )
    parser.add_argument("--n-train", type=int, default=None, help="first N training sentences (default: all)")
    parser.add_argument("--probes", default="attn,words,distances")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the probes' n_jobs)")
    parser.add_argument("--scorer-batches", type=int, default=100, help="training batches timed by the scorer step")
    parser.add_argument("--device", default=None, help="where the probes fit besides the CPU (default: the model's)")
    parser.add_argument("--steps", default="read,train,together,scorer,feed", help="the steps to run, by name")
    parser.add_argument("--no-cpu", action="store_true", help="together: fit on --device only")
    args = parser.parse_args()
    steps = set(args.steps.split(","))

    import torch

    from bertology_utils.analyses.probes import (
        AttentionProbe,
        AttentionWordsProbe,
        DistanceWordsProbe,
        ProbeData,
    )
    from bertology_utils.analyses.word_vectors import default_word_vectors
    from bertology_utils.attention.extraction import extract_cached
    from bertology_utils.core.models import load_model
    from bertology_utils.data import treebank_splits

    loaded = load_model()
    device = loaded.device if args.device is None else torch.device(args.device)
    elsewhere = device.type != "cpu"  # then every probe fits on the CPU and there, and their ratio is printed
    splits, note = treebank_splits(n_train=args.n_train)
    stores = {name: extract_cached(corpus, loaded, progress=False) for name, corpus in splits.items()}
    vectors = default_word_vectors(loaded)
    train = ProbeData(splits["train"], stores["train"], vectors)
    streamed = ProbeData(splits["train"], stores["train"], vectors, cache_size=0)
    dev = ProbeData(splits["dev"], stores["dev"], vectors)
    print(
        f"model {loaded.name} ({loaded.num_layers}x{loaded.num_heads}) on {loaded.device}; probes on {device}; {note}"
    )
    print(f"train: {train.description}")
    print(f"dev:   {dev.description}")
    print(f"max RSS after loading and extraction: {max_rss_mb():.0f} MB")

    # Word vectors are cached per word form on first use; warm the cache so epochs compare.
    start = time.perf_counter()
    for _ in train.batches(attention=False, vectors=True):
        pass
    for _ in dev.batches(attention=False, vectors=True):
        pass
    print(f"word vectors for {len(vectors._cache)} word forms: {time.perf_counter() - start:.1f} s")

    # The first pass may read the store from disk, later ones from the OS page cache, as training does.
    # Same torch threads as the probes use (collation is torch work too).
    torch.set_num_threads(args.threads)
    for which in ("first", "second") if "read" in steps else ():
        start = time.perf_counter()
        n_batches = sum(1 for _ in streamed.batches(attention=True, vectors=True))
        read_s = time.perf_counter() - start
        print(
            f"read      {len(train) / read_s:8.0f} sentences/s   {which} pass of store reads and batching "
            f"({n_batches} batches, {read_s:.1f} s); max RSS {max_rss_mb():.0f} MB"
        )

    kinds = {"attn": AttentionProbe, "words": AttentionWordsProbe, "distances": DistanceWordsProbe}
    names = args.probes.split(",")
    results = {"sentences_train": len(train), "sentences_dev": len(dev)}
    if "read" in steps:
        results["read_sentences_per_s"] = len(train) / read_s
    if "feed" in steps and elsewhere:
        results["feed"] = feed_step(train, device)
    if "scorer" in steps:
        results["scorer"] = scorer_step(train, vectors.dim, args.scorer_batches, device)
    fit_s: dict[str, dict[str, float]] = {}  # per device, each probe's fit alone (the CPU's from kept blocks)
    fits = [("streamed", streamed, "cpu"), ("kept", train, "cpu")] + (
        [(str(device), train, device)] if elsewhere else []
    )
    for name in names if "train" in steps else ():
        epochs = {}
        for label, data, on in fits:
            probe = kinds[name](max_epochs=args.epochs, patience=None, n_jobs=args.threads, device=on).fit(data)
            epochs[label] = min(row["seconds"] for row in probe.history_[1:] or probe.history_)
            fit_s.setdefault(str(on), {})[name] = probe.fit_seconds_
        start = time.perf_counter()
        uas = probe.score(dev)
        score_s = time.perf_counter() - start
        there = (
            f"; on {device} {epochs[str(device)]:.2f} s ({epochs['kept'] / epochs[str(device)]:.1f}x the CPU's)"
            if elsewhere
            else ""
        )
        print(
            f"{name:10s} train: epoch {epochs['streamed']:.1f} s streamed, {epochs['kept']:.1f} s from kept blocks "
            f"({epochs['streamed'] / epochs['kept']:.1f}x){there}; score on {probe.device_} "
            f"{len(dev) / score_s:6.0f} sentences/s ({score_s:.1f} s); "
            f"dev UAS after {args.epochs} epochs {100 * uas:.1f}; max RSS {max_rss_mb():.0f} MB"
        )
        results[name] = {
            "epoch_s_streamed": round(epochs["streamed"], 2),
            "epoch_s_kept": round(epochs["kept"], 2),
            **({f"epoch_s_{device.type}": round(epochs[str(device)], 2)} if elsewhere else {}),
            "score_sentences_per_s": round(len(dev) / score_s, 1),
            "dev_uas": round(uas, 4),
        }
    if "together" in steps:
        results |= together_step(kinds, names, train, args, device, fit_s)
    results["max_rss_mb"] = round(max_rss_mb())
    print(json.dumps(results))


def together_step(kinds, names, train, args, device, fit_s: dict[str, dict[str, float]]) -> dict:
    """fit_probes on each device, in threads and in processes, against the same fits one after another (those of
    train when it ran)."""
    import torch

    from bertology_utils.analyses.probes import fit_probes

    cores = len(os.sched_getaffinity(0))
    where = ([] if args.no_cpu else ["cpu"]) + ([device] if device.type != "cpu" else [])
    results = {}
    for on in where:
        if str(on) not in fit_s:
            fit_s[str(on)] = {
                name: kinds[name](max_epochs=args.epochs, patience=None, device=on).fit(train).fit_seconds_
                for name in names
            }
        alone, together = sum(fit_s[str(on)].values()), {}
        for label, processes in (("threads", False), ("processes", True)):
            start = time.perf_counter()
            jobs = {name: (kinds[name](max_epochs=args.epochs, patience=None), train, None) for name in names}
            fit_probes(jobs, n_jobs=cores, device=on, processes=processes, progress=False)
            together[label] = time.perf_counter() - start
        # threads of one process: on a GPU what overlaps is only what is not host Python; processes (fit_probes'
        # choice there) each read the data anew
        print(
            f"together  {len(names)} probes side by side on {on}, {cores} at a time: in threads "
            f"{together['threads']:.1f} s, in processes {together['processes']:.1f} s; one after another {alone:.1f} s "
            f"({alone / together['threads']:.2f}x and {alone / together['processes']:.2f}x)"
        )
        suffix = "" if str(on) == "cpu" else f"_{torch.device(on).type}"
        results[f"together_s{suffix}"] = round(together["threads"], 1)
        results[f"processes_s{suffix}"] = round(together["processes"], 1)
        results[f"one_after_another_s{suffix}"] = round(alone, 1)
    return results


def feed_step(train, device) -> dict:
    """Seconds per epoch of batches on ``device``: padded on the host and copied vs gathered there."""
    import itertools

    import torch

    options = dict(attention=True, vectors=True, shuffle=True, seed=0)
    ways = {
        "host": lambda: (batch.to(device) for batch in train.batches(**options)),
        "gathered": lambda: train.batches(**options, device=device),
    }

    def epoch(batches) -> None:
        for _ in batches():
            pass
        torch.accelerator.synchronize(device)

    # the untimed pass sends the blocks to the device; the timed one is the fits' later epochs
    seconds = {label: best_of(1, functools.partial(epoch, batches)) for label, batches in ways.items()}
    fields = ("heads", "scored", "candidates", "positions", "maps", "root", "vectors")
    equal = all(
        torch.equal(getattr(a, name), getattr(b, name))
        for a, b in itertools.islice(zip(ways["host"](), ways["gathered"]()), 50)
        for name in fields
    )
    print(
        f"feed      an epoch's batches on {device}: {seconds['host']:.2f} s padded on the host and copied, "
        f"{seconds['gathered']:.2f} s gathered there ({seconds['host'] / seconds['gathered']:.2f}x); "
        f"the first 50 batches equal: {equal}"
    )
    return {"host_s": round(seconds["host"], 3), "gathered_s": round(seconds["gathered"], 3), "equal": equal}


def scorer_step(train, dim: int, n_batches: int, device) -> dict:
    """Milliseconds per training step of the two fused pair scorers vs their formulas op by op (same weights), on
    the CPU; on ``device``, when it is another, the fused step in one chunk a batch vs the CPU's chunks."""
    import copy
    import itertools
    from unittest import mock

    import torch

    from bertology_utils.analyses.probes import distance_features, scorers
    from bertology_utils.analyses.probes.scorers import AttentionWordsScorer, DistanceWordsScorer

    torch.manual_seed(0)
    distances = DistanceWordsScorer(dim, 256)
    K = next(iter(train.batches(attention=True, vectors=True))).maps.shape[-1]  # layers x heads
    words = AttentionWordsScorer(2 * K, dim)
    for layer in (words.dependent, words.candidate):  # zeros at init; the same work either way
        torch.nn.init.normal_(layer.weight, std=0.01)

    def distances_op_by_op(batch):
        cand = distances.candidate(batch.vectors)
        cand = torch.cat([torch.zeros_like(cand[:, :1]), cand], 1)
        hidden = (
            distances.dependent(batch.vectors)[:, :, None]
            + cand[:, None]
            + distances.distance(distance_features(batch.lengths, batch.heads.shape[1]))
        )
        return distances.out(torch.tanh(hidden)).squeeze(-1)

    def words_op_by_op(batch):  # as autograd computed it before: row-weighted sums as matrix products
        dep, cand = words.dependent(batch.vectors), words.candidate(batch.vectors)
        maps = batch.maps

        def row(w):
            return torch.matmul(maps, w.unsqueeze(-1)).squeeze(-1)

        def column(w):
            return (maps * w.unsqueeze(1)).sum(-1)

        return row(dep[..., :K]) + column(cand[..., :K]) + (row(cand[..., K:]) + column(dep[..., K:])).transpose(1, 2)

    def steps(forward, batches, device) -> None:
        for batch in batches:
            forward(batch).sum().backward()
        if device.type != "cpu":
            torch.accelerator.synchronize(device)

    results = {}
    for name, fused, op_by_op, attention in (
        ("Distances + words", distances, distances_op_by_op, False),
        ("Attn + words", words, words_op_by_op, True),
    ):
        batches = list(itertools.islice(train.batches(attention=attention, vectors=True), n_batches))

        # one untimed round (allocator warm), one timed
        seconds = {
            label: best_of(1, functools.partial(steps, forward, batches, torch.device("cpu"))) / len(batches)
            for label, forward in (("op by op", op_by_op), ("fused", fused))
        }
        ratio = seconds["op by op"] / seconds["fused"]
        print(
            f"scorer    {name} step: {1e3 * seconds['op by op']:.1f} ms op by op, "
            f"{1e3 * seconds['fused']:.1f} ms fused ({ratio:.2f}x) over {len(batches)} training batches"
        )
        results[name] = {
            "op_by_op_ms": round(1e3 * seconds["op by op"], 2),
            "fused_ms": round(1e3 * seconds["fused"], 2),
        }
        if device.type == "cpu":
            continue
        there, scorer = [batch.to(device) for batch in batches], copy.deepcopy(fused).to(device)
        on_device = {}
        for label, chunk in (("one chunk", scorers._chunk_elements), ("CPU chunks", lambda t: scorers._PAIR_CHUNK)):
            with mock.patch.object(scorers, "_chunk_elements", chunk):
                on_device[label] = best_of(1, functools.partial(steps, scorer, there, device)) / len(there)
        print(
            f"scorer    {name} step on {device}: {1e3 * on_device['CPU chunks']:.2f} ms in the CPU's 4 MB chunks, "
            f"{1e3 * on_device['one chunk']:.2f} ms a batch in one chunk "
            f"({on_device['CPU chunks'] / on_device['one chunk']:.2f}x)"
        )
        results[name] |= {
            f"{device.type}_cpu_chunks_ms": round(1e3 * on_device["CPU chunks"], 3),
            f"{device.type}_one_chunk_ms": round(1e3 * on_device["one chunk"], 3),
        }
    return results


if __name__ == "__main__":
    main()
