"""Physically pruned heads vs the full model: inference speed at batch sizes 1 and 32.

The same classifier (the offline MiniLM with a fresh classification head unless --model) is
timed in full and after :func:`bertology_utils.interventions.head_removal.prune_heads` removes --share of the
heads of every layer (lowest-numbered kept, at least one head per layer). Both are timed in
the same run on the same inputs, interleaved, best of --repeats; the ratio full / pruned is
the speed-up. The pruned outputs are checked against the full model with those heads gated
to 0. Also: Michel importance (one backward per batch) vs the one-at-a-time head ablation
sweep on the same dev batches (time ratio), and that sweep with the layers below each gated
layer shared by its configurations vs the whole model run per configuration. Last, the sweep,
importance and a random pruning curve with the last layer's feed-forward block on the first token
alone (:func:`bertology_utils.interventions.editing.first_token_readout`, the default) vs on every token.

    python bench/bench_pruning.py [--model NAME] [--share 0.5] [--tokens 64] [--repeats 5] [--threads 1]
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import time
from unittest import mock

import numpy as np
import torch
from _timing import best_of


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None)
    parser.add_argument("--share", type=float, default=0.5, help="share of each layer's heads to remove")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--dev-examples", type=int, default=32, help="examples for importance vs ablation timing")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    from bertology_utils.core.models import load_model
    from bertology_utils.data import Corpus, Sentence
    from bertology_utils.interventions import editing, gated_logits
    from bertology_utils.interventions.dev_sets import dev_set
    from bertology_utils.interventions.editing import gate_heads
    from bertology_utils.interventions.gated_logits import gate_shape
    from bertology_utils.interventions.head_removal import prune_heads
    from bertology_utils.interventions.pruning import ablation_sweep, head_importance, random_pruning_curves

    full = load_model(args.model, head="sequence-classification", num_labels=2, device="cpu")
    layers, heads = gate_shape(full)
    n_remove = min(heads - 1, int(round(args.share * heads)))
    mask = np.ones((layers, heads))
    mask[:, heads - n_remove :] = 0
    pruned = copy.deepcopy(full)
    prune_heads(pruned, mask)
    print(
        f"{full.name}: {layers} layers x {heads} heads; removing {n_remove} heads per layer "
        f"({n_remove * layers} of {layers * heads}); {args.tokens} tokens; {args.threads} thread(s)"
    )
    n_full = sum(p.numel() for p in full.model.parameters())
    n_pruned = sum(p.numel() for p in pruned.model.parameters())
    print(f"parameters: {n_full:,} -> {n_pruned:,}")

    rng = np.random.default_rng(0)
    vocab = full.tokenizer.vocab_size
    for batch_size in (1, 32):
        ids = torch.as_tensor(rng.integers(1000, vocab, size=(batch_size, args.tokens)))
        batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        with torch.no_grad():
            a = pruned.model(**batch).logits
            with gate_heads(full.model, torch.as_tensor(mask, dtype=torch.float32)):
                b = full.model(**batch).logits
        err = (a - b).abs().max().item()
        t_full = t_pruned = float("inf")
        for _ in range(args.repeats):  # interleaved, so load changes hit both
            with torch.no_grad():
                t_full = min(t_full, best_of(1, lambda batch=batch: full.model(**batch)))
                t_pruned = min(t_pruned, best_of(1, lambda batch=batch: pruned.model(**batch)))
        print(
            f"batch {batch_size:>2}: full {t_full * 1e3:8.2f} ms, pruned {t_pruned * 1e3:8.2f} ms, "
            f"speed-up x{t_full / t_pruned:.2f} (max |pruned - gated| {err:.1e})"
        )

    words = ["the", "film", "was", "not", "very", "good", "and", "story", "acting", "bad", "great", "plot"]
    items = [Sentence(f"s{i}", tuple(rng.choice(words, size=12))) for i in range(args.dev_examples)]
    dev = dev_set(full, Corpus.from_items(items, "bench", [int(x) for x in rng.integers(0, 2, len(items))]), "SST-2")
    start = time.perf_counter()
    head_importance(full, dev)
    t_imp = time.perf_counter() - start
    start = time.perf_counter()
    shared = ablation_sweep(full, dev)
    t_abl = time.perf_counter() - start
    print(
        f"importance (1 backward/batch) {t_imp:.2f} s vs one-at-a-time ablation of {layers * heads} heads "
        f"and {layers} layers {t_abl:.2f} s on {len(dev)} examples: x{t_abl / t_imp:.1f}"
    )
    # the same sweep with every configuration running the whole model (no layers shared below the gated one)
    with mock.patch.object(
        gated_logits, "_first_gated_layers", lambda gate_stack: np.zeros(len(gate_stack), dtype=int)
    ):
        start = time.perf_counter()
        whole = ablation_sweep(full, dev)
        t_whole = time.perf_counter() - start
    err = np.abs(shared.head_loss_deltas - whole.head_loss_deltas).max()
    print(
        f"ablation sweep sharing the layers below the gated one {t_abl:.2f} s vs whole model per configuration "
        f"{t_whole:.2f} s: x{t_whole / t_abl:.2f} (max |loss delta difference| {err:.1e})"
    )

    def passes():
        start = time.perf_counter()
        sweep = ablation_sweep(full, dev)
        importance = head_importance(full, dev, normalise=False)
        curve = random_pruning_curves(full, dev, seeds=[0], step=0.1)[0]
        return time.perf_counter() - start, np.concatenate(
            [sweep.head_loss_deltas.ravel(), importance.ravel(), curve.scores]
        )

    @contextlib.contextmanager
    def every_token(_model):
        yield False

    t_first, first = passes()
    with mock.patch.object(editing, "first_token_readout", every_token):
        t_every, every = passes()
    print(
        f"sweep + importance + a random pruning curve, last feed-forward block on the first token {t_first:.2f} s "
        f"vs every token {t_every:.2f} s: x{t_every / t_first:.2f} (max |difference| {np.abs(first - every).max():.1e})"
    )


if __name__ == "__main__":
    main()
