"""Extraction on a Dask cluster against plain extraction, as ratios measured in the same run.

  plain        extract_attention in this process, torch on every core (the baseline)
  cluster 1x   extract_on_cluster on one worker process with as many threads as plain (its tasks
               run one at a time, torch on all of them): the engine's overhead (scatter, tasks,
               shard groups, progress polling, the worker's own model). Target >= 0.9x.
  cluster Nx1  N single-threaded worker processes (N = the cores): one process per core
               against one process with a thread per core.
Each run writes a fresh store; the clusters are started before the clock runs (their start-up is
printed on its own). Each cluster runs two jobs: in the first its workers load the model, in the
second they have it (a long job's steady state). Throughput is items/s, and the per-worker rate says what a cluster of
machines of this kind would reach (workers x rate, while the shared disk keeps up).

    python bench/bench_distributed.py [--sentences 2000] [--model NAME] [--shards-per-worker K]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import torch
from bench_extraction import corpus_of


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=2000)
    parser.add_argument("--model", default=None)
    parser.add_argument("--shards-per-worker", type=int, default=None, help="default: extract_on_cluster's (4)")
    args = parser.parse_args()

    import distributed

    from bertology_utils.attention.distributed import extract_on_cluster
    from bertology_utils.attention.extraction import extract_attention
    from bertology_utils.core.cluster import local_cluster
    from bertology_utils.core.models import load_model

    cores = len(os.sched_getaffinity(0))
    corpus, name = corpus_of(args.sentences)
    loaded = load_model(args.model)
    torch.set_num_threads(cores)
    print(f"{name}, {len(corpus)} items, {loaded.name} ({loaded.num_layers} x {loaded.num_heads}), {cores} cores")
    with tempfile.TemporaryDirectory() as tmp:
        extract_attention(corpus[:64], Path(tmp) / "warm.zarr", loaded, progress=False)  # first-call costs
        start = time.perf_counter()
        extract_attention(corpus, Path(tmp) / "plain.zarr", loaded, progress=False)
        plain = time.perf_counter() - start
        rows = [(f"plain, 1 process x {cores} threads", plain)]
        for workers, threads in ((1, cores), (cores, 1)):
            start = time.perf_counter()
            with local_cluster(workers, threads) as cluster, distributed.Client(cluster) as client:
                shards = None if args.shards_per_worker is None else args.shards_per_worker * workers
                client.run(lambda: __import__("bertology_utils.core.models"))  # imports before the clock
                up = time.perf_counter() - start
                for job in ("first job: workers load the model", "second job: model loaded"):
                    start = time.perf_counter()
                    extract_on_cluster(
                        corpus,
                        Path(tmp) / f"{workers}-{job[:5]}.zarr",
                        loaded,
                        cluster=client,
                        progress=False,
                        shards=shards,
                    )
                    label = f"cluster, {workers} worker(s) x {threads} thread(s), {job}"
                    rows.append((label, time.perf_counter() - start))
            print(f"cluster of {workers} worker(s) x {threads} thread(s): start-up {up:.1f} s")
    print(f"{'run':76s} {'seconds':>8s} {'items/s':>8s} {'speed vs plain':>15s}")
    for label, seconds in rows:
        print(f"{label:76s} {seconds:8.1f} {len(corpus) / seconds:8.1f} {plain / seconds:14.2f}x")
    per_worker = len(corpus) / rows[-1][1] / cores  # the last row: one worker per core, model loaded
    print(f"per single-threaded worker: {per_worker:.1f} items/s (a cluster of W such workers: about W x that)")


if __name__ == "__main__":
    main()
