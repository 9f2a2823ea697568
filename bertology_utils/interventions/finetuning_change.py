"""What fine-tuning changes in attention: per head, how alike a pre-trained and a fine-tuned model attend.

Kovaleva et al. (2019, "Revealing the Dark Secrets of BERT", https://arxiv.org/abs/1908.08593) compare each
head's attention maps before and after fine-tuning by cosine similarity and find the last layers change most.
:func:`attention_change` does so over real tokens only (no padding compared); :func:`layer_means` reads it per layer.
"""

from __future__ import annotations

import numpy as np
import torch

from bertology_utils.core import architectures
from bertology_utils.core.batching import Padding, plan_batches
from bertology_utils.core.models import LoadedModel
from bertology_utils.core.typing import AttentionMaps, HeadMatrix, LayerValues
from bertology_utils.data import Corpus
from bertology_utils.interventions.finetuning import encode

__all__ = ["attention_change", "layer_means"]


@torch.no_grad()
def _attentions(loaded: LoadedModel, batch: dict) -> list[AttentionMaps]:
    out = loaded.model(**batch, output_attentions=True)
    return [a.float() for a in out.attentions]


@torch.no_grad()
def attention_change(
    before: LoadedModel, after: LoadedModel, corpus: Corpus, *, max_tokens: int = 128, batch_size: int = 16
) -> HeadMatrix:
    """Mean over ``corpus`` of the cosine similarity of each head's attention map in ``before`` and ``after``.

    Both models see the same token ids (``after``'s tokenizer; they must share a vocabulary).
    Each map is compared over its real tokens only (queries and keys); padding is left out.
    Fine-tuning changes the last layers most:
    Kovaleva et al. 2019, "Revealing the Dark Secrets of BERT", https://arxiv.org/abs/1908.08593.

    :param before: the pre-trained model.
    :param after: the fine-tuned one.
    :param corpus: the inputs both read.
    :param max_tokens: truncate each input to this many tokens.
    :param batch_size: inputs per batch.
    :returns: (L, H).
    :raises ValueError: for an empty corpus.
    """
    limit = min(max_tokens, before.max_tokens, after.max_tokens)
    encodings = encode(after.tokenizer, list(corpus), limit)
    a_padding = Padding.of(after)  # the same padded ids for both; token types where each model takes them
    b_padding = Padding(a_padding.pad_id, architectures.uses_token_types(before))
    states = [(m, m.model.training) for m in (before, after)]
    for m, _ in states:
        m.model.eval()
    total: torch.Tensor | None = None
    n = 0
    try:
        for rows in plan_batches([len(e["input_ids"]) for e in encodings], batch_size):
            chunk = [encodings[i] for i in rows]
            a_batch = a_padding.collate(chunk, after.device)
            b_batch = b_padding.collate(chunk, before.device)
            real = b_batch["attention_mask"].float()
            pair = (real[:, :, None] * real[:, None, :])[:, None]  # (B, 1, T, T)
            per_layer = []
            for x, y in zip(_attentions(before, b_batch), _attentions(after, a_batch)):
                x, y = x * pair, (y.to(x.device)) * pair
                dot = (x * y).sum((-1, -2))
                norm = x.pow(2).sum((-1, -2)).sqrt() * y.pow(2).sum((-1, -2)).sqrt()
                per_layer.append(dot / norm.clamp_min(1e-12))
            sims = torch.stack(per_layer, 1).double().sum(0)  # (L, H), summed on the device: read once, at the end
            total = sims if total is None else total + sims
            n += len(chunk)
    finally:
        for m, was in states:
            m.model.train(was)
    if total is None:
        raise ValueError("no items to compare")
    return (total.cpu() / n).numpy()


def layer_means(values: HeadMatrix) -> LayerValues:
    """Mean of a per-head array per layer.

    :param values: (L, H).
    :returns: (L,).
    """
    return np.asarray(values, dtype=float).mean(-1)
