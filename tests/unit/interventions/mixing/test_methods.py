"""The registry's contract over every registered method: batching, extraction, several at once, refusals, new methods."""

import numpy as np
import pytest
import torch
from contracts import check_mixing_method
from mixing_checks import PART_FAMILIES, TEXTS, batch_inputs

from bertology_utils.core import architectures
from bertology_utils.core.errors import UnsupportedArchitectureError
from bertology_utils.core.models import load_model
from bertology_utils.data import Corpus
from bertology_utils.interventions import mixing
from bertology_utils.interventions.objectives import token_batches


@pytest.mark.parametrize("method", mixing.METHODS)
def test_an_item_gets_the_same_maps_alone_and_in_a_padded_batch(tiny_model_dirs, method):
    loaded = load_model(tiny_model_dirs["roberta"], device="cpu")
    (batched,), _ = token_batches(loaded, Corpus.from_texts(TEXTS, name="t"), batch_size=len(TEXTS))
    batch = mixing.mixing_maps(loaded, batched.model_inputs(), (method,))[method]
    alone = mixing.mixing_maps(loaded, batch_inputs(loaded, TEXTS[1:2]), (method,))[method]
    n = alone[0].shape[-1]
    index = [a.index for a in batched.items].index(1)  # batches are sorted by length
    assert batch[0].shape[-1] > n
    for a, b in zip(alone, batch):
        torch.testing.assert_close(b[index, :, :n, :n], a[0], atol=2e-5, rtol=1e-4)


def test_unknown_methods_are_refused(tiny_model_dirs):
    loaded = load_model(tiny_model_dirs["bert"], device="cpu")
    with pytest.raises(ValueError, match="unknown context-mixing"):
        mixing.mixing_maps(loaded, batch_inputs(loaded), ("attention", "saliency"))
    with pytest.raises(ValueError, match="method must be one of"):
        mixing.MixingMaps("saliency")


def test_map_source_heads_and_settings():
    assert mixing.MixingMaps("norm").heads is None and mixing.MixingMaps("alti").heads == 1
    assert mixing.MixingMaps("flow", flow_rows=(0,)).settings() == {"normalise": False, "rows": [0], "max_tokens": 48}
    # flow's options are flow's: other methods neither record nor need them, and an unknown option is refused
    assert mixing.MixingMaps("norm", flow_rows=(0,)).settings() == {"normalise": False}
    assert (mixing.MixingMaps("flow").max_tokens, mixing.MixingMaps("norm").max_tokens) == (
        mixing.FLOW_MAX_TOKENS,
        None,
    )
    with pytest.raises(TypeError, match="unknown context-mixing option.*rows"):
        mixing.MixingMaps("flow", rows=(0,))


@pytest.mark.parametrize("method", ["norm", "alti", "value_zeroing_rollout"])
def test_sentence_pairs_go_through_extraction_at_word_and_token_level(tiny_model_dirs, method):
    from bertology_utils.attention import attention_for
    from bertology_utils.data import SentencePair

    loaded = load_model(tiny_model_dirs["bert"], device="cpu")
    pairs = Corpus.from_items(
        [
            SentencePair("p0", ("The", "old", "sailor", "reads", "."), ("He", "smiles", ".")),
            SentencePair("p1", ("Hello", "!"), ("Welcome", "back", "to", "the", "garden", ".")),
        ],
        "pairs",
    )
    items = attention_for(pairs, loaded, maps=mixing.MixingMaps(method), keep_tokens=True)
    heads = 4 if method == "norm" else 1
    for item in items:
        assert set(np.unique(item.segments)) == {0, 1}
        assert item.attention.shape == (2, heads, item.n_words, item.n_words)
        assert item.token_attention.shape == (2, heads, item.n_tokens, item.n_tokens)
        if method != "norm":  # contributions are distributions over the item's tokens and words
            np.testing.assert_allclose(item.token_attention.sum(-1), 1, atol=2e-3)
            np.testing.assert_allclose(item.attention.sum(-1), 1, atol=2e-3)


@pytest.mark.parametrize("normalise", [False, True])
def test_several_methods_at_once_equal_each_method_alone(tiny_model_dirs, normalise, monkeypatch):
    from bertology_utils.attention import attention_for

    loaded = load_model(tiny_model_dirs["bert"], device="cpu")
    corpus = Corpus.from_texts([*TEXTS, " ".join(["word"] * 20)], name="t")
    settings = {"too_long": "skip", "max_tokens": 16, "batch_size": 2, "keep_tokens": True}
    methods = list(mixing.METHODS)
    calls = []
    traced = mixing.trace
    monkeypatch.setattr(mixing.maps, "trace", lambda *a: calls.append(1) or traced(*a))  # where mixing_maps finds it
    together = mixing.mixing_for(corpus, loaded, methods, normalise=normalise, flow_rows=(0,), **settings)
    passes = len(calls)
    assert passes == 2  # the three items of at most 16 tokens in two batches, each traced once for all methods
    assert list(together) == methods
    for method in methods:
        source = mixing.MixingMaps(method, normalise=normalise, flow_rows=(0,))
        alone = attention_for(corpus, loaded, maps=source, **settings)
        assert len(together[method]) == len(alone) == 3  # the long one skipped by both
        for got, want in zip(together[method], alone):
            assert got.item_id == want.item_id and got.words == want.words
            np.testing.assert_array_equal(got.attention, want.attention)
            np.testing.assert_array_equal(got.token_attention, want.token_attention)
    assert len(calls) == passes + 2 * len(methods)


@pytest.mark.parametrize("method", mixing.METHODS)
def test_every_registered_method_gives_finite_non_negative_maps_of_the_batch_shape(tiny_model_dirs, method):
    loaded = load_model(tiny_model_dirs["roberta"], device="cpu")
    check_mixing_method(loaded, batch_inputs(loaded), method)


class UniformMixing(mixing.LayerMethod):
    """A null method, as a new method's file would define it: every real token mixes evenly with all."""

    name = "uniform_for_test"
    reads = frozenset()

    def layer_map(self, model, layer, t, real):
        tokens = real.shape[1]
        return (real[:, None, :].expand(-1, tokens, -1) / real.sum(-1)[:, None, None])[:, None]


@pytest.fixture
def uniform_registered():
    mixing.register(UniformMixing())
    mixing.register(mixing.Rollout("uniform_for_test_rollout", of="uniform_for_test"))
    yield
    mixing.REGISTRY.unregister("uniform_for_test_rollout")
    mixing.REGISTRY.unregister("uniform_for_test")


def test_a_new_method_is_one_registered_class_that_every_path_takes(tiny_model_dirs, uniform_registered):
    names = ("uniform_for_test", "uniform_for_test_rollout")
    assert mixing.METHODS[-1] == names[1] and names[0] in mixing.LAYER_METHODS
    assert mixing.AGGREGATED[names[1]] == names[0] and not mixing.LAYER_METHODS[names[0]]
    loaded = load_model(tiny_model_dirs["bert"], device="cpu")
    inputs = batch_inputs(loaded)
    real = inputs["attention_mask"].float()
    even = real[:, None, :] / real.sum(-1)[:, None, None]
    maps = mixing.mixing_maps(loaded, inputs, names)
    for name in names:  # an even mixing rolled out through the layers stays even
        for m in maps[name]:
            torch.testing.assert_close(m[:, 0], even.expand_as(m[:, 0]))
    assert mixing.MixingMaps(names[1]).heads == 1
    words = mixing.mixing_for(Corpus.from_texts(TEXTS, name="t"), loaded, ("attention", *names))
    assert set(words) == {"attention", *names} and all(len(v) == len(TEXTS) for v in words.values())
    with pytest.raises(ValueError, match="already registered"):
        mixing.register(UniformMixing())


def test_methods_that_read_only_the_weights_do_not_need_a_post_ln_block(tiny_model_dirs):
    loaded = load_model(tiny_model_dirs["bert"], device="cpu")
    inputs = batch_inputs(loaded)
    expected = mixing.mixing_maps(loaded, inputs, ("attention", "rollout", "flow"))
    norm, _ = architectures.layer_norms(loaded.model, 0)
    handle = norm.register_forward_pre_hook(lambda m, args: (args[0] + 1.0,))  # breaks LN(x + W_O ctx + b_O)
    try:
        got = mixing.mixing_maps(loaded, inputs, ("attention", "rollout", "flow"))
        with pytest.raises(UnsupportedArchitectureError, match="post-LN"):
            mixing.mixing_maps(loaded, inputs, ("rollout", "norm"))
    finally:
        handle.remove()
    assert mixing.get_method("rollout").of == "attention"
    for name, maps in expected.items():  # layer 0's weights come before the broken norm
        torch.testing.assert_close(got[name][0], maps[0])
    with pytest.raises(ValueError, match="unknown context-mixing method 'saliency'; choose from attention"):
        mixing.get_method("saliency")


def test_albert_gets_the_weight_only_methods_and_a_reason_for_the_rest(family_model_dirs):
    loaded = load_model(family_model_dirs["albert"], device="cpu")
    inputs = batch_inputs(loaded)
    maps = mixing.mixing_maps(loaded, inputs, ("attention", "rollout", "flow"))
    assert all(len(v) == loaded.num_layers for v in maps.values())
    with pytest.raises(UnsupportedArchitectureError, match="shared_layers"):
        mixing.mixing_maps(loaded, inputs, ("alti",))


def test_unsupported_methods_names_what_albert_cannot_run_and_why(family_model_dirs):
    """Decided from the architecture alone, and in agreement with what mixing_maps refuses."""
    albert = load_model(family_model_dirs["albert"], device="cpu")
    refused = mixing.unsupported_methods(albert)
    assert set(refused) == set(mixing.METHODS) - {"attention", "rollout", "flow"}
    assert all("shared_layers" in reason for reason in refused.values())
    inputs = batch_inputs(albert)
    for method in refused:
        with pytest.raises(UnsupportedArchitectureError, match="shared_layers"):
            mixing.mixing_maps(albert, inputs, (method,))
    assert mixing.unsupported_methods(albert, ["attention", "rollout", "flow"]) == {}
    assert list(mixing.unsupported_methods(albert, ["value_zeroing_rollout", "attention"])) == ["value_zeroing_rollout"]
    with pytest.raises(ValueError, match="unknown"):
        mixing.unsupported_methods(albert, ["no such method"])


@pytest.mark.parametrize("family", ("bert", *PART_FAMILIES))
def test_unsupported_methods_is_empty_where_every_method_runs(family, family_model_dirs):
    """Every method runs on these families but DecompX on ModernBERT, whose feed-forward block is gated."""
    refused = mixing.unsupported_methods(load_model(family_model_dirs[family], device="cpu"))
    assert list(refused) == (["decompx"] if family == "modernbert" else [])
