"""A labelled corpus encoded and collated once, for the experiments that run a classifier on it many times.

Disabling heads (Kovaleva et al. 2019, "Revealing the Dark Secrets of BERT",
https://arxiv.org/abs/1908.08593), head importance and pruning curves (Michel et al. 2019, "Are Sixteen Heads
Really Better than One?", https://arxiv.org/abs/1905.10650), L0 gates and head relevance score hundreds of gate
configurations on the same examples: :func:`dev_set` tokenizes and pads them once, in batches of similar length,
and :class:`DevSet`'s fingerprint keys what the results cache stores about them.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from bertology_utils.core.batching import Padding, plan_batches
from bertology_utils.core.models import LoadedModel
from bertology_utils.data import Corpus
from bertology_utils.interventions.finetuning import encode
from bertology_utils.interventions.scoring import label_ids, task_spec

__all__ = ["DevSet", "dev_set"]


@dataclass
class DevSet:
    """A labelled corpus encoded and collated once: batches sorted by length, labels in corpus order.

    :param task: the GLUE task (its canonical name, :func:`~bertology_utils.interventions.scoring.task_spec`).
    :param batches: the model's inputs, one dict of padded tensors per batch.
    :param rows: for each batch, the corpus rows it holds.
    :param labels: label ids (class numbers, or scores for regression), in corpus order, (n,).
    :param name: the corpus's name.
    :param raw_labels: the corpus's own labels (what :func:`~bertology_utils.interventions.scoring.glue_metrics`
        takes).
    """

    task: str
    batches: list = field(repr=False)
    rows: list = field(repr=False)
    labels: np.ndarray = field(repr=False)
    name: str = ""
    raw_labels: tuple = field(default=(), repr=False)

    def __len__(self) -> int:
        return len(self.labels)

    def fingerprint(self) -> str:
        """What the results cache keys this dev set by: the same examples encoded the same way give the same digest.

        :returns: the sha256 (hex) of the task, the encoded batches (every input tensor) and the labels.
        """
        digest = hashlib.sha256(f"{self.task}\n".encode())
        for batch, rows in zip(self.batches, self.rows):
            digest.update(np.asarray(rows, dtype=np.int64).tobytes())
            for name in sorted(batch):
                digest.update(f"{name}{tuple(batch[name].shape)}".encode())
                digest.update(batch[name].cpu().contiguous().numpy().tobytes())
        digest.update(np.ascontiguousarray(self.labels).tobytes())
        return digest.hexdigest()


def dev_set(
    loaded: LoadedModel,
    corpus: Corpus,
    task: str,
    *,
    max_tokens: int | None = None,
    batch_size: int = 32,
    token_budget: int | None = None,
) -> DevSet:
    """Encode and collate ``corpus`` for ``loaded`` once, so every configuration reuses the batches.

    ``token_budget``: keep only the first items of ``corpus`` whose tokens (after truncation to
    ``max_tokens``, no padding) add up to at most this many (at least one item), so that tasks
    with long inputs (RTE) cost about what short ones (SST-2) cost per configuration.

    :param loaded: the classifier whose tokenizer, padding and device the batches take.
    :param corpus: the labelled examples.
    :param task: the GLUE task (any spelling :func:`~bertology_utils.interventions.scoring.task_spec` reads).
    :param max_tokens: truncate each example to this many tokens (default and cap: the model's limit).
    :param batch_size: examples per batch.
    :param token_budget: keep only the first examples whose tokens add up to at most this many.
    :returns: the encoded dev set.
    :raises ValueError: when ``corpus`` has no labels.
    """
    if corpus.labels is None:
        raise ValueError(f"{corpus.name}: the dev corpus needs labels")
    spec = task_spec(task)
    limit = loaded.max_tokens if max_tokens is None else min(max_tokens, loaded.max_tokens)
    encodings = encode(loaded.tokenizer, list(corpus), limit)
    if token_budget is not None:
        total = np.cumsum([len(e["input_ids"]) for e in encodings])
        n = max(1, int(np.searchsorted(total, token_budget, side="right")))
        if n < len(corpus):
            corpus, encodings = corpus[:n], encodings[:n]
    padding = Padding.of(loaded)
    rows = plan_batches([len(e["input_ids"]) for e in encodings], batch_size)
    batches = [padding.collate([encodings[i] for i in chunk], loaded.device) for chunk in rows]
    raw = tuple(corpus.labels or ())  # checked above; a slice of a labelled corpus keeps its labels
    return DevSet(spec.name, batches, rows, label_ids(spec.name, list(raw)), corpus.name, raw)
