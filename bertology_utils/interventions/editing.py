"""Edit attention probabilities inside a model, with one mechanism for every intervention.

transformers 5 removed ``head_mask``, and its attention modules compute their probabilities
inside a function call, where a forward hook on the module comes too late to change them.
This module puts one *edit point* in every self-attention layer: right after the softmax
(and attention dropout), just before the probabilities are multiplied with the values. An
edit is a function ``edit(layer, probs) -> probs`` with ``probs`` of shape
``(B, H, T, T)`` and ``layer`` counted from 0. Everything else is built on it:

* :func:`edit_attention` — any edit, inside a ``with`` block that always restores the model;
* :func:`capture_attention` — keep each layer's probabilities (the very tensors multiplied
  with the values) and, after ``backward()``, their gradients: all heads in one pass;
* :func:`gate_heads` — multiply each head's probabilities by a gate (1 keeps the head, 0
  removes its contribution). The head's context is ``probs @ values``, linear in the
  probabilities, so this *is* a gate on the head's output before the output projection
  (Michel et al. 2019's gate, `Are Sixteen Heads Really Better than One? <https://arxiv.org/abs/1905.10650>`_,
  and what the removed ``head_mask`` did); it is differentiable;
* :func:`record_layer_outputs` / :func:`replay_layers_below` — an edit at layer ``l`` cannot
  change the layers below it, so a pass with that edit can take their outputs from an unedited
  pass on the same inputs instead of recomputing them;
* :func:`first_token_readout` — a sequence classifier reads the last layer at one token, so
  that layer's feed-forward block need not run on the others; :func:`classifier_inference` is
  that in eval mode and the model's precision, what every pass that only scores a classifier runs in.

How the edit point is installed depends on the architecture:

* models whose attention goes through transformers' ``AttentionInterface`` (BERT, RoBERTa,
  DistilBERT, ELECTRA and most current encoders) are switched, for the duration of the
  block, to a registered attention function that computes exactly what ``eager`` computes
  (bit-identical outputs when no edit changes anything) with the edit point in it;
* MPNet and DeBERTa-v2 compute their softmax inline and then apply their attention-dropout
  module to the probabilities; a forward hook on that module is the edit point.

Where layers share one module (ALBERT), the module counts its calls in each forward pass to know
which layer it runs as, so an edit (a gate, a capture) applies to that layer alone.

Which applies, and where the self-attention modules and dropout modules are, is the
architecture's :class:`~bertology_utils.core.architectures.ArchSpec` (``dropout_edit_point``); an
unregistered architecture raises :class:`~bertology_utils.core.errors.UnsupportedArchitectureError`. A
guard checks at run time that every attention layer really passed through its edit point,
so an architecture that bypasses it fails loudly instead of silently ignoring the edit.
Edits nest: inner blocks apply after outer ones, and the model goes back to its own
attention implementation when the outermost block exits, even on an exception.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

import torch
from torch import nn

from bertology_utils.core import architectures
from bertology_utils.core.architectures import Model, dropout_edit_points, self_attention_modules
from bertology_utils.core.errors import BertologyError, ModelNotAvailableError
from bertology_utils.core.models import LoadedModel, autocast, evaluating
from bertology_utils.core.typing import AllAttentionMaps, AttentionMaps, HeadTensor

if TYPE_CHECKING:
    from transformers import PreTrainedModel

__all__ = [
    "Edit",
    "edit_attention",
    "capture_attention",
    "AttentionCapture",
    "gate_heads",
    "record_layer_outputs",
    "replay_layers_below",
    "first_token_readout",
    "classifier_inference",
    "INTERFACE_NAME",
]

#: An edit: ``(layer counted from 0, probabilities (B, H, T, T)) -> probabilities``, or None to leave them as they are.
Edit = Callable[[int, AttentionMaps], Optional[AttentionMaps]]  # noqa: UP045 (AttentionMaps is a string at run time)

#: Name under which the edit-point attention function is registered with transformers.
INTERFACE_NAME = "bertology_edit"

#: Attributes set on attention modules while edits are active.
_STATE = "_bertology_edit_state"

#: Attention-function arguments of other model families (logit soft-capping, attention sinks) that
#: eager BERT-style attention does not have; the edit point refuses them rather than ignore them.
_UNSUPPORTED_KWARGS = ("softcap", "s_aux", "sinks")

_LOCK = threading.RLock()
_REGISTERED = False


@dataclass
class _ModuleState:
    layer: int
    edits: list = field(default_factory=list)
    visited: bool = False
    #: The layers this module runs as, in forward order: several where layers share it (ALBERT).
    depths: tuple[int, ...] = ()
    #: Its calls so far in the current forward pass: the layer it runs as now is ``depths[calls - 1]``.
    calls: int = 0


# --------------------------------------------------------------------------- the edit point


def _apply_edits(module: nn.Module, probs: AttentionMaps) -> AttentionMaps:
    state: _ModuleState | None = getattr(module, _STATE, None)
    if state is None:
        return probs
    state.visited = True
    for edit in list(state.edits):
        out = edit(state.layer, probs)
        if out is not None:
            if out.shape != probs.shape:
                raise BertologyError(
                    f"an attention edit returned shape {tuple(out.shape)} for probabilities "
                    f"of shape {tuple(probs.shape)} (layer {state.layer})"
                )
            probs = out
    return probs


def _edit_point_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """transformers' eager attention (BERT's ``eager_attention_forward``) with the edit point added.

    Same operations in the same order as eager, so outputs are bit-identical when no edit
    changes the probabilities.
    """
    unsupported = sorted(k for k in _UNSUPPORTED_KWARGS if kwargs.get(k) is not None)
    if unsupported or key.shape[1] != query.shape[1]:
        what = ", ".join(unsupported) or "grouped key/value heads"
        raise ModelNotAvailableError(
            f"{type(module).__name__} asks its attention function for {what}, which the edit point does not "
            "implement; attention interventions support BERT-style encoders"
        )
    if scaling is None:
        scaling = query.size(-1) ** -0.5
    weights = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        weights = weights + attention_mask
    weights = nn.functional.softmax(weights, dim=-1)
    weights = nn.functional.dropout(weights, p=dropout, training=module.training)
    weights = _apply_edits(module, weights)
    output = torch.matmul(weights, value)
    output = output.transpose(1, 2).contiguous()
    return output, weights


def _dropout_hook(module: nn.Module) -> Callable[[nn.Module, tuple, torch.Tensor], torch.Tensor]:
    def hook(_dropout: nn.Module, _inputs: tuple, output: torch.Tensor) -> torch.Tensor:
        return _apply_edits(module, output)

    return hook


def _register_interface() -> None:
    global _REGISTERED
    if _REGISTERED:
        return
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask

    AttentionInterface.register(INTERFACE_NAME, _edit_point_attention)
    # The masks our function adds to the scores must be eager's additive float masks.
    AttentionMaskInterface.register(INTERFACE_NAME, eager_mask)
    _REGISTERED = True


class _Installation:
    """The edit points of one model, shared by nested ``edit_attention`` blocks."""

    def __init__(self, model: nn.Module):
        self.model = model
        # One entry per layer; layers sharing weights (ALBERT) share a module, which then holds one state
        # and learns which layer it runs as by counting its calls in each forward pass.
        self.modules = self_attention_modules(model, shared=True)
        self.unique = list({id(m): m for m in self.modules}.values())
        self.depth = 0
        self.handles: list = []
        self.previous_implementation: str | None = None
        self.guards: list = []
        self.dropout_points = dropout_edit_points(model)
        self.uses_interface = self.dropout_points is None
        if self.uses_interface:
            can_set = getattr(type(model), "_can_set_attn_implementation", None)
            if can_set is None or not can_set():
                names = sorted({type(m).__name__ for m in self.modules})
                raise ModelNotAvailableError(
                    f"{type(model).__name__} ({', '.join(names)}) does not route its attention through "
                    "transformers' AttentionInterface; give its ArchSpec a dropout_edit_point (the module applied "
                    "to the attention probabilities) with register_architecture(..., replace=True)"
                )

    def enter(self) -> None:
        if self.depth == 0:
            for module in self.unique:
                depths = tuple(i for i, m in enumerate(self.modules) if m is module)
                setattr(module, _STATE, _ModuleState(depths[0], depths=depths))
                self.guards.append(module.register_forward_pre_hook(self._reset_visit))
                self.guards.append(module.register_forward_hook(self._check_visit))
            if len(self.unique) < len(self.modules):
                self.guards.append(architectures.base_model(self.model).register_forward_pre_hook(self._new_pass))
            try:
                if self.uses_interface:
                    _register_interface()
                    model = self._transformers_model()
                    self.previous_implementation = model.config._attn_implementation
                    model.set_attn_implementation(INTERFACE_NAME)
                else:
                    for module, point in zip(self.modules, self.dropout_points or ()):
                        self.handles.append(point.register_forward_hook(_dropout_hook(module)))
            except BaseException:
                self._uninstall()
                raise
        self.depth += 1

    def _transformers_model(self) -> PreTrainedModel:
        """The model, typed as transformers' class: edits through the interface switch its attention implementation."""
        from transformers import PreTrainedModel

        assert isinstance(self.model, PreTrainedModel)  # __init__ checked its _can_set_attn_implementation
        return self.model

    def exit(self) -> None:
        self.depth -= 1
        if self.depth == 0:
            self._uninstall()

    def _uninstall(self) -> None:
        for handle in self.handles + self.guards:
            handle.remove()
        self.handles, self.guards = [], []
        if self.uses_interface and self.previous_implementation is not None:
            self._transformers_model().set_attn_implementation(self.previous_implementation)
            self.previous_implementation = None
        for module in self.unique:
            if hasattr(module, _STATE):
                delattr(module, _STATE)

    def _new_pass(self, _module: nn.Module, _args: tuple) -> None:
        for module in self.unique:
            state = getattr(module, _STATE, None)
            if state is not None:
                state.calls = 0

    @staticmethod
    def _reset_visit(module: nn.Module, _args: tuple) -> None:
        state = getattr(module, _STATE, None)
        if state is not None:
            state.visited = False
            if len(state.depths) > 1:
                state.layer = state.depths[state.calls % len(state.depths)]
                state.calls += 1

    @staticmethod
    def _check_visit(module: nn.Module, _args: tuple, _output: object) -> None:
        state = getattr(module, _STATE, None)
        if state is not None and state.edits and not state.visited:
            raise ModelNotAvailableError(
                f"{type(module).__name__} (layer {state.layer}) computed its attention without passing through "
                "the edit point, so the edit would be silently ignored; this architecture is not supported"
            )


_INSTALLATIONS: dict[int, _Installation] = {}


@contextlib.contextmanager
def edit_attention(model: Model, edit: Edit) -> Iterator[None]:
    """Within the block, every self-attention layer's probabilities go through ``edit(layer, probs)``.

    ``model`` is a LoadedModel or a transformers model; ``layer`` is counted from 0 and
    ``probs`` has shape ``(B, H, T, T)``. The edit may return a new tensor
    (it must keep the shape) or None to leave the probabilities unchanged; it runs inside the
    forward pass, so whatever it does is part of the autograd graph. The model's attention
    implementation, hooks and outputs are restored when the block exits.

    :param model: the model to edit.
    :param edit: ``edit(layer, probs)``, probabilities ``(B, H, T, T)`` in and out (or None: unchanged).
    :returns: a context manager; ModelNotAvailableError on entry for an architecture without an edit point, and in
        the pass where a layer bypassed its edit point.
    """
    module = architectures.torch_module(model)
    with _LOCK:
        installation = _INSTALLATIONS.get(id(module))
        if installation is None or installation.model is not module:
            installation = _INSTALLATIONS[id(module)] = _Installation(module)
        installation.enter()
        for m in installation.unique:
            getattr(m, _STATE).edits.append(edit)
    try:
        yield
    finally:
        with _LOCK:
            for m in installation.unique:
                state = getattr(m, _STATE, None)
                if state is not None and edit in state.edits:
                    # Remove this block's edit (by identity: the same function may be used twice).
                    del state.edits[max(i for i, e in enumerate(state.edits) if e is edit)]
            installation.exit()
            if installation.depth == 0:
                _INSTALLATIONS.pop(id(module), None)


# --------------------------------------------------------------------------- capture and gradients


@dataclass
class AttentionCapture:
    """Attention probabilities captured by :func:`capture_attention`, one entry per layer.

    ``probs[layer]`` is the tensor the layer multiplied with its values in the latest forward
    pass, shape ``(B, H, T, T)``; after ``loss.backward()``, ``grads[layer]`` is
    d(loss)/d(probs[layer]) for all heads at once (None where no gradient flowed).

    :param probs: per layer, the probabilities of the latest pass (None before one).
    """

    probs: list = field(default_factory=list)

    @property
    def grads(self) -> list:
        """Per layer, ``(B, H, T, T)`` d(loss)/d(probs) after ``backward()`` (None where no gradient flowed)."""
        return [None if p is None else p.grad for p in self.probs]

    def stacked(self) -> AllAttentionMaps:
        """Captured probabilities as one tensor, detached.

        :returns: ``(B, L, H, T, T)``.
        """
        return torch.stack([p.detach() for p in self.probs], dim=1)

    def stacked_grads(self) -> AllAttentionMaps:
        """Gradients as one tensor (zeros where none flowed).

        :returns: ``(B, L, H, T, T)``.
        """
        return torch.stack([torch.zeros_like(p) if g is None else g for p, g in zip(self.probs, self.grads)], dim=1)


@contextlib.contextmanager
def capture_attention(model: Model, *, retain_grad: bool = True) -> Iterator[AttentionCapture]:
    """Keep every layer's attention probabilities (and, after backward, their gradients).

    Capturing is one more edit that returns the probabilities unchanged, so it sees what
    outer edits did to them (place it innermost to read the probabilities actually used).
    Each forward pass replaces what the previous one captured.

    :param model: the model.
    :param retain_grad: keep the probabilities' ``.grad`` after ``backward()`` (for :attr:`AttentionCapture.grads`).
    :returns: a context manager yielding the capture, filled by each pass.
    """
    n_layers = len(self_attention_modules(model, shared=True))
    capture = AttentionCapture([None] * n_layers)

    def keep(layer: int, probs: AttentionMaps) -> None:
        if retain_grad and probs.requires_grad:
            probs.retain_grad()
        capture.probs[layer] = probs
        return None

    with edit_attention(model, keep):
        yield capture


@contextlib.contextmanager
def gate_heads(model: Model, gates: HeadTensor) -> Iterator[HeadTensor]:
    """Multiply head ``h`` of layer ``l``'s output by ``gates[l, h]`` inside the block.

    ``gates`` has shape (L, H); 1 leaves a head unchanged, 0 removes its
    contribution (its context vector is zero; the output projection's bias stays, as with
    pruning). Gates may require grad: after ``loss.backward()``, ``gates.grad`` holds
    d(loss)/d(gate) for every head from one backward pass (Michel et al.'s importance).

    :param model: the model.
    :param gates: ``(L, H)`` one gate per head.
    :returns: a context manager yielding the gates as a tensor; ValueError for gates of the wrong shape.
    """
    modules = self_attention_modules(model, shared=True)
    gates = torch.as_tensor(gates)
    if gates.dim() != 2 or gates.shape[0] != len(modules):
        raise ValueError(f"gates must have shape (layers={len(modules)}, heads), not {tuple(gates.shape)}")

    def gate(layer: int, probs: AttentionMaps) -> AttentionMaps:
        if gates.shape[1] != probs.shape[1]:
            raise ValueError(f"gates have {gates.shape[1]} heads per layer; layer {layer} has {probs.shape[1]}")
        g = gates[layer].to(device=probs.device, dtype=probs.dtype)
        return probs * g[None, :, None, None]

    with edit_attention(model, gate):
        yield gates


@contextlib.contextmanager
def record_layer_outputs(model: Model) -> Iterator[dict[int, object]]:
    """What each encoder layer (0-based) returns during the block, for :func:`replay_layers_below`.

    :param model: the model.
    :returns: a context manager yielding layer -> its output in the latest pass.
    """
    outputs: dict[int, object] = {}

    def keeper(index: int) -> Callable[[nn.Module, tuple, object], None]:
        def hook(_module: nn.Module, _args: tuple, output: object) -> None:
            outputs[index] = output

        return hook

    handles = [layer.register_forward_hook(keeper(i)) for i, layer in enumerate(architectures.layers(model))]
    try:
        yield outputs
    finally:
        for handle in handles:
            handle.remove()


@contextlib.contextmanager
def replay_layers_below(model: Model, first: int, outputs: dict[int, object]) -> Iterator[None]:
    """Layers below ``first`` return ``outputs`` (from :func:`record_layer_outputs`) instead of running.

    Valid only for a pass on the same inputs whose edits start at layer ``first``: the layers
    below see exactly what they saw when recorded. The embeddings and the layers from
    ``first`` on run as usual, so the cost of an edit at layer ``l`` is the layers from ``l`` on.

    :param model: the model.
    :param first: the first layer (from 0) that runs.
    :param outputs: what :func:`record_layer_outputs` recorded on the same inputs.
    :returns: a context manager; BertologyError when a layer below ``first`` has no recorded output.
    """
    modules = architectures.layers(model)[:first]
    missing = [i for i in range(len(modules)) if i not in outputs]
    if missing:
        raise BertologyError(f"no recorded output for layers {missing}: record them on the same inputs first")
    saved = []
    for index, module in enumerate(modules):
        saved.append(module.__dict__.get("forward"))
        module.forward = lambda *_args, _output=outputs[index], **_kwargs: _output
    try:
        yield
    finally:
        for module, forward in zip(modules, saved):
            if forward is None:
                del module.forward
            else:
                module.forward = forward


@contextlib.contextmanager
def first_token_readout(model: Model) -> Iterator[bool]:
    """Inside the block, the last layer's feed-forward block runs on the first token alone.

    A sequence classifier's head reads the last layer at the first token, and a feed-forward
    block works token by token, so its output there is the same (to float rounding) without the
    other tokens: the pass costs about two thirds of a layer less (attention still sees every
    token). The model's last hidden states then have one position; only its ``logits`` (and
    loss) are meant to be read. Applies to a ``...ForSequenceClassification`` model whose
    architecture's spec says its head reads the first token
    (:attr:`~bertology_utils.core.architectures.ArchSpec.classifier_reads_first_token`) and whose
    last layer is not shared with another (as ALBERT's are); anything else (an unregistered model type
    too) runs as it is.
    Yields whether it applies.

    In training mode it is exact too: each dropout of the shortened block draws its mask for every
    position, as the full pass draws it, and keeps the first token's, so the random stream, the
    masks, the loss and the gradients are the full pass's (to float rounding).

    :param model: the model.
    :returns: a context manager yielding whether the readout applies.
    """
    module = architectures.torch_module(model)
    applies = type(module).__name__.endswith("ForSequenceClassification") and architectures.is_registered(module)
    if applies:
        spec = architectures.arch_spec(module)
        applies = spec.classifier_reads_first_token and not spec.shared_layers
    if applies:
        stack = architectures.layers(module)
        applies = all(layer is not stack[-1] for layer in stack[:-1])
    if not applies:
        yield False
        return
    norm, _ = architectures.layer_norms(module, len(stack) - 1)
    width = [0]  # positions the last block would have run on, while it runs on one (0: not inside it)

    def first_token(_module: nn.Module, _args: tuple, output: object) -> object:
        if torch.is_tensor(output) and output.dim() == 3:
            width[0] = output.shape[1]
            return output[:, :1]
        return output

    def block_done(_module: nn.Module, _args: tuple, _output: object) -> None:
        width[0] = 0

    def full_mask(dropout: nn.Dropout, x: torch.Tensor) -> torch.Tensor:
        # the mask drawn for every position, as the whole block would draw it, whichever generator dropout uses
        if dropout.training and 0 < dropout.p < 1 and width[0] > 1 and x.dim() == 3 and x.shape[1] == 1:
            return nn.functional.dropout(x.expand(x.shape[0], width[0], x.shape[2]), dropout.p)[:, :1]
        return type(dropout).forward(dropout, x)

    dropouts = [m for m in stack[-1].modules() if type(m) is nn.Dropout and "forward" not in vars(m)]
    handles = [norm.register_forward_hook(first_token), stack[-1].register_forward_hook(block_done)]
    for dropout in dropouts:
        patched: nn.Module = dropout  # nn.Module's forward is an attribute: this one shadows Dropout's until finally
        patched.forward = functools.partial(full_mask, dropout)
    try:
        yield True
    finally:
        for handle in handles:
            handle.remove()
        for dropout in dropouts:
            del dropout.forward


@contextlib.contextmanager
def classifier_inference(model: Model, *, precision: str | None = None) -> Iterator[bool]:
    """Eval mode (no dropout), :func:`first_token_readout` and, for a LoadedModel, its
    :attr:`~bertology_utils.core.models.LoadedModel.precision` (or ``precision``, which overrides it):
    passes that read only a classifier's logits, or gradients of them. Logits come out float32
    whatever the precision. Yields whether the readout applies.

    :param model: a sequence classifier.
    :param precision: "fp32" or "bf16" instead of a LoadedModel's own (None: its own).
    :returns: a context manager yielding whether :func:`first_token_readout` applies.
    """
    module = architectures.torch_module(model)
    cast = autocast(model, precision) if isinstance(model, LoadedModel) else contextlib.nullcontext()
    with evaluating(module), first_token_readout(module) as applies, cast, _float32_logits(module):
        yield applies


@contextlib.contextmanager
def _float32_logits(module: nn.Module) -> Iterator[None]:
    """A model's output ``logits`` as float32 (under bf16 autocast the head's matrix product gives bfloat16)."""

    def to_float32(_module: nn.Module, _args: tuple, output: Any) -> None:
        logits = getattr(output, "logits", None)
        if torch.is_tensor(logits) and logits.is_floating_point() and logits.dtype != torch.float32:
            output.logits = logits.float()

    handle = module.register_forward_hook(to_float32)
    try:
        yield
    finally:
        handle.remove()
