"""Layer-wise relevance propagation for a sequence classifier's tokens: AttnLRP and CP-LRP.

Both are input x gradient on the word-piece embedding (what
:func:`~bertology_utils.interventions.attribution.input_x_gradient` computes) with the backward pass of
some operations replaced by a relevance rule, so one forward and one backward pass per batch give
``R_t = sum_d e_td * g_td``, ``g`` the modified gradient of the target logit. Written from the papers:

* AttnLRP — Achtibat et al. (ICML 2024), `AttnLRP: Attention-Aware Layer-Wise Relevance Propagation for
  Transformers <https://arxiv.org/abs/2402.05602>`_;
* CP-LRP — Ali et al. (ICML 2022), `XAI for Transformers: Better Explanations through Conservative
  Propagation <https://arxiv.org/abs/2202.07304>`_.

In the input x gradient form the relevance of a tensor ``z`` is ``R(z) = z * g(z)``, and a rule is a
choice of ``g`` at an operation's input given ``g`` at its output. The rules (AttnLRP's Section 3; each is
written out below, so nothing depends on an equation number):

* linear layers (and every operation linear in its input: sums, constant scalings, the rotary rotation):
  the plain gradient, i.e. LRP-epsilon with epsilon 0; a bias ``b`` keeps ``R(b) = b * g`` (absorbed);
* element-wise nonlinearities ``y = f(x)`` (GELU, SiLU, ReLU, tanh, the Mish and tanh-approximated GELU
  modules of ``transformers.activations``): the identity rule ``R(x) = R(y)``, i.e.
  ``g(x) = g(y) * f(x) / x``. Epsilon 0: for these functions ``f(0) = 0`` with a finite slope, so
  ``f(x) / x`` is bounded, and where ``x == 0`` exactly it is taken as 0 (``R(x)`` is 0 there either way);
* LayerNorm (the LN-rule of Ali et al., which AttnLRP keeps): the normalisation's
  ``1 / std`` is a constant in the backward, so ``y = w * (x - mean(x)) / std + b`` is linear in ``x``
  and ``sum R(x) = sum R(y) - sum R(b)`` exactly (the centring keeps its gradient);
* softmax ``s = softmax(x)`` (AttnLRP's softmax rule, a first-order Taylor decomposition at ``x``
  whose bias term is dropped): ``R(x_i) = x_i (R_i - s_i sum_j R_j)`` with ``R_j = s_j g_j`` the
  relevance of output ``j``; what the dropped bias takes, ``sum_j R_j - sum_i R(x_i)``, is absorbed
  (:class:`LRPRules` records it with ``record=True``). In this form the rule's ``g(x)`` is the exact
  gradient of the softmax: the backward below writes the equation out;
* the products of two tensors that both depend on the input — ``Q K^T`` and ``A V`` in attention,
  DeBERTa's relative-position products, ModernBERT's gated linear unit: the uniform rule (AttnLRP's rule for
  multiplication), each of the ``k`` factors gets ``1 / k`` of the relevance, i.e. the
  gradient to each factor is multiplied by ``1 / k``;
* the classifier head (pooler dense and tanh, pre-classifier, dense and activation) follows the same
  rules: it is made of the same operations.

CP-LRP differs in one place: the attention weights (every softmax's output) are constants, so ``A V`` is
linear in ``V``, which gets all the relevance, and nothing flows into queries and keys (Ali et al.'s
AH-rule); LN-rule, identity rule and the uniform rule for other products are as above.

The rules are applied by a torch function mode (:class:`LRPRules`, as :func:`~bertology_utils.core.
determinism.host_dropout` intercepts dropout) around the classifier's forward, plus forward hooks on the
activation modules of ``transformers.activations``, whose tanh-approximated GELU is a composite of
products the mode would otherwise split. One mode serves every family with eager attention (what
:func:`~bertology_utils.core.models.load_model` loads), without a per-family table of where the softmax
and the products are: every ``softmax`` is taken for attention's, every ``matmul``/``bmm``/``einsum``/``mul``
of two tensors that require gradients (and are not weights) for a bilinear product, every ``layer_norm``
for a LayerNorm. Conservation: the token relevances plus what biases, position and segment embeddings
and (AttnLRP only) the softmaxes absorb add up to the target logit (tested per family in float64).

:class:`AttnLRP` (``"attnlrp"``) and :class:`CPLRP` (``"cp_lrp"``) are registered attribution references
that :func:`~bertology_utils.interventions.references.word_references` computes when named; they are not
among its defaults (``Reference.default`` is False), so a corpus's default references stay as they were.
Notebook 08 names them (:func:`~bertology_utils.interventions.faithfulness_runs.faithfulness_by_seed` computes
every registered reference), so their faithfulness sits beside integrated gradients'.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode

from bertology_utils.core.errors import BertologyError
from bertology_utils.core.models import LoadedModel
from bertology_utils.core.typing import TokenScores
from bertology_utils.interventions.attribution import Labels, input_x_gradient, token_to_word_scores
from bertology_utils.interventions.objectives import TokenBatch
from bertology_utils.interventions.references import Reference, ReferenceScores, ReferenceSettings, register_reference

__all__ = ["LRP_VARIANTS", "LRPRules", "lrp_rules", "lrp_relevance", "AttnLRP", "CPLRP"]

#: The rule sets: AttnLRP, and CP-LRP (attention weights constant).
LRP_VARIANTS = ("attnlrp", "cp_lrp")
#: Where transformers defines its activation modules (some, as the tanh-approximated GELU, are composites).
_ACTIVATIONS_MODULE = "transformers.activations"


# --------------------------------------------------------------------------- the rules' backward passes


class _ScaledGradient(torch.autograd.Function):
    """The identity forward; the backward multiplies the gradient by ``scale`` (the uniform rule's share)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, scale: float) -> torch.Tensor:
        ctx.scale = scale
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad * ctx.scale, None


class _IdentityRule(torch.autograd.Function):
    """``y = f(x)`` forward (``y`` given); backward ``g(x) = g(y) * f(x) / x``, so ``x * g(x) = y * g(y)``."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x, y)
        return y.view_as(y)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        x, y = ctx.saved_tensors
        zero = x == 0
        ratio = torch.where(zero, torch.zeros_like(y), y / torch.where(zero, torch.ones_like(x), x))
        return (grad * ratio).to(x.dtype), None


class _SoftmaxRule(torch.autograd.Function):
    """``s = softmax(x)`` forward (``s`` given); backward AttnLRP's softmax rule:
    ``x_i g(x_i) = x_i (R_i - s_i sum_j R_j)`` with ``R_j = s_j g(s_j)``."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, s: torch.Tensor, dim: int, absorbed: list | None) -> torch.Tensor:
        ctx.save_for_backward(x, s)
        ctx.dim, ctx.absorbed = dim, absorbed
        return s.view_as(s)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        x, s = ctx.saved_tensors
        relevance = s * grad  # R_j
        out = (relevance - s * relevance.sum(ctx.dim, keepdim=True)).to(x.dtype)  # R_i - s_i sum_j R_j
        if ctx.absorbed is not None:
            # masked scores can be -inf with a zero gradient: their relevance is 0, not nan
            kept = torch.where(out == 0, torch.zeros_like(out), x * out)
            ctx.absorbed.append(relevance.flatten(1).sum(1).to(x.dtype) - kept.flatten(1).sum(1))
        return out, None, None, None


# --------------------------------------------------------------------------- the mode


def _depends_on_input(value: Any) -> bool:
    """A tensor the backward reaches that is not a weight itself (an activation, or DeBERTa's relative
    positions, which are computed from weights alone and so are a source of relevance like positions)."""
    return torch.is_tensor(value) and value.requires_grad and not isinstance(value, nn.Parameter)


def _layer_norm(
    input: torch.Tensor,
    normalized_shape: Sequence[int],
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
) -> torch.Tensor:
    """``F.layer_norm`` (same arguments) with ``1 / std`` a constant of the backward: the LN-rule."""
    dims = tuple(range(-len(normalized_shape), 0))
    centred = input - input.mean(dims, keepdim=True)
    with torch.no_grad():
        scale = torch.rsqrt(centred.pow(2).mean(dims, keepdim=True) + eps)
    out = centred * scale
    if weight is not None:
        out = out * weight
    return out if bias is None else out + bias


class LRPRules(TorchFunctionMode):
    """A torch function mode in which the operations of a forward pass get the backward rules of AttnLRP
    (``variant="attnlrp"``) or CP-LRP (``"cp_lrp"``); see the module docstring. Rules apply only where
    gradients are being recorded; elsewhere (``no_grad``, the backward pass itself) every operation is
    its own. Use :func:`lrp_rules`, which also hooks a model's composite activation modules.

    :param variant: one of :data:`LRP_VARIANTS`.
    :param record: keep, in :attr:`absorbed`, what each AttnLRP softmax's dropped bias term takes during
        the backward: one (B,) tensor per softmax call, B its first dimension (the batch, in attention).
    """

    def __init__(self, variant: str = "attnlrp", *, record: bool = False):
        super().__init__()
        if variant not in LRP_VARIANTS:
            raise ValueError(f"variant must be one of {LRP_VARIANTS}, not {variant!r}")
        self.variant = variant
        #: the relevance each softmax's bias term absorbed, once the backward has run (``record=True``)
        self.absorbed: list[torch.Tensor] | None = [] if record else None
        self._rules: dict[Callable, Callable[[Callable, tuple, dict], Any]] = {
            **dict.fromkeys(_ELEMENTWISE, self._identity),
            **dict.fromkeys(_PRODUCTS, self._uniform),
            **dict.fromkeys(_SOFTMAXES, self._softmax),
            F.layer_norm: self._layer_norm,
        }

    def __torch_function__(
        self, func: Callable, types: Sequence[type], args: Sequence = (), kwargs: dict | None = None
    ) -> Any:
        kwargs = kwargs or {}
        rule = self._rules.get(func)
        if rule is None or not torch.is_grad_enabled():
            return func(*args, **kwargs)
        return rule(func, tuple(args), kwargs)

    @staticmethod
    def _identity(func: Callable, args: tuple, kwargs: dict) -> Any:
        out = func(*args, **kwargs)
        x = args[0] if args else kwargs["input"]
        return _IdentityRule.apply(x, out.detach()) if _depends_on_input(x) else out

    @staticmethod
    def _uniform(func: Callable, args: tuple, kwargs: dict) -> Any:
        # einsum takes its operands as further arguments or as one list
        flat = [a for arg in args for a in (arg if isinstance(arg, (list, tuple)) else (arg,))]
        factors = sum(_depends_on_input(a) for a in flat)
        if factors < 2:
            return func(*args, **kwargs)

        def share(a: Any) -> Any:
            if isinstance(a, (list, tuple)):
                return type(a)(share(b) for b in a)
            return _ScaledGradient.apply(a, 1.0 / factors) if _depends_on_input(a) else a

        return func(*(share(a) for a in args), **kwargs)

    def _softmax(self, func: Callable, args: tuple, kwargs: dict) -> Any:
        out = func(*args, **kwargs)
        x = args[0] if args else kwargs["input"]
        if not _depends_on_input(x):
            return out
        if self.variant == "cp_lrp":
            return out.detach()  # the AH-rule: attention weights are constants
        dim = kwargs["dim"] if "dim" in kwargs else args[1] if len(args) > 1 else None
        if dim is None:
            raise BertologyError("AttnLRP's softmax rule needs the softmax's dim")
        return _SoftmaxRule.apply(x, out.detach(), dim, self.absorbed)

    @staticmethod
    def _layer_norm(func: Callable, args: tuple, kwargs: dict) -> Any:
        return _layer_norm(*args, **kwargs)


_ELEMENTWISE: tuple[Callable, ...] = (
    F.gelu,
    F.silu,
    F.relu,
    torch.relu,
    torch.Tensor.relu,
    F.tanh,
    torch.tanh,
    torch.Tensor.tanh,
    F.mish,
)
_PRODUCTS: tuple[Callable, ...] = (
    torch.matmul,
    torch.Tensor.matmul,
    torch.bmm,
    torch.Tensor.bmm,
    torch.einsum,
    torch.mul,
    torch.Tensor.mul,
)
_SOFTMAXES: tuple[Callable, ...] = (F.softmax, torch.softmax, torch.Tensor.softmax)


def _activation_hook(_module: nn.Module, args: tuple, output: Any) -> Any:
    """The identity rule across a whole activation module (its insides may be products and sums)."""
    x = args[0] if args else None
    if not (torch.is_grad_enabled() and _depends_on_input(x) and torch.is_tensor(output)):
        return None
    return _IdentityRule.apply(x, output.detach())


@contextlib.contextmanager
def lrp_rules(model: nn.Module, variant: str = "attnlrp", *, record: bool = False) -> Iterator[LRPRules]:
    """Run a block with the relevance rules of ``variant``: a gradient taken inside it is the modified one,
    and ``input * gradient`` is the relevance. The mode and the hooks are removed when the block ends, a
    raised error included; the model's weights and ``.grad`` are not touched.

    :param model: the torch module whose forward the block runs (its activation modules get hooks).
    :param variant: one of :data:`LRP_VARIANTS`.
    :param record: record each softmax's absorbed relevance (:attr:`LRPRules.absorbed`).
    :returns: a context manager yielding the mode.
    """
    rules = LRPRules(variant, record=record)
    handles = [
        module.register_forward_hook(_activation_hook)
        for module in model.modules()
        if type(module).__module__ == _ACTIVATIONS_MODULE
    ]
    try:
        with rules:
            yield rules
    finally:
        for handle in handles:
            handle.remove()


def lrp_relevance(
    loaded: LoadedModel, batch: TokenBatch, labels: Labels = None, *, variant: str = "attnlrp"
) -> TokenScores:
    """Each token's relevance for the target logit under AttnLRP's or CP-LRP's rules (module docstring):
    :func:`~bertology_utils.interventions.attribution.input_x_gradient` run inside :func:`lrp_rules`.

    :param loaded: the classifier.
    :param batch: the items.
    :param labels: (B,) the classes to explain, or None for the predicted ones.
    :param variant: "attnlrp" or "cp_lrp".
    :returns: (B, T), zero on padding; special tokens get theirs (their embedding is an input).
    """
    with lrp_rules(loaded.model, variant):
        return input_x_gradient(loaded, batch, labels)


# --------------------------------------------------------------------------- references


class AttnLRP(Reference):
    """``attnlrp``: :func:`lrp_relevance` (Achtibat et al. 2024, `AttnLRP <https://arxiv.org/abs/2402.05602>`_),
    each word's tokens summed. Not among :func:`~bertology_utils.interventions.references.word_references`'
    defaults: name it."""

    name = "attnlrp"
    title = "AttnLRP"
    default = False
    variant = "attnlrp"

    def scores(
        self, loaded: LoadedModel, batch: TokenBatch, labels: Labels, settings: ReferenceSettings
    ) -> ReferenceScores:
        """(B, W) summed relevances (see :meth:`Reference.scores`; ``settings`` are integrated gradients')."""
        relevance = lrp_relevance(loaded, batch, labels, variant=self.variant)
        return ReferenceScores(token_to_word_scores(relevance, batch))


class CPLRP(AttnLRP):
    """``cp_lrp``: :func:`lrp_relevance` with the attention weights constant (Ali et al. 2022, `XAI for
    Transformers: Better Explanations through Conservative Propagation <https://arxiv.org/abs/2202.07304>`_),
    each word's tokens summed; opt-in as :class:`AttnLRP`."""

    name = "cp_lrp"
    title = "CP-LRP"
    variant = "cp_lrp"


register_reference(AttnLRP())
register_reference(CPLRP())
