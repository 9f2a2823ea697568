"""Structural probes' cost beside an attention probe's, on the same sentences in the same run.

  structural  word vectors of one layer (StructuralData.from_model: the forward passes and the
              word-piece averaging), then Hewitt and Manning's distance and depth probes fitted
              at that layer, full rank, dev loss steering (the paper's settings: up to 40 epochs)
  attention   the word-level attention of the same sentences (extract_attention into a temporary
              store), then Clark et al.'s "Attn" probe fitted with its defaults (dev UAS steering)

Both on the default model and UD EWT ($BERTOLOGY_DATA_DIR), the first --n-train training and
--n-dev dev sentences, the CPU, one torch thread per fit. Prints each part's seconds, the epochs
each fit ran, and the ratio structural / attention.

    python bench/bench_structural_probes.py [--n-train 300] [--n-dev 100] [--layer 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n-train", type=int, default=300, help="first N training sentences")
    parser.add_argument("--n-dev", type=int, default=100, help="first N dev sentences")
    parser.add_argument("--layer", type=int, default=None, help="hidden-state layer (default: the middle one)")
    args = parser.parse_args()

    from bertology_utils.analyses.probes import AttentionProbe, DepthProbe, DistanceProbe, ProbeData, StructuralData
    from bertology_utils.attention.extraction import extract_attention
    from bertology_utils.core.models import load_model
    from bertology_utils.data import load_treebank

    loaded = load_model(None, device="cpu")
    train, dev = load_treebank("train")[: args.n_train], load_treebank("dev")[: args.n_dev]
    layer = loaded.num_layers // 2 if args.layer is None else args.layer
    print(f"{loaded.label}; train {len(train)}, dev {len(dev)} sentences of UD EWT; layer {layer}")

    start = time.perf_counter()
    data = {name: StructuralData.from_model(c, loaded, layers=[layer]) for name, c in (("train", train), ("dev", dev))}
    features = time.perf_counter() - start
    distance = DistanceProbe().fit(data["train"], dev=data["dev"])
    depth = DepthProbe().fit(data["train"], dev=data["dev"])
    structural = time.perf_counter() - start
    print(
        f"structural: features {features:.1f} s, distance {distance.fit_seconds_:.1f} s "
        f"({len(distance.history_)} epochs), depth {depth.fit_seconds_:.1f} s ({len(depth.history_)} epochs); "
        f"dev UUAS {distance.score(data['dev']):.3f}, root% {depth.score(data['dev']):.3f}"
    )

    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        stores = {
            name: extract_attention(c, Path(folder) / f"{name}.zarr", loaded, progress=False)
            for name, c in (("train", train), ("dev", dev))
        }
        extraction = time.perf_counter() - start
        probe = AttentionProbe().fit(ProbeData(train, stores["train"]), dev=ProbeData(dev, stores["dev"]))
        attention = time.perf_counter() - start
    print(
        f"attention: extraction {extraction:.1f} s, Attn probe {probe.fit_seconds_:.1f} s "
        f"({len(probe.history_)} epochs); dev UAS {probe.history_[probe.best_epoch_ - 1]['dev_uas']:.3f}"
    )
    print(
        f"structural (features + both probes) {structural:.1f} s / attention (extraction + Attn) {attention:.1f} s "
        f"= {structural / attention:.2f}"
    )


if __name__ == "__main__":
    main()
