"""The per-architecture map of model parts: every registered layout resolved on the tiny models, and the error
an unregistered one gets."""

import dataclasses
import inspect
from types import SimpleNamespace

import pytest
import torch
from contracts import check_arch_spec, check_parts_resolve
from tiny_models import ARCHS, HEAD_DIM, TINY_SHAPES
from torch import nn
from transformers import AlbertConfig, AlbertModel, AutoConfig

from bertology_utils.core import architectures
from bertology_utils.core.architectures import (
    ArchSpec,
    arch_spec,
    check_architecture,
    dropout_edit_points,
    embeddings,
    layers,
    num_heads,
    num_layers,
    pad_token_id,
    position_bias,
    qkv,
    register_architecture,
    registered_architectures,
    self_attention_modules,
    uses_token_types,
)
from bertology_utils.core.errors import ModelNotAvailableError, UnsupportedArchitectureError
from bertology_utils.core.models import load_model

#: The pad ids the tiny tokenizers were built with (RoBERTa and MPNet pad with 1, their padding_idx).
PAD_IDS = {"bert": 0, "roberta": 1, "distilbert": 0, "electra": 0, "mpnet": 1}
MODULE_FIELDS = [
    "layers",
    "self_attention",
    "attention_output",
    "attention_layer_norm",
    "output_layer_norm",
    "query",
    "key",
    "value",
]


@pytest.fixture
def scratch_registry():
    """Registrations made in a test are undone after it: the registry holds what it held before, in its order."""
    registry = architectures.ARCHITECTURE_REGISTRY
    before = list(registry.values())
    yield registry
    for model_type in list(registry):
        registry.unregister(model_type)
    for spec in before:
        registry.register(spec)


@pytest.fixture(scope="module")
def models(tiny_model_dirs):
    """arch -> (base model, sequence classifier) of every tiny architecture."""
    return {
        arch: (load_model(folder), load_model(folder, head="sequence-classification", num_labels=2))
        for arch, folder in tiny_model_dirs.items()
    }


def test_every_tiny_architecture_is_registered():
    assert set(ARCHS) <= set(registered_architectures())


@pytest.mark.parametrize("model_type", registered_architectures())
def test_every_registered_spec_is_consistent(model_type):
    check_arch_spec(arch_spec(SimpleNamespace(model_type=model_type)))


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("head", ["base", "sequence-classification"])
def test_parts_resolve_with_their_shapes(models, arch, head):
    loaded = models[arch][head != "base"]
    assert check_architecture(loaded).model_type == arch
    check_parts_resolve(loaded.model, *TINY_SHAPES[arch], HEAD_DIM)
    assert pad_token_id(loaded) == PAD_IDS[arch] == loaded.tokenizer.pad_token_id
    # What the model's forward accepts, not a name guess.
    assert uses_token_types(loaded) == ("token_type_ids" in inspect.signature(loaded.model.forward).parameters)
    assert uses_token_types(loaded) == (arch in ("bert", "roberta", "electra"))


@pytest.mark.parametrize("arch", ARCHS)
def test_self_attention_modules_return_the_models_own_probabilities(models, arch):
    loaded = models[arch][0]
    seen = []
    handles = [m.register_forward_hook(lambda _m, _a, out: seen.append(out[1])) for m in self_attention_modules(loaded)]
    try:
        with torch.no_grad():
            out = loaded.model(
                **loaded.tokenizer(["The old sailor reads."], return_tensors="pt"), output_attentions=True
            )
    finally:
        for h in handles:
            h.remove()
    assert len(seen) == len(out.attentions)
    for mine, theirs in zip(seen, out.attentions):
        assert torch.equal(mine, theirs)


@pytest.mark.parametrize("arch", ARCHS)
def test_mpnet_alone_has_a_position_bias_and_a_dropout_edit_point(models, arch):
    loaded = models[arch][0]
    n_layers, n_heads = TINY_SHAPES[arch]
    if arch == "mpnet":
        bias = position_bias(loaded)
        assert isinstance(bias, nn.Embedding) and bias.embedding_dim == n_heads
        points = dropout_edit_points(loaded)
        assert len(points) == n_layers and all(isinstance(p, nn.Dropout) for p in points)
    else:
        assert position_bias(loaded) is None and dropout_edit_points(loaded) is None


def test_the_default_minilm_is_bert(default_model_dir):
    config = AutoConfig.from_pretrained(default_model_dir)
    assert arch_spec(config) is arch_spec(SimpleNamespace(model_type="bert"))
    assert (num_layers(config), num_heads(config)) == (6, 12)


def test_an_unregistered_model_names_its_type_the_missing_fields_and_how_to_register(scratch_registry):
    scratch_registry.unregister("albert")  # ALBERT is registered now: unregister it to stand for an unknown layout
    albert = AlbertModel(
        AlbertConfig(
            vocab_size=50,
            embedding_size=8,
            hidden_size=16,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=32,
        )
    )
    with pytest.raises(UnsupportedArchitectureError) as info:
        layers(albert)
    error = info.value
    assert isinstance(error, ModelNotAvailableError)
    assert error.model_type == "albert"
    # ALBERT's shared layer groups are at none of the registered paths; its embeddings and config counts are.
    assert list(error.missing) == MODULE_FIELDS
    message = str(error)
    assert "AlbertModel (model type 'albert') is not a registered architecture" in message
    assert (
        "layers, self_attention, attention_output, attention_layer_norm, output_layer_norm, query, key, value."
        in message
    )
    assert "register_architecture(ArchSpec(model_type='albert'" in message
    # A config alone: its own fields are found, the modules cannot be looked for.
    with pytest.raises(UnsupportedArchitectureError) as info:
        arch_spec(albert.config)
    assert list(info.value.missing) == ["layers", "embeddings"] + MODULE_FIELDS[1:]


class _Renamed(nn.Module):
    """BERT's parts under other names, with a config that names its counts its own way."""

    def __init__(self, bert: nn.Module):
        super().__init__()
        self.config = SimpleNamespace(model_type="renamed-bert", n_blocks=len(bert.encoder.layer), heads=4, pad=3)
        self.embed = bert.embeddings
        self.blocks = bert.encoder.layer


def test_registering_a_new_architecture(models, scratch_registry):
    bert = models["bert"][0].model
    renamed = _Renamed(bert)
    with pytest.raises(UnsupportedArchitectureError) as info:
        self_attention_modules(renamed)
    assert list(info.value.missing) == ["layers", "embeddings"] + MODULE_FIELDS[1:] + [
        "num_layers_attr",
        "num_heads_attr",
    ]
    spec = ArchSpec(
        model_type="renamed-bert",
        layers="blocks",
        self_attention="attention.self",
        query="query",
        key="key",
        value="value",
        attention_output="attention.output.dense",
        attention_layer_norm="attention.output.LayerNorm",
        output_layer_norm="output.LayerNorm",
        embeddings="embed",
        token_type_ids=False,
        num_layers_attr="n_blocks",
        num_heads_attr="heads",
        pad_token_id_attr="pad",
    )
    assert register_architecture(spec) is spec
    assert check_architecture(renamed) is spec and "renamed-bert" in registered_architectures()
    assert layers(renamed) == list(bert.encoder.layer)
    assert qkv(renamed, 1) == (
        bert.encoder.layer[1].attention.self.query,
        bert.encoder.layer[1].attention.self.key,
        bert.encoder.layer[1].attention.self.value,
    )
    assert embeddings(renamed) is bert.embeddings
    assert (num_layers(renamed), num_heads(renamed)) == (2, 4)
    assert (pad_token_id(renamed), uses_token_types(renamed)) == (3, False)
    register_architecture(spec)  # the same spec again is fine
    with pytest.raises(ValueError, match="already registered"):
        register_architecture(dataclasses.replace(spec, query="q"))


def test_a_spec_that_does_not_match_its_model_lists_what_is_missing(models, scratch_registry):
    loaded = models["bert"][0]
    register_architecture(
        dataclasses.replace(arch_spec(loaded), query="q_proj", output_layer_norm="ln_2"), replace=True
    )
    with pytest.raises(UnsupportedArchitectureError, match="does not match its registered ArchSpec") as info:
        qkv(loaded, 0)
    assert list(info.value.missing) == ["output_layer_norm", "query"]
    assert "query ('q_proj' from the self-attention)" in str(info.value)
    assert "output_layer_norm ('ln_2' from the layer)" in str(info.value)
    # load_model checks the layout before handing a model out.
    with pytest.raises(UnsupportedArchitectureError):
        load_model(loaded.source)
