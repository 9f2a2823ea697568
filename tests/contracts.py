"""What every registered item must do, one check per registry: context-mixing methods
(``mixing.REGISTRY``), attribution references (``REFERENCE_REGISTRY``) and architectures
(``ARCHITECTURE_REGISTRY``). ``interventions/mixing/test_methods``, ``test_attribution`` and ``test_architectures`` run them over
their registry, and ``core/test_registry`` on toy items that a module of their own registers."""

import numpy as np
import torch
from torch import nn

from bertology_utils.attention.alignment import WORD
from bertology_utils.core import architectures
from bertology_utils.core.architectures import ArchSpec
from bertology_utils.interventions import attribution, mixing, references


def check_mixing_method(loaded, inputs: dict[str, torch.Tensor], name: str) -> None:
    """Method ``name`` gives, for every layer, finite non-negative maps of the batch's shape, nothing from
    padding, and rows of real tokens summing to 1 once normalised."""
    real = inputs["attention_mask"].bool()
    heads = loaded.num_heads if mixing.get_method(name).per_head else 1
    maps = mixing.mixing_maps(loaded, inputs, (name,))[name]
    normalised = mixing.MixingMaps(name, normalise=True)(loaded, inputs)
    assert len(maps) == len(normalised) == loaded.num_layers
    for m, n in zip(maps, normalised):
        assert m.shape == (real.shape[0], heads, *real.shape[1:], real.shape[1])
        assert torch.isfinite(m).all() and (m >= 0).all()
        assert (m.transpose(1, 3)[~real] == 0).all()  # nothing comes from padding
        sums = n.sum(-1).transpose(1, 2)[real]  # rows of real tokens
        torch.testing.assert_close(sums, torch.ones_like(sums))


def check_reference(loaded, batch, name: str) -> None:
    """Reference ``name`` scores each word of each item of ``batch`` (a classifier's), NaN past an item's
    words, with a gap and a panel count per item when it has a completeness property."""
    labels = attribution.predicted_labels(loaded, batch)
    out = references.REFERENCE_REGISTRY[name](loaded, batch, labels, references.ReferenceSettings(8))
    width = max(a.n_words for a in batch.items)
    assert out.words.shape == (len(batch.items), width)
    for row, item in zip(out.words.numpy(), batch.items):
        words = item.word_kinds == WORD
        assert np.isfinite(row[: item.n_words][words]).all() and np.isnan(row[item.n_words :]).all()
    if out.relative_gap is not None:
        assert out.relative_gap.shape == out.panels.shape == (len(batch.items),)


def check_arch_spec(spec: ArchSpec) -> None:
    """A registered spec is found by its model type and names its queries, keys and values either apart or as
    one fused projection; a pre-LN one names its final norm."""
    assert architectures.ARCHITECTURE_REGISTRY[spec.model_type] is spec
    apart = (spec.query, spec.key, spec.value)
    assert (spec.fused_qkv is None) == all(path is not None for path in apart)
    assert spec.fused_qkv is None or all(path is None for path in apart)
    assert not spec.pre_layer_norm or spec.final_layer_norm is not None


def check_parts_resolve(model: nn.Module, n_layers: int, n_heads: int, head_dim: int) -> None:
    """Every part of ``model`` (a post-LN model with three projections) is where its spec says, with its shape."""
    hidden = n_heads * head_dim
    spec = architectures.check_architecture(model)
    assert spec.model_type == model.config.model_type
    assert (architectures.num_layers(model.config), architectures.num_heads(model.config)) == (n_layers, n_heads)
    assert len(architectures.layers(model)) == len(architectures.self_attention_modules(model)) == n_layers
    for layer in range(n_layers):
        assert all(p.weight.shape == (hidden, hidden) for p in architectures.qkv(model, layer))
        assert architectures.attention_output(model, layer).weight.shape == (hidden, hidden)
        norms = architectures.layer_norms(model, layer)
        assert [tuple(norm.normalized_shape) for norm in norms] == [(hidden,), (hidden,)]
        assert architectures.attention_heads(model, layer) == n_heads
    assert architectures.embeddings(model).word_embeddings is model.get_input_embeddings()
