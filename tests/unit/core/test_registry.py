"""One kind of registry for what the package finds by name: a context-mixing method, an attribution reference
and an architecture registered from a module of their own meet the contracts every registered one meets."""

import copy
import importlib
import sys
import textwrap

import pytest
from contracts import check_arch_spec, check_mixing_method, check_parts_resolve, check_reference
from tiny_models import HEAD_DIM, TINY_SHAPES

from bertology_utils.core import architectures
from bertology_utils.core.models import load_model
from bertology_utils.core.registry import Registry
from bertology_utils.data import Corpus
from bertology_utils.interventions import mixing, references
from bertology_utils.interventions.objectives import token_batches

#: A user's module: one item of each registry, each registered on import.
TOY_MODULE = textwrap.dedent(
    '''
    import dataclasses
    from types import SimpleNamespace

    import numpy as np
    import torch

    from bertology_utils.core.architectures import arch_spec, register_architecture
    from bertology_utils.interventions.references import Reference, ReferenceScores, register_reference
    from bertology_utils.interventions.mixing import LayerMethod, register


    class EvenMixing(LayerMethod):
        """Every token mixes evenly with every real token."""

        name = "toy_even"
        reads = frozenset()

        def layer_map(self, model, layer, t, real):
            tokens = real.shape[1]
            return (real[:, None, :].expand(-1, tokens, -1) / real.sum(-1)[:, None, None])[:, None]


    class WordPosition(Reference):
        """Later words matter more."""

        name = "toy_word_position"

        def scores(self, loaded, batch, labels, settings):
            width = max(a.n_words for a in batch.items)
            rows = [np.r_[np.arange(a.n_words, dtype=np.float32), np.full(width - a.n_words, np.nan)]
                    for a in batch.items]
            return ReferenceScores(torch.from_numpy(np.stack(rows)))


    METHOD = register(EvenMixing())
    REFERENCE = register_reference(WordPosition())
    # BERT's layout under a model type of its own
    ARCHITECTURE = register_architecture(
        dataclasses.replace(arch_spec(SimpleNamespace(model_type="bert")), model_type="toy-bert")
    )
    '''
)


@pytest.fixture
def toy_module(tmp_path, monkeypatch):
    """The toy module, imported from a folder of its own; its registrations are undone after the test."""
    (tmp_path / "toy_registrations.py").write_text(TOY_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("toy_registrations")
    try:
        yield module
    finally:
        mixing.REGISTRY.unregister(module.METHOD.name)
        references.REFERENCE_REGISTRY.unregister(module.REFERENCE.name)
        architectures.ARCHITECTURE_REGISTRY.unregister(module.ARCHITECTURE.model_type)
        sys.modules.pop("toy_registrations")


def test_items_registered_by_a_module_of_their_own_meet_every_contract(toy_module, tiny_model_dirs):
    assert "toy_even" in mixing.LAYER_METHODS and mixing.METHODS.index("toy_even") < mixing.METHODS.index("rollout")
    assert references.REFERENCES[-1] == "toy_word_position"
    assert architectures.registered_architectures()[-1] == "toy-bert"
    loaded = load_model(tiny_model_dirs["roberta"], device="cpu")
    (batch,), _ = token_batches(loaded, Corpus.from_texts(["The old sailor reads .", "Hello !"], name="t"))
    check_mixing_method(loaded, batch.model_inputs(), "toy_even")
    classifier = load_model(tiny_model_dirs["roberta"], head="sequence-classification", num_labels=2, device="cpu")
    check_reference(classifier, batch, "toy_word_position")
    check_arch_spec(toy_module.ARCHITECTURE)
    model = copy.deepcopy(load_model(tiny_model_dirs["bert"], device="cpu").model)
    model.config.model_type = "toy-bert"
    check_parts_resolve(model, *TINY_SHAPES["bert"], HEAD_DIM)


def test_a_registry_restores_what_a_temporary_registration_replaced():
    registry: Registry[str] = Registry("word", key=str.lower)
    for word in ("Alpha", "Beta", "Gamma"):
        registry.register(word)
    registry.register("Alpha")  # the same item again: a no-op
    with pytest.raises(ValueError, match="a word named 'beta' is already registered"):
        registry.register("BETA")
    with registry.registered("BETA", replace=True), registry.registered("Delta"):
        assert list(registry.values()) == ["Alpha", "BETA", "Gamma", "Delta"]
    assert list(registry.values()) == ["Alpha", "Beta", "Gamma"]
    assert registry.unregister("gamma") == "Gamma" and "gamma" not in registry and registry.get("gamma") is None
    with pytest.raises(ValueError, match="unknown word 'gamma'; choose from alpha, beta"):
        registry["gamma"]
