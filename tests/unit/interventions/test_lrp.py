"""AttnLRP and CP-LRP (bertology_utils.interventions.lrp): each rule against a hand computation, conservation on a
tiny classifier of every family, and the references' contract.

Conservation is checked in float64 on every relevance source the rules leave: the word-piece embeddings (the
tokens), the other embedding tables (positions, segments, DeBERTa's and MPNet's relative positions), every bias,
and (AttnLRP) what each softmax's dropped bias term takes. Their sum is the target logit to ``CONSERVATION``
relative (observed: 1e-15). ModernBERT's eager attention takes its softmax in float32 whatever the model's
dtype, so its AttnLRP relevance passes through float32 once: ``MODERNBERT_ATTNLRP`` there (observed: 1e-8).
With every bias zero the tokens alone do not carry the logit: positions, segments and (AttnLRP) the softmaxes
still take shares. With the position and segment tables zeroed too, CP-LRP's token relevances alone sum to the
logit, and AttnLRP's with the softmaxes' shares, to the same tolerances. No family is skipped: every tiny family's forward uses only operations the rules handle. The float64 checks run
one item per batch: ModernBERT's float64 forward gives NaN logits for padded items (with or without the rules).
"""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from contracts import check_reference
from test_attribution import classifier, corpus, one_batch
from tiny_models import ALL_FAMILIES
from transformers.activations import NewGELUActivation

from bertology_utils.interventions import attribution, references
from bertology_utils.interventions.attribution import input_x_gradient, predicted_labels
from bertology_utils.interventions.lrp import CPLRP, LRP_VARIANTS, AttnLRP, LRPRules, lrp_relevance, lrp_rules
from bertology_utils.interventions.objectives import token_batches

#: |sum of relevances - logit| / max(1, |logit|) in float64.
CONSERVATION = 1e-12
#: the same for ModernBERT under AttnLRP, whose softmax runs in float32 (module docstring).
MODERNBERT_ATTNLRP = 1e-6


def tolerance(family: str, variant: str) -> float:
    return MODERNBERT_ATTNLRP if (family, variant) == ("modernbert", "attnlrp") else CONSERVATION


def float64_classifier(folder, zero_biases: bool = False):
    loaded = classifier(folder, dtype=torch.float64)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, parameter in loaded.model.named_parameters():
            if name.endswith("bias"):
                values = torch.randn(parameter.shape, generator=generator, dtype=torch.float64) * 0.1
                parameter.copy_(torch.zeros_like(parameter) if zero_biases else values)
    return loaded


def embedding_tables(loaded) -> list[torch.nn.Parameter]:
    """The non-word embedding tables: positions, segments, relative positions (none in ModernBERT)."""
    word = loaded.model.get_input_embeddings()
    return [m.weight for m in loaded.model.modules() if isinstance(m, torch.nn.Embedding) and m is not word]


def single_items(loaded, n: int = 4):
    """One item per batch (no padding: see the module docstring)."""
    batches, _ = token_batches(loaded, corpus(n), batch_size=1)
    return batches


@pytest.fixture(scope="module", params=ALL_FAMILIES)
def family(request, family_model_dirs):
    loaded = float64_classifier(family_model_dirs[request.param])
    return request.param, loaded, single_items(loaded)


def relevance(loaded, batches, variant: str = "attnlrp") -> torch.Tensor:
    """Each item's token relevances, concatenated."""
    return torch.cat([lrp_relevance(loaded, batch, variant=variant)[0] for batch in batches])


# --------------------------------------------------------------------------- each rule by hand


def test_layer_norm_rule_treats_the_scale_as_a_constant():
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(3, 6, generator=generator, dtype=torch.float64, requires_grad=True)
    weight, bias, up = (torch.randn(6, generator=generator, dtype=torch.float64) for _ in range(3))
    with lrp_rules(torch.nn.Module()):
        y = F.layer_norm(x, (6,), weight, bias, 1e-5)
        (grad,) = torch.autograd.grad((y * up).sum(), x)
    torch.testing.assert_close(y, F.layer_norm(x, (6,), weight, bias, 1e-5))
    std = (x.detach().var(-1, unbiased=False, keepdim=True) + 1e-5).sqrt()
    upstream = up * weight
    torch.testing.assert_close(grad, (upstream - upstream.mean(-1, keepdim=True)) / std)
    # linear in x once the scale is fixed: the input's relevance is the output's less the bias's
    torch.testing.assert_close((x * grad).sum(-1), ((y - bias) * up).sum(-1))


@pytest.mark.parametrize("function", [F.gelu, torch.tanh, F.silu, F.relu, NewGELUActivation()])
def test_identity_rule_passes_each_element_s_relevance_unchanged(function):
    x = torch.tensor([[-2.0, -0.5, 0.0, 0.3, 1.7]], dtype=torch.float64, requires_grad=True)
    up = torch.tensor([[0.5, -1.0, 2.0, 1.5, -0.25]], dtype=torch.float64)
    # a module runs under its forward hook: its insides (NewGELU's products) do not split the relevance
    host = function if isinstance(function, torch.nn.Module) else torch.nn.Module()
    with lrp_rules(host):
        y = function(x)
        (grad,) = torch.autograd.grad((y * up).sum(), x)
    values, inputs = y.detach(), x.detach()
    nonzero = inputs != 0
    expected = torch.zeros_like(inputs)  # f(x) / x taken as 0 where x is 0
    expected[nonzero] = up[nonzero] * values[nonzero] / inputs[nonzero]
    torch.testing.assert_close(grad, expected)
    torch.testing.assert_close(x * grad, values * up)  # R(x) = R(y), element by element


@pytest.mark.parametrize("product", ["matmul", "bmm", "einsum", "mul", "operator"])
def test_uniform_rule_halves_the_gradient_of_each_factor(product):
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(2, 3, 4, generator=generator, dtype=torch.float64, requires_grad=True)
    shape = (2, 3, 4) if product in ("mul", "operator") else (2, 4, 3)  # element-wise, or a matrix product
    b = torch.randn(shape, generator=generator, dtype=torch.float64, requires_grad=True)
    call = {
        "matmul": torch.matmul,
        "bmm": torch.bmm,
        "einsum": lambda p, q: torch.einsum("bij,bjk->bik", p, q),
        "mul": torch.mul,
        "operator": lambda p, q: p * q,
    }[product]
    out = call(a, b)
    up = torch.randn(out.shape, generator=generator, dtype=torch.float64)
    exact = torch.autograd.grad((out * up).sum(), (a, b))
    with lrp_rules(torch.nn.Module()):
        ruled = torch.autograd.grad((call(a, b) * up).sum(), (a, b))
    for got, want in zip(ruled, exact):
        torch.testing.assert_close(got, want / 2)
    total = (a * ruled[0]).sum() + (b * ruled[1]).sum()
    torch.testing.assert_close(total, (out * up).sum())  # half to each factor, nothing lost
    with lrp_rules(torch.nn.Module()):  # one factor constant: a linear map, the plain gradient
        (linear,) = torch.autograd.grad((call(a, b.detach()) * up).sum(), a)
    torch.testing.assert_close(linear, exact[0])


def test_softmax_rule_is_attnlrp_s_equation_and_records_what_its_bias_takes():
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(3, 5, generator=generator, dtype=torch.float64, requires_grad=True)
    up = torch.randn(3, 5, generator=generator, dtype=torch.float64)
    with lrp_rules(torch.nn.Module(), record=True) as rules:
        s = F.softmax(x, dim=-1)
        (grad,) = torch.autograd.grad((s * up).sum(), x)
    out = s.detach() * up  # R_j
    expected = x.detach() * (out - s.detach() * out.sum(-1, keepdim=True))  # R_i = x_i (R_i - s_i sum_j R_j)
    torch.testing.assert_close(x.detach() * grad, expected)
    (absorbed,) = rules.absorbed
    torch.testing.assert_close(absorbed, out.sum(-1) - expected.sum(-1))
    assert absorbed.abs().min() > 1e-3  # not conservative: the dropped bias term takes a share
    with lrp_rules(torch.nn.Module(), "cp_lrp"):
        assert not F.softmax(x, dim=-1).requires_grad  # CP-LRP: attention weights are constants


def test_unknown_variant_is_refused():
    with pytest.raises(ValueError, match="variant must be one of"):
        LRPRules("lrp_gamma")


# --------------------------------------------------------------------------- conservation, per family


@pytest.mark.parametrize("variant", LRP_VARIANTS)
def test_relevance_of_every_source_adds_up_to_the_logit(family, variant):
    name, loaded, batches = family
    model, word = loaded.model, loaded.model.get_input_embeddings().weight
    sources = [word, *embedding_tables(loaded), *(p for n, p in model.named_parameters() if n.endswith("bias"))]
    for batch in batches:
        label = predicted_labels(loaded, batch)
        tokens = lrp_relevance(loaded, batch, label, variant=variant)
        with lrp_rules(model, variant, record=True) as rules, torch.enable_grad():
            logit = model(**batch.model_inputs()).logits[0, label[0]]
            grads = torch.autograd.grad(logit, sources, allow_unused=True)
        parts = [float((p * g).sum()) for p, g in zip(sources, grads) if g is not None]
        absorbed = sum(float(a.sum()) for a in rules.absorbed)
        assert (variant == "cp_lrp") == (absorbed == 0)
        gap = abs(sum(parts) + absorbed - float(logit)) / max(1.0, abs(float(logit)))
        assert gap <= tolerance(name, variant), (name, gap)
        # the reference's token relevances are the word-embedding table's
        assert float(tokens.sum()) == pytest.approx(parts[0], rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("variant", LRP_VARIANTS)
def test_without_biases_and_position_tables_the_tokens_alone_carry_the_logit(family_model_dirs, variant):
    for name in ALL_FAMILIES:
        loaded = float64_classifier(family_model_dirs[name], zero_biases=True)
        with torch.no_grad():
            for table in embedding_tables(loaded):
                table.zero_()
        for batch in single_items(loaded, 3):
            with lrp_rules(loaded.model, variant, record=True) as rules:
                tokens = input_x_gradient(loaded, batch)
            with torch.no_grad():
                logits = loaded.model(**batch.model_inputs()).logits.double()
            target = float(logits[0].max())  # the predicted class's logit, which input_x_gradient explains
            absorbed = sum(float(a.sum()) for a in rules.absorbed)
            gap = abs(float(tokens.sum()) + absorbed - target) / max(1.0, abs(target))
            assert gap <= tolerance(name, variant), (name, gap)


def test_cp_lrp_is_not_attnlrp(family):
    name, loaded, batches = family
    attn, cp = (relevance(loaded, batches, v) for v in LRP_VARIANTS)
    assert float((attn - cp).abs().max()) > 1e-3 * float(attn.abs().max()), name


def test_relevance_is_deterministic_and_leaves_the_model_as_it_was(family):
    name, loaded, batches = family
    before = {k: v.clone() for k, v in loaded.model.state_dict().items()}
    first, second = (relevance(loaded, batches) for _ in range(2))
    assert torch.equal(first, second), name
    after = loaded.model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert all(p.grad is None for p in loaded.model.parameters())
    assert not loaded.model.training


def test_the_mode_and_hooks_are_removed_when_the_forward_raises(tiny_model_dirs):
    loaded = classifier(tiny_model_dirs["bert"])
    hooks = {m: dict(m._forward_hooks) for m in loaded.model.modules()}
    with pytest.raises(IndexError):
        with lrp_rules(loaded.model):
            loaded.model(input_ids=torch.tensor([[10**6]]))  # beyond the vocabulary
    assert {m: dict(m._forward_hooks) for m in loaded.model.modules()} == hooks
    x = torch.randn(2, 3, requires_grad=True)
    assert type(F.softmax(x, dim=-1).grad_fn).__name__ == "SoftmaxBackward0"  # torch's own again


# --------------------------------------------------------------------------- the references


@pytest.mark.parametrize("reference", [AttnLRP, CPLRP])
def test_lrp_references_meet_the_contract_and_are_opt_in(tiny_model_dirs, reference):
    loaded = classifier(tiny_model_dirs["roberta"])
    check_reference(loaded, one_batch(loaded), reference.name)
    assert references.REFERENCE_REGISTRY[reference.name].variant == reference.variant
    assert reference.name not in references.REFERENCES


def test_word_references_compute_lrp_by_name_only(tiny_model_dirs):
    loaded = classifier(tiny_model_dirs["bert"])
    data = corpus(5)
    default = references.word_references(loaded, data, batch_size=4, steps=4, progress=False)
    named = references.word_references(loaded, data, references=["attnlrp", "cp_lrp"], batch_size=4, progress=False)
    assert list(default.scores) == ["blank_out", "input_x_gradient", "integrated_gradients"]
    assert list(named.scores) == ["attnlrp", "cp_lrp"] and (named.ig_relative_gap, named.ig_panels) == (0, 1)
    batch = one_batch(loaded, data)
    words = attribution.token_to_word_scores(lrp_relevance(loaded, batch), batch).numpy()
    by_index = {item.index: row[: item.n_words] for row, item in zip(words, batch.items)}  # batches sort by length
    for scores, index in zip(named.scores["attnlrp"], sorted(by_index)):
        np.testing.assert_allclose(scores, by_index[index], rtol=1e-5, atol=1e-7)
