"""Path integrals by Gauss-Legendre quadrature, refined panel by panel where a fixed rule is not enough.

Integrated gradients (Sundararajan et al. 2017, `Axiomatic Attribution for Deep Networks
<https://arxiv.org/abs/1703.01365>`_) on tokens
(:func:`~bertology_utils.interventions.attribution.integrated_gradients`) and on head gates
(:func:`~bertology_utils.interventions.head_relevance.head_attribution`) integrate a gradient along a straight path,
``a`` from 0 to 1. :func:`gauss_legendre` gives the fixed rule, which converges fast for smooth integrands; a ReLU's
kinks or a large model's narrow features need :func:`adaptive_integral`: panels halved where the rule disagrees with
its halves, until the estimated error is within a tolerance (:func:`check_adaptive` refuses bad settings before any
work).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["Integrand", "gauss_legendre", "check_adaptive", "adaptive_integral"]


def gauss_legendre(steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Legendre nodes and weights on [0, 1]: exact for polynomials of degree 2 * steps - 1.

    :param steps: how many nodes.
    :returns: ``(steps,)`` nodes in (0, 1) and ``(steps,)`` weights summing to 1.
    """
    nodes, weights = np.polynomial.legendre.leggauss(steps)
    return (nodes + 1) / 2, weights / 2


@dataclass
class _Panels:
    """One example's path integral cut into panels ``[lo, hi]``: each panel's ends, F there, its
    quadrature (one value per attributed part: heads, tokens) and an estimate of that quadrature's
    error (summed over the parts)."""

    ends: list[tuple[float, float]]
    f: list[tuple[float, float]]
    parts: list[torch.Tensor]  # float64, sum_k (hi - lo) w_k dF/dpart at lo + (hi - lo) x_k
    errors: list[float]

    def split(self, j: int, f_mid: float, left: torch.Tensor, right: torch.Tensor) -> None:
        """Panel ``j`` becomes its two halves. Each half's error: half the parts' summed difference
        between the panel's quadrature and its halves' (the usual adaptive estimate, per part, so
        errors that cancel in the sum still count), at least the half's own completeness error."""
        (lo, hi), (f_lo, f_hi), mid = self.ends[j], self.f[j], (self.ends[j][0] + self.ends[j][1]) / 2
        change = float((self.parts[j] - left - right).abs().sum()) / 2
        self.ends[j : j + 1] = [(lo, mid), (mid, hi)]
        self.f[j : j + 1] = [(f_lo, f_mid), (f_mid, f_hi)]
        self.parts[j : j + 1] = [left, right]
        self.errors[j : j + 1] = [
            max(change, abs(float(left.sum()) - (f_mid - f_lo))),
            max(change, abs(float(right.sum()) - (f_hi - f_mid))),
        ]


#: ``evaluate(index, alphas)`` of :func:`adaptive_integral`: the integrand's parts (r, ...) and F (r,)
#: at path position ``alphas[r]`` for example ``index[r]``.
Integrand = Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


def check_adaptive(tolerance: float | None, max_panels: int) -> None:
    """Refuse an adaptive rule's settings before any model work (``None``: the fixed rule, nothing to check).

    :param tolerance: the error allowed per example, relative to max(1, |F(1) - F(0)|); None: the fixed rule.
    :param max_panels: the most panels an example may be cut into.
    :returns: None; ValueError when the tolerance is not positive or ``max_panels`` below 1.
    """
    if tolerance is not None and (not tolerance > 0 or max_panels < 1):
        raise ValueError("tolerance must be positive and max_panels at least 1")


def adaptive_integral(
    evaluate: Integrand,
    whole: torch.Tensor,
    f0: torch.Tensor,
    f1: torch.Tensor,
    nodes: torch.Tensor,
    weights: torch.Tensor,
    tolerance: float,
    max_panels: int,
) -> tuple[torch.Tensor, list[int]]:
    """Path integrals refined panel by panel: (the integrals, float64, as ``whole``; panels per example).

    ``whole`` (n, ...) is each example's integral by the fixed rule (``nodes``, ``weights`` on [0, 1]),
    ``f0`` and ``f1`` F at the path's ends. Round after round, for every example whose estimated
    errors add up to more than ``tolerance`` x max(1, |F(1) - F(0)|) and that has fewer than
    ``max_panels`` panels, the panel with the largest error is halved: the rule on both halves and
    F at the new midpoint, all in one call of ``evaluate``. There is no error estimate before a
    first split (completeness alone misses errors that cancel across parts), so every example is
    split at least once.

    :param evaluate: the integrand (:data:`Integrand`) at path positions of chosen examples.
    :param whole: ``(n, ...)`` each example's integral by the fixed rule.
    :param f0: ``(n,)`` F at the start of each example's path.
    :param f1: ``(n,)`` F at its end.
    :param nodes: ``(k,)`` the rule's nodes on [0, 1] (:func:`gauss_legendre`).
    :param weights: ``(k,)`` its weights.
    :param tolerance: the error allowed, relative to max(1, |F(1) - F(0)|).
    :param max_panels: the most panels per example.
    :returns: ``(n, ...)`` float64 integrals, and how many panels each example ended with.
    """
    f0d, f1d = f0.double().tolist(), f1.double().tolist()
    panels = [_Panels([(0.0, 1.0)], [(f0d[i], f1d[i])], [whole[i].double()], [math.inf]) for i in range(len(whole))]
    k = len(nodes)
    while True:
        todo = []
        for i, p in enumerate(panels):
            scale = max(1.0, abs(p.f[-1][1] - p.f[0][0]))
            if sum(p.errors) > tolerance * scale and len(p.ends) < max_panels:
                todo.append((i, int(np.argmax(p.errors))))
        if not todo:
            break
        # Per example: the nodes of the left half, of the right half, then the midpoint (for F).
        index = torch.arange(len(todo), device=nodes.device).repeat_interleave(2 * k + 1)
        index = torch.as_tensor([i for i, _ in todo], device=nodes.device)[index]
        los, his = torch.as_tensor([panels[i].ends[j] for i, j in todo], device=nodes.device).T[:, :, None]
        mids = (los + his) / 2
        alphas = torch.cat([los + (mids - los) * nodes, mids + (his - mids) * nodes, mids], 1)
        values, scores = evaluate(index, alphas.ravel())
        values = values.double().reshape(len(todo), 2 * k + 1, *values.shape[1:])
        halves = (
            torch.einsum("k,tk...->t...", weights, values[:, :k]),
            torch.einsum("k,tk...->t...", weights, values[:, k:-1]),
        )
        for t, (i, j) in enumerate(todo):
            half = (panels[i].ends[j][1] - panels[i].ends[j][0]) / 2
            f_mid = float(scores[t * (2 * k + 1) + 2 * k])
            panels[i].split(j, f_mid, half * halves[0][t], half * halves[1][t])
    return torch.stack([torch.stack(p.parts).sum(0) for p in panels]), [len(p.ends) for p in panels]
