"""Training that draws the same random numbers on every device, and says where torch could not promise the same
result.

* :func:`training_seeds`: the seeds of a notebook's repeated trainings, from its ``seed`` and ``seeds``.
* :func:`derived_seed`: one seed per purpose (data order, dropout, ...) from a run's base seed, so two streams
  seeded alike are not the same stream.
* :func:`host_dropout`: every ``torch.nn.functional.dropout`` inside the block (``nn.Dropout`` modules and the
  attention dropout transformers' eager attention applies inline) draws its mask from a CPU generator and moves
  it to the tensor's device. torch's own dropout draws from the device's generator, and CUDA's Philox stream is
  not CPU's Mersenne twister: one seed gave other masks on a GPU, so fine-tuning there learned another model.
* :func:`deterministic_algorithms`: torch's deterministic kernels where it has them
  (``torch.use_deterministic_algorithms(warn_only=True)``); the operations it has none for are collected, to be
  written into the record of what was trained.
"""

from __future__ import annotations

import contextlib
import hashlib
import numbers
import os
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from bertology_utils.core.batching import to_device

__all__ = [
    "training_seeds",
    "derived_seed",
    "HostDropout",
    "host_dropout",
    "deterministic_algorithms",
    "CUBLAS_WORKSPACE",
]

#: What cuBLAS needs set before its first call for its matrix products to be deterministic (torch's notes on
#: reproducibility); :func:`~bertology_utils.core.models.load_model` sets it when it puts a model on a GPU.
CUBLAS_WORKSPACE = ("CUBLAS_WORKSPACE_CONFIG", ":4096:8")


def training_seeds(seed: int, seeds: int) -> list[int]:
    """The seeds of ``seeds`` trainings from the base ``seed``: ``seed``, ``seed + 1``, ...

    The first is the base seed itself, so one seed trains (and reuses from the cache) what a single-seed run
    did; two runs see disjoint seeds when their base seeds are at least ``seeds`` apart.
    """
    if isinstance(seeds, bool) or not isinstance(seeds, numbers.Integral) or seeds < 1:
        raise ValueError(f"seeds is how many trainings to run, a whole number of at least 1, not {seeds!r}")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"seed is a whole number of at least 0, not {seed!r}")
    return list(range(int(seed), int(seed) + int(seeds)))


def derived_seed(seed: int, purpose: str) -> int:
    """A 63-bit seed for ``purpose`` from ``seed``: the same on every machine and Python (a sha256, not ``hash``)."""
    digest = hashlib.sha256(f"{int(seed)}:{purpose}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


class HostDropout(TorchFunctionMode):
    """A torch function mode in which dropout masks come from ``generator`` (a CPU generator).

    The mask keeps an element where a uniform draw is at least ``p`` and scales the kept ones by ``1 / (1 - p)``,
    as torch's dropout does; ``p`` of 0, evaluation (``training=False``) and ``p`` of 1 draw nothing.
    """

    def __init__(self, generator: torch.Generator):
        super().__init__()
        if generator.device.type != "cpu":
            raise ValueError(f"HostDropout needs a CPU generator, not one on {generator.device}")
        self.generator = generator

    def __torch_function__(
        self, func: Callable, types: Sequence[type], args: Sequence = (), kwargs: dict | None = None
    ) -> Any:
        kwargs = kwargs or {}
        if func is F.dropout:
            return self._dropout(*args, **kwargs)
        return func(*args, **kwargs)

    def _dropout(
        self, input: torch.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
    ) -> torch.Tensor:
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        if not training or p == 0.0:
            return input
        if p == 1.0:
            return input.zero_() if inplace else torch.zeros_like(input)
        keep = torch.rand(input.shape, generator=self.generator) >= p
        scale = to_device(keep, input.device).to(input.dtype).div_(1.0 - p)  # queued: no wait for a GPU per mask
        return input.mul_(scale) if inplace else input * scale


@contextlib.contextmanager
def host_dropout(generator: torch.Generator) -> Iterator[HostDropout]:
    """Run a block with :class:`HostDropout`: its dropout masks the same on CPU and GPU for one generator state."""
    with HostDropout(generator) as mode:
        yield mode


@contextlib.contextmanager
def deterministic_algorithms() -> Iterator[list[str]]:
    """Run a block with torch's deterministic algorithms; yields a list that, once the block ends, names each operation
    that had no deterministic implementation on this device. The previous settings are restored.

    Fresh tensors are not filled: torch fills every ``empty`` tensor with NaN in this mode by default, a check for
    reads of uninitialised memory that changes no result and, in bf16 where autocast makes a fresh copy of every
    weight at each step, took a tenth of a fine-tuning step (``bench/bench_finetuning.py --variants fill``).
    """
    was = torch.are_deterministic_algorithms_enabled()
    was_warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    filling = torch.utils.deterministic  # its setting is a property of the module's class, which mypy does not see
    was_filling = filling.fill_uninitialized_memory  # type: ignore[attr-defined]
    if torch.cuda.is_available():
        os.environ.setdefault(*CUBLAS_WORKSPACE)
    missing: list[str] = []
    torch.use_deterministic_algorithms(True, warn_only=True)
    filling.fill_uninitialized_memory = False  # type: ignore[attr-defined]
    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as recorded:
            warnings.simplefilter("always")
            try:
                yield missing
            finally:
                caught = list(recorded)
    finally:
        torch.use_deterministic_algorithms(was, warn_only=was_warn_only)
        filling.fill_uninitialized_memory = was_filling  # type: ignore[attr-defined]
    # outside the recording block: a warning passed on must not land in the list being read
    for warning in caught:
        text = str(warning.message)
        if "does not have a deterministic implementation" in text:
            name = text.split(" does not have a deterministic implementation")[0].strip()
            if name not in missing:
                missing.append(name)
        else:  # not ours to swallow
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
