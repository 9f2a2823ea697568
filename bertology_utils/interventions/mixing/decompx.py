"""Modarressi et al. (2023, `DecompX: Explaining Transformers Decisions by Propagating Token Decomposition
<https://aclanthology.org/2023.acl-long.149/>`_, ACL 2023): every token's representation, at every layer, as a
sum of one vector per input token, propagated through the whole encoder (attention, both residuals, both layer
norms and the feed-forward block) and on through the classifier head.

``decompx``        the norms ||x^l_(i<-k)|| of input k's part of token i after layer l, rows rescaled to sum to 1
                   (:class:`DecompX`: the decomposition is carried through the layers, so each layer's map is
                   already one of the whole encoder up to that layer, not a layer's to be rolled out);
``decompx_logit``  an attribution reference: input k's part of the explained class's logit
                   (:class:`DecompXLogit`, :func:`decompx_logits`).

The rules, as the paper states them (Section 3) and as its authors' code runs by default:

* the input of the first layer is decomposed into the tokens' own embeddings, x^0_(i<-k) = [i = k] x_i;
* a linear map applies to every part; a bias b is shared among the parts in proportion to |x_k . b| (the
  paper's choice among its bias rules, "absdot");
* attention: part k of token i is sum_h alpha^h_ij W_O^h W_V^h x_(j<-k) plus the residual's x_(i<-k); the
  biases W_O b_V + b_O are shared as above. In the first layer each part is a whole token, so its value vector
  W_V x_k + b_V carries its own bias there, and only b_O is shared (the authors' code does the same);
* a layer norm is linear once its input's statistics are fixed: gamma (u - mean u) / sigma(z_i) of each part,
  sigma that of the real input z_i; beta is shared;
* an element-wise activation (GELU in the feed-forward block, tanh or ReLU in the heads) scales each part by
  theta = act(z) / z of the real input z (the paper's zero-origin slope, "ZO"), so the parts still add up.

Every rule keeps the sum: at every layer the parts add up to the layer's output, and the logit's parts to the
logit (tests). Two choices of ours: where z = 0 exactly theta is 0 (act(0) = 0 for these activations, so the
parts of a zero add up to 0 either way), and a bias no part has any dot product with is lost (the authors add
1e-12 to the denominator; that case does not arise with real weights). The head's operations are found as
AttnLRP's are (:mod:`~bertology_utils.interventions.lrp`): its linear layers and activations, whatever the family
names them. Post-LN encoders with a plain feed-forward block; ModernBERT's gated block is refused
(:func:`~bertology_utils.core.architectures.feed_forward`), and ALBERT's shared layers too.

The parts of T tokens are a (T, T, E) tensor per item and the feed-forward block works on (T, T, 4E): the cost is
about T forward passes, in chunks of receiving rows (:func:`~bertology_utils.interventions.mixing.norm.row_chunks`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode

from bertology_utils.core import architectures
from bertology_utils.core.architectures import Model
from bertology_utils.core.errors import BertologyError, UnsupportedArchitectureError
from bertology_utils.core.models import LoadedModel, evaluating
from bertology_utils.core.typing import AttentionMaps, TokenMask, TokenScores
from bertology_utils.interventions.attribution import Labels, classifier_logits, predicted_labels, token_to_word_scores
from bertology_utils.interventions.mixing.alti import layer_norm_part
from bertology_utils.interventions.mixing.base import LayerMethod, LayerTrace, trace, value_projection
from bertology_utils.interventions.mixing.norm import row_chunks
from bertology_utils.interventions.objectives import TokenBatch
from bertology_utils.interventions.references import Reference, ReferenceScores, ReferenceSettings, register_reference

__all__ = ["shared_bias", "zero_origin", "decompose", "decompx_logits", "DecompX", "DecompXLogit"]

#: The element-wise activations a decomposed classifier head may apply (zero at zero, so act(z) / z is bounded).
_ACTIVATIONS: frozenset[Callable[..., Any]] = frozenset({torch.tanh, torch.Tensor.tanh, F.gelu, F.relu, torch.relu})


def shared_bias(parts: torch.Tensor, bias: torch.Tensor | None, *, in_place: bool = False) -> torch.Tensor:
    """``parts`` plus each part's share of ``bias``, in proportion to |part . bias| (DecompX's "absdot" rule).

    :param parts: (..., K, D) the parts of one vector each, along the last but one axis.
    :param bias: (D,) or (..., D), broadcast over the parts; None for none.
    :param in_place: add the shares to ``parts`` itself, which is returned: for a caller's temporary, where a
        second tensor of its size would be one more pass through memory.
    :returns: (..., K, D), adding up to ``parts.sum(-2) + bias``.
    """
    if bias is None:
        return parts
    # the dot products as one product with the bias, not an elementwise one of the parts' size and its sum
    dots = parts @ bias if bias.dim() == 1 else (parts * bias.unsqueeze(-2)).sum(-1)
    weights = dots.abs_().unsqueeze(-1)
    shares = weights / weights.sum(-2, keepdim=True).clamp_min(torch.finfo(weights.dtype).tiny)
    return (parts if in_place else parts.clone()).addcmul_(shares, bias.unsqueeze(-2))


def zero_origin(activation: Callable[[torch.Tensor], torch.Tensor], z: torch.Tensor) -> torch.Tensor:
    """DecompX's zero-origin slope of an element-wise activation at the real input ``z``: act(z) / z, 0 where z = 0.

    :param activation: the activation.
    :param z: its real input.
    :returns: theta, of ``z``'s shape.
    """
    nonzero = z != 0
    return torch.where(nonzero, activation(z) / torch.where(nonzero, z, torch.ones_like(z)), torch.zeros_like(z))


def _layer_norm(
    model: nn.Module, layer: int, z: torch.Tensor, parts: torch.Tensor, rows: slice, out: bool
) -> torch.Tensor:
    """A post-LN norm on the parts of its input ``z``'s rows: its linear part, beta shared."""
    beta = architectures.layer_norms(model, layer)[1 if out else 0].bias
    linear = layer_norm_part(model, layer, z, parts, rows, output_norm=out)
    return shared_bias(linear, beta if isinstance(beta, torch.Tensor) else None, in_place=True)


def _feed_forward(model: nn.Module, layer: int, y: torch.Tensor, parts: torch.Tensor) -> torch.Tensor:
    """W_2 (theta (W_1 y_k + shared b_1)) + shared b_2 of each part y_k of the real input rows ``y``."""
    first, activation, second = architectures.feed_forward(model, layer)
    theta = zero_origin(activation, first(y))
    # in place on the products' own outputs: the (B, rows, T, 4E) hidden parts are the largest tensors here
    hidden = shared_bias(F.linear(parts, first.weight), first.bias, in_place=True).mul_(theta[:, :, None, :])
    return shared_bias(F.linear(hidden, second.weight), second.bias, in_place=True)


def _attention(model: nn.Module, layer: int, t: LayerTrace, parts: torch.Tensor | None) -> torch.Tensor:
    """Part k of sum_h alpha^h_ij W_O^h v^h_j plus the residual, with the biases shared: (B, T, K, E)."""
    batch, tokens, _ = t.hidden.shape
    output = architectures.attention_output(model, layer)
    heads, size = t.values.shape[1], t.values.shape[-1]
    if parts is None:  # the first layer: each part is a whole token, its value vector with its own bias
        eye = torch.eye(tokens, dtype=t.hidden.dtype, device=t.hidden.device)
        parts = eye[None, :, :, None] * t.hidden[:, :, None, :]
        values = eye[None, None, :, :, None] * t.values[:, :, :, None, :]  # (B, H, T_j, K, d)
        bias: torch.Tensor | None = output.bias
    else:
        projection = value_projection(model, layer)
        values = F.linear(parts, projection.weight).view(batch, tokens, tokens, heads, size).permute(0, 3, 1, 2, 4)
        bias = output.bias if projection.bias is None else F.linear(projection.bias, output.weight, output.bias)
    mixed = torch.einsum("bhij,bhjkd->bikhd", t.probs, values).reshape(batch, tokens, tokens, heads * size)
    return shared_bias(F.linear(mixed, output.weight).add_(parts), bias, in_place=True)


def _check_model(model: nn.Module) -> None:
    """Refuse a model the decomposition does not cover (pre-LN, gated feed-forward, shared layers)."""
    for layer in range(len(architectures.layers(model))):
        architectures.feed_forward(model, layer)
    if architectures.is_pre_layer_norm(model):
        architectures.layer_norms(model, 0)  # raises, saying why


@torch.no_grad()
def decompose(loaded: Model, traces: Sequence[LayerTrace]) -> Iterator[torch.Tensor]:
    """DecompX's parts of every layer's output, layer by layer: x^l_(i<-k), adding up to the output x^l_i.

    :param loaded: a LoadedModel or its torch module (post-LN, plain feed-forward blocks).
    :param traces: :func:`~bertology_utils.interventions.mixing.base.trace`'s layers, all parts kept.
    :returns: per layer (B, T_i, K, E), K the input tokens (padding's columns zero in real rows).
    """
    model = architectures.torch_module(loaded)
    _check_model(model)
    parts: torch.Tensor | None = None
    for layer, t in enumerate(traces):
        block = _attention(model, layer, t, parts)
        out = torch.empty_like(block)
        width = architectures.feed_forward(model, layer)[0].out_features
        first_input, second_input = t.hidden + t.dense, t.normed + t.ffn  # the two norms' real inputs
        for rows in row_chunks(t.hidden.shape[0], t.hidden.shape[1], width):
            normed = _layer_norm(model, layer, first_input, block[:, rows], rows, out=False)
            summed = _feed_forward(model, layer, t.normed[:, rows], normed).add_(normed)
            out[:, rows] = _layer_norm(model, layer, second_input, summed, rows, out=True)
        parts = out
        yield parts


class DecompX(LayerMethod):
    """``decompx``: the norm of each input's part of each token after every layer (:func:`decompose`; Modarressi
    et al. 2023, `DecompX <https://aclanthology.org/2023.acl-long.149/>`_), rows rescaled to sum to 1 over real
    tokens. One map per layer, each of the encoder up to that layer: it is not rolled out."""

    name = "decompx"
    reads: ClassVar[frozenset[str]] = frozenset({"hidden", "values", "dense", "normed", "ffn"})

    def check_model(self, model: nn.Module) -> None:
        """Refuse a pre-LN model, a gated feed-forward block or shared layers (:func:`decompose`)."""
        _check_model(model)

    def maps(self, model: nn.Module, traces: Sequence[LayerTrace], real: TokenMask) -> list[AttentionMaps]:
        """Every layer's (B, 1, T, T) map, from one propagation through the layers (see :meth:`LayerMethod.maps`)."""
        mask = real[:, :, None] * real[:, None, :]
        out = []
        for parts in decompose(model, traces):
            norms = parts.norm(dim=-1) * mask
            out.append((norms / norms.sum(-1, keepdim=True).clamp_min(torch.finfo(norms.dtype).tiny))[:, None])
        return self._checked(out, real, [t.probs.shape[1] for t in traces])


# --------------------------------------------------------------------------- through the classifier head


class _DecomposedHead(TorchFunctionMode):
    """Runs a classifier head on parts stacked along the batch axis ((B K, ...), K parts of each of B items):
    every linear layer applies to each part and shares its bias, every element-wise activation scales each part
    by theta of the parts' sum (module docstring). Active from ``start()`` on (the encoder's last layer)."""

    def __init__(self, items: int, parts: int):
        super().__init__()
        self.items, self.parts, self.active = items, parts, False

    def _grouped(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(self.items, self.parts, *x.shape[1:])

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if not self.active:
            return func(*args, **kwargs)
        if func is F.linear:
            x, weight, bias = (*args, None)[:3] if len(args) >= 2 else (args[0], kwargs["weight"], None)
            bias = kwargs.get("bias", bias)
            out = F.linear(x, weight)
            if bias is None:
                return out
            grouped = self._grouped(out).movedim(1, -2)  # (B, ..., K, D), a view of the product's own output
            return shared_bias(grouped, bias, in_place=True).movedim(-2, 1).reshape(out.shape)
        if func in _ACTIVATIONS:
            x = args[0]
            theta = zero_origin(lambda z: func(z, *args[1:], **kwargs), self._grouped(x).sum(1))
            return (self._grouped(x) * theta[:, None]).reshape(x.shape)
        return func(*args, **kwargs)


def decompx_logits(loaded: LoadedModel, batch: TokenBatch) -> torch.Tensor:
    """DecompX's parts of every logit: input k's part of class c's logit (Modarressi et al. 2023, `DecompX
    <https://aclanthology.org/2023.acl-long.149/>`_), the encoder's decomposition (:func:`decompose`) of the
    first token carried through the classifier head (module docstring).

    :param loaded: the classifier (a sequence-classification head reading the first token).
    :param batch: the items.
    :returns: (B, T, C) float32, summing over T to the logits; zero on padding.
    """
    model = loaded.model
    _check_model(model)
    if not architectures.arch_spec(model).classifier_reads_first_token:
        raise UnsupportedArchitectureError(
            f"{loaded.name}'s classifier head does not read the first token alone, as DecompX's head rules assume",
            model_type=getattr(model.config, "model_type", None),
            missing=["classifier"],
        )
    inputs = batch.model_inputs()
    with evaluating(model):  # float32, every token through the last layer (no first-token readout)
        traces = trace(model, inputs)
        *_, parts = decompose(model, traces)
        first = parts[:, 0] * batch.real[:, :, None].to(parts.dtype)  # (B, K, E)
        items, tokens, width = first.shape
        head = _DecomposedHead(items, tokens)
        last = architectures.layers(model)[-1]

        def swap(module: nn.Module, args: Any, output: Any) -> Any:
            head.active = True  # from here on only the head runs
            stacked = first.reshape(items * tokens, 1, width)
            return (stacked, *output[1:]) if isinstance(output, tuple) else stacked

        handle = last.register_forward_hook(swap)
        try:
            with head, torch.no_grad():
                logits = classifier_logits(loaded, model(**inputs))
        finally:
            handle.remove()
    if logits.shape[0] != items * tokens:
        raise BertologyError(f"{loaded.name}'s classifier head did not keep the parts apart")
    return logits.view(items, tokens, -1)


class DecompXLogit(Reference):
    """``decompx_logit``: DecompX's parts of the explained class's logit (:func:`decompx_logits`), each word's
    tokens summed. Opt-in (name it), as AttnLRP."""

    name = "decompx_logit"
    title = "DecompX"
    default = False

    def unsupported(self, loaded: LoadedModel) -> str | None:
        """The decomposition's refusal (:func:`decompose`: pre-LN, gated feed-forward, shared layers), or None."""
        try:
            _check_model(loaded.model)
        except UnsupportedArchitectureError as error:
            return str(error)
        return None

    def scores(
        self, loaded: LoadedModel, batch: TokenBatch, labels: Labels, settings: ReferenceSettings
    ) -> ReferenceScores:
        """(B, W) summed parts of the class's logit (see :meth:`Reference.scores`; ``settings`` are IG's)."""
        target = predicted_labels(loaded, batch) if labels is None else torch.as_tensor(labels).reshape(-1)
        parts = decompx_logits(loaded, batch)
        chosen: TokenScores = parts.gather(-1, target.to(parts.device).view(-1, 1, 1).expand(-1, parts.shape[1], 1))
        return ReferenceScores(token_to_word_scores(chosen[..., 0], batch))


register_reference(DecompXLogit())
