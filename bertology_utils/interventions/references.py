"""Attribution references by name: word-level scores of a classifier's class that context-mixing maps are judged against.

A reference is a :class:`Reference` subclass registered by name (:data:`REFERENCE_REGISTRY`, the inseq way):
:class:`BlankOut`, :class:`InputXGradient` and :class:`IntegratedGradients` over the methods of
:mod:`~bertology_utils.interventions.attribution`, and the opt-in ones of :mod:`~bertology_utils.interventions.lrp`;
:func:`register_reference` adds one. :func:`word_references` computes the chosen references of every item of a
corpus at word level (cached when asked), and :func:`reference_title` says what figures and claims call each.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import torch
from tqdm.auto import tqdm

from bertology_utils.core.errors import BertologyError
from bertology_utils.core.models import LoadedModel
from bertology_utils.core.registry import Names, Registry
from bertology_utils.core.typing import ItemValues, WordScores
from bertology_utils.data import Corpus
from bertology_utils.interventions.attribution import (
    Labels,
    blank_out,
    input_x_gradient,
    integrated_gradients,
    predicted_labels,
    token_to_word_scores,
)
from bertology_utils.interventions.objectives import TokenBatch, token_batches
from bertology_utils.interventions.results_cache import cached_results

__all__ = [
    "ReferenceSettings",
    "ReferenceScores",
    "Reference",
    "REFERENCE_REGISTRY",
    "REFERENCES",
    "register_reference",
    "reference_title",
    "BlankOut",
    "InputXGradient",
    "IntegratedGradients",
    "WordReferences",
    "word_references",
]


# --------------------------------------------------------------------------- references, by name


@dataclass(frozen=True)
class ReferenceSettings:
    """What :func:`word_references` passes every reference: integrated gradients' ``steps``, ``baseline``
    and ``tolerance`` (:func:`integrated_gradients`)."""

    steps: int = 32
    baseline: str = "zero"
    tolerance: float | None = None


@dataclass(frozen=True)
class ReferenceScores:
    """A reference's scores of one batch: ``words`` (B, W), NaN where an item has no word W; a reference
    with a completeness property (the scores add up to ``f(x) - f(x')``) also gives ``relative_gap`` (B,),
    ``|delta| / max(1, |f(x) - f(x')|)``, and ``panels`` (B,), the pieces its path integral took."""

    words: WordScores
    relative_gap: ItemValues | None = None
    panels: ItemValues | None = None


class Reference:
    """An attribution reference, found by ``name``: :meth:`scores` gives a batch's word-level scores of the
    class ``labels`` (one signature for all: token-level references sum their tokens onto words).
    Calling it checks the shape and, for a complete reference, that the gaps are finite."""

    name: str
    default = True  #: computed by :func:`word_references` when given no names (False: only when named)
    #: What figures and claims call it (None: its name, words apart); see :func:`reference_title`.
    title: str | None = None

    def unsupported(self, loaded: LoadedModel) -> str | None:
        """Why the reference cannot run on ``loaded``'s architecture, or None where it can (the default).

        :param loaded: the classifier.
        :returns: the reason, or None.
        """
        return None

    def scores(
        self, loaded: LoadedModel, batch: TokenBatch, labels: Labels, settings: ReferenceSettings
    ) -> ReferenceScores:
        """A batch's word-level scores.

        :param loaded: the classifier.
        :param batch: the items.
        :param labels: (B,) the classes to explain.
        :param settings: what :func:`word_references` passes every reference.
        :returns: (B, W) scores, W the batch's largest word count, and a complete reference's gaps.
        """
        raise NotImplementedError

    def __call__(
        self, loaded: LoadedModel, batch: TokenBatch, labels: Labels, settings: ReferenceSettings
    ) -> ReferenceScores:
        """:meth:`scores`, checked: BertologyError for a wrong shape or a gap that is not finite."""
        out = self.scores(loaded, batch, labels, settings)
        expected = (len(batch.items), max((a.n_words for a in batch.items), default=0))
        if tuple(out.words.shape) != expected:
            raise BertologyError(f"reference {self.name} gave scores of shape {tuple(out.words.shape)}, not {expected}")
        if out.relative_gap is not None and not torch.isfinite(out.relative_gap).all():
            raise BertologyError(f"reference {self.name}: its completeness gap is not finite")
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


#: Every registered reference by name, in registration order; :func:`register_reference` adds one.
REFERENCE_REGISTRY: Registry[Reference] = Registry("attribution reference")
#: The references :func:`word_references` computes by default, those whose ``default`` is True (live).
REFERENCES = Names(REFERENCE_REGISTRY, lambda reference: reference.default)
R = TypeVar("R", bound=Reference)


def reference_title(name: str) -> str:
    """What figures and claims call a reference.

    :param name: the reference's name, registered or not.
    :returns: its :attr:`Reference.title`, else the name with its words apart (``integrated_gradients``:
        "integrated gradients").
    """
    reference = REFERENCE_REGISTRY.get(name)
    title = reference.title if reference is not None else None
    return title or name.replace("_", " ")


def register_reference(reference: R, *, replace: bool = False) -> R:
    """Add ``reference`` to :data:`REFERENCE_REGISTRY` under its name.

    :param reference: an instance of a :class:`Reference` subclass.
    :param replace: override a registered reference of that name.
    :returns: ``reference``.
    """
    REFERENCE_REGISTRY.register(reference, replace=replace)
    return reference


class BlankOut(Reference):
    """``blank_out``: :func:`blank_out` (Abnar & Zuidema 2020, `Quantifying Attention Flow in Transformers
    <https://arxiv.org/abs/2005.00928>`_), word level by construction."""

    name = "blank_out"
    title = "blank-out"

    def scores(
        self, loaded: LoadedModel, batch: TokenBatch, labels: Labels, settings: ReferenceSettings
    ) -> ReferenceScores:
        """(B, W) drops of the target class's probability (see :meth:`Reference.scores`)."""
        return ReferenceScores(blank_out(loaded, batch, labels))


class InputXGradient(Reference):
    """``input_x_gradient``: :func:`input_x_gradient` (Shrikumar et al. 2016, `Not Just a Black Box
    <https://arxiv.org/abs/1605.01713>`_), each word's tokens summed."""

    name = "input_x_gradient"
    title = "input × gradient"

    def scores(
        self, loaded: LoadedModel, batch: TokenBatch, labels: Labels, settings: ReferenceSettings
    ) -> ReferenceScores:
        """(B, W) summed gradient x input (see :meth:`Reference.scores`)."""
        return ReferenceScores(token_to_word_scores(input_x_gradient(loaded, batch, labels), batch))


class IntegratedGradients(Reference):
    """``integrated_gradients``: :func:`integrated_gradients` (Sundararajan et al. 2017, `Axiomatic Attribution
    for Deep Networks <https://arxiv.org/abs/1703.01365>`_), each word's tokens summed, with its completeness
    gap and panels."""

    name = "integrated_gradients"

    def scores(
        self, loaded: LoadedModel, batch: TokenBatch, labels: Labels, settings: ReferenceSettings
    ) -> ReferenceScores:
        """(B, W) summed attributions with ``settings``' steps, baseline and tolerance (:meth:`Reference.scores`)."""
        ig = integrated_gradients(
            loaded, batch, labels, steps=settings.steps, baseline=settings.baseline, tolerance=settings.tolerance
        )
        gap = ig.delta.abs() / (ig.score - ig.baseline_score).abs().clamp_min(1)
        return ReferenceScores(token_to_word_scores(ig.attributions, batch), gap, ig.panels)


register_reference(BlankOut())
register_reference(InputXGradient())
register_reference(IntegratedGradients())


# --------------------------------------------------------------------------- a corpus's references


@dataclass(frozen=True)
class WordReferences:
    """Word-level references for the kept items of a corpus, in corpus order.

    ``scores[name][k]`` is a (W,) array for the k-th kept item (NaN where a reference has no value);
    ``skipped`` the items longer than the token limit; ``ig_relative_gap`` the largest integrated-
    gradients completeness error, ``|delta| / max(1, |f(x) - f(x')|)``, over the kept items, and
    ``ig_panels`` the mean number of panels their paths were cut into (1 without a tolerance; 0 and 1
    when integrated gradients was not among the references).
    """

    scores: dict[str, list[np.ndarray]]
    skipped: list
    ig_relative_gap: float
    ig_panels: float


def word_references(
    loaded: LoadedModel,
    items: Any,
    *,
    references: Sequence[str] | None = None,
    batch_size: int = 8,
    max_tokens: int | None = None,
    steps: int = 32,
    baseline: str = "zero",
    tolerance: float | None = None,
    cache: bool = False,
    progress: bool = True,
) -> WordReferences:
    """The references of every item, at word level, in corpus order; each item explains its own predicted class.

    :param loaded: the classifier.
    :param items: a corpus, or what :meth:`~bertology_utils.data.Corpus.of` takes.
    :param references: names in :data:`REFERENCE_REGISTRY` (default: :data:`REFERENCES`).
    :param batch_size: items per batch.
    :param max_tokens: items longer (and longer than the model takes) are skipped, as
        :func:`~bertology_utils.attention.extraction.attention_for` with ``too_long="skip"`` skips them, so
        the two line up item for item.
    :param steps: :func:`integrated_gradients`' quadrature nodes (per panel).
    :param baseline: :func:`integrated_gradients`' baseline, "zero" or "mask".
    :param tolerance: :func:`integrated_gradients`' adaptive rule's error bound (None: fixed nodes).
    :param cache: reuse the scores an earlier call with the same model weights, items and settings stored
        (the results cache of :mod:`~bertology_utils.interventions.results_cache`).
    :param progress: a bar of the items.
    :returns: the scores per reference and kept item, the skipped items and integrated gradients' gaps.
    """
    chosen = [REFERENCE_REGISTRY[name] for name in dict.fromkeys(REFERENCES if references is None else references)]
    names = [r.name for r in chosen]
    settings = ReferenceSettings(steps, baseline, tolerance)
    corpus = Corpus.of(items)
    batches, skipped = token_batches(loaded, corpus, batch_size=batch_size, max_tokens=max_tokens)

    def compute() -> dict[str, np.ndarray]:
        found: dict[str, dict[int, np.ndarray]] = {name: {} for name in names}
        n_words: dict[int, int] = {}
        gap, panels = 0.0, []
        with tqdm(
            total=sum(len(b.items) for b in batches), desc="word references", unit="example", disable=not progress
        ) as bar:
            for batch in batches:
                labels = predicted_labels(loaded, batch)
                n_words.update((item.index, item.n_words) for item in batch.items)
                for reference in chosen:
                    out = reference(loaded, batch, labels, settings)
                    if out.relative_gap is not None:
                        gap = max(gap, float(out.relative_gap.max()))
                    if out.panels is not None:
                        panels.extend(out.panels.tolist())
                    rows = out.words.detach().cpu().numpy()
                    for row, item in zip(rows, batch.items):
                        found[reference.name][item.index] = row[: item.n_words]
                bar.update(len(batch.items))
        order = sorted(n_words)
        # ragged per-item rows, concatenated in corpus order: what the results cache stores
        return {
            **{name: np.concatenate([found[name][i] for i in order] or [np.zeros(0)]) for name in names},
            "n_words": np.asarray([n_words[i] for i in order], dtype=np.int64),
            "ig": np.asarray([gap, float(np.mean(panels)) if panels else 1.0]),
        }

    fields: dict[str, object] = {"items": len(corpus), "batch_size": batch_size, "max_tokens": max_tokens}
    fields |= {"steps": steps, "baseline": baseline, "tolerance": tolerance, "references": names}
    packed = cached_results("word-references", loaded, corpus.sha256, fields, compute, cache)
    cuts = np.cumsum(packed["n_words"])[:-1]
    scores = {name: np.split(packed[name], cuts) if len(packed["n_words"]) else [] for name in names}
    return WordReferences(scores, skipped, float(packed["ig"][0]), float(packed["ig"][1]))
