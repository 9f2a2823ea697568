"""What every context-mixing method shares: the traced forward pass, the method protocol and the registry.

A method is a class in a file of its own; the package registers one instance of each built-in method, in
the order :data:`METHODS` keeps, and :func:`register` adds others. Two kinds:

* :class:`LayerMethod` maps one layer's trace to that layer's map, one per head (``per_head``) or one for
  the layer, and says which parts of the trace it ``reads``;
* :class:`AcrossLayers` combines another method's per-layer maps (``of``) through the layers
  (:class:`~bertology_utils.interventions.mixing.rollout.Rollout` wraps any per-layer method).

:class:`MixingMethod`, their base, owns the checks every method gets (its maps have the batch's shape) and
the protocol of a method's own options (:attr:`MixingMethod.options`: attention flow's receiving rows and
length limit), which callers pass by keyword and the method alone reads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

import torch
from torch import nn

from bertology_utils.core import architectures
from bertology_utils.core.architectures import Model
from bertology_utils.core.errors import BertologyError, UnsupportedArchitectureError
from bertology_utils.core.registry import Names, Registry, View
from bertology_utils.core.typing import AttentionMaps, MixingMatrix, TokenMask, TokenVectors
from bertology_utils.interventions.editing import capture_attention

__all__ = [
    "PARTS",
    "LayerParts",
    "LayerTrace",
    "trace",
    "first_output",
    "value_projection",
    "value_vectors",
    "MixingMethod",
    "LayerMethod",
    "AcrossLayers",
    "REGISTRY",
    "register",
    "get_method",
    "option_names",
    "method_options",
    "layer_method",
    "unsupported_methods",
    "METHODS",
    "LAYER_METHODS",
    "AGGREGATED",
]

#: The parts of a layer's computation a method may read besides the attention weights (``probs``).
PARTS = frozenset({"hidden", "values", "dense", "normed", "ffn", "output", "call"})
#: Tolerance of the post-LN check in :func:`trace` (float32 over a layer).
_DECOMPOSITION_TOL = 1e-4


# --------------------------------------------------------------------------- tracing one forward pass


@dataclass
class LayerParts:
    """The parts of one layer's computation besides its attention weights (see :class:`LayerTrace`): the
    layer's input, value vectors, attention output projection, the attention block's output, what the
    feed-forward block adds to it, the layer's output and its own arguments."""

    hidden: TokenVectors
    values: torch.Tensor
    dense: TokenVectors
    normed: TokenVectors
    ffn: TokenVectors
    output: TokenVectors
    call: tuple[Any, ...] = field(repr=False, default=((), {}))


@dataclass
class LayerTrace:
    """What one encoder layer computed in a forward pass (eval mode, no dropout).

    ``probs`` (B, H, T, T) the attention weights; with ``parts`` (a trace that methods reading more than the
    weights asked for): ``hidden`` (B, T, E) the layer's input x; ``values`` (B, H, T, d) the value vectors
    per head (W_V x + b_V, or W_V LN(x) + b_V in a pre-LN block); ``dense`` (B, T, E) the attention output
    projection W_O ctx + b_O; ``normed`` (B, T, E) the attention block's output, LN(x + dense) post-LN or
    x + dense pre-LN; ``ffn`` (B, T, E) what the feed-forward block adds to it through the second residual,
    the layer's output being LN2(normed + ffn) post-LN, normed + ffn pre-LN; ``output`` (B, T, E) the layer's
    output; ``call`` the layer's own arguments, to run it again.
    """

    probs: AttentionMaps
    parts: LayerParts | None = field(repr=False, default=None)

    def _parts(self) -> LayerParts:
        if self.parts is None:
            raise BertologyError("this trace holds only the attention weights; trace(..., reads=PARTS) keeps the rest")
        return self.parts

    hidden = property(lambda self: self._parts().hidden)
    values = property(lambda self: self._parts().values)
    dense = property(lambda self: self._parts().dense)
    normed = property(lambda self: self._parts().normed)
    ffn = property(lambda self: self._parts().ffn)
    output = property(lambda self: self._parts().output)
    call = property(lambda self: self._parts().call)


def value_projection(model: Model, layer: int) -> nn.Linear:
    """The module whose output holds ``layer``'s value vectors: its value projection, or the fused
    query-key-value projection (values last) of a model that has one.

    :param model: a LoadedModel or its torch module.
    :param layer: the layer (from 0).
    :returns: the projection.
    """
    fused = architectures.fused_qkv(model, layer)
    return fused if fused is not None else architectures.qkv(model, layer)[2]


def value_vectors(model: Model, layer: int, projected: torch.Tensor, heads: int) -> torch.Tensor:
    """The value vectors per head from :func:`value_projection`'s output.

    :param model: a LoadedModel or its torch module.
    :param layer: the layer (from 0).
    :param projected: (B, T, H*d), fused (B, T, 3*H*d).
    :param heads: H.
    :returns: (B, H, T, d).
    """
    if projected.dim() != 3:
        raise UnsupportedArchitectureError(
            f"layer {layer}'s value projection gave shape {tuple(projected.shape)}, not (batch, tokens, features): "
            "the model unpads its batch inside the layer; load it with attn_implementation='eager'",
            model_type=None,
            missing=["value"],
        )
    if architectures.fused_qkv(model, layer) is not None:
        projected = projected[..., 2 * projected.shape[-1] // 3 :]
    return projected.view(*projected.shape[:2], heads, -1).transpose(1, 2)


def first_output(output: Any) -> Any:
    """A module's main output: the first element when it returns a tuple, else the output itself.

    :param output: what a module's forward returned (its hook's ``output``).
    :returns: the main output.
    """
    return output[0] if isinstance(output, tuple) else output


def _layer_parts(
    model: nn.Module, layer: int, pre_ln: bool
) -> tuple[nn.Module, nn.Module | None, nn.Module | None, nn.Module, nn.Module]:
    """What :func:`trace` hooks in ``layer`` besides the block itself: the norm whose input is x + dense (post-LN
    the attention norm, pre-LN the feed-forward norm), the norm whose output is the block's and the norm whose
    output is the layer's (post-LN only), the module giving the values and the attention output projection.
    Raises where the architecture cannot give them."""
    first, second = architectures.layer_norms(model, layer, pre_ln=pre_ln)
    summed, normed, last = (second, None, None) if pre_ln else (first, first, second)
    return summed, normed, last, value_projection(model, layer), architectures.attention_output(model, layer)


def _gap(got: torch.Tensor, expected: torch.Tensor) -> torch.Tensor:
    """``(off, scale)``: how far ``got`` is from ``expected`` at most, and ``expected``'s largest magnitude, left on the
    device for :func:`_check_decomposed` to read with every other layer's."""
    return torch.stack([(got - expected).abs().max(), expected.abs().max()]).double()


def _check_decomposed(model: nn.Module, checks: list[tuple[torch.Tensor, str, str, str]]) -> None:
    """Refuse a model whose layer does not add up as the methods' decomposition assumes (a :func:`_gap` whose ``off``
    is over :data:`_DECOMPOSITION_TOL` of its scale). ``checks`` holds each gap with what was checked, what the
    methods need and the part concerned; every layer's gaps are read from the device at once."""
    if not checks:
        return
    gaps = torch.stack([gap for gap, *_ in checks]).cpu().tolist()
    for (off, scale), (_, what, need, part) in zip(gaps, checks):
        if off > _DECOMPOSITION_TOL * max(1.0, scale):
            raise UnsupportedArchitectureError(
                f"{type(model).__name__}, {what} (off by {off:.2g}); {need}",
                model_type=getattr(model.config, "model_type", None),
                missing=[part],
            )


@torch.no_grad()
def trace(loaded: Model, inputs: dict[str, torch.Tensor], reads: frozenset[str] = PARTS) -> list[LayerTrace]:
    """Run ``inputs`` through the model once and keep, for every layer, what :class:`LayerTrace` holds.

    ``reads``: the parts kept besides the weights; with none, only the weights are captured (no hook on
    the layers' parts, no decomposition check). With parts, raises UnsupportedArchitectureError when an
    attention block is neither LN(x + W_O ctx + b_O) (post-LN) nor x + W_O ctx(LN(x)) + b_O (pre-LN,
    :func:`~bertology_utils.core.architectures.is_pre_layer_norm`), or a post-LN layer's output is not its
    output layer norm's, the decompositions the methods rely on.

    :param loaded: a LoadedModel or its torch module.
    :param inputs: the batch's model inputs.
    :param reads: the parts of :data:`PARTS` to keep.
    :returns: one :class:`LayerTrace` per layer.
    """
    model = architectures.torch_module(loaded)
    if not reads & PARTS:
        if not architectures.is_registered(model):  # no known edit point: the weights the model returns
            return [LayerTrace(probs) for probs in model(**inputs, output_attentions=True).attentions]
        with capture_attention(model, retain_grad=False) as capture:
            model(**inputs)
        return [LayerTrace(probs) for probs in capture.probs]
    blocks = architectures.layers(model)
    n = len(blocks)
    pre_ln = architectures.is_pre_layer_norm(model)
    names = ("call", "values", "dense", "sum", "normed", "last", "output")
    kept: dict[str, list[Any]] = {name: [None] * n for name in names}
    handles = []

    def keep(name: str, layer: int, pick: Callable[..., Any]) -> Callable[..., None]:
        def hook(*args: Any) -> None:
            kept[name][layer] = pick(*args)

        return hook

    for layer, block in enumerate(blocks):
        summed, normed, last, value, output = _layer_parts(model, layer, pre_ln)
        handles += [
            block.register_forward_pre_hook(keep("call", layer, lambda m, a, k: (a, k)), with_kwargs=True),
            block.register_forward_hook(keep("output", layer, lambda m, a, o: first_output(o))),
            value.register_forward_hook(keep("values", layer, lambda m, a, o: o)),
            output.register_forward_hook(keep("dense", layer, lambda m, a, o: o)),
            summed.register_forward_hook(keep("sum", layer, lambda m, a, o: a[0])),
        ]
        if normed is not None:
            handles.append(normed.register_forward_hook(keep("normed", layer, lambda m, a, o: o)))
        if last is not None:  # the layer's last norm: its input and output
            handles.append(last.register_forward_hook(keep("last", layer, lambda m, a, o: (a[0], o))))
    try:
        with capture_attention(model, retain_grad=False) as capture:
            model(**inputs)
    finally:
        for handle in handles:
            handle.remove()
    traces = []
    checks: list[tuple[torch.Tensor, str, str, str]] = []
    for layer in range(n):
        args, kwargs = kept["call"][layer]
        hidden = args[0] if args else kwargs["hidden_states"]
        probs = capture.probs[layer]
        values = value_vectors(model, layer, kept["values"][layer], probs.shape[1])
        checks.append((
            _gap(kept["sum"][layer], kept["dense"][layer] + hidden),
            f"layer {layer}: the attention block's residual sum is not the layer input plus the attention output",
            "context-mixing maps need a post-LN block LN(x + W_O ctx + b_O) or a pre-LN one x + W_O ctx(LN(x)) + b_O",
            "attention_layer_norm",
        ))  # fmt: skip
        normed, output = (kept["sum"][layer] if pre_ln else kept["normed"][layer]), kept["output"][layer]
        if pre_ln:
            ffn = output - normed
        else:
            second_sum, second_normed = kept["last"][layer]
            checks.append((
                _gap(second_normed, output),
                f"layer {layer}: the layer's output is not its output layer norm's",
                "context-mixing maps of the whole layer need a post-LN layer LN2(y + FFN(y))",
                "output_layer_norm",
            ))  # fmt: skip
            ffn = second_sum - normed
        parts = LayerParts(hidden, values, kept["dense"][layer], normed, ffn, output, (args, kwargs))
        traces.append(LayerTrace(probs, parts))
    _check_decomposed(model, checks)  # one read of the device for every layer's checks
    return traces


# --------------------------------------------------------------------------- the protocol


class MixingMethod:
    """A context-mixing method found by ``name``.

    Subclasses implement :class:`LayerMethod` or :class:`AcrossLayers`. A method with settings of its own
    declares them in :attr:`options` and reads them in :meth:`check_batch`, :meth:`max_tokens`,
    :meth:`settings` and (across layers) :meth:`AcrossLayers.combine`, so that no other code knows them.
    """

    name: str
    #: One map per head (True) or one per layer.
    per_head: ClassVar[bool] = False
    #: The options it takes, each keyword (its method's name first: ``flow_rows``) with its default; callers
    #: pass them to :func:`~bertology_utils.interventions.mixing.maps.mixing_maps` and the map sources.
    options: ClassVar[Mapping[str, Any]] = {}

    def heads(self, layer_heads: int) -> int:
        """The maps it gives for a layer.

        :param layer_heads: the layer's heads.
        :returns: ``layer_heads`` for a per-head method, else 1.
        """
        return layer_heads if self.per_head else 1

    def check_model(self, model: nn.Module) -> None:
        """Raise UnsupportedArchitectureError when the method cannot run on ``model`` for a reason of its own,
        beyond the layer parts it reads (no-op by default; :func:`unsupported_methods` asks).

        :param model: the torch module.
        """

    def max_tokens(self, options: Mapping[str, Any]) -> int | None:
        """The longest item (in tokens) the method takes with ``options`` (see :func:`method_options`); None
        for no limit of its own."""
        return None

    def check_batch(self, real: TokenMask, options: Mapping[str, Any]) -> None:
        """Raise a BertologyError when the method cannot take this batch (no-op by default).

        :param real: (B, T) token mask.
        :param options: the method's options (:func:`method_options`).
        """

    def settings(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """What a store records of the method's ``options`` (:func:`method_options`); none by default."""
        return {}

    def _checked(self, maps: list[AttentionMaps], real: TokenMask, heads: Sequence[int]) -> list[AttentionMaps]:
        """``maps`` after checking each layer's shape (``heads``: the model's heads per layer)."""
        batch, tokens = real.shape
        for layer, (m, h) in enumerate(zip(maps, heads, strict=True)):
            expected = (batch, self.heads(h), tokens, tokens)
            if tuple(m.shape) != expected:
                raise BertologyError(
                    f"{self.name} gave a map of shape {tuple(m.shape)} at layer {layer}, not {expected}"
                )
        return maps

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class LayerMethod(MixingMethod):
    """A per-layer method: ``layer_map`` gives one layer's (B, H, T, T) map (H = 1 unless ``per_head``)."""

    #: The trace's parts it reads besides the attention weights (a subset of :data:`PARTS`).
    reads: ClassVar[frozenset[str]] = PARTS

    def layer_map(self, model: nn.Module, layer: int, t: LayerTrace, real: TokenMask) -> AttentionMaps:
        """One layer's map.

        :param model: the torch module traced.
        :param layer: the layer (from 0).
        :param t: what the layer computed (:class:`LayerTrace`).
        :param real: (B, T) token mask.
        :returns: (B, H, T, T), H the layer's heads for a per-head method, else 1; zero from padding.
        """
        raise NotImplementedError

    def maps(self, model: nn.Module, traces: Sequence[LayerTrace], real: TokenMask) -> list[AttentionMaps]:
        """Every layer's map (:meth:`layer_map`), each checked to have the batch's shape.

        :param model: the torch module traced.
        :param traces: :func:`trace`'s layers.
        :param real: (B, T) token mask.
        :returns: one (B, H, T, T) map per layer.
        """
        out = [self.layer_map(model, layer, t, real) for layer, t in enumerate(traces)]
        return self._checked(out, real, [t.probs.shape[1] for t in traces])


class AcrossLayers(MixingMethod):
    """A method over the layers: ``combine`` turns the per-layer maps of method ``of`` into one (B, T, T) map
    per layer (row i of layer l: how much output token i at layer l draws on input token j)."""

    of: str

    def combine(
        self, per_layer: Sequence[AttentionMaps], real: TokenMask, options: Mapping[str, Any]
    ) -> list[MixingMatrix]:
        """The per-layer maps combined through the layers.

        :param per_layer: method ``of``'s (B, H, T, T) map of each layer.
        :param real: (B, T) token mask.
        :param options: the method's options (:func:`method_options`).
        :returns: one (B, T, T) map per layer.
        """
        raise NotImplementedError

    def maps(
        self, per_layer: Sequence[AttentionMaps], real: TokenMask, options: Mapping[str, Any]
    ) -> list[MixingMatrix]:
        """Every layer's map (:meth:`combine`) as (B, 1, T, T), checked to have the batch's shape."""
        return self._checked([m[:, None] for m in self.combine(per_layer, real, options)], real, [1] * len(per_layer))


# --------------------------------------------------------------------------- the registry

#: Every registered method by name, in registration order (:data:`METHODS` lists the per-layer ones first).
REGISTRY: Registry[MixingMethod] = Registry("context-mixing method")
M = TypeVar("M", bound=MixingMethod)


def register(method: M, *, replace: bool = False) -> M:
    """Add ``method`` to :data:`REGISTRY` under its name.

    :param method: an instance of a :class:`LayerMethod` or :class:`AcrossLayers` subclass.
    :param replace: override a registered method of that name.
    :returns: ``method``.
    """
    REGISTRY.register(method, replace=replace)
    return method


#: Per-layer methods, and whether each has one map per head (live: methods registered later appear).
LAYER_METHODS = View(REGISTRY, lambda m: isinstance(m, LayerMethod), lambda m: m.per_head)
#: Methods across layers, and the per-layer method each combines.
AGGREGATED = View(REGISTRY, lambda m: isinstance(m, AcrossLayers), lambda m: m.of)


class _AllNames(Names):
    def _names(self) -> tuple[str, ...]:
        return (*LAYER_METHODS, *AGGREGATED)


#: Every method name, per-layer ones first.
METHODS = _AllNames(REGISTRY)


def get_method(name: str) -> MixingMethod:
    """The registered method ``name``.

    :param name: a registered method's name (:data:`METHODS`).
    :returns: the method; ValueError naming the known ones when none is registered as ``name``.
    """
    return REGISTRY[name]


def option_names() -> frozenset[str]:
    """Every option keyword a registered method takes (:attr:`MixingMethod.options`)."""
    return frozenset(name for method in REGISTRY.values() for name in method.options)


def method_options(method: MixingMethod, given: Mapping[str, Any]) -> dict[str, Any]:
    """``method``'s options: each from ``given``, else its default.

    :param method: the method.
    :param given: option keywords as a caller passed them, for any methods; a keyword no registered method
        takes raises TypeError.
    :returns: the method's own options, in the order it declares them.
    """
    unknown = sorted(set(given) - option_names())
    if unknown:
        raise TypeError(
            f"unknown context-mixing option(s) {', '.join(unknown)}; the methods take {', '.join(sorted(option_names()))}"
        )
    return {name: given.get(name, default) for name, default in method.options.items()}


def layer_method(method: MixingMethod) -> LayerMethod:
    """The per-layer method whose maps ``method`` is (a per-layer method) or combines (a method across layers).

    :param method: a registered method.
    :returns: the per-layer method; BertologyError when what ``method`` combines is not a per-layer method.
    """
    base = get_method(method.of) if isinstance(method, AcrossLayers) else method
    if not isinstance(base, LayerMethod):
        raise BertologyError(f"{method.name} combines {base.name}, which is not a per-layer method")
    return base


def unsupported_methods(model: Model, methods: Sequence[str] = METHODS) -> dict[str, str]:
    """The methods of ``methods`` that cannot run on ``model``, each with the reason (the refusal's message).

    A method that reads a layer's parts besides its attention weights (and a method across layers that combines
    one) needs them for every layer; the architecture alone says whether they can be had, so no forward pass
    is run (the decomposition check of :func:`trace` still comes with the first batch). A method may refuse a model
    for a reason of its own (:meth:`MixingMethod.check_model`). The others (``attention``, ``rollout``, ``flow``) run
    on every registered architecture. Unknown names raise ValueError.

    :param model: a LoadedModel or its torch module.
    :param methods: names in :data:`METHODS`.
    :returns: method -> reason, for those that cannot run.
    """
    needing = [name for name in methods if layer_method(get_method(name)).reads & PARTS]
    module = architectures.torch_module(model)
    if needing:
        pre_ln = architectures.is_pre_layer_norm(module)
        try:
            for layer in range(len(architectures.layers(module))):
                _layer_parts(module, layer, pre_ln)
        except UnsupportedArchitectureError as error:
            return dict.fromkeys(needing, str(error))
    refused = {}
    for name in methods:
        try:
            for method in dict.fromkeys((get_method(name), layer_method(get_method(name)))):
                method.check_model(module)
        except UnsupportedArchitectureError as error:
            refused[name] = str(error)
    return refused
