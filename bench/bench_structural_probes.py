"""Structural probes' cost beside an attention probe's, and every layer's probes fitted together vs one by one.

  structural  word vectors of one layer (StructuralData.from_model: the forward passes and the
              word-piece averaging), then Hewitt and Manning's distance and depth probes fitted
              at that layer, full rank, dev loss steering (the paper's settings: up to 40 epochs)
  attention   the word-level attention of the same sentences (extract_attention into a temporary
              store), then Clark et al.'s "Attn" probe fitted with its defaults (dev UAS steering)

  together    (--together) both probes at every layer (L + 1 layers), fitted one by one as
              notebook 04 did before, against all of them fitted in one pass (fit_jointly, what
              structural_probe_layers does now): seconds, the ratio, and how far apart the two
              fits' B matrices, kept epochs and dev scores are

Both on the default model and UD EWT ($BERTOLOGY_DATA_DIR), the first --n-train training and
--n-dev dev sentences, the CPU, one torch thread per fit. Prints each part's seconds, the epochs
each fit ran, and the ratio.

    python bench/bench_structural_probes.py [--n-train 300] [--n-dev 100] [--layer 3] [--together]
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
    parser.add_argument("--together", action="store_true", help="every layer's probes together vs one by one")
    args = parser.parse_args()
    if args.together:
        together(args.n_train, args.n_dev)
        return

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


def together(n_train: int, n_dev: int) -> None:
    """Every layer's distance and depth probes fitted one by one, then together, on the same data."""
    import numpy as np

    from bertology_utils.analyses.probes import DepthProbe, DistanceProbe, StructuralData, fit_jointly
    from bertology_utils.core.models import load_model
    from bertology_utils.data import load_treebank

    loaded = load_model(None, device="cpu")
    train, dev = load_treebank("train")[:n_train], load_treebank("dev")[:n_dev]
    data = {name: StructuralData.from_model(c, loaded) for name, c in (("train", train), ("dev", dev))}
    layers = list(range(loaded.num_layers + 1))
    print(f"{loaded.label}; train {len(train)}, dev {len(dev)} sentences of UD EWT; layers {layers}, full rank")

    def probes() -> list:
        return [cls(layer=layer) for layer in layers for cls in (DistanceProbe, DepthProbe)]

    start = time.perf_counter()
    alone = [probe.fit(data["train"], dev=data["dev"]) for probe in probes()]
    one_by_one = time.perf_counter() - start
    start = time.perf_counter()
    joint = fit_jointly(probes(), data["train"], data["dev"])
    joint_seconds = time.perf_counter() - start
    epochs = sum(len(p.history_) for p in alone)
    gap = max(float(np.abs(a.B_ - b.B_).max()) for a, b in zip(alone, joint))
    same_epochs = all(a.best_epoch_ == b.best_epoch_ for a, b in zip(alone, joint))
    scores = max(abs(a.score(data["dev"]) - b.score(data["dev"])) for a, b in zip(alone, joint))
    print(
        f"{len(alone)} probes, {epochs} epochs in all: one by one {one_by_one:.1f} s, together {joint_seconds:.1f} s "
        f"= {one_by_one / joint_seconds:.2f}x; largest |B difference| {gap:.2g}, same kept epochs: {same_epochs}, "
        f"largest dev UUAS / root% difference {scores:.2g}"
    )


if __name__ == "__main__":
    main()
