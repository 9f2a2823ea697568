"""Hard Concrete gates, one per head: the stochastic gates Voita et al. 2019 prune heads with.

Louizos, Welling & Kingma 2018, `Learning Sparse Neural Networks through L0 Regularization
<https://arxiv.org/abs/1712.01312>`_: ``u ~ U(0, 1)``, ``s = sigmoid((log u - log(1 - u) + log_alpha) / beta)``,
``z = clamp(s (r - l) + l, 0, 1)``; the expected number of open gates has a closed form, differentiable in
``log_alpha``. Voita et al. 2019 (`Analyzing Multi-Head Self-Attention <https://arxiv.org/abs/1905.09418>`_) put one
on each head's output; :mod:`~bertology_utils.interventions.l0` trains them.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from bertology_utils.core.batching import to_device
from bertology_utils.core.models import LoadedModel
from bertology_utils.core.typing import HeadDraws, HeadTensor
from bertology_utils.interventions.gated_logits import gate_shape

__all__ = ["HardConcreteGates"]


class HardConcreteGates(nn.Module):
    """Hard Concrete gates, one per head: ``log_alpha`` of shape (L, H).

    ``BETA`` (the temperature) and ``LIMITS`` (the stretch ``(l, r)``) are Louizos et al.'s values,
    which Voita et al. used. ``INIT`` = 3 starts every gate almost surely open,
    ``P(z != 0) = sigmoid(3 + (2/3) log 11) = 0.990`` (fully open, ``P(z = 1)``, 0.80; the
    deterministic gate is exactly 1), so training starts from the model as it is. Not higher: a
    gate clamped at 1 gets no gradient from the task loss, and a ``log_alpha`` must travel from the
    init to the threshold (about -1.6) before its head is pruned; from 5 (``P(z != 0)`` 0.9986),
    SST-2 gates were still drifting after 500 steps at lambdas where these had settled.

    :param shape: ``(L, H)``.
    :param init: every gate's initial ``log_alpha``.
    """

    #: Temperature of the concrete distribution.
    BETA: float = 2 / 3
    #: The stretch (l, r): s in (0, 1) is mapped to (l, r) and clamped to [0, 1].
    LIMITS: tuple[float, float] = (-0.1, 1.1)
    #: Initial log_alpha of every gate.
    INIT: float = 3.0
    #: u is kept this far from 0 and 1, so its logit stays finite.
    _EPS = 1e-6

    def __init__(self, shape: tuple[int, int], init: float = INIT):
        super().__init__()
        self.log_alpha = nn.Parameter(torch.full(tuple(shape), float(init)))

    @classmethod
    def for_model(cls, loaded: LoadedModel, init: float = INIT) -> HardConcreteGates:
        """Gates shaped like the model's heads (:func:`~bertology_utils.interventions.gated_logits.gate_shape`).

        :param loaded: the model.
        :param init: every gate's initial ``log_alpha``.
        :returns: the gates, ``(L, H)``.
        """
        return cls(gate_shape(loaded), init)

    @property
    def shape(self) -> tuple[int, int]:
        """``(L, H)``."""
        return tuple(self.log_alpha.shape)  # type: ignore[return-value]

    def sample(self, n: int, generator: torch.Generator | None = None) -> HeadDraws:
        """``n`` independent draws of every gate; differentiable in ``log_alpha``.

        :param n: how many draws (N).
        :param generator: the draws' generator (None: torch's default).
        :returns: ``(N, L, H)`` gates in [0, 1].
        """
        return self.from_noise(self.noise(n, generator))

    def noise(self, n: int, generator: torch.Generator | None = None) -> HeadDraws:
        """The uniform draws behind :meth:`sample`, kept inside (0, 1).

        :param n: how many draws (N).
        :param generator: the draws' generator (None: torch's default).
        :returns: ``(N, L, H)``.
        """
        la = self.log_alpha
        device = la.device if generator is None else generator.device  # the generator's own device draws
        u = to_device(torch.rand((n, *la.shape), generator=generator, dtype=la.dtype, device=device), la.device)
        return u.clamp(self._EPS, 1 - self._EPS)

    def from_noise(self, u: HeadDraws) -> HeadDraws:
        """The gates that uniform draws ``u`` (from :meth:`noise`) give: gates of several ``log_alpha`` can share
        one draw, as trainings with one seed would draw it.

        :param u: ``(N, L, H)`` uniform draws.
        :returns: ``(N, L, H)`` gates in [0, 1].
        """
        s = torch.sigmoid((torch.log(u) - torch.log1p(-u) + self.log_alpha) / self.BETA)
        low, high = self.LIMITS
        return (s * (high - low) + low).clamp(0.0, 1.0)

    def open_probability(self) -> HeadTensor:
        """``P(z != 0)`` per head, ``(L, H)``: ``sigmoid(log_alpha - beta log(-l / r))``."""
        low, high = self.LIMITS
        return torch.sigmoid(self.log_alpha - self.BETA * math.log(-low / high))

    def full_probability(self) -> HeadTensor:
        """``P(z = 1)`` per head, ``(L, H)``: ``1 - sigmoid(beta log((1 - l) / (r - 1)) - log_alpha)``."""
        low, high = self.LIMITS
        return torch.sigmoid(self.log_alpha - self.BETA * math.log((1 - low) / (high - 1)))

    def expected_l0(self) -> torch.Tensor:
        """The expected number of open gates (a scalar), differentiable: Voita's ``L_C``."""
        return self.open_probability().sum()

    def deterministic(self) -> HeadTensor:
        """Louizos' test-time gate, ``clamp(sigmoid(log_alpha) (r - l) + l, 0, 1)``, ``(L, H)``."""
        low, high = self.LIMITS
        return (torch.sigmoid(self.log_alpha) * (high - low) + low).clamp(0.0, 1.0)

    @torch.no_grad()
    def keep_mask(self) -> HeadTensor:
        """Heads kept, ``(L, H)`` bool: those whose gate is more likely open than closed.

        ``P(z != 0) > 0.5``, i.e. ``log_alpha > beta log(-l / r)`` (about -1.6): the head is kept
        when the trained model more often uses it than not. After training most gates are far
        from the threshold, so this and ``deterministic() > 0`` rarely differ.
        """
        return self.open_probability() > 0.5
