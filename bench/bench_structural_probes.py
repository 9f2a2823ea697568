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

  step        (--step) every layer's probes fitted together for --epochs epochs as the package
              fits them (each loss's gradient by its prediction's own formula, torch's fused Adam)
              and with the parts of a step as they were before (autograd through the losses, Adam
              op by op, both; B kept (rank, hidden), its gradient copied out of the product
              transposed at every step; the pair formulas with their passes over the projected
              words, the squared norms' own and the gradient's three; both of those): seconds, the
              ratios, and how far apart the fits' B matrices and dev scores are

  precision   (--precision) the word vectors of every layer read with float32 products and with
              products from bfloat16-rounded inputs (StructuralData.from_model(precision=)), then every
              layer's probes fitted together for --epochs epochs on the float32 vectors both ways
              (precision="bf16": fast_fp32_products; the CPU must have bfloat16 units for it to
              differ), each two rounds in alternation: seconds, the ratios, how far apart the vectors
              are, and how far apart the fits' B matrices, kept epochs and dev scores are

  host        (--host) the host's part of the probes, what no device speeds up: every EWT test
              sentence's gold tree distances, and the paper's four metrics of one distance and
              one depth prediction per sentence (random, seeded), as this package computes them
              (tree distances from the ancestors' overlap; every spanning tree in one scipy call;
              one Spearman call per sentence length) against one sentence at a time with scipy's
              shortest paths and spanning tree, as before: seconds, ratios, and whether the
              numbers are the same (--record: bench/results/structural-host.json and the
              benchmarks page's table from it)

Both on the default model and UD EWT ($BERTOLOGY_DATA_DIR), the first --n-train training and
--n-dev dev sentences, the CPU, one torch thread per fit. Prints each part's seconds, the epochs
each fit ran, and the ratio.

    python bench/bench_structural_probes.py [--n-train 300] [--n-dev 100] [--layer 3] [--together | --step [--epochs 3] | --precision [--epochs 3]
                                       | --host [--record]]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from _machine import machine  # noqa: E402
from _timing import fastest_call  # noqa: E402

RECORD = ROOT / "bench" / "results" / "structural-host.json"
#: The generated block (bertology_utils.present.generated) that shows the recorded --host run, and its page.
BLOCK = "structural-host"
PAGE = ROOT / "docs" / "benchmarks.md"
T = TypeVar("T")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n-train", type=int, default=300, help="first N training sentences")
    parser.add_argument("--n-dev", type=int, default=100, help="first N dev sentences")
    parser.add_argument("--layer", type=int, default=None, help="hidden-state layer (default: the middle one)")
    parser.add_argument("--together", action="store_true", help="every layer's probes together vs one by one")
    parser.add_argument("--step", action="store_true", help="a training step's parts vs what they replaced")
    parser.add_argument("--precision", action="store_true", help="fp32 products vs bf16-rounded inputs")
    parser.add_argument("--epochs", type=int, default=3, help="with --step or --precision: epochs per fit")
    parser.add_argument("--host", action="store_true", help="the tree distances and metrics, against one by one")
    parser.add_argument("--record", action="store_true", help="with --host: record it and the benchmarks page's table")
    args = parser.parse_args()
    if args.record and not args.host:
        parser.error("--record records --host")
    if args.host:
        host(args.record)
        return
    if args.together:
        together(args.n_train, args.n_dev)
        return
    if args.step:
        step(args.n_train, args.n_dev, args.epochs)
        return
    if args.precision:
        precision(args.n_train, args.n_dev, args.epochs)
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


def _autograd_losses(cls, t, batch):
    """Baseline: a probe kind's losses differentiated by autograd through its prediction formula."""
    error = (cls._outputs(t) - cls._target(batch)).abs()
    words = batch.words if cls._power == 1 else batch.words[:, :, None] & batch.words[:, None, :]
    return ((error * words).flatten(2).sum(2) / batch.lengths**cls._power).mean(1)


def _op_by_op_adam(stack) -> None:
    """Baseline: Adam's update as torch.optim.Adam's single-tensor formula, op by op, each probe at its own rate."""
    import torch

    from bertology_utils.analyses.probes.structural_fit import _BETAS, _EPS

    with torch.no_grad():
        g, (beta1, beta2) = stack.B.grad, _BETAS
        stack.steps.add_(1)
        step = int(stack.steps)
        lrs = torch.tensor([t.lr for t in stack.tracks], dtype=torch.float64)
        stack.m.lerp_(g, 1 - beta1)
        stack.v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
        sizes = (lrs / -(1 - beta1**step)).to(stack.B.dtype)
        denominator = (stack.v.sqrt() / (1 - beta2**step) ** 0.5).add_(_EPS)
        stack.B.add_(stack.m.mul(sizes[:, None, None]).div_(denominator))
        stack.B.grad = None


def _outputs_with_norms(t):
    """Baseline: the distance probe's squared distances with the squared norms summed over ``t`` again."""
    norms = (t * t).sum(-1)
    return (norms[..., :, None] + norms[..., None, :] - 2 * t @ t.transpose(-1, -2)).clamp(min=0)


def _pullback_on_words(t, s, predicted):
    """Baseline: the distance probe's gradient with its row sums, difference and factor 2 applied to ``t``'s size."""
    s = s * (predicted > 0)
    s = s + s.transpose(-1, -2)
    return 2 * (s.sum(-1, keepdim=True) * t - s @ t)


def _pair_formulas_before():
    """Baseline: both probes' formulas as they were, with their passes over the projected words."""
    from contextlib import ExitStack
    from unittest import mock

    from bertology_utils.analyses.probes import DepthProbe, DistanceProbe

    formulas = {
        (DistanceProbe, "_outputs"): _outputs_with_norms,
        (DistanceProbe, "_pullback"): _pullback_on_words,
        (DepthProbe, "_outputs"): lambda t: (t * t).sum(-1),
        (DepthProbe, "_pullback"): lambda t, s, predicted: 2 * s[..., None] * t,
    }
    stack = ExitStack()
    for (cls, name), formula in formulas.items():
        stack.enter_context(mock.patch.object(cls, name, staticmethod(formula)))
    return stack


def _row_major_B():
    """Baseline: ``B`` kept ``(P, rank, hidden)`` and transposed in the product, as it was: its gradient leaves the
    product transposed and is copied into ``B``'s layout at every step."""
    from contextlib import ExitStack
    from unittest import mock

    import torch

    from bertology_utils.analyses.probes import structural_fit
    from bertology_utils.analyses.probes.structural_fit import _Stack

    init, end_epoch = _Stack.__init__, structural_fit._end_epoch

    def __init__(self, tracks, starts) -> None:
        init(self, tracks, starts)
        self.B = self.B.detach().transpose(1, 2).contiguous().requires_grad_(True)

    def project(self, batch):
        k, b, w, d = batch.vectors.shape
        words = batch.vectors.view(k, b * w, d)
        words = words if self.at is None else words[self.at]
        return torch.bmm(words, self.B.transpose(1, 2)).view(len(self.tracks), b, w, -1)

    stack = ExitStack()
    stack.enter_context(mock.patch.object(_Stack, "__init__", __init__))
    stack.enter_context(mock.patch.object(_Stack, "project", project))
    stack.enter_context(mock.patch.object(structural_fit, "_end_epoch", lambda t, row, B, e: end_epoch(t, row, B.T, e)))
    return stack


#: The variants of ``--step`` that the others are measured against: the code before each of its two changes.
_BASES = ("before (both)", "B (rank, hidden) and the pair formulas as before")


def step(n_train: int, n_dev: int, epochs: int) -> None:
    """Every layer's probes fitted together as the package fits them, and with each part of a training step as it was
    before (the losses differentiated by autograd, Adam op by op, both), two rounds in alternation (the faster of
    each variant's runs is printed)."""
    from contextlib import ExitStack
    from unittest import mock

    import numpy as np

    from bertology_utils.analyses.probes import DepthProbe, DistanceProbe, StructuralData, fit_jointly
    from bertology_utils.analyses.probes.structural import _StructuralProbe
    from bertology_utils.analyses.probes.structural_fit import _Stack
    from bertology_utils.core.models import load_model
    from bertology_utils.data import load_treebank

    loaded = load_model(None, device="cpu")
    train, dev = load_treebank("train")[:n_train], load_treebank("dev")[:n_dev]
    data = {name: StructuralData.from_model(c, loaded) for name, c in (("train", train), ("dev", dev))}
    layers = list(range(loaded.num_layers + 1))
    print(f"{loaded.label}; train {len(train)}, dev {len(dev)} sentences of UD EWT; layers {layers}, full rank")
    patches = {
        "losses": lambda: mock.patch.object(_StructuralProbe, "losses", classmethod(_autograd_losses)),
        "adam": lambda: mock.patch.object(_Stack, "adam_step", _op_by_op_adam),
        "layout": _row_major_B,
        "pairs": _pair_formulas_before,
    }
    variants = {
        "before (both)": ("losses", "adam"),
        "autograd losses": ("losses",),
        "op-by-op Adam": ("adam",),
        "B (rank, hidden) and the pair formulas as before": ("layout", "pairs"),
        "B (rank, hidden)": ("layout",),
        "pair formulas as before": ("pairs",),
        "now": (),
    }

    def fit(patched: tuple[str, ...]) -> tuple[float, list]:
        probes = [
            cls(layer=k, max_epochs=epochs, patience=epochs) for k in layers for cls in (DistanceProbe, DepthProbe)
        ]
        with ExitStack() as stack:
            for name in patched:
                stack.enter_context(patches[name]())
            start = time.perf_counter()
            fitted = fit_jointly(probes, data["train"], data["dev"])
        return time.perf_counter() - start, fitted

    seconds: dict[str, list[float]] = {name: [] for name in variants}
    fits = {}
    for _ in range(2):
        for name, patched in variants.items():
            took, fits[name] = fit(patched)
            seconds[name].append(took)
    for name in variants:
        ratios = ", ".join(f"{min(seconds[base]) / min(seconds[name]):.2f}x {base}" for base in _BASES)
        print(f"{name}: {min(seconds[name]):.1f} s (runs {', '.join(f'{t:.1f}' for t in seconds[name])}); {ratios}")
    for base in _BASES:
        before, now = fits[base], fits["now"]
        gap = max(float(np.abs(a.B_ - b.B_).max() / np.abs(a.B_).max()) for a, b in zip(before, now))
        scores = max(abs(a.score(data["dev"]) - b.score(data["dev"])) for a, b in zip(before, now))
        print(f"{len(now)} probes x {epochs} epochs; now vs {base}: largest |B difference| / largest |B| {gap:.2g}, "
              f"largest dev UUAS / root% difference {scores:.2g}")  # fmt: skip


def _in_alternation(run: Callable[[str], T]) -> tuple[dict[str, list[float]], dict[str, T]]:
    """``run("fp32")`` and ``run("bf16")`` in turn, two rounds: each one's seconds per call, and its last result."""
    seconds: dict[str, list[float]] = {"fp32": [], "bf16": []}
    results: dict[str, T] = {}
    for _ in range(2):
        for name in seconds:
            took, results[name] = fastest_call(1, lambda name=name: run(name))
            seconds[name].append(took)
    return seconds, results


def precision(n_train: int, n_dev: int, epochs: int) -> None:
    """Every layer's probes fitted together with float32 products and with bfloat16-rounded inputs, two rounds in
    alternation (the faster of each variant's runs is printed), and how far apart the fits are."""
    import numpy as np

    from bertology_utils.analyses.probes import DepthProbe, DistanceProbe, StructuralData, fit_jointly
    from bertology_utils.core.models import load_model, resolve_precision
    from bertology_utils.data import load_treebank

    loaded = load_model(None, device="cpu")
    train, dev = load_treebank("train")[:n_train], load_treebank("dev")[:n_dev]
    layers = list(range(loaded.num_layers + 1))
    print(f"{loaded.label}; train {len(train)}, dev {len(dev)} sentences of UD EWT; layers {layers}, full rank; "
          f"precision auto is {resolve_precision('auto', 'cpu')} on this CPU")  # fmt: skip

    def read(name: str) -> dict:
        return {
            split: StructuralData.from_model(c, loaded, precision=name) for split, c in (("train", train), ("dev", dev))
        }

    reads, vectors = _in_alternation(read)
    data = vectors["fp32"]
    gaps = [
        np.abs(a.astype(np.float32) - b.astype(np.float32)).max() / max(float(np.abs(a).max()), 1e-12)
        for k in layers
        for a, b in zip(data["train"].vectors[k], vectors["bf16"]["train"].vectors[k])
    ]
    print(f"word vectors: fp32 {min(reads['fp32']):.1f} s, bf16 products {min(reads['bf16']):.1f} s, "
          f"{min(reads['fp32']) / min(reads['bf16']):.2f}x; per sentence and layer, largest |difference| / largest |vector| "
          f"{np.median(gaps):.2g} in the median, {max(gaps):.2g} at most")  # fmt: skip

    def fit(name: str) -> list:
        probes = [
            cls(layer=k, max_epochs=epochs, precision=name) for k in layers for cls in (DistanceProbe, DepthProbe)
        ]
        return fit_jointly(probes, data["train"], data["dev"])

    seconds, fits = _in_alternation(fit)
    for name, runs in seconds.items():
        print(f"fits {name}: {min(runs):.1f} s (runs {', '.join(f'{t:.1f}' for t in runs)})")
    print(f"fits fp32 / bf16: {min(seconds['fp32']) / min(seconds['bf16']):.2f}x")
    before, now = fits["fp32"], fits["bf16"]
    gap = max(float(np.abs(a.B_ - b.B_).max() / np.abs(a.B_).max()) for a, b in zip(before, now))
    scores = [abs(a.score(data["dev"]) - b.score(data["dev"])) for a, b in zip(before, now)]
    same = sum(a.best_epoch_ == b.best_epoch_ for a, b in zip(before, now))
    print(f"{len(now)} probes, at most {epochs} epochs; largest |B difference| / largest |B| {gap:.2g}; kept epochs "
          f"the same for {same} of {len(now)}; dev UUAS differences {max(scores[::2]):.3g} at most, root% "
          f"{max(scores[1::2]):.3g}")  # fmt: skip


def _scipy_tree_distances(heads: tuple[int, ...]):
    """The baseline: a tree's distances by scipy's shortest paths, one sentence at a time."""
    import numpy as np
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import shortest_path

    heads_ = np.asarray(heads, dtype=np.int64)
    child = np.flatnonzero(heads_ > 0)
    graph = csr_matrix((np.ones(len(child)), (child, heads_[child] - 1)), shape=(len(heads_), len(heads_)))
    return shortest_path(graph, directed=False, unweighted=True).astype(np.int16)


def _one_by_one_metrics(X, distances: list, depths: list) -> dict[str, float]:
    """The baseline: the paper's metrics a sentence at a time (a spanning tree and Spearman calls per sentence)."""
    from collections import defaultdict

    import numpy as np
    from scipy.sparse.csgraph import minimum_spanning_tree

    from bertology_utils.analyses.probes.structural import rowwise_spearman

    found = edges = roots = roots_right = 0
    dspr, nspr = defaultdict(list), defaultdict(list)
    for k in range(len(X)):
        keep = np.flatnonzero(X.scored[k])
        n = len(keep)
        if n < 2:
            continue
        gold = X.distances[k][np.ix_(keep, keep)].astype(np.float64)
        predicted = np.asarray(distances[k], dtype=np.float64)[np.ix_(keep, keep)]
        upper = np.triu(np.ones((n, n), dtype=bool), 1)
        tree = minimum_spanning_tree(np.where(upper, predicted - predicted[upper].min() + 1.0, 0.0)).tocoo()
        gold_edges = {(int(a), int(b)) for a, b in zip(*np.nonzero(np.triu(gold == 1)))}
        found += len({(int(min(i, j)), int(max(i, j))) for i, j in zip(tree.row, tree.col)} & gold_edges)
        edges += len(gold_edges)
        predicted_depth = np.asarray(depths[k], dtype=np.float64)[keep]
        if X.scored[k][X.roots[k]]:
            roots += 1
            roots_right += int(keep[np.argmin(predicted_depth)] == X.roots[k])
        if 5 <= n <= 50:
            others = ~np.eye(n, dtype=bool)
            rows = rowwise_spearman(predicted[others].reshape(n, n - 1), gold[others].reshape(n, n - 1))
            dspr[n].append(float(rows.mean()))
            gold_depth = X.distances[k][X.roots[k], keep].astype(np.float64)[None]
            nspr[n].append(float(rowwise_spearman(predicted_depth[None], gold_depth)[0]))
    return {
        "uuas": found / edges,
        "dspr": float(np.mean([np.mean(v) for v in dspr.values()])),
        "root_acc": roots_right / roots,
        "nspr": float(np.mean([np.mean(v) for v in nspr.values()])),
    }


def doc_block(record: dict) -> str:
    """The benchmarks page's block for a recorded ``--host`` run."""
    head = (
        f"UD EWT test, {record['sentences']:,} sentences and {record['words']:,} words, one distance and one depth "
        f"prediction per sentence (random, seeded), fastest of {record['repeats']} ({record['date']}, "
        f"{record['machine']}). Baseline: the same numbers one sentence at a time with scipy's shortest paths and "
        "spanning tree, as the package computed them before."
    )
    rows = [
        f"| {r['part']} | {r['one_by_one_s']:.2f} | {r['now_s']:.2f} | {r['one_by_one_s'] / r['now_s']:.1f}x | "
        f"{'yes' if r['same'] else 'no'} |"
        for r in record["rows"]
    ]
    table = ["| host part | one by one (s) | now (s) | speed-up | the same numbers |", "|---|---|---|---|---|", *rows]
    return "\n".join([head, "", *table])


def host(record: bool) -> None:
    """The host's part of the structural probes on EWT test, as computed now and one sentence at a time."""
    import json

    import numpy as np

    from bertology_utils.analyses.probes import StructuralData, structural_metrics, tree_distances
    from bertology_utils.data import load_treebank

    test = [s for s in load_treebank("test") if s.has_syntax]
    rng = np.random.default_rng(0)
    points = [rng.normal(size=(len(s.words), 1, 8)).astype(np.float32) for s in test]
    X = StructuralData(test, points, [0])
    distances = [((p[:, 0, None] - p[None, :, 0]) ** 2).sum(-1) for p in points]
    depths = [(p[:, 0] ** 2).sum(-1) for p in points]
    repeats = 3

    rows = []
    old_s, old = fastest_call(repeats, lambda: [_scipy_tree_distances(s.heads) for s in test])
    new_s, new = fastest_call(repeats, lambda: [tree_distances(s.heads) for s in test])
    same = all(np.array_equal(a, b) for a, b in zip(old, new))
    rows.append({"part": "gold tree distances", "one_by_one_s": old_s, "now_s": new_s, "same": same})
    old_s, old = fastest_call(repeats, lambda: _one_by_one_metrics(X, distances, depths))
    new_s, new = fastest_call(repeats, lambda: structural_metrics(X, distances=distances, depths=depths))
    same = all(old[name] == new[name] for name in old)
    rows.append({"part": "UUAS, DSpr, root% and NSpr", "one_by_one_s": old_s, "now_s": new_s, "same": same})
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": machine(),
        "sentences": len(X),
        "words": int(X.lengths.sum()),
        "repeats": repeats,
        "rows": rows,
    }
    print(doc_block(result))
    if record:
        RECORD.parent.mkdir(parents=True, exist_ok=True)
        RECORD.write_text(json.dumps(result, indent=2) + "\n")
        from bertology_utils.present.generated import write_block

        write_block(PAGE, BLOCK, doc_block(result))


if __name__ == "__main__":
    main()
