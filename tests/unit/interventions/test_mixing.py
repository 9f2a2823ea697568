"""Context-mixing maps on tiny random models of every architecture, each against an independent computation."""

import networkx as nx
import numpy as np
import pytest
import torch
from contracts import check_mixing_method

from bertology_utils.attention.alignment import LEADING_SPECIAL, WORD
from bertology_utils.attention.word_attention import ItemAttention
from bertology_utils.core import architectures
from bertology_utils.core.errors import BertologyError, UnsupportedArchitectureError
from bertology_utils.core.models import load_model
from bertology_utils.data import Corpus
from bertology_utils.interventions import mixing
from bertology_utils.interventions.objectives import token_batches

TEXTS = [
    "The old sailor reads a heavy wooden box near the station .",
    "Hello world !",
    "My neighbour borrowed the morning newspaper in the garden , before breakfast .",
]


def batch_inputs(loaded, texts=TEXTS):
    batches, skipped = token_batches(loaded, Corpus.from_texts(texts, name="t"), batch_size=len(texts))
    assert not skipped and len(batches) == 1
    return batches[0].model_inputs()


@pytest.fixture
def traced(tiny_model_dir):
    loaded = load_model(tiny_model_dir, device="cpu")
    inputs = batch_inputs(loaded)
    return loaded, inputs, mixing.trace(loaded, inputs)


def test_weighted_value_vectors_and_the_output_bias_rebuild_the_attention_output(traced):
    loaded, _, traces = traced
    for layer, t in enumerate(traces):
        vectors = mixing.head_vectors(loaded.model, layer, t.values)
        rebuilt = (
            torch.einsum("bhij,bhjd->bid", t.probs, vectors) + architectures.attention_output(loaded.model, layer).bias
        )
        torch.testing.assert_close(rebuilt, t.dense, atol=1e-5, rtol=1e-5)


def test_value_vectors_are_the_value_projection_of_the_layer_input(traced):
    loaded, _, traces = traced
    for layer, t in enumerate(traces):
        _, _, value = architectures.qkv(loaded.model, layer)
        expected = t.hidden @ value.weight.T + value.bias  # (B, T, H*d)
        heads = t.probs.shape[1]
        torch.testing.assert_close(t.values.transpose(1, 2).reshape(expected.shape), expected, atol=1e-5, rtol=1e-5)
        assert t.values.shape[1] == heads == architectures.attention_heads(loaded.model, layer)


def test_norm_weighted_attention_is_the_norm_of_each_weighted_transformed_vector(traced):
    loaded, inputs, traces = traced
    maps = mixing.mixing_maps(loaded, inputs, ("norm", "norm_layer"))
    for layer, t in enumerate(traces):
        weight = architectures.attention_output(loaded.model, layer).weight
        heads, d = t.values.shape[1], t.values.shape[-1]
        b, i, j = 2, 3, 5
        per_head = [t.probs[b, h, i, j] * (weight[:, h * d : (h + 1) * d] @ t.values[b, h, j]) for h in range(heads)]
        expected = torch.stack([v.norm() for v in per_head])
        torch.testing.assert_close(maps["norm"][layer][b, :, i, j], expected, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(maps["norm_layer"][layer][b, 0, i, j], sum(per_head).norm(), atol=1e-5, rtol=1e-5)


def test_alti_transformed_vectors_account_for_the_layer_norm_output(traced):
    """sum_j T_i(x_j) + L_i(b_O) + beta = y_i, the attention block's output, to 1e-5 (relative to |y|)."""
    loaded, _, traces = traced
    for layer, t in enumerate(traces):
        norm, _ = architectures.layer_norms(loaded.model, layer)
        bias = architectures.attention_output(loaded.model, layer).bias
        z = t.hidden + t.dense
        sigma = torch.sqrt(z.var(-1, unbiased=False, keepdim=True) + norm.eps)
        bias_part = norm.weight * (bias - bias.mean()) / sigma
        tokens = t.hidden.shape[1]
        total = mixing.transformed_vectors(loaded.model, layer, t, slice(0, tokens)).sum(2) + bias_part + norm.bias
        scale = float(t.normed.abs().max())
        torch.testing.assert_close(total / scale, t.normed / scale, atol=1e-5, rtol=0)


def test_alti_contributions_follow_the_papers_formula(traced):
    loaded, inputs, traces = traced
    real = inputs["attention_mask"].float()
    t = traces[-1]
    layer = len(traces) - 1
    contributions = mixing.alti_contributions(loaded.model, layer, t, real)
    b = 0
    n = int(real[b].sum())
    transformed = mixing.transformed_vectors(loaded.model, layer, t, slice(0, n))[b, :, :n]  # (n, n, D)
    y = t.normed[b, :n]
    raw = (y.abs().sum(-1)[:, None] - (y[:, None] - transformed).abs().sum(-1)).clamp_min(0)
    torch.testing.assert_close(contributions[b, :n, :n], raw / raw.sum(-1, keepdim=True), atol=1e-5, rtol=1e-5)
    assert torch.all(contributions[b, :, n:] == 0)


def rollout_reference(probs, n):
    """Abnar & Zuidema's rollout written out for one item with numpy (their recipe, loop form)."""
    out = None
    for p in probs:
        a = p[:, :n, :n].mean(0) + np.eye(n)  # 0.5 A + 0.5 I up to a factor the renormalisation removes
        a = a / a.sum(-1, keepdims=True)
        out = a if out is None else a @ out
    return out


def test_rollout_rows_sum_to_one_and_match_the_reference(traced):
    loaded, inputs, traces = traced
    maps = mixing.mixing_maps(loaded, inputs, ("rollout",))["rollout"]
    real = inputs["attention_mask"].bool()
    for b in range(real.shape[0]):
        n = int(real[b].sum())
        expected = rollout_reference([t.probs[b].double().numpy() for t in traces], n)
        np.testing.assert_allclose(maps[-1][b, 0, :n, :n].double().numpy(), expected, atol=1e-5)
        torch.testing.assert_close(maps[-1][b, 0, :n].sum(-1), torch.ones(n), atol=1e-5, rtol=0)


def networkx_flow(mixing_matrices, layer, i, j):
    graph = nx.DiGraph()
    tokens = mixing_matrices.shape[-1]
    for k in range(layer + 1):
        for a in range(tokens):  # receiving token at layer k+1
            for c in range(tokens):  # input token at layer k
                if mixing_matrices[k, a, c] > 0:
                    graph.add_edge((k, c), (k + 1, a), capacity=float(mixing_matrices[k, a, c]))
    return nx.maximum_flow_value(graph, (0, j), (layer + 1, i))


def test_attention_flow_equals_networkx_max_flow_on_small_graphs():
    rng = np.random.default_rng(0)
    for tokens, layers in ((3, 2), (4, 3), (5, 2)):
        probs = torch.from_numpy(rng.dirichlet(np.ones(tokens), size=(layers, 1, 2, tokens))).float()
        real = torch.ones(1, tokens)
        capacities = torch.stack([mixing.residual_attention(p, real)[0] for p in probs]).double().numpy()
        flow = mixing.attention_flow(capacities)
        for layer in range(layers):
            raw = np.array([[networkx_flow(capacities, layer, i, j) for j in range(tokens)] for i in range(tokens)])
            np.testing.assert_allclose(flow[layer], raw / raw.sum(-1, keepdims=True), atol=1e-5)


def test_flow_rows_and_padding(traced):
    loaded, inputs, _ = traced
    full = mixing.mixing_maps(loaded, inputs, ("flow",))["flow"]
    cls_only = mixing.mixing_maps(loaded, inputs, ("flow",), flow_rows=[0])["flow"]
    real = inputs["attention_mask"].bool()
    for layer in range(len(full)):
        torch.testing.assert_close(cls_only[layer][:, 0, 0], full[layer][:, 0, 0])
        assert torch.all(cls_only[layer][:, 0, 1:] == 0)
        for b in range(real.shape[0]):
            n = int(real[b].sum())
            torch.testing.assert_close(full[layer][b, 0, :n].sum(-1), torch.ones(n), atol=1e-5, rtol=0)
            assert torch.all(full[layer][b, 0, n:] == 0) and torch.all(full[layer][b, 0, :, n:] == 0)


def test_flow_refuses_items_over_its_length_limit(tiny_model_dirs):
    loaded = load_model(tiny_model_dirs["bert"], device="cpu")
    inputs = batch_inputs(loaded)
    with pytest.raises(BertologyError, match="limited to 5 tokens"):
        mixing.mixing_maps(loaded, inputs, ("flow",), flow_max_tokens=5)


def layer_output(model, layer, inputs, zero_token=None):
    """Layer ``layer``'s output for ``inputs`` from a full forward pass, token ``zero_token``'s values zeroed there."""
    _, _, value = architectures.qkv(model, layer)
    kept = {}

    def zero(_m, _a, output):
        output = output.clone()
        output[:, zero_token] = 0
        return output

    def keep(_m, _a, output):
        kept["out"] = output[0] if isinstance(output, tuple) else output

    handles = [architectures.layers(model)[layer].register_forward_hook(keep)]
    if zero_token is not None:
        handles.append(value.register_forward_hook(zero))
    try:
        with torch.no_grad():
            model(**inputs)
    finally:
        for h in handles:
            h.remove()
    return kept["out"][0].double()


def test_value_zeroing_matches_zeroing_each_token_in_a_full_forward_pass(traced):
    loaded, inputs, traces = traced
    real = inputs["attention_mask"].float()
    b = 0
    n = int(real[b].sum())
    one = {k: v[b : b + 1, :n] for k, v in inputs.items()}
    for layer, t in enumerate(traces):
        scores = mixing.value_zeroing(loaded.model, layer, t, real)
        clean = torch.nn.functional.normalize(layer_output(loaded.model, layer, one), dim=-1)
        distance = torch.stack(
            [
                (torch.nn.functional.normalize(layer_output(loaded.model, layer, one, j), dim=-1) - clean)
                .square()
                .sum(-1)
                / 2
                for j in range(n)
            ],
            dim=1,
        )  # (n receiving, n zeroed): 1 - cos
        expected = distance / distance.sum(-1, keepdim=True)
        torch.testing.assert_close(scores[b, :n, :n].double(), expected, atol=1e-4, rtol=1e-3)
        assert torch.all(scores[b, :, n:] == 0)


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


def test_a_model_that_is_not_post_ln_is_refused(tiny_model_dirs):
    loaded = load_model(tiny_model_dirs["bert"], device="cpu")
    norm, _ = architectures.layer_norms(loaded.model, 0)
    handle = norm.register_forward_pre_hook(lambda m, args: (args[0] + 1.0,))
    try:
        with pytest.raises(UnsupportedArchitectureError, match="post-LN"):
            mixing.trace(loaded, batch_inputs(loaded))
    finally:
        handle.remove()


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


def synthetic_item(attribution_by_layer, kinds):
    layers, words = len(attribution_by_layer), len(kinds)
    attention = np.zeros((layers, 2, words, words), dtype=np.float32)
    attention[:, :, 0, :] = np.asarray(attribution_by_layer)[:, None, :]
    return ItemAttention(
        0, "s", tuple(f"w{i}" for i in range(words)), np.asarray(kinds), np.zeros(words), attention, words
    )


def test_faithfulness_ranks_words_by_the_leading_token_row():
    kinds = [LEADING_SPECIAL, WORD, WORD, WORD, WORD, 2]
    reference = np.array([np.nan, 0.1, -0.4, 0.3, 0.2, np.nan])  # |.|: 0.1 < 0.2 < 0.3 < 0.4
    same = [0, 1, 4, 3, 2, 9]
    reverse = [0, 4, 1, 2, 3, 9]
    item = synthetic_item([same, reverse], kinds)
    table = mixing.faithfulness({"m": [item]}, {"ref": [reference]})
    assert table.spearman.tolist() == pytest.approx([1.0, -1.0])
    summary = mixing.faithfulness_summary(table)
    assert summary["count"].tolist() == [1, 1] and summary.layer.tolist() == [1, 2]
    signed = mixing.faithfulness({"m": [item]}, {"ref": [reference]}, absolute=False)
    assert signed.spearman.iloc[0] == pytest.approx(-0.2)


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


# --------------------------------------------------------------------------- the registry: one method, one file


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


# --------------------------------------------------------------------------- the other families: pre-LN, fused qkv, DeBERTa

#: Families whose layers' parts the methods read; ALBERT shares one layer's weights across depth.
PART_FAMILIES = ("xlm-roberta", "camembert", "deberta-v2", "modernbert")


@pytest.fixture(params=PART_FAMILIES)
def family_traced(request, family_model_dirs):
    loaded = load_model(family_model_dirs[request.param], device="cpu")
    inputs = batch_inputs(loaded)
    return loaded, inputs, mixing.trace(loaded, inputs)


def test_weighted_value_vectors_rebuild_the_attention_output_on_every_family(family_traced):
    loaded, _, traces = family_traced
    for layer, t in enumerate(traces):
        bias = architectures.attention_output(loaded.model, layer).bias
        rebuilt = torch.einsum("bhij,bhjd->bid", t.probs, mixing.head_vectors(loaded.model, layer, t.values))
        torch.testing.assert_close(rebuilt + (0 if bias is None else bias), t.dense, atol=1e-5, rtol=1e-5)


def test_alti_vectors_rebuild_the_attention_blocks_output_pre_ln_and_post_ln(family_traced):
    """Pre-LN (ModernBERT): sum_j T_i(x_j) + b_O = x_i + W_O ctx_i + b_O; post-LN as on the other models."""
    loaded, _, traces = family_traced
    pre_ln = architectures.is_pre_layer_norm(loaded.model)
    assert pre_ln == (loaded.model.config.model_type == "modernbert")
    for layer, t in enumerate(traces):
        bias = architectures.attention_output(loaded.model, layer).bias
        bias = torch.zeros_like(t.hidden[0, 0]) if bias is None else bias
        tokens = t.hidden.shape[1]
        summed = mixing.transformed_vectors(loaded.model, layer, t, slice(0, tokens)).sum(2)
        if pre_ln:
            torch.testing.assert_close(summed + bias, t.hidden + t.dense, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(t.normed, t.hidden + t.dense)
        else:
            norm, _ = architectures.layer_norms(loaded.model, layer)
            z = t.hidden + t.dense
            sigma = torch.sqrt(z.var(-1, unbiased=False, keepdim=True) + norm.eps)
            total = summed + norm.weight * (bias - bias.mean()) / sigma + norm.bias
            scale = float(t.normed.abs().max())
            torch.testing.assert_close(total / scale, t.normed / scale, atol=1e-5, rtol=0)


def test_value_zeroing_on_every_family_equals_zeroing_in_a_full_forward_pass(family_traced):
    """One item alone (DeBERTa's batch-independent relative positions must not be repeated), fused or not."""
    loaded, inputs, _ = family_traced
    n = int(inputs["attention_mask"][0].sum())
    one = {k: v[:1, :n] for k, v in inputs.items()}
    traces = mixing.trace(loaded, one)
    fused = architectures.fused_qkv(loaded.model, 0) is not None

    def output(layer, zero_token=None):
        kept = {}

        def zero(_m, _a, out):
            out = out.clone()
            out[:, zero_token, (2 * out.shape[-1] // 3 if fused else 0) :] = 0
            return out

        handles = [architectures.layers(loaded.model)[layer].register_forward_hook(lambda m, a, o: kept.update(o=o))]
        if zero_token is not None:
            handles.append(mixing.base.value_projection(loaded.model, layer).register_forward_hook(zero))
        try:
            with torch.no_grad():
                loaded.model(**one)
        finally:
            for h in handles:
                h.remove()
        out = kept["o"][0] if isinstance(kept["o"], tuple) else kept["o"]
        return torch.nn.functional.normalize(out[0].double(), dim=-1)

    for layer, t in enumerate(traces):
        scores = mixing.value_zeroing(loaded.model, layer, t, one["attention_mask"].float())
        clean = output(layer)
        distance = torch.stack([(output(layer, j) - clean).square().sum(-1) / 2 for j in range(n)], dim=1)
        torch.testing.assert_close(scores[0].double(), distance / distance.sum(-1, keepdim=True), atol=1e-4, rtol=1e-3)


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
    assert mixing.unsupported_methods(load_model(family_model_dirs[family], device="cpu")) == {}
