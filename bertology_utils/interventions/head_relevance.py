"""How much each attention head contributes to a fine-tuned classifier's decision (Voita et al. 2019).

Voita et al. (2019, `Analyzing Multi-Head Self-Attention <https://arxiv.org/abs/1905.09418>`_) rank heads by
their *relevance* to a translation model's output, found with layer-wise relevance propagation (LRP), averaged over
examples and normalised per layer. This module gives that ranking for any BERT-style sequence
classifier (or regression head), by **integrated gradients over head gates** instead of LRP:

* :func:`head_attribution` — a per-example gate ``g[l, h]`` multiplies each head's attention
  probabilities (:func:`~bertology_utils.interventions.head_gates.gate_edit`: that is a gate on the
  head's output, 1 = the model as it is, 0 = the head removed). The gates of *all* heads move
  together along the straight path ``g = a * 1``, ``a`` from 0 (baseline: every head removed) to 1,
  and ``attribution[l, h] = (1 - 0) * integral_0^1 dF(a * 1)/dg[l, h] da`` (Sundararajan et al.
  2017, `Axiomatic Attribution for Deep Networks <https://arxiv.org/abs/1703.01365>`_, with the gates as inputs).
  Completeness: the attributions of one example add up to ``F(1) - F(0)``. Hao et al. (2021, `Self-Attention
  Attribution <https://arxiv.org/abs/2004.11207>`_) integrate over the attention matrices of one layer at a time;
  summed over a head's query-key entries their attribution is this one's integrand
  (``dF/dg = sum_ij A_ij dF/dA_ij``), here with one path through all layers so that the attributions of every
  head share one budget, ``F(1) - F(0)``;
* :func:`gate_times_gradient` — ``g * dF/dg`` at ``g = 1``: what LRP-0 (= gradient x input)
  gives the gates; kept to measure how far it is from conserving ``F(1) - F(0)``.

``F`` is :func:`~bertology_utils.interventions.attribution.target_scores`: the logit of the class
predicted on the clean input (``labels="predicted"``) or of the gold class (``"gold"``), or the
output of a regression head. The integral is a Gauss-Legendre quadrature on [0, 1]; several
nodes share one forward/backward pass (the batch repeated once per node, each copy with its own
gates), and each example's gradient for every head comes out of that one backward pass.

Relevance, as Voita: the mean over examples of each head's *absolute* attribution, divided by
the sum of its layer (so each layer's relevances add up to 1): :meth:`HeadAttribution.relevance`.
Absolute, because a head that pushes some decisions one way and others the other way matters
to both; signed means are :attr:`HeadAttribution.mean`.

Why not LRP. LRP's standard rules (LRP-0, epsilon) conserve relevance layer by layer only
where each layer is linear in its input, up to a bias (ReLU networks). A BERT-style encoder has
three operations where they do not: softmax attention (its output is the product of two
input-dependent factors, probabilities and values, and the softmax is not homogeneous),
LayerNorm (the input divided by its own standard deviation) and GELU (not homogeneous:
``gelu(x) != x * gelu'(x)``). Through them LRP-0 reduces to gradient x input, which on the
gates is :func:`gate_times_gradient`, and its sum over heads misses ``F(1) - F(0)``, on random
and fine-tuned models alike (:attr:`GateGradient.relative_gap`; docs/benchmarks.md records the gaps
measured on fine-tuned classifiers, far larger than integrated gradients').
Conserving rules exist — Ali et al. (2022, "XAI for Transformers: Better Explanations through
Conservative Propagation": treat softmax and the LayerNorm scale as constants) and Achtibat et
al. (2024, AttnLRP: rules for softmax, products and LayerNorm) — but they change the forward
pass (modules replaced by rule-carrying ones) for each architecture (BERT, RoBERTa, ELECTRA,
DistilBERT, MPNet with its relative position bias) and each needs its own conservation checks;
integrated gradients need only the gates every architecture here already has, and their
completeness is checked on every example.

Convergence: where every activation is smooth (GELU; BERT, RoBERTa, ELECTRA, MPNet) and the
model small, the quadrature converges fast (``relative_gap < 1e-3`` at 32 nodes in the tests). A
ReLU (DistilBERT's pre-classifier) puts kinks in ``F(a * 1)``, and a 144-head model's paths can
have narrow dips (MPNet-base's, in docs/mpnet.md); a fixed rule then converges slowly. ``tolerance`` makes the rule adaptive per example: panels are
halved where the rule disagrees with its halves (per head, so errors that cancel in the sum
still count) until the estimated error is within it; :attr:`HeadAttribution.panels` says how
many each example took, and ``relative_gap`` stays the measured check. Models run in eval mode.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np
import torch
from tqdm.auto import tqdm

from bertology_utils.core.models import LoadedModel
from bertology_utils.core.typing import HeadMatrix, HeadSamples, SampleValues
from bertology_utils.interventions.attribution import classifier_logits, explained_labels, target_scores
from bertology_utils.interventions.dev_sets import DevSet
from bertology_utils.interventions.editing import classifier_inference, edit_attention
from bertology_utils.interventions.gated_logits import gate_shape
from bertology_utils.interventions.head_gates import gate_edit
from bertology_utils.interventions.quadrature import adaptive_integral, check_adaptive, gauss_legendre
from bertology_utils.interventions.results_cache import cached_result

__all__ = [
    "LABELS",
    "HeadScores",
    "HeadAttribution",
    "GateGradient",
    "head_attribution",
    "gate_times_gradient",
]

#: Which class ``F`` explains: the one predicted on the clean input, or the gold one.
LABELS = ("predicted", "gold")


@dataclass(frozen=True)
class HeadScores:
    """Per-example scores of every head for ``F``, and ``F`` with every head on and every head off.

    ``attributions`` ``(N, L, H)``, ``score`` = F(all gates 1) and ``baseline_score`` =
    F(all gates 0), both ``(N,)``; all in corpus order (``dev``'s rows).

    :param attributions: ``(N, L, H)`` each example's score of each head.
    :param score: ``(N,)`` F with every head on.
    :param baseline_score: ``(N,)`` F with every head off.
    :param labels: ``(N,)`` the class explained (zeros for a regression head).
    :param task: the task's name.
    """

    attributions: HeadSamples
    score: SampleValues
    baseline_score: SampleValues
    #: ``(N,)`` the class explained (zeros for a regression head).
    labels: SampleValues
    task: str

    @property
    def completeness_gap(self) -> SampleValues:
        """``(N,)`` ``|sum_h attribution - (F(1) - F(0))|``: how far each example is from completeness."""
        total = self.attributions.reshape(len(self.score), -1).sum(-1)
        return np.abs(total - (self.score - self.baseline_score))

    @property
    def relative_gap(self) -> SampleValues:
        """``(N,)`` the gap divided by ``max(1, |F(1) - F(0)|)`` (as integrated gradients on tokens report it)."""
        return self.completeness_gap / np.maximum(1.0, np.abs(self.score - self.baseline_score))

    @property
    def mean(self) -> HeadMatrix:
        """``(L, H)`` signed mean over examples."""
        return self.attributions.mean(0)

    @property
    def mean_abs(self) -> HeadMatrix:
        """``(L, H)`` mean over examples of the absolute score."""
        return np.abs(self.attributions).mean(0)

    def relevance(self, normalise: bool = True) -> HeadMatrix:
        """Voita's relevance: :attr:`mean_abs`, divided by its layer's sum with ``normalise``.

        Normalised, each layer's relevances add up to 1 (a layer whose heads all score 0 stays 0).

        :param normalise: divide by the layer's sum.
        :returns: ``(L, H)``.
        """
        values = self.mean_abs
        if not normalise:
            return values
        total = values.sum(-1, keepdims=True)
        return values / np.where(total > 0, total, 1.0)


@dataclass(frozen=True)
class HeadAttribution(HeadScores):
    """Integrated gradients over head gates (:func:`head_attribution`); the gaps should be ~0.

    :param steps: Gauss-Legendre nodes on [0, 1] (per panel).
    :param panels: ``(N,)`` panels each example's integral was cut into.
    """

    #: Gauss-Legendre nodes on [0, 1] (per panel).
    steps: int
    #: ``(N,)`` panels each example's integral was cut into (1: the fixed rule; more: see ``tolerance``).
    panels: SampleValues


@dataclass(frozen=True)
class GateGradient(HeadScores):
    """``g * dF/dg`` at ``g = 1`` (LRP-0 / gradient x input on the gates): the gaps are *not* ~0."""


def _check_labels(labels: str) -> None:
    if labels not in LABELS:
        raise ValueError(f"labels must be one of {LABELS}, not {labels!r}")


def _ends(
    loaded: LoadedModel, dev: DevSet, batch: dict, rows: np.ndarray, labels: str
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(explained classes, F(1), F(0)) of one batch: the plain model, and every head gated to 0."""
    model = loaded.model
    n_layers, n_heads = gate_shape(loaded)
    with torch.no_grad():
        clean = classifier_logits(loaded, model(**batch))
        regression = loaded.config.num_labels == 1  # gold scores are not class ids
        gold = None if labels == "predicted" or regression else dev.labels[rows]
        explained = explained_labels(loaded, clean, gold)
        zeros = torch.zeros(len(rows), n_layers, n_heads, device=loaded.device)
        with edit_attention(model, gate_edit(zeros)):
            off = model(**batch)
        return explained, target_scores(loaded, clean, explained), target_scores(loaded, off, explained)


def _gate_gradients(
    loaded: LoadedModel, batch: dict, explained: torch.Tensor, index: torch.Tensor, alphas: torch.Tensor, chunk: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(dF/dg, F) at ``g = alphas[r] * 1`` for example ``index[r]`` of ``batch``: (r, layers, heads), (r,).

    Rows are independent in eval mode, so one backward pass of the sum gives every row's own
    gradient; ``chunk`` rows go through the model at a time.
    """
    model = loaded.model
    n_layers, n_heads = gate_shape(loaded)
    grads, scores = [], []
    for lo in range(0, len(index), chunk):
        rows, a = index[lo : lo + chunk], alphas[lo : lo + chunk]
        gates = a[:, None, None].expand(len(a), n_layers, n_heads).clone().requires_grad_(True)
        with torch.enable_grad(), edit_attention(model, gate_edit(gates)):
            score = target_scores(loaded, model(**{k: v[rows] for k, v in batch.items()}), explained[rows])
            (grad,) = torch.autograd.grad(score.sum(), gates)
        grads.append(grad)
        scores.append(score.detach())
    return torch.cat(grads), torch.cat(scores)


def _per_head(
    loaded: LoadedModel,
    dev: DevSet,
    labels: str,
    alphas: np.ndarray,
    weights: np.ndarray,
    rows_per_pass: int,
    tolerance: float | None = None,
    max_panels: int = 1,
    desc: str | None = None,
) -> tuple[np.ndarray, ...]:
    """(sum_k weights[k] dF/dg at alphas[k] * 1, F(1), F(0), classes, panels), per example in corpus order.

    With ``tolerance``, each example's integral is refined panel by panel
    (:func:`~bertology_utils.interventions.quadrature.adaptive_integral`), ``alphas`` and ``weights``
    being a rule on [0, 1] scaled to each panel. ``desc``: a progress bar of the examples so labelled.
    """
    _check_labels(labels)
    if rows_per_pass < 1:
        raise ValueError("rows_per_pass must be at least 1")
    n_layers, n_heads = gate_shape(loaded)
    values = np.zeros((len(dev), n_layers, n_heads))
    score, baseline, classes = np.zeros(len(dev)), np.zeros(len(dev)), np.zeros(len(dev), dtype=np.int64)
    n_panels = np.ones(len(dev))
    a = torch.as_tensor(alphas, dtype=torch.float32, device=loaded.device)
    w = torch.as_tensor(weights, dtype=torch.float64, device=loaded.device)
    done, panels_done = 0, 0.0
    # float32 whatever the model's precision: bfloat16's noise in the gradients defeats the panels' error
    # estimate (MiniLM on MRPC in bf16: 7x the panels, and gaps 500x float32's)
    with (
        classifier_inference(loaded, precision="fp32"),
        tqdm(total=len(dev), desc=desc, unit="example", disable=desc is None) as bar,
    ):
        for batch, rows in zip(dev.batches, dev.rows):
            explained, f1, f0 = _ends(loaded, dev, batch, rows, labels)
            b = len(rows)
            # Row k * b + i: example i at node k; whole copies of the batch per pass.
            index = torch.arange(b, device=loaded.device).repeat(len(a))
            grads, _ = _gate_gradients(
                loaded, batch, explained, index, a.repeat_interleave(b), max(1, rows_per_pass // b) * b
            )
            whole = torch.einsum("k,kblh->blh", w, grads.reshape(len(a), b, n_layers, n_heads).double())
            if tolerance is not None:
                evaluate = partial(_gate_gradients, loaded, batch, explained, chunk=rows_per_pass)
                whole, n_panels[rows] = adaptive_integral(evaluate, whole, f0, f1, a, w, tolerance, max_panels)
            values[rows] = whole.cpu().numpy()
            score[rows], baseline[rows] = f1.double().cpu().numpy(), f0.double().cpu().numpy()
            classes[rows] = explained.cpu().numpy()
            bar.update(b)
            if tolerance is not None:  # how hard the paths are so far: what the time left depends on
                done, panels_done = done + b, panels_done + float(n_panels[rows].sum())
                bar.set_postfix(panels=f"{panels_done / done:.1f}")
    return values, score, baseline, classes, n_panels


def _scores(
    label: str,
    loaded: LoadedModel,
    dev: DevSet,
    labels: str,
    alphas: np.ndarray,
    weights: np.ndarray,
    rows_per_pass: int,
    cache: bool,
    tolerance: float | None = None,
    max_panels: int = 1,
    desc: str | None = None,
) -> tuple[np.ndarray, ...]:
    """:func:`_per_head`, stored in and read from the results cache with ``cache`` (one packed array)."""
    n = len(dev)
    fields = {"labels": labels, "nodes": np.asarray(alphas).tolist(), "rows": rows_per_pass}
    # The panel counts are stored only with a tolerance: entries of the fixed rule keep their key and layout.
    per_example = 3 if tolerance is None else 4
    if tolerance is not None:
        fields.update(tolerance=tolerance, max_panels=max_panels)

    def compute() -> np.ndarray:
        values, score, baseline, classes, panels = _per_head(
            loaded, dev, labels, alphas, weights, rows_per_pass, tolerance, max_panels, desc
        )
        return np.concatenate([values.ravel(), score, baseline, classes.astype(np.float64), panels][: per_example + 1])

    packed = cached_result(label, loaded, dev, fields, compute, cache)
    values = packed[: -per_example * n].reshape(n, *gate_shape(loaded))
    ends = np.concatenate([packed[-per_example * n :], np.ones(n * (4 - per_example))]).reshape(4, n)
    return values, ends[0], ends[1], ends[2].astype(np.int64), ends[3].astype(np.int64)


def head_attribution(
    loaded: LoadedModel,
    dev: DevSet,
    *,
    steps: int = 16,
    labels: str = "predicted",
    tolerance: float | None = None,
    max_panels: int = 64,
    rows_per_pass: int = 128,
    cache: bool = False,
    progress: bool = True,
) -> HeadAttribution:
    """Integrated gradients over the gates of all heads, per example of ``dev`` (see the module docstring).

    ``attributions[i, l, h] = sum_k w_k dF_i(a_k * 1)/dg[l, h]`` with ``steps`` Gauss-Legendre nodes
    ``a_k`` and weights ``w_k`` on [0, 1]; ``labels``: "predicted" or "gold" (the class ``F`` is the
    logit of). Each batch of ``dev`` is repeated once per node, as many nodes per forward/backward
    pass as fit in ``rows_per_pass`` rows (at least one): about ``steps`` forward and backward passes
    of ``dev`` in all. Check ``relative_gap`` (completeness): 16 nodes leave at most 1.4e-5 on the
    fine-tuned MiniLM SST-2 classifier.

    ``tolerance``: an adaptive rule for paths with narrow features (on MPNet-base one sentence's F
    dips by 0.09 between gates 0.394 and 0.404, which fixed rules need hundreds of nodes to see).
    An example whose relative gap is above ``tolerance`` has its least complete panel halved,
    ``steps`` nodes on each half, again and again, until the gap is within ``tolerance`` or it has
    ``max_panels`` panels (:attr:`HeadAttribution.panels` says how many each used). Each panel's
    own completeness (its attributions' sum against ``F`` at its two ends, measured) says where to
    cut; only examples above ``tolerance`` cost more. ``None``: the fixed rule alone.
    ``cache``: reuse what an earlier call with the same model, dev set and settings stored (as
    :mod:`~bertology_utils.interventions.results_cache`). ``progress``: a bar of the examples (with
    a tolerance, the mean panels per example so far).

    :param loaded: a sequence classifier (or regression head).
    :param dev: the examples (:func:`~bertology_utils.interventions.dev_sets.dev_set`).
    :param steps: Gauss-Legendre nodes (per panel).
    :param labels: "predicted" or "gold".
    :param tolerance: the relative gap allowed per example (None: the fixed rule).
    :param max_panels: the most panels per example.
    :param rows_per_pass: rows (examples x nodes) per forward/backward pass.
    :param cache: read and store the results in the results cache.
    :param progress: show a progress bar.
    :returns: the attributions, ``(N, L, H)``, with F at both ends and the panels used.
    """
    if steps < 1:
        raise ValueError("steps must be at least 1")
    check_adaptive(tolerance, max_panels)
    nodes, weights = gauss_legendre(steps)
    values, score, baseline, classes, panels = _scores(
        "head-ig",
        loaded,
        dev,
        labels,
        nodes,
        weights,
        rows_per_pass,
        cache,
        tolerance,
        max_panels,
        f"head relevance {dev.task}" if progress else None,
    )
    return HeadAttribution(values, score, baseline, classes, dev.task, steps, panels)


def gate_times_gradient(
    loaded: LoadedModel,
    dev: DevSet,
    *,
    labels: str = "predicted",
    rows_per_pass: int = 128,
    cache: bool = False,
    progress: bool = True,
) -> GateGradient:
    """``g * dF/dg`` at every gate 1, per example: LRP-0 / gradient x input on the head gates.

    Its sum over heads is not ``F(1) - F(0)``: :attr:`GateGradient.relative_gap` measures by how
    much (the reason this module attributes with integrated gradients, not LRP). ``cache`` and
    ``progress`` as for :func:`head_attribution`.

    :param loaded: a sequence classifier (or regression head).
    :param dev: the examples.
    :param labels: "predicted" or "gold".
    :param rows_per_pass: rows per forward/backward pass.
    :param cache: read and store the results in the results cache.
    :param progress: show a progress bar.
    :returns: the scores, ``(N, L, H)``, with F at both ends.
    """
    values, score, baseline, classes, _ = _scores(
        "gate-gradient",
        loaded,
        dev,
        labels,
        np.ones(1),
        np.ones(1),
        rows_per_pass,
        cache,
        desc=f"gate x gradient {dev.task}" if progress else None,
    )
    return GateGradient(values, score, baseline, classes, dev.task)
