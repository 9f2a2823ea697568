"""Where each encoder architecture keeps its parts: one declarative :class:`ArchSpec` per model type.

Every piece of code that reaches into a model (edit points, hooks on the self-attention
modules, head pruning, the neuron view, padding, the random-init control) reads the parts'
places from here instead of guessing them from class or attribute names, in the spirit of
TransformerLens' per-architecture component maps and inseq's ``register_model_config``.
Module paths are dotted attribute paths (``nn.Module.get_submodule``):

* ``layers``, ``embeddings``, ``position_bias`` and ``final_layer_norm`` from the base model
  (``model.base_model``: the encoder without its task head);
* ``self_attention``, ``attention_output`` and the two layer norms from one layer;
* ``query``/``key``/``value`` (or ``fused_qkv``) and ``dropout_edit_point`` from the self-attention module.

Three flags say where a family departs from BERT's layout, and the accessors refuse (rather than
hand out parts that code written for BERT would misuse) unless the caller says it handles the case:
``fused_qkv`` (one projection for queries, keys and values: :func:`qkv` refuses, :func:`fused_qkv`
answers), ``pre_layer_norm`` (norms before the blocks: :func:`layer_norms` refuses unless
``pre_ln=True``) and ``shared_layers`` (ALBERT: one layer's weights at every depth: the per-layer
accessors refuse unless ``shared=True``).

A model type that is not registered, or whose modules are not where its spec says, raises
:class:`~bertology_utils.core.errors.UnsupportedArchitectureError` naming the fields that could
not be found; :func:`register_architecture` adds a spec to :data:`ARCHITECTURE_REGISTRY`.
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias, TypeVar

from torch import nn

from bertology_utils.core.errors import UnsupportedArchitectureError
from bertology_utils.core.registry import Registry

__all__ = [
    "Model",
    "WrapsModule",
    "ArchSpec",
    "ARCHITECTURE_REGISTRY",
    "register_architecture",
    "registered_architectures",
    "is_registered",
    "arch_spec",
    "check_architecture",
    "torch_module",
    "base_model",
    "layers",
    "self_attention_modules",
    "qkv",
    "fused_qkv",
    "attention_output",
    "feed_forward",
    "layer_norms",
    "is_pre_layer_norm",
    "final_layer_norm",
    "shares_layers",
    "embeddings",
    "position_bias",
    "dropout_edit_points",
    "uses_token_types",
    "pad_token_id",
    "num_layers",
    "num_heads",
    "attention_heads",
]


@dataclass(frozen=True)
class ArchSpec:
    """Where one architecture (a transformers ``model_type``) keeps the parts this package touches."""

    model_type: str
    #: From the base model: the ModuleList of encoder layers.
    layers: str
    #: From a layer: the self-attention module (what computes the probabilities; its forward returns them second).
    self_attention: str
    #: From the self-attention module: the query, key and value projections (nn.Linear, heads along output rows);
    #: None when ``fused_qkv`` names one projection for the three.
    query: str | None
    key: str | None
    value: str | None
    #: From a layer: the attention output projection (nn.Linear, heads along input columns).
    attention_output: str
    #: From a layer: the layer norm after the attention block, and the one after the feed-forward block
    #: (with ``pre_layer_norm``: the norm before the attention block, and the one before the feed-forward block).
    attention_layer_norm: str
    output_layer_norm: str
    #: From the base model: the embeddings module (word, position and segment embeddings and their norm).
    embeddings: str = "embeddings"
    #: From the base model: the module every layer's position bias comes from (MPNet's relative
    #: position bias), None when there is none.
    position_bias: str | None = None
    #: From the self-attention module: the attention-dropout module applied to the probabilities, whose
    #: forward hook is the edit point; None when attention goes through transformers' AttentionInterface.
    dropout_edit_point: str | None = None
    #: Whether the model's forward takes ``token_type_ids``.
    token_type_ids: bool = True
    #: Config attributes holding the layer and head counts, and the padding token's id.
    num_layers_attr: str = "num_hidden_layers"
    num_heads_attr: str = "num_attention_heads"
    pad_token_id_attr: str = "pad_token_id"
    #: The self-attention module's own head-count attribute (what head pruning updates); None when the module
    #: has none (its head count is the config's).
    heads_attr: str | None = "num_attention_heads"
    #: Whether the model type's ``...ForSequenceClassification`` head reads the last layer at the
    #: first token only (BERT's pooler, the RoBERTa-style heads): then that layer's feed-forward block
    #: may run on the first token alone (:func:`~bertology_utils.interventions.editing.first_token_readout`).
    classifier_reads_first_token: bool = False
    #: From the self-attention module: one nn.Linear computing queries, keys and values at once (ModernBERT's
    #: ``Wqkv``), its output rows the queries, then the keys, then the values (each heads x head size), or None.
    fused_qkv: str | None = None
    #: Whether each block normalises its input (pre-LN, ModernBERT) rather than its residual sum (post-LN, BERT).
    pre_layer_norm: bool = False
    #: From the base model: the norm after the last layer (pre-LN models have one), or None.
    final_layer_norm: str | None = None
    #: Whether the ``layers`` ModuleList holds fewer modules than the model has layers, the forward running
    #: them over and over (ALBERT): layer ``i`` of ``L`` is module ``i * len(layers) // L``.
    shared_layers: bool = False
    #: Whether the self-attention adds to ``q·k`` score terms it computes itself (DeBERTa's content-to-position
    #: and position-to-content attention, with a scaling of its own): queries and keys read from the projections
    #: (and what the module is passed) then do not rebuild its scores.
    internal_score_terms: bool = False
    #: From a layer: the feed-forward block W_2 act(W_1 y + b_1) + b_2's W_1, act (a module) and W_2, and whether
    #: act's output is multiplied by a second half of W_1's (a gated linear unit, ModernBERT's).
    ffn_in: str = "intermediate.dense"
    ffn_activation: str = "intermediate.intermediate_act_fn"
    ffn_out: str = "output.dense"
    gated_ffn: bool = False
    #: The 4-D masks the base model makes of a 2-D padding mask with transformers' mask functions, which
    #: :mod:`~bertology_utils.core.masks` builds ahead: "bidirectional" (one mask), "by layer type" (a dict keyed by
    #: ``config.layer_types``: ModernBERT's local layers get sliding-window masks), or None (its own masks).
    attention_mask: str | None = "bidirectional"


class WrapsModule(Protocol):
    """What the accessors read of a :class:`~bertology_utils.core.models.LoadedModel` (which imports this
    module, so it is named by what it has, not imported): its torch module."""

    model: nn.Module


#: What the accessors take: a LoadedModel (its ``.model`` is used) or a torch module.
Model: TypeAlias = "WrapsModule | nn.Module"

#: The feed-forward block's fields (:func:`feed_forward`).
_FEED_FORWARD = ("ffn_in", "ffn_activation", "ffn_out")
#: Module fields: (field, what it is resolved from).
_MODULE_FIELDS = (
    ("layers", "base model"),
    ("embeddings", "base model"),
    ("position_bias", "base model"),
    ("final_layer_norm", "base model"),
    ("self_attention", "layer"),
    ("attention_output", "layer"),
    ("attention_layer_norm", "layer"),
    ("output_layer_norm", "layer"),
    ("query", "self-attention"),
    ("key", "self-attention"),
    ("value", "self-attention"),
    ("fused_qkv", "self-attention"),
    ("dropout_edit_point", "self-attention"),
    *((name, "layer") for name in _FEED_FORWARD),
)
_CONFIG_FIELDS = ("num_layers_attr", "num_heads_attr")
#: Fields an architecture may lack.
_OPTIONAL = ("position_bias", "final_layer_norm", "fused_qkv", "dropout_edit_point", *_FEED_FORWARD)

_BERT = ArchSpec(
    model_type="bert",
    layers="encoder.layer",
    self_attention="attention.self",
    query="query",
    key="key",
    value="value",
    attention_output="attention.output.dense",
    attention_layer_norm="attention.output.LayerNorm",
    output_layer_norm="output.LayerNorm",
    classifier_reads_first_token=True,
)
#: Every registered :class:`ArchSpec` by its ``model_type``, in registration order.
ARCHITECTURE_REGISTRY: Registry[ArchSpec] = Registry("model type", key=lambda spec: spec.model_type)


def register_architecture(spec: ArchSpec, *, replace: bool = False) -> ArchSpec:
    """Register ``spec`` for its ``model_type`` and return it.

    :param spec: where the architecture keeps its parts.
    :param replace: override the spec of a registered model type (the same spec again needs no ``replace``).
    :returns: ``spec``.
    """
    if not isinstance(spec, ArchSpec):
        raise TypeError(f"register an ArchSpec, not {type(spec).__name__}")
    return ARCHITECTURE_REGISTRY.register(spec, replace=replace)


def registered_architectures() -> tuple[str, ...]:
    """The registered model types, in registration order."""
    return tuple(ARCHITECTURE_REGISTRY)


# BERT (and the default all-MiniLM-L6-v2, a BERT), RoBERTa and ELECTRA share one layout.
register_architecture(_BERT)
register_architecture(dataclasses.replace(_BERT, model_type="roberta"))
register_architecture(dataclasses.replace(_BERT, model_type="electra"))
register_architecture(
    ArchSpec(
        model_type="distilbert",
        layers="transformer.layer",
        self_attention="attention",
        query="q_lin",
        key="k_lin",
        value="v_lin",
        attention_output="attention.out_lin",
        attention_layer_norm="sa_layer_norm",
        output_layer_norm="output_layer_norm",
        token_type_ids=False,
        num_layers_attr="n_layers",
        num_heads_attr="n_heads",
        heads_attr="n_heads",
        classifier_reads_first_token=True,
        ffn_in="ffn.lin1",
        ffn_activation="ffn.activation",
        ffn_out="ffn.lin2",
    )
)
# MPNet computes its softmax inline, then applies its attention dropout to the probabilities.
register_architecture(
    ArchSpec(
        model_type="mpnet",
        layers="encoder.layer",
        self_attention="attention.attn",
        query="q",
        key="k",
        value="v",
        attention_output="attention.attn.o",
        attention_layer_norm="attention.LayerNorm",
        output_layer_norm="output.LayerNorm",
        position_bias="encoder.relative_attention_bias",
        dropout_edit_point="dropout",
        token_type_ids=False,
        classifier_reads_first_token=True,
    )
)
# XLM-RoBERTa and CamemBERT are RoBERTa's code under other names (their tokenizers differ: SentencePiece).
register_architecture(dataclasses.replace(_BERT, model_type="xlm-roberta"))
register_architecture(dataclasses.replace(_BERT, model_type="camembert"))
# ALBERT runs one layer group (of one layer, as in every released checkpoint) at every depth; a group of
# several layers returns more attention maps than the config has layers, and load_model refuses it.
register_architecture(
    ArchSpec(
        model_type="albert",
        layers="encoder.albert_layer_groups",
        self_attention="albert_layers.0.attention",
        query="query",
        key="key",
        value="value",
        attention_output="albert_layers.0.attention.dense",
        attention_layer_norm="albert_layers.0.attention.LayerNorm",
        output_layer_norm="albert_layers.0.full_layer_layer_norm",
        shared_layers=True,
        classifier_reads_first_token=True,
        ffn_in="albert_layers.0.ffn",
        ffn_activation="albert_layers.0.activation",
        ffn_out="albert_layers.0.ffn_output",
    )
)
# DeBERTa-v2/v3 computes its disentangled attention inline, then applies its attention dropout to the
# probabilities (as MPNet does); its relative position terms are per head, from projections of shared embeddings.
register_architecture(
    ArchSpec(
        model_type="deberta-v2",
        layers="encoder.layer",
        self_attention="attention.self",
        query="query_proj",
        key="key_proj",
        value="value_proj",
        attention_output="attention.output.dense",
        attention_layer_norm="attention.output.LayerNorm",
        output_layer_norm="output.LayerNorm",
        dropout_edit_point="dropout",
        internal_score_terms=True,
        classifier_reads_first_token=True,  # its ContextPooler reads the first token
        attention_mask=None,
    )
)
# ModernBERT: pre-LN blocks (its first layer's attention norm is an Identity), one fused Wqkv, rotary
# positions, local (sliding-window) attention in most layers through the attention mask.
register_architecture(
    ArchSpec(
        model_type="modernbert",
        layers="layers",
        self_attention="attn",
        query=None,
        key=None,
        value=None,
        fused_qkv="Wqkv",
        attention_output="attn.Wo",
        attention_layer_norm="attn_norm",
        output_layer_norm="mlp_norm",
        final_layer_norm="final_norm",
        pre_layer_norm=True,
        token_type_ids=False,
        heads_attr=None,
        ffn_in="mlp.Wi",
        ffn_activation="mlp.act",
        ffn_out="mlp.Wo",
        gated_ffn=True,
        attention_mask="by layer type",
    )
)


# --------------------------------------------------------------------------- resolution


def _module(model: object) -> nn.Module | None:
    """The torch module of a LoadedModel (``.model``), or the module itself."""
    if isinstance(model, nn.Module):
        return model
    inner = getattr(model, "model", None)
    return inner if isinstance(inner, nn.Module) else None


def torch_module(model: Model) -> nn.Module:
    """The torch module of a LoadedModel (``.model``), or the module itself."""
    module = _module(model)
    if module is None:
        raise TypeError(f"expected a LoadedModel or a torch module, not {type(model).__name__}")
    return module


def _config(model_or_config: object) -> Any:
    module = _module(model_or_config)
    return getattr(module, "config", None) if module is not None else model_or_config


def base_model(model: Model) -> nn.Module:
    """The encoder without its task head (transformers' ``base_model``; the module itself when it has none)."""
    module = torch_module(model)
    base = getattr(module, "base_model", module)
    return base if isinstance(base, nn.Module) else module


def _get(root: nn.Module | None, path: str | None) -> nn.Module | None:
    if root is None or path is None:
        return None
    try:
        return root.get_submodule(path)
    except AttributeError:
        return None


def _found(spec: ArchSpec, module: nn.Module, config: object) -> dict[str, bool]:
    """For each field of ``spec``, whether ``module`` (and ``config``) has it where the spec says."""
    base = base_model(module)
    stack = _get(base, spec.layers)
    first = stack[0] if isinstance(stack, nn.ModuleList) and len(stack) else None
    attention = _get(first, spec.self_attention)
    found = {
        "layers": first is not None,
        "embeddings": _get(base, spec.embeddings) is not None,
        "position_bias": spec.position_bias is None or _get(base, spec.position_bias) is not None,
        "final_layer_norm": spec.final_layer_norm is None or _get(base, spec.final_layer_norm) is not None,
        "self_attention": attention is not None,
        "dropout_edit_point": spec.dropout_edit_point is None or _get(attention, spec.dropout_edit_point) is not None,
    }
    found["attention_output"] = isinstance(_get(first, spec.attention_output), nn.Linear)
    for name in ("attention_layer_norm", "output_layer_norm"):
        found[name] = _get(first, getattr(spec, name)) is not None
    fused = _get(attention, spec.fused_qkv)
    found["fused_qkv"] = spec.fused_qkv is None or (isinstance(fused, nn.Linear) and fused.out_features % 3 == 0)
    for name in ("query", "key", "value"):  # without a path, the fused projection stands for them
        path = getattr(spec, name)
        found[name] = isinstance(_get(attention, path), nn.Linear) if path is not None else spec.fused_qkv is not None
    for name in _CONFIG_FIELDS:
        found[name] = isinstance(getattr(config, getattr(spec, name), None), int)
    return found


def _describe(model_or_config: object) -> str:
    module = _module(model_or_config)
    what = type(module if module is not None else model_or_config).__name__
    model_type = getattr(_config(model_or_config), "model_type", None)
    return f"{what} (model type {model_type!r})" if model_type else f"{what} (no model type: it has no config)"


def _how_to_register(model_type: object) -> str:
    return (
        f"describe where its parts are with bertology_utils.core.architectures.register_architecture(ArchSpec("
        f"model_type={model_type or '...'!r}, layers=..., self_attention=..., query=..., key=..., value=..., "
        "attention_output=..., attention_layer_norm=..., output_layer_norm=..., ...)); registered: "
        f"{', '.join(ARCHITECTURE_REGISTRY)}"
    )


def _unregistered(model_or_config: object) -> UnsupportedArchitectureError:
    """The error for a model type without a spec, listing the fields no registered layout finds on it."""
    config = _config(model_or_config)
    model_type = getattr(config, "model_type", None)
    module = _module(model_or_config)
    found: dict[str, bool] = {}
    alike = []  # registered layouts whose every part is on it
    for registered, spec in ARCHITECTURE_REGISTRY.items():
        if module is not None:
            on_it = _found(spec, module, config)
            if all(on_it.values()):
                alike.append(registered)
            for name, ok in on_it.items():
                found[name] = found.get(name, False) or (ok and getattr(spec, name) is not None)
        for name in _CONFIG_FIELDS:  # a config alone: only its own fields can be looked for
            found[name] = found.get(name, False) or isinstance(getattr(config, getattr(spec, name), None), int)
    missing = [name for name, _ in _MODULE_FIELDS if not found.get(name) and name not in _OPTIONAL]
    missing += [name for name in _CONFIG_FIELDS if not found[name]]
    # Parts at a registered layout's paths say nothing of what they compute (positions, normalisation, score
    # terms), so the spec is never borrowed silently; the user is told how to borrow it after checking.
    how = (
        f"if it computes attention as {alike[0]} does (check its positions, normalisation and score terms), "
        f"register_architecture(dataclasses.replace(arch_spec(transformers.AutoConfig.for_model({alike[0]!r})), "
        f"model_type={model_type!r})); otherwise {_how_to_register(model_type)}"
        if alike
        else _how_to_register(model_type)
    )
    where = (
        f"every part is where the layout of {', '.join(alike)} looks"
        if alike
        else f"fields no registered layout finds on it: {', '.join(missing) or 'none'}"
    )
    return UnsupportedArchitectureError(
        f"{_describe(model_or_config)} is not a registered architecture; {where}. To support it, {how}.",
        model_type=model_type,
        missing=missing,
    )


def arch_spec(model_or_config: object) -> ArchSpec:
    """The :class:`ArchSpec` of a LoadedModel, a transformers model or its config (looked up by ``model_type``).

    Raises UnsupportedArchitectureError for a model type that is not registered.
    """
    model_type = getattr(_config(model_or_config), "model_type", None)
    spec = ARCHITECTURE_REGISTRY.get(model_type) if isinstance(model_type, str) else None
    if spec is None:
        raise _unregistered(model_or_config)
    return spec


def check_architecture(model: Model) -> ArchSpec:
    """``model``'s :class:`ArchSpec`, after checking that every part is where the spec says.

    Raises UnsupportedArchitectureError listing the fields that could not be found.
    """
    spec = arch_spec(model)
    module = _module(model)
    if module is None:
        raise TypeError(f"expected a torch module or a LoadedModel, not {type(model).__name__}")
    missing = [name for name, ok in _found(spec, module, module.config).items() if not ok]
    if missing:
        where = {name: origin for name, origin in _MODULE_FIELDS}
        detail = ", ".join(f"{name} ({getattr(spec, name)!r} from the {where.get(name, 'config')})" for name in missing)
        raise UnsupportedArchitectureError(
            f"{_describe(model)} does not match its registered ArchSpec: could not find {detail}. Register a spec "
            f"that does with register_architecture(..., replace=True).",
            model_type=spec.model_type,
            missing=missing,
        )
    stack = _get(base_model(module), spec.layers)
    if spec.shared_layers and isinstance(stack, nn.ModuleList):
        # The spec's paths name one layer per shared module; a group of several (ALBERT's inner_group_num > 1)
        # would run attention the paths do not see.
        kind = type(_get(stack[0], spec.self_attention))
        count = sum(type(m) is kind for m in stack[0].modules())
        if count != 1:
            raise UnsupportedArchitectureError(
                f"{_describe(model)}: each of its shared layer groups runs {count} attention modules, where its "
                f"ArchSpec names one ({spec.self_attention!r}); groups of several layers are not supported",
                model_type=spec.model_type,
                missing=["self_attention"],
            )
    return spec


_M = TypeVar("_M", bound=nn.Module)


def _part(spec: ArchSpec, root: nn.Module | None, field: str, model: Model, kind: type[_M]) -> _M:
    part = _get(root, getattr(spec, field))
    if not isinstance(part, kind):
        check_architecture(model)  # raises, naming every field that is missing
        raise UnsupportedArchitectureError(
            f"{_describe(model)}: no {kind.__name__} {field} at {getattr(spec, field)!r}",
            model_type=spec.model_type,
            missing=[field],
        )
    return part


# --------------------------------------------------------------------------- accessors


def layers(model: Model, *, shared: bool = False) -> list[nn.Module]:
    """The encoder layers, in order: one entry per layer the forward runs.

    A model whose layers share their weights (:attr:`ArchSpec.shared_layers`, ALBERT) raises
    UnsupportedArchitectureError, since a hook, an edit or a pruned head on one entry would act on every
    layer sharing it; ``shared=True`` returns its entries (the same module at several depths) for code
    that handles that.
    """
    spec = arch_spec(model)
    stack = list(_part(spec, base_model(model), "layers", model, nn.ModuleList))
    if not spec.shared_layers:
        return stack
    depth = num_layers(model)
    if not shared:
        raise UnsupportedArchitectureError(
            f"{_describe(model)} runs its {depth} layers on the weights of {len(stack)} (ArchSpec.shared_layers): "
            "a hook, edit or pruned head on one layer would act on every layer sharing its weights, so this "
            "per-layer operation is not supported on it",
            model_type=spec.model_type,
            missing=["layers"],
        )
    return [stack[i * len(stack) // depth] for i in range(depth)]


def shares_layers(model: Model) -> bool:
    """Whether several of the model's layers run the same module (:attr:`ArchSpec.shared_layers`, ALBERT)."""
    return arch_spec(model).shared_layers


def self_attention_modules(model: Model, *, shared: bool = False) -> list[nn.Module]:
    """The self-attention module of every layer, in layer order (``shared``: as :func:`layers`)."""
    spec = arch_spec(model)
    return [_part(spec, layer, "self_attention", model, nn.Module) for layer in layers(model, shared=shared)]


def qkv(model: Model, layer: int) -> tuple[nn.Linear, nn.Linear, nn.Linear]:
    """The query, key and value projections of ``layer`` (from 0).

    A model with one fused projection (:attr:`ArchSpec.fused_qkv`) raises UnsupportedArchitectureError:
    hooks and pruning on three separate modules cannot apply to it (see :func:`fused_qkv`).
    """
    spec = arch_spec(model)
    attention = self_attention_modules(model)[layer]
    if spec.fused_qkv is not None:
        raise UnsupportedArchitectureError(
            f"{_describe(model)} projects queries, keys and values with one fused nn.Linear ({spec.fused_qkv!r}, "
            "ArchSpec.fused_qkv) rather than three: what needs them apart is not supported on it "
            "(architectures.fused_qkv returns the fused projection)",
            model_type=spec.model_type,
            missing=["query", "key", "value"],
        )
    query, key, value = (_part(spec, attention, name, model, nn.Linear) for name in ("query", "key", "value"))
    return query, key, value


def fused_qkv(model: Model, layer: int) -> nn.Linear | None:
    """``layer``'s fused query-key-value projection (output rows: queries, keys, values), None when it has three."""
    spec = arch_spec(model)
    if spec.fused_qkv is None:
        return None
    return _part(spec, self_attention_modules(model)[layer], "fused_qkv", model, nn.Linear)


def attention_output(model: Model, layer: int) -> nn.Linear:
    """The attention output projection of ``layer`` (from 0)."""
    return _part(arch_spec(model), layers(model)[layer], "attention_output", model, nn.Linear)


def feed_forward(model: Model, layer: int) -> tuple[nn.Linear, nn.Module, nn.Linear]:
    """``layer``'s feed-forward block W_2 act(W_1 y + b_1) + b_2 as (W_1, act, W_2); UnsupportedArchitectureError
    for a gated one (:attr:`ArchSpec.gated_ffn`), which is not of that form."""
    spec, block = arch_spec(model), layers(model)[layer]
    if spec.gated_ffn:
        raise UnsupportedArchitectureError(
            f"{_describe(model)}'s feed-forward block is a gated linear unit (ArchSpec.gated_ffn): the activation of "
            "one half of its first projection multiplies the other half, so it is not W_2 act(W_1 y + b_1) + b_2",
            model_type=spec.model_type,
            missing=["ffn_in"],
        )
    first, second = (_part(spec, block, name, model, nn.Linear) for name in ("ffn_in", "ffn_out"))
    return first, _part(spec, block, "ffn_activation", model, nn.Module), second


def layer_norms(model: Model, layer: int, *, pre_ln: bool = False) -> tuple[nn.Module, nn.Module]:
    """(the norm after the attention block, the norm after the feed-forward block) of ``layer`` (from 0).

    A pre-LN model (:attr:`ArchSpec.pre_layer_norm`) has no such norms and raises
    UnsupportedArchitectureError; with ``pre_ln=True`` its (norm before the attention block, norm before
    the feed-forward block) are returned (see :func:`is_pre_layer_norm`).
    """
    spec, block = arch_spec(model), layers(model)[layer]
    if spec.pre_layer_norm and not pre_ln:
        raise UnsupportedArchitectureError(
            f"{_describe(model)} normalises each block's input (pre-LN, ArchSpec.pre_layer_norm), not its residual "
            "sum: what reads the norms after the attention and feed-forward blocks (post-LN) does not apply to it",
            model_type=spec.model_type,
            missing=["attention_layer_norm", "output_layer_norm"],
        )
    return (
        _part(spec, block, "attention_layer_norm", model, nn.Module),
        _part(spec, block, "output_layer_norm", model, nn.Module),
    )


def is_pre_layer_norm(model: Model) -> bool:
    """Whether the model's blocks normalise their input (pre-LN, :attr:`ArchSpec.pre_layer_norm`)."""
    return arch_spec(model).pre_layer_norm


def final_layer_norm(model: Model) -> nn.Module | None:
    """The norm after the last layer (:attr:`ArchSpec.final_layer_norm`, pre-LN models), or None."""
    spec = arch_spec(model)
    if spec.final_layer_norm is None:
        return None
    return _part(spec, base_model(model), "final_layer_norm", model, nn.Module)


def embeddings(model: Model) -> nn.Module:
    """The embeddings module (word, position and segment embeddings and their layer norm)."""
    return _part(arch_spec(model), base_model(model), "embeddings", model, nn.Module)


def position_bias(model: Model) -> nn.Module | None:
    """The module every layer's position bias comes from (MPNet's relative position bias), or None."""
    spec = arch_spec(model)
    return None if spec.position_bias is None else _part(spec, base_model(model), "position_bias", model, nn.Module)


def dropout_edit_points(model: Model) -> list[nn.Module] | None:
    """Each layer's attention-dropout module, the edit point of inline-softmax models; None for
    models whose attention goes through transformers' AttentionInterface."""
    spec = arch_spec(model)
    if spec.dropout_edit_point is None:
        return None
    return [
        _part(spec, attention, "dropout_edit_point", model, nn.Module) for attention in self_attention_modules(model)
    ]


def attention_heads(model: Model, layer: int) -> int:
    """The number of heads ``layer`` (from 0) has now (fewer than the config's after pruning); read only, so a
    model whose layers share their weights (ALBERT) answers too."""
    spec = arch_spec(model)
    module = self_attention_modules(model, shared=True)[layer]
    return num_heads(model) if spec.heads_attr is None else int(getattr(module, spec.heads_attr))


def uses_token_types(model: Model) -> bool:
    """Whether the model's forward takes ``token_type_ids`` (an unregistered model: whether its forward
    has that argument)."""
    if is_registered(model):
        return arch_spec(model).token_type_ids
    module = _module(model)
    return module is not None and "token_type_ids" in inspect.signature(module.forward).parameters


def pad_token_id(model: Model, tokenizer: Any = None) -> int:
    """The id inputs are padded with: the tokenizer's pad token (``tokenizer``, else a LoadedModel's
    own), else the config's pad id, else 0."""
    tokenizer = tokenizer if tokenizer is not None else getattr(model, "tokenizer", None)
    if getattr(tokenizer, "pad_token_id", None) is not None:
        return int(tokenizer.pad_token_id)
    value = getattr(_config(model), _config_attr(model, "pad_token_id_attr"), None)
    return value if isinstance(value, int) else 0


def is_registered(model_or_config: object) -> bool:
    """Whether the model type has an :class:`ArchSpec` (see :func:`register_architecture`)."""
    return getattr(_config(model_or_config), "model_type", None) in ARCHITECTURE_REGISTRY


def _config_attr(model_or_config: object, field: str) -> str:
    """The config attribute an ArchSpec ``field`` names: the spec's, or for an unregistered model type the
    default (transformers' common names), since what the config holds needs no knowledge of the modules."""
    spec = ARCHITECTURE_REGISTRY.get(str(getattr(_config(model_or_config), "model_type", "")))
    return str(getattr(spec, field) if spec is not None else ArchSpec.__dataclass_fields__[field].default)


def _config_int(model_or_config: object, field: str) -> int:
    attr = _config_attr(model_or_config, field)
    value = getattr(_config(model_or_config), attr, None)
    if not isinstance(value, int):
        raise UnsupportedArchitectureError(
            f"{_describe(model_or_config)}: its config has no {attr!r} ({field} of its ArchSpec)",
            model_type=getattr(_config(model_or_config), "model_type", None),
            missing=[field],
        )
    return value


def num_layers(model_or_config: object) -> int:
    """The layer count the config declares."""
    return _config_int(model_or_config, "num_layers_attr")


def num_heads(model_or_config: object) -> int:
    """The heads per layer the config declares."""
    return _config_int(model_or_config, "num_heads_attr")
