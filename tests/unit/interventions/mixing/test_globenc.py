"""GlobEnc (Modarressi et al. 2022): its decomposition against the layer's real output, against the authors'
published recipe written out step by step, and its rows.

Sentences: ``mixing_checks.TEXTS`` (three, padded into one batch), on tiny random models built offline
(``tiny_models``): BERT, RoBERTa, DistilBERT, DeBERTa-v2 (post-LN) and ModernBERT (pre-LN) for the
decomposition; BERT for the authors' recipe and the rows.
"""

import pytest
import torch
from mixing_checks import TEXTS, batch_inputs, forward_with

from bertology_utils.core import architectures
from bertology_utils.core.errors import UnsupportedArchitectureError
from bertology_utils.core.models import load_model
from bertology_utils.interventions import mixing


def second_sums(model, inputs):
    """Each post-LN layer's output-norm input (normed + FFN(normed)), caught by a hook of the test's own."""
    kept = {}
    norms = [architectures.layer_norms(model, layer)[1] for layer in range(len(architectures.layers(model)))]
    handles = [
        n.register_forward_hook(lambda m, a, o, layer=layer: kept.__setitem__(layer, a[0]))
        for layer, n in enumerate(norms)
    ]
    forward_with(model, inputs, handles)
    return kept


@pytest.mark.parametrize("family", ["bert", "roberta", "distilbert", "deberta-v2", "modernbert"])
def test_the_parts_add_up_to_the_layers_output_less_what_globenc_leaves_out(family, family_model_dirs):
    """Post-LN: sum_j x~_(i<-j) + beta_2 + L2_i(FFN_i + beta_1 + L1_i(b_O)) = the layer's output, L1 and L2 the
    norms' linear parts with their inputs' statistics, FFN_i from a hook of the test on the output norm's input;
    pre-LN (ModernBERT): sum_j x~_(i<-j) + b_O + mlp(mlp_norm(h_i)) = the layer's output, the feed-forward block
    run by the test. To 1e-5 of the output's scale, on every layer and token (padding included)."""
    loaded = load_model(family_model_dirs[family], device="cpu")
    model = loaded.model
    inputs = batch_inputs(loaded)
    traces = mixing.trace(loaded, inputs)
    pre_ln = architectures.is_pre_layer_norm(model)
    assert pre_ln == (family == "modernbert")
    second = None if pre_ln else second_sums(model, inputs)
    for layer, t in enumerate(traces):
        tokens = t.hidden.shape[1]
        summed = mixing.encoder_vectors(model, layer, t, slice(0, tokens)).sum(2)
        bias = architectures.attention_output(model, layer).bias
        bias = torch.zeros_like(t.hidden[0, 0]) if bias is None else bias
        if pre_ln:
            block = architectures.layers(model)[layer]
            with torch.no_grad():
                ffn = block.mlp(block.mlp_norm(t.hidden + t.dense))
            total = summed + bias + ffn
        else:
            first, last = architectures.layer_norms(model, layer)
            z1, z2 = t.hidden + t.dense, second[layer]
            sigma1 = torch.sqrt(z1.var(-1, unbiased=False, keepdim=True) + first.eps)
            sigma2 = torch.sqrt(z2.var(-1, unbiased=False, keepdim=True) + last.eps)
            left_out = (z2 - t.normed) + first.bias + first.weight * (bias - bias.mean()) / sigma1
            total = summed + last.bias + last.weight * (left_out - left_out.mean(-1, keepdim=True)) / sigma2
        scale = float(t.output.abs().max())
        torch.testing.assert_close(total / scale, t.output / scale, atol=1e-5, rtol=0)


def authors_n_enc(bert, input_ids):
    """N_Enc of every layer for one unpadded sentence, written out as the authors' code computes it
    (github.com/mohsenfayyaz/GlobEnc, src/modeling/modeling_bert.py: BertNormOutput.forward, then
    BertLayer.forward's second layer norm), on the BERT modules run by hand; and the layers' outputs."""
    hidden = bert.embeddings(input_ids=input_ids)
    n_enc, outputs = [], []
    for module in bert.encoder.layer:
        attention = module.attention.self
        heads, size = attention.num_attention_heads, attention.attention_head_size

        def split(x, heads=heads, size=size):
            return x.view(*x.shape[:2], heads, size).permute(0, 2, 1, 3)

        query, key = split(attention.query(hidden)), split(attention.key(hidden))
        value_layer = split(attention.value(hidden))
        attention_probs = torch.softmax(query @ key.transpose(-1, -2) / size**0.5, dim=-1)
        context = (attention_probs @ value_layer).permute(0, 2, 1, 3).reshape(hidden.shape)
        dense, norm1 = module.attention.output.dense, module.attention.output.LayerNorm
        pre_ln_states = dense(context) + hidden
        attention_output = norm1(pre_ln_states)
        # BertNormOutput: f(x) per head, weighted, summed over heads, the residual on the diagonal
        transformed_layer = torch.einsum("bhsv,dhv->bhsd", value_layer, dense.weight.view(-1, heads, size))
        weighted_layer = torch.einsum("bhks,bhsd->bhksd", attention_probs, transformed_layer)
        summed_weighted_layer = weighted_layer.sum(dim=1)
        residual = torch.einsum("sk,bsd->bskd", torch.eye(hidden.shape[1]), hidden)
        residual_weighted_layer = summed_weighted_layer + residual
        # the first norm per vector: each vector's own mean, the real input's variance, gamma (no beta)
        mean = pre_ln_states.mean(-1, keepdim=True)
        var = (pre_ln_states - mean).pow(2).mean(-1, keepdim=True).unsqueeze(dim=2)
        each_mean = residual_weighted_layer.mean(-1, keepdim=True)
        normalized_layer = (residual_weighted_layer - each_mean) / (var + norm1.eps) ** 0.5
        post_ln_layer = torch.einsum("bskd,d->bskd", normalized_layer, norm1.weight)
        # BertLayer: the feed-forward block, then the second norm the same way (FFN left out of the vectors)
        norm2 = module.output.LayerNorm
        pre_ln2_states = module.output.dense(module.intermediate(attention_output)) + attention_output
        hidden = norm2(pre_ln2_states)
        each_mean = post_ln_layer.mean(-1, keepdim=True)
        mean = pre_ln2_states.mean(-1, keepdim=True)
        var = (pre_ln2_states - mean).pow(2).mean(-1, keepdim=True).unsqueeze(dim=2)
        normalized_layer = (post_ln_layer - each_mean) / (var + norm2.eps) ** 0.5
        post_ln2_layer = torch.einsum("bskd,d->bskd", normalized_layer, norm2.weight)
        n_enc.append(torch.norm(post_ln2_layer, dim=-1)[0])
        outputs.append(hidden[0])
    return n_enc, outputs


def authors_rollout(n_enc):
    """BertEncoder's output_globenc aggregation and AttentionRollout.compute_joint_attention: the N_Enc
    matrices multiplied as they are, R_l = N_l R_(l-1), nothing added or normalised."""
    out = [n_enc[0]]
    for matrix in n_enc[1:]:
        out.append(matrix @ out[-1])
    return out


def sharpened(model):
    """``model`` in float64 with its layer norms' weights drawn from U(0.2, 2) and its linear weights x 20:
    a random init's near-uniform attention and unit gammas give N_Enc rows of almost equal sums, on which
    rolling out the norms and rolling out rows rescaled first would agree; a trained model's do not."""
    generator = torch.Generator().manual_seed(0)
    model = model.double()
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.weight.copy_(0.2 + 1.8 * torch.rand(module.weight.shape, generator=generator))
            elif isinstance(module, torch.nn.Linear):
                module.weight.mul_(20)
    return model


def test_globenc_matches_the_authors_recipe_on_each_sentence_of_a_padded_batch(tiny_model_dirs):
    """Tiny BERT (2 layers x 4 heads, :func:`sharpened`), the three TEXTS: ``globenc_layer`` of the padded batch
    equals the authors' N_Enc of each sentence alone (1e-9), and ``globenc`` equals their rollout with each row
    rescaled to sum to 1 (their rows are not; their [CLS]-row rank correlations do not see a row's scale), which
    rolling out rows rescaled first does not (off by over 1e-3)."""
    loaded = load_model(tiny_model_dirs["bert"], device="cpu")
    model = sharpened(loaded.model)
    inputs = batch_inputs(loaded)
    maps = mixing.mixing_maps(model, inputs, ("globenc_layer", "globenc"))
    real = inputs["attention_mask"].bool()
    bert = architectures.base_model(model)
    for b in range(len(TEXTS)):
        n = int(real[b].sum())
        ids = inputs["input_ids"][b : b + 1, :n]
        with torch.no_grad():
            n_enc, outputs = authors_n_enc(bert, ids)
            expected_last = bert(input_ids=ids).last_hidden_state[0]
        torch.testing.assert_close(outputs[-1], expected_last, atol=1e-9, rtol=0)  # the hand-run layers are BERT's
        rolled = authors_rollout(n_enc)
        for layer, (local, total) in enumerate(zip(n_enc, rolled)):
            torch.testing.assert_close(maps["globenc_layer"][layer][b, 0, :n, :n], local, atol=1e-9, rtol=1e-9)
            rows = total / total.sum(-1, keepdim=True)
            torch.testing.assert_close(maps["globenc"][layer][b, 0, :n, :n], rows, atol=1e-9, rtol=1e-9)
        assert (maps["globenc"][-1][b, 0, :, n:] == 0).all() and (maps["globenc_layer"][-1][b, 0, n:] == 0).all()
        rescaled_first = authors_rollout([m / m.sum(-1, keepdim=True) for m in n_enc])[-1]
        assert (rescaled_first - rolled[-1] / rolled[-1].sum(-1, keepdim=True)).abs().max() > 1e-3


def test_the_rollouts_rows_sum_to_one_and_the_layers_are_norms(tiny_model_dirs):
    """Tiny BERT, the three TEXTS: ``globenc``'s rows of real tokens sum to 1 at every layer, its first layer is
    ``globenc_layer``'s rows rescaled; ``globenc_layer``'s rows are norms (sums far from 1), as in the paper."""
    loaded = load_model(tiny_model_dirs["bert"], device="cpu")
    inputs = batch_inputs(loaded)
    maps = mixing.mixing_maps(loaded, inputs, ("globenc_layer", "globenc"))
    real = inputs["attention_mask"].bool()
    for m in maps["globenc"]:
        sums = m[:, 0].sum(-1)[real]
        torch.testing.assert_close(sums, torch.ones_like(sums))
    first = maps["globenc_layer"][0][:, 0]
    torch.testing.assert_close(maps["globenc"][0][:, 0], first / first.sum(-1, keepdim=True).clamp_min(1e-30))
    assert (first.sum(-1)[real] > 2).all()  # a row sums the norms of E-dimensional parts, not weights


def test_deep_products_of_norms_stay_finite():
    """Products of 200 layers of norms near 40 (40^200 overflows float64) keep each row's ratios: the
    renormalised rollout equals the plain one's rows rescaled, computed on a few layers in float64."""
    torch.manual_seed(0)
    per_layer = [30 + 20 * torch.rand(2, 5, 5, dtype=torch.float32) for _ in range(200)]
    rolled = mixing.aggregate(per_layer, renormalise=True)
    assert all(torch.isfinite(r).all() for r in rolled)
    plain = mixing.aggregate([m.double() for m in per_layer[:6]])[-1]
    torch.testing.assert_close(rolled[5].double(), plain / plain.sum(-1, keepdim=True), atol=1e-6, rtol=1e-5)


def test_a_layer_whose_output_is_not_its_output_norms_is_refused(tiny_model_dirs):
    loaded = load_model(tiny_model_dirs["bert"], device="cpu")
    block = architectures.layers(loaded.model)[0]
    handle = block.register_forward_hook(lambda m, a, o: (o[0] + 1.0, *o[1:]) if isinstance(o, tuple) else o + 1.0)
    try:
        with pytest.raises(UnsupportedArchitectureError, match="output layer norm"):
            mixing.mixing_maps(loaded, batch_inputs(loaded), ("globenc",))
    finally:
        handle.remove()
