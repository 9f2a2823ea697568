"""DecompX (Modarressi et al. 2023): its parts add up to every layer's output and to the logits on a tiny model of
every family it covers, they equal the authors' code on the default model, padding leaks nothing, each rule
against a hand computation, and the refusals.

Sentences: ``mixing_checks.TEXTS`` on the tiny models (``tiny_models``), ``test_attribution.corpus`` for the
classifiers, and the six sentences of ``tests/data/decompx_authors.json`` for the authors' numbers (that file's
``about`` says how they were computed; the README beside it says what it holds).
"""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from contracts import check_reference
from mixing_checks import batch_inputs
from test_attribution import classifier, corpus, one_batch
from tiny_models import ALL_FAMILIES

from bertology_utils.core.errors import UnsupportedArchitectureError
from bertology_utils.core.models import load_model
from bertology_utils.data import Corpus
from bertology_utils.interventions import mixing, references
from bertology_utils.interventions.mixing.decompx import shared_bias, zero_origin
from bertology_utils.interventions.objectives import token_batches

#: The families DecompX covers: post-LN, plain feed-forward blocks, a layer's own weights.
COVERED = tuple(f for f in ALL_FAMILIES if f not in ("albert", "modernbert"))
AUTHORS = Path(__file__).parents[2] / "data" / "decompx_authors.json"
#: |ours - authors'| over the largest value, float64 (observed: 1e-9; the authors add 1e-12 to every denominator).
AUTHORS_TOLERANCE = 1e-7


@pytest.mark.parametrize("family", COVERED)
def test_the_parts_add_up_to_every_layer_s_output(family, family_model_dirs):
    """sum_k x^l_(i<-k) = x^l_i on every layer and real token, to 1e-5 of the output's scale (float32); a real
    token's parts from padding are exactly zero."""
    loaded = load_model(family_model_dirs[family], device="cpu")
    inputs = batch_inputs(loaded)
    traces = mixing.trace(loaded, inputs)
    real = inputs["attention_mask"].bool()
    assert (~real).any()
    layers = list(mixing.decompose(loaded, traces))
    assert len(layers) == len(traces)
    for parts, t in zip(layers, traces):
        assert parts.shape == (*real.shape, real.shape[1], t.output.shape[-1])
        scale = float(t.output.abs().max())
        torch.testing.assert_close(parts.sum(2)[real] / scale, t.output[real] / scale, atol=1e-5, rtol=0)
        assert float(parts[real[:, :, None] & ~real[:, None, :]].abs().max()) == 0


@pytest.mark.parametrize("family", COVERED)
def test_the_logit_s_parts_add_up_to_the_logits(family, family_model_dirs):
    """sum_k (part k of class c's logit) = the logit, float64, to 1e-10 of its scale; padding's parts are zero."""
    loaded = classifier(family_model_dirs[family], dtype=torch.float64)
    batches, _ = token_batches(loaded, corpus(5), batch_size=5)
    for batch in batches:
        parts = mixing.decompx_logits(loaded, batch)
        with torch.no_grad():
            logits = loaded.model(**batch.model_inputs()).logits
        assert parts.shape == (*batch.real.shape, logits.shape[-1])
        scale = max(1.0, float(logits.abs().max()))
        assert float((parts.sum(1) - logits).abs().max()) / scale < 1e-10
        assert (~batch.real).any() and float(parts[~batch.real].abs().max()) == 0


def authors_model(default_model_dir):
    """The model of the authors' run (``decompx_authors.json``'s ``about``), in float64."""
    loaded = load_model(default_model_dir, head="sequence-classification", num_labels=2, device="cpu")
    torch.manual_seed(1)
    with torch.no_grad():
        for linear in (loaded.model.bert.pooler.dense, loaded.model.classifier):
            torch.nn.init.normal_(linear.weight, std=0.2)
            torch.nn.init.normal_(linear.bias, std=0.2)
    loaded.model.double()
    return loaded


def test_equal_to_the_authors_code_on_the_default_model(default_model_dir):
    """Every layer's norms (the first token's row of every item, the whole map of the first) and the logits' parts
    equal what the authors' code gave, to AUTHORS_TOLERANCE of the largest value."""
    expected = json.loads(AUTHORS.read_text())
    loaded = authors_model(default_model_dir)
    batches, skipped = token_batches(loaded, Corpus.from_texts(expected["sentences"], name="t"), batch_size=6)
    assert not skipped and len(batches) == 1
    batch = batches[0]
    order = [item.index for item in batch.items]  # batches sort by length
    lengths = batch.real.sum(1).tolist()
    for row, index in enumerate(order):
        assert batch.input_ids[row, : lengths[row]].tolist() == expected["input_ids"][index]
    with torch.no_grad():
        logits = loaded.model(**batch.model_inputs()).logits
    np.testing.assert_allclose(logits.numpy(), np.asarray(expected["logits"])[order], atol=1e-9)
    traces = mixing.trace(loaded, batch.model_inputs())
    for layer, parts in enumerate(mixing.decompose(loaded, traces)):
        norms = parts.norm(dim=-1).numpy()
        for row, index in enumerate(order):
            want = np.asarray(expected["first_row_norms"][layer][index])
            got = norms[row, 0, : lengths[row]]
            assert np.abs(got - want).max() <= AUTHORS_TOLERANCE * np.abs(want).max(), (layer, index)
            if index == 0:
                want = np.asarray(expected["item_norms"][layer])
                got = norms[row, : lengths[row], : lengths[row]]
                assert np.abs(got - want).max() <= AUTHORS_TOLERANCE * np.abs(want).max(), layer
    parts = mixing.decompx_logits(loaded, batch).numpy()
    for row, index in enumerate(order):
        want = np.asarray(expected["classifier"][index])
        assert np.abs(parts[row, : lengths[row]] - want).max() <= AUTHORS_TOLERANCE * np.abs(want).max()


def test_padding_leaks_nothing(tiny_model_dirs):
    """Each item's maps and logit parts alone equal those it gets padded in a batch."""
    loaded = load_model(tiny_model_dirs["bert"], device="cpu")
    inputs = batch_inputs(loaded)  # sorted by length, padded
    together = mixing.mixing_maps(loaded, inputs, ["decompx"])["decompx"]
    for row, n in enumerate(inputs["attention_mask"].sum(1).tolist()):
        alone_inputs = {k: v[row : row + 1, :n] for k, v in inputs.items()}
        alone = mixing.mixing_maps(loaded, alone_inputs, ["decompx"])["decompx"]
        for a, b in zip(alone, together):
            torch.testing.assert_close(a[0], b[row, :, :n, :n], atol=1e-6, rtol=1e-5)
    tuned = classifier(tiny_model_dirs["bert"])
    batch = one_batch(tuned, corpus(4))
    parts = mixing.decompx_logits(tuned, batch)
    assert (~batch.real).any()
    for row, n in enumerate(batch.real.sum(1).tolist()):
        cut = {k: None if v is None else v[row : row + 1, :n] for k, v in vars(batch).items() if torch.is_tensor(v)}
        single = dataclasses.replace(batch, items=batch.items[row : row + 1], **cut)
        torch.testing.assert_close(mixing.decompx_logits(tuned, single)[0], parts[row, :n], atol=1e-6, rtol=1e-5)


def test_maps_are_rows_of_norms_summing_to_one(tiny_model_dirs):
    loaded = load_model(tiny_model_dirs["roberta"], device="cpu")
    inputs = batch_inputs(loaded)
    real = inputs["attention_mask"].bool()
    maps = mixing.mixing_maps(loaded, inputs, ["decompx"])["decompx"]
    parts = list(mixing.decompose(loaded, mixing.trace(loaded, inputs)))
    for m, p in zip(maps, parts):
        assert m.shape == (*real.shape[:1], 1, real.shape[1], real.shape[1])
        torch.testing.assert_close(m[:, 0].sum(-1)[real], torch.ones(int(real.sum())))
        norms = p.norm(dim=-1)[real]
        torch.testing.assert_close(m[:, 0][real], norms / norms.sum(-1, keepdim=True))
        assert float(m[:, 0][~real].abs().max()) == 0


# --------------------------------------------------------------------------- each rule by hand


def test_a_bias_is_shared_in_proportion_to_each_part_s_dot_product_with_it():
    parts = torch.tensor([[1.0, 0.0], [0.0, -2.0], [0.0, 0.0]])
    bias = torch.tensor([3.0, 3.0])
    out = shared_bias(parts, bias)
    torch.testing.assert_close(out, parts + torch.tensor([[1.0], [2.0], [0.0]]) / 3 * bias)
    torch.testing.assert_close(out.sum(0), parts.sum(0) + bias)
    assert shared_bias(parts, None) is parts


def test_a_bias_shared_in_place_is_added_to_the_parts_given_and_equals_the_copy():
    parts = torch.randn(2, 3, 4, 5, generator=torch.Generator().manual_seed(0))
    bias = torch.randn(5, generator=torch.Generator().manual_seed(1))
    given = parts.clone()
    copied = shared_bias(given, bias)
    torch.testing.assert_close(given, parts, rtol=0, atol=0)  # the copy leaves its input alone
    shared = shared_bias(given, bias, in_place=True)
    assert shared is given
    torch.testing.assert_close(shared, copied)
    torch.testing.assert_close(shared.sum(-2), parts.sum(-2) + bias)
    # a bias per vector (..., D) is shared among that vector's parts, as a (D,) one among all
    per_vector = bias.expand(2, 3, 5)
    torch.testing.assert_close(shared_bias(parts, per_vector), copied)


def test_zero_origin_slope_is_act_over_input_and_zero_at_zero():
    z = torch.tensor([-2.0, 0.0, 0.5, 3.0])
    theta = zero_origin(torch.nn.functional.gelu, z)
    torch.testing.assert_close(theta[[0, 2, 3]], torch.nn.functional.gelu(z[[0, 2, 3]]) / z[[0, 2, 3]])
    assert float(theta[1]) == 0


# --------------------------------------------------------------------------- refusals and the reference


def test_refused_where_the_decomposition_does_not_hold(family_model_dirs):
    """ModernBERT (gated feed-forward block, pre-LN) and ALBERT (shared layers): refused by name, and by the map
    sources, before any map is made."""
    for family, reason in (("modernbert", "gated linear unit"), ("albert", "shared_layers")):
        loaded = load_model(family_model_dirs[family], device="cpu")
        assert reason in mixing.unsupported_methods(loaded, ["decompx"])["decompx"]
        with pytest.raises(UnsupportedArchitectureError, match=reason):
            mixing.mixing_maps(loaded, batch_inputs(loaded), ["decompx"])
    bert = load_model(family_model_dirs["bert"], device="cpu")
    assert mixing.unsupported_methods(bert, ["decompx"]) == {}
    reference = references.REFERENCE_REGISTRY["decompx_logit"]
    assert "gated linear unit" in reference.unsupported(classifier(family_model_dirs["modernbert"]))
    assert reference.unsupported(classifier(family_model_dirs["bert"])) is None


def test_the_logit_reference_meets_the_contract_and_is_opt_in(tiny_model_dirs):
    loaded = classifier(tiny_model_dirs["distilbert"])
    batch = one_batch(loaded)
    check_reference(loaded, batch, "decompx_logit")
    assert "decompx_logit" not in references.REFERENCES
    words = references.REFERENCE_REGISTRY["decompx_logit"](
        loaded, batch, torch.ones(len(batch.items), dtype=torch.long), references.ReferenceSettings()
    ).words
    parts = mixing.decompx_logits(loaded, batch)[..., 1]
    total = np.nansum(words.numpy(), axis=1)
    np.testing.assert_allclose(total, parts.sum(1).numpy(), rtol=1e-5, atol=1e-6)  # every token is some word's
