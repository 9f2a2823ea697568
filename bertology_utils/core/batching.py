"""Tokenized inputs into model batches: padding, attention masks, token types, length-sorted batch plans.

Works on sequences of token-id arrays, so every caller (extraction, gradients, fine-tuning,
pruning) pads the same way: with the model's pad id (:func:`~bertology_utils.core.architectures.pad_token_id`),
with token type ids only where the architecture takes them, and with batches cut from
length-sorted inputs under an item count and, optionally, a budget of padded tokens or of
attention weights.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from bertology_utils.core import architectures

__all__ = ["Padding", "PaddedBatch", "pad_rows", "to_device", "plan_batches", "length_grouped_batches"]


def pad_rows(rows: Sequence, fill: int, width: int | None = None, dtype: npt.DTypeLike = np.int64) -> np.ndarray:
    """``rows`` (sequences of numbers) as one (len(rows), width) array, each row followed by ``fill``.

    ``width`` defaults to the longest row.
    """
    width = max((len(r) for r in rows), default=0) if width is None else width
    out = np.full((len(rows), width), fill, dtype=dtype)
    for b, row in enumerate(rows):
        out[b, : len(row)] = row
    return out


def to_device(values: torch.Tensor | np.ndarray, device: str | torch.device | None) -> torch.Tensor:
    """``values`` from the host on ``device``, without the host waiting for the device.

    A copy to a GPU from ordinary (pageable) memory waits until the device has finished all the work queued
    before it; from pinned memory the copy is queued on the device's stream, ahead of the work that reads it,
    and the host goes on. Other devices get a plain copy (none to the CPU).

    :param values: a tensor or an array on the host.
    :param device: where to (None: the CPU).
    :returns: the tensor on ``device``.
    """
    tensor = torch.as_tensor(values)
    target = torch.device("cpu" if device is None else device)
    if target.type == "cuda" and tensor.device.type == "cpu":
        return tensor.pin_memory().to(target, non_blocking=True)
    return tensor.to(target)


@dataclass(frozen=True)
class PaddedBatch:
    """Token ids padded to one width, with the attention mask and (where the model takes them) token types."""

    input_ids: np.ndarray  #: (B, T) int64, the pad id after each row's tokens
    attention_mask: np.ndarray  #: (B, T) int64, 1 on real tokens
    token_type_ids: np.ndarray | None  #: (B, T) int64 (0 on padding), or None when not passed to the model

    @property
    def lengths(self) -> np.ndarray:
        """(B,) real tokens per row."""
        return self.attention_mask.sum(1)

    def inputs(self, device: str | torch.device | None = None) -> dict[str, torch.Tensor]:
        """The model's keyword inputs, as tensors on ``device``."""
        out = {"input_ids": to_device(self.input_ids, device), "attention_mask": to_device(self.attention_mask, device)}
        if self.token_type_ids is not None:
            out["token_type_ids"] = to_device(self.token_type_ids, device)
        return out


@dataclass(frozen=True)
class Padding:
    """How one model's inputs are padded: its pad id, and whether it takes token type ids."""

    pad_id: int
    token_types: bool

    @classmethod
    def of(cls, model: architectures.Model, tokenizer: Any = None) -> Padding:
        """The padding of a LoadedModel (or a transformers model and its ``tokenizer``)."""
        return cls(architectures.pad_token_id(model, tokenizer), architectures.uses_token_types(model))

    def pad(self, input_ids: Sequence, token_type_ids: Sequence | None = None) -> PaddedBatch:
        """Pad rows of token ids (and their token types, rows of None being all 0) into a :class:`PaddedBatch`.

        Token types reach the batch only when the model takes them and the first row has them
        (tokenizers give them to every row of a batch or to none).
        """
        width = max(len(row) for row in input_ids)
        ids = np.full((len(input_ids), width), self.pad_id, dtype=np.int64)
        mask = np.zeros((len(input_ids), width), dtype=np.int64)
        given = token_type_ids is not None and token_type_ids[0] is not None
        type_rows = token_type_ids if self.token_types and given else None
        types = None if type_rows is None else np.zeros((len(input_ids), width), dtype=np.int64)
        for b, row in enumerate(input_ids):  # one row copy per item
            ids[b, : len(row)], mask[b, : len(row)] = row, 1
            if types is not None and type_rows is not None and type_rows[b] is not None:
                types[b, : len(row)] = type_rows[b]
        return PaddedBatch(ids, mask, types)

    def collate(
        self, encodings: Sequence[Mapping], device: str | torch.device | None = None
    ) -> dict[str, torch.Tensor]:
        """Model inputs on ``device`` from encodings with ``input_ids`` and, optionally, ``token_type_ids``."""
        padded = self.pad([e["input_ids"] for e in encodings], [e.get("token_type_ids") for e in encodings])
        return padded.inputs(device)


def plan_batches(
    lengths: Sequence[int],
    batch_size: int,
    *,
    max_batch_tokens: int | None = None,
    max_batch_weights: int | None = None,
    maps_per_item: int = 1,
) -> list[np.ndarray]:
    """Indices into ``lengths`` cut into batches, shortest inputs first (ties keep their order).

    A batch holds at most ``batch_size`` items and, where given, at most ``max_batch_tokens``
    padded tokens (items x longest) and ``max_batch_weights`` attention weights (items x
    ``maps_per_item`` x longest^2), so one long outlier cannot blow up memory; an item over a
    budget on its own gets a batch of its own. Deterministic for given lengths.
    """
    sizes = np.asarray(lengths, dtype=np.int64)
    order = np.argsort(sizes, kind="stable")
    batches, start = [], 0
    for k in range(1, len(order) + 1):
        if k < len(order):
            n, longest = k + 1 - start, int(sizes[order[k]])  # the batch if item k joined it
            fits = n <= batch_size
            fits &= max_batch_tokens is None or n * longest <= max_batch_tokens
            fits &= max_batch_weights is None or n * maps_per_item * longest**2 <= max_batch_weights
            if fits:
                continue
        batches.append(order[start:k])
        start = k
    return batches


def length_grouped_batches(
    lengths: Sequence[int], batch_size: int, generator: torch.Generator, *, group: int = 50
) -> list[torch.Tensor]:
    """Training batches in a random order, each of items of about the same length.

    The items are shuffled and cut into groups of ``group x batch_size``; each group is sorted by
    length (longest first, ties in shuffled order) and cut into batches of ``batch_size``; then
    the order of all batches is shuffled. Batches hold random items of similar length, so they
    carry little padding, as transformers' ``group_by_length`` sampler does. There are as many
    batches as ``randperm(n).split(batch_size)`` gives; everything follows ``generator``.
    """
    sizes = torch.as_tensor(np.asarray(lengths, dtype=np.int64))
    perm = torch.randperm(len(sizes), generator=generator)
    batches = []
    for chunk in perm.split(group * batch_size):
        by_length = chunk[torch.sort(sizes[chunk], descending=True, stable=True).indices]
        batches.extend(by_length.split(batch_size))
    return [batches[k] for k in torch.randperm(len(batches), generator=generator).tolist()]
