"""Where each encoder architecture keeps its parts: one declarative :class:`ArchSpec` per model type.

Every piece of code that reaches into a model (edit points, hooks on the self-attention
modules, head pruning, the neuron view, padding, the random-init control) reads the parts'
places from here instead of guessing them from class or attribute names, in the spirit of
TransformerLens' per-architecture component maps and inseq's ``register_model_config``.
Module paths are dotted attribute paths (``nn.Module.get_submodule``):

* ``layers`` and ``embeddings`` and ``position_bias`` from the base model (``model.base_model``:
  the encoder without its task head);
* ``self_attention``, ``attention_output`` and the two layer norms from one layer;
* ``query``/``key``/``value`` and ``dropout_edit_point`` from the self-attention module.

A model type that is not registered, or whose modules are not where its spec says, raises
:class:`~bertology_utils.core.errors.UnsupportedArchitectureError` naming the fields that could
not be found; :func:`register_architecture` adds a spec.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TypeVar

from torch import nn

from bertology_utils.core.errors import UnsupportedArchitectureError

__all__ = [
    "ArchSpec",
    "register_architecture",
    "registered_architectures",
    "arch_spec",
    "check_architecture",
    "torch_module",
    "base_model",
    "layers",
    "self_attention_modules",
    "qkv",
    "attention_output",
    "layer_norms",
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
    #: From the self-attention module: the query, key and value projections (nn.Linear, heads along output rows).
    query: str
    key: str
    value: str
    #: From a layer: the attention output projection (nn.Linear, heads along input columns).
    attention_output: str
    #: From a layer: the layer norm after the attention block, and the one after the feed-forward block.
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
    #: The self-attention module's own head-count attribute (what head pruning updates).
    heads_attr: str = "num_attention_heads"
    #: Whether the model type's ``...ForSequenceClassification`` head reads the last layer at the
    #: first token only (BERT's pooler, the RoBERTa-style heads): then that layer's feed-forward block
    #: may run on the first token alone (:func:`~bertology_utils.interventions.editing.first_token_readout`).
    classifier_reads_first_token: bool = False


#: Module fields: (field, what it is resolved from).
_MODULE_FIELDS = (
    ("layers", "base model"),
    ("embeddings", "base model"),
    ("position_bias", "base model"),
    ("self_attention", "layer"),
    ("attention_output", "layer"),
    ("attention_layer_norm", "layer"),
    ("output_layer_norm", "layer"),
    ("query", "self-attention"),
    ("key", "self-attention"),
    ("value", "self-attention"),
    ("dropout_edit_point", "self-attention"),
)
_CONFIG_FIELDS = ("num_layers_attr", "num_heads_attr")
#: Fields an architecture may lack.
_OPTIONAL = ("position_bias", "dropout_edit_point")

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
_REGISTRY: dict[str, ArchSpec] = {}


def register_architecture(spec: ArchSpec, *, replace: bool = False) -> ArchSpec:
    """Register ``spec`` for its ``model_type`` (``replace`` to override an existing one); returns it."""
    if not isinstance(spec, ArchSpec):
        raise TypeError(f"register an ArchSpec, not {type(spec).__name__}")
    if spec.model_type in _REGISTRY and not replace and _REGISTRY[spec.model_type] != spec:
        raise ValueError(f"model type {spec.model_type!r} is already registered; pass replace=True to override it")
    _REGISTRY[spec.model_type] = spec
    return spec


def registered_architectures() -> tuple[str, ...]:
    """The registered model types, in registration order."""
    return tuple(_REGISTRY)


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


# --------------------------------------------------------------------------- resolution


def _module(model) -> nn.Module | None:
    """The torch module of a LoadedModel (``.model``), or the module itself."""
    if isinstance(model, nn.Module):
        return model
    inner = getattr(model, "model", None)
    return inner if isinstance(inner, nn.Module) else None


def torch_module(model) -> nn.Module:
    """The torch module of a LoadedModel (``.model``), or the module itself."""
    module = _module(model)
    if module is None:
        raise TypeError(f"expected a LoadedModel or a torch module, not {type(model).__name__}")
    return module


def _config(model_or_config):
    module = _module(model_or_config)
    return getattr(module, "config", None) if module is not None else model_or_config


def base_model(model) -> nn.Module:
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


def _found(spec: ArchSpec, module: nn.Module, config) -> dict[str, bool]:
    """For each field of ``spec``, whether ``module`` (and ``config``) has it where the spec says."""
    base = base_model(module)
    stack = _get(base, spec.layers)
    first = stack[0] if isinstance(stack, nn.ModuleList) and len(stack) else None
    attention = _get(first, spec.self_attention)
    found = {
        "layers": first is not None,
        "embeddings": _get(base, spec.embeddings) is not None,
        "position_bias": spec.position_bias is None or _get(base, spec.position_bias) is not None,
        "self_attention": attention is not None,
        "dropout_edit_point": spec.dropout_edit_point is None or _get(attention, spec.dropout_edit_point) is not None,
    }
    found["attention_output"] = isinstance(_get(first, spec.attention_output), nn.Linear)
    for name in ("attention_layer_norm", "output_layer_norm"):
        found[name] = _get(first, getattr(spec, name)) is not None
    for name in ("query", "key", "value"):
        found[name] = isinstance(_get(attention, getattr(spec, name)), nn.Linear)
    for name in _CONFIG_FIELDS:
        found[name] = isinstance(getattr(config, getattr(spec, name), None), int)
    return found


def _describe(model_or_config) -> str:
    module = _module(model_or_config)
    what = type(module if module is not None else model_or_config).__name__
    model_type = getattr(_config(model_or_config), "model_type", None)
    return f"{what} (model type {model_type!r})" if model_type else f"{what} (no model type: it has no config)"


def _how_to_register(model_type) -> str:
    return (
        f"describe where its parts are with bertology_utils.core.architectures.register_architecture(ArchSpec("
        f"model_type={model_type or '...'!r}, layers=..., self_attention=..., query=..., key=..., value=..., "
        "attention_output=..., attention_layer_norm=..., output_layer_norm=..., ...)); registered: "
        f"{', '.join(_REGISTRY)}"
    )


def _unregistered(model_or_config) -> UnsupportedArchitectureError:
    """The error for a model type without a spec, listing the fields no registered layout finds on it."""
    config = _config(model_or_config)
    model_type = getattr(config, "model_type", None)
    module = _module(model_or_config)
    found: dict[str, bool] = {}
    for spec in _REGISTRY.values():
        if module is not None:
            for name, ok in _found(spec, module, config).items():
                found[name] = found.get(name, False) or (ok and getattr(spec, name) is not None)
        for name in _CONFIG_FIELDS:  # a config alone: only its own fields can be looked for
            found[name] = found.get(name, False) or isinstance(getattr(config, getattr(spec, name), None), int)
    missing = [name for name, _ in _MODULE_FIELDS if not found.get(name) and name not in _OPTIONAL]
    missing += [name for name in _CONFIG_FIELDS if not found[name]]
    return UnsupportedArchitectureError(
        f"{_describe(model_or_config)} is not a registered architecture. Fields no registered layout finds on it: "
        f"{', '.join(missing) or 'none'}. To support it, {_how_to_register(model_type)}.",
        model_type=model_type,
        missing=missing,
    )


def arch_spec(model_or_config) -> ArchSpec:
    """The :class:`ArchSpec` of a LoadedModel, a transformers model or its config (looked up by ``model_type``).

    Raises UnsupportedArchitectureError for a model type that is not registered.
    """
    model_type = getattr(_config(model_or_config), "model_type", None)
    spec = _REGISTRY.get(model_type) if isinstance(model_type, str) else None
    if spec is None:
        raise _unregistered(model_or_config)
    return spec


def check_architecture(model) -> ArchSpec:
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
    return spec


_M = TypeVar("_M", bound=nn.Module)


def _part(spec: ArchSpec, root: nn.Module | None, field: str, model, kind: type[_M]) -> _M:
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


def layers(model) -> list[nn.Module]:
    """The encoder layers, in order."""
    spec = arch_spec(model)
    return list(_part(spec, base_model(model), "layers", model, nn.ModuleList))


def self_attention_modules(model) -> list[nn.Module]:
    """The self-attention module of every layer, in layer order."""
    spec = arch_spec(model)
    return [_part(spec, layer, "self_attention", model, nn.Module) for layer in layers(model)]


def qkv(model, layer: int) -> tuple[nn.Linear, nn.Linear, nn.Linear]:
    """The query, key and value projections of ``layer`` (from 0)."""
    spec = arch_spec(model)
    attention = self_attention_modules(model)[layer]
    query, key, value = (_part(spec, attention, name, model, nn.Linear) for name in ("query", "key", "value"))
    return query, key, value


def attention_output(model, layer: int) -> nn.Linear:
    """The attention output projection of ``layer`` (from 0)."""
    return _part(arch_spec(model), layers(model)[layer], "attention_output", model, nn.Linear)


def layer_norms(model, layer: int) -> tuple[nn.Module, nn.Module]:
    """(the norm after the attention block, the norm after the feed-forward block) of ``layer`` (from 0)."""
    spec, block = arch_spec(model), layers(model)[layer]
    return (
        _part(spec, block, "attention_layer_norm", model, nn.Module),
        _part(spec, block, "output_layer_norm", model, nn.Module),
    )


def embeddings(model) -> nn.Module:
    """The embeddings module (word, position and segment embeddings and their layer norm)."""
    return _part(arch_spec(model), base_model(model), "embeddings", model, nn.Module)


def position_bias(model) -> nn.Module | None:
    """The module every layer's position bias comes from (MPNet's relative position bias), or None."""
    spec = arch_spec(model)
    return None if spec.position_bias is None else _part(spec, base_model(model), "position_bias", model, nn.Module)


def dropout_edit_points(model) -> list[nn.Module] | None:
    """Each layer's attention-dropout module, the edit point of inline-softmax models; None for
    models whose attention goes through transformers' AttentionInterface."""
    spec = arch_spec(model)
    if spec.dropout_edit_point is None:
        return None
    return [
        _part(spec, attention, "dropout_edit_point", model, nn.Module) for attention in self_attention_modules(model)
    ]


def attention_heads(model, layer: int) -> int:
    """The number of heads ``layer`` (from 0) has now (fewer than the config's after pruning)."""
    spec = arch_spec(model)
    return int(getattr(self_attention_modules(model)[layer], spec.heads_attr))


def uses_token_types(model) -> bool:
    """Whether the model's forward takes ``token_type_ids``."""
    return arch_spec(model).token_type_ids


def pad_token_id(model, tokenizer=None) -> int:
    """The id inputs are padded with: the tokenizer's pad token (``tokenizer``, else a LoadedModel's
    own), else the config's pad id, else 0."""
    tokenizer = tokenizer if tokenizer is not None else getattr(model, "tokenizer", None)
    if getattr(tokenizer, "pad_token_id", None) is not None:
        return int(tokenizer.pad_token_id)
    value = getattr(_config(model), arch_spec(model).pad_token_id_attr, None)
    return value if isinstance(value, int) else 0


def _config_int(model_or_config, field: str) -> int:
    spec = arch_spec(model_or_config)
    value = getattr(_config(model_or_config), getattr(spec, field), None)
    if not isinstance(value, int):
        raise UnsupportedArchitectureError(
            f"{_describe(model_or_config)}: its config has no {getattr(spec, field)!r} ({field} of its ArchSpec)",
            model_type=spec.model_type,
            missing=[field],
        )
    return value


def num_layers(model_or_config) -> int:
    """The layer count the config declares."""
    return _config_int(model_or_config, "num_layers_attr")


def num_heads(model_or_config) -> int:
    """The heads per layer the config declares."""
    return _config_int(model_or_config, "num_heads_attr")
