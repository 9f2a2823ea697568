"""Probe speed: sentences per second for training and scoring, streaming from the attention store.

  read      two passes over the training data as batches (store read + batch building), no model; the
            first may read from disk, the second from the OS page cache
  train     training epochs of each probe on UD EWT train (sentences/s per epoch, dev scoring excluded)
  score     predicting UD EWT dev with the trained probe

The extraction (extract_cached) runs first and is not timed. Without EWT the project's sample
treebank is used (and the numbers mean little). Peak memory (max RSS) is printed after each
step: it should stay flat, since the data are streamed block by block, never held whole.

    python bench/bench_probes.py [--epochs 1] [--n-train N] [--probes attn,words,distances] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import resource
import time


def max_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=1, help="training epochs timed per probe")
    parser.add_argument("--n-train", type=int, default=None, help="first N training sentences (default: all)")
    parser.add_argument("--probes", default="attn,words,distances")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the probes' n_jobs)")
    args = parser.parse_args()

    from bertology_utils.analyses.probes import AttentionProbe, AttentionWordsProbe, DistanceWordsProbe, ProbeData
    from bertology_utils.analyses.word_vectors import default_word_vectors
    from bertology_utils.attention.extraction import extract_cached
    from bertology_utils.core.models import load_model
    from bertology_utils.data import treebank_splits

    loaded = load_model()
    splits, note = treebank_splits(n_train=args.n_train)
    stores = {name: extract_cached(corpus, loaded, progress=False) for name, corpus in splits.items()}
    vectors = default_word_vectors(loaded)
    train = ProbeData(splits["train"], stores["train"], vectors)
    dev = ProbeData(splits["dev"], stores["dev"], vectors)
    print(f"model {loaded.name} ({loaded.num_layers}x{loaded.num_heads}); {note}")
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
    import torch

    torch.set_num_threads(args.threads)
    for which in ("first", "second"):
        start = time.perf_counter()
        n_batches = sum(1 for _ in train.batches(attention=True, vectors=True))
        read_s = time.perf_counter() - start
        print(
            f"read      {len(train) / read_s:8.0f} sentences/s   {which} pass of store reads and batching "
            f"({n_batches} batches, {read_s:.1f} s); max RSS {max_rss_mb():.0f} MB"
        )

    kinds = {"attn": AttentionProbe, "words": AttentionWordsProbe, "distances": DistanceWordsProbe}
    results = {"sentences_train": len(train), "sentences_dev": len(dev), "read_sentences_per_s": len(train) / read_s}
    for name in args.probes.split(","):
        probe = kinds[name](max_epochs=args.epochs, patience=None, n_jobs=args.threads)
        probe.fit(train)
        epoch_s = [row["seconds"] for row in probe.history_]
        train_rate = len(train) / min(epoch_s)
        start = time.perf_counter()
        uas = probe.score(dev)
        score_s = time.perf_counter() - start
        print(
            f"{name:10s} train {train_rate:6.0f} sentences/s (fastest of {len(epoch_s)} epoch(s), "
            f"{min(epoch_s):.1f} s per epoch)   score {len(dev) / score_s:6.0f} sentences/s ({score_s:.1f} s); "
            f"dev UAS after {args.epochs} epoch(s) {100 * uas:.1f}; max RSS {max_rss_mb():.0f} MB"
        )
        results[name] = {
            "train_sentences_per_s": round(train_rate, 1),
            "epoch_s": round(min(epoch_s), 2),
            "score_sentences_per_s": round(len(dev) / score_s, 1),
            "dev_uas": round(uas, 4),
        }
    results["max_rss_mb"] = round(max_rss_mb())
    print(json.dumps(results))


if __name__ == "__main__":
    main()
