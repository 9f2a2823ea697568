"""The edit point in every attention layer: exact when idle, always restored, gates and mass moves correct."""

import contextlib
import copy
import dataclasses
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from bertology_utils.core import architectures, models
from bertology_utils.core.architectures import qkv, self_attention_modules
from bertology_utils.core.determinism import host_dropout
from bertology_utils.core.errors import ModelNotAvailableError, UnsupportedArchitectureError
from bertology_utils.core.models import load_model
from bertology_utils.interventions.ablations import (
    ablate_matched_random,
    ablate_tokens,
    move_matched_mass,
    negative_share,
    remove_attention_to,
)
from bertology_utils.interventions.editing import (
    capture_attention,
    classifier_inference,
    edit_attention,
    first_token_readout,
    gate_heads,
)

TEXTS = ["Hello world, how are you today?", "A short one."]


@pytest.fixture(scope="module")
def loaded_models(tiny_model_dirs):
    return {arch: load_model(folder) for arch, folder in tiny_model_dirs.items()}


def _inputs(loaded):
    return loaded.tokenizer(TEXTS, return_tensors="pt", padding=True)


def _run(loaded, inputs):
    with torch.no_grad():
        out = loaded.model(**inputs, output_attentions=True)
    return out.last_hidden_state, out.attentions


def _hook_counts(model):
    return [(len(m._forward_hooks), len(m._forward_pre_hooks)) for m in model.modules()]


@pytest.mark.parametrize("arch", ["bert", "roberta", "distilbert", "electra", "mpnet"])
def test_idle_edit_point_is_exact_and_the_model_is_restored(loaded_models, arch):
    loaded = loaded_models[arch]
    inputs = _inputs(loaded)
    before_hidden, before_att = _run(loaded, inputs)
    implementation, hooks = loaded.model.config._attn_implementation, _hook_counts(loaded.model)
    with edit_attention(loaded, lambda layer, probs: None), capture_attention(loaded) as captured:
        during_hidden, during_att = _run(loaded, inputs)
        assert len(captured.probs) == loaded.num_layers
        # The captured tensors are the very ones the model returned (and multiplied with the values).
        assert all(p is a for p, a in zip(captured.probs, during_att))
    after_hidden, after_att = _run(loaded, inputs)
    assert torch.equal(before_hidden, during_hidden) and torch.equal(before_hidden, after_hidden)
    assert all(torch.equal(a, b) and torch.equal(a, c) for a, b, c in zip(before_att, during_att, after_att))
    assert loaded.model.config._attn_implementation == implementation
    assert _hook_counts(loaded.model) == hooks
    assert not any(hasattr(m, "_bertology_edit_state") for m in loaded.model.modules())


def test_model_is_restored_after_an_exception(loaded_models):
    loaded = loaded_models["bert"]
    inputs = _inputs(loaded)
    before, _ = _run(loaded, inputs)
    with pytest.raises(RuntimeError, match="boom"):
        with edit_attention(loaded, lambda layer, probs: probs * 0):
            changed, _ = _run(loaded, inputs)
            assert not torch.equal(before, changed)
            raise RuntimeError("boom")
    after, _ = _run(loaded, inputs)
    assert torch.equal(before, after)
    assert loaded.model.config._attn_implementation == "eager"


def test_nested_edits_apply_outer_first(loaded_models):
    loaded = loaded_models["distilbert"]
    seen = []
    with edit_attention(loaded, lambda layer, probs: probs * 2):
        with edit_attention(loaded, lambda layer, probs: seen.append(float(probs.sum(-1).max())) or None):
            _run(loaded, _inputs(loaded))
    assert seen and all(abs(s - 2.0) < 1e-5 for s in seen)


@pytest.mark.parametrize("arch", ["bert", "roberta", "distilbert", "electra", "mpnet"])
def test_gates_of_one_change_nothing_and_zero_removes_the_head(loaded_models, arch):
    loaded = loaded_models[arch]
    inputs = _inputs(loaded)
    before, _ = _run(loaded, inputs)
    with gate_heads(loaded, torch.ones(loaded.num_layers, loaded.num_heads)):
        same, _ = _run(loaded, inputs)
    assert torch.equal(before, same)

    layer, head = loaded.num_layers - 1, loaded.num_heads - 1
    gates = torch.ones(loaded.num_layers, loaded.num_heads)
    gates[layer, head] = 0
    with gate_heads(loaded, gates):
        gated, _ = _run(loaded, inputs)
    # The same head removed by hand: zero its rows of the value projection (weights and bias).
    twin = copy.deepcopy(loaded)
    value = qkv(twin.model, layer)[2]
    size = value.out_features // loaded.num_heads
    with torch.no_grad():
        value.weight[head * size : (head + 1) * size] = 0
        value.bias[head * size : (head + 1) * size] = 0
    removed, _ = _run(twin, inputs)
    assert not torch.allclose(before, gated)
    torch.testing.assert_close(gated, removed, rtol=1e-5, atol=1e-6)


def test_gate_gradient_matches_finite_differences(loaded_models):
    loaded = copy.deepcopy(loaded_models["bert"])
    loaded.model.double()
    inputs = _inputs(loaded)
    # A fixed random read-out: LayerNorm makes the hidden states' own norm nearly constant.
    readout = torch.randn(loaded.config.hidden_size, generator=torch.Generator().manual_seed(0), dtype=torch.float64)

    def loss(gates):
        with gate_heads(loaded, gates):
            return (loaded.model(**inputs).last_hidden_state @ readout).pow(2).mean()

    gates = torch.ones(loaded.num_layers, loaded.num_heads, dtype=torch.float64, requires_grad=True)
    loss(gates).backward()
    eps = 1e-6
    for layer, head in [(0, 0), (loaded.num_layers - 1, loaded.num_heads - 1)]:
        bump = torch.zeros_like(gates)
        bump[layer, head] = eps
        with torch.no_grad():
            estimate = (loss(gates.detach() + bump) - loss(gates.detach() - bump)) / (2 * eps)
        assert float(gates.grad[layer, head]) == pytest.approx(float(estimate), rel=1e-5, abs=1e-10)


def _probs(seed=0, shape=(2, 3, 5, 5)):
    generator = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(shape, generator=generator, dtype=torch.float64) * 2, dim=-1)


def test_remove_attention_to():
    probs = _probs()
    targets = torch.zeros(2, 5, dtype=torch.bool)
    targets[0, 4] = True  # item 1 has no target
    zero = remove_attention_to(probs, targets, "zero")
    renorm = remove_attention_to(probs, targets, "renormalise")
    assert torch.equal(zero[1], probs[1]) and torch.equal(renorm[1], probs[1])  # nothing to remove: bit for bit
    assert torch.all(zero[0, ..., 4] == 0) and torch.all(renorm[0, ..., 4] == 0)
    torch.testing.assert_close(zero[0].sum(-1), 1 - probs[0, ..., 4])
    torch.testing.assert_close(renorm.sum(-1), torch.ones(2, 3, 5, dtype=torch.float64))
    # Renormalising = masking the target out of the softmax.
    torch.testing.assert_close(renorm[0, ..., :4], torch.softmax(probs[0, ..., :4].log(), dim=-1))
    with pytest.raises(ValueError):
        remove_attention_to(probs, targets, "scatter")
    # A row with (almost) all its attention on the target stays finite (float32, as models run).
    peaked = torch.tensor([[[[1 - 1e-7, 5e-8, 5e-8], [1.0, 0.0, 0.0]]]])
    first = torch.tensor([[True, False, False]])
    out = remove_attention_to(peaked, first, "renormalise")
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out[0, 0, 0], torch.tensor([0.0, 0.5, 0.5]))
    assert torch.equal(out[0, 0, 1], torch.zeros(3))  # nothing left: the row stays empty


def test_move_matched_mass_moves_the_same_mass():
    probs = _probs(1)
    reference = torch.zeros(2, 5, dtype=torch.bool)
    reference[:, 4] = True
    token = torch.tensor([1, 2])
    mass = probs[..., 4]
    zero = move_matched_mass(probs, reference, token, "zero")
    renorm = move_matched_mass(probs, reference, token, "renormalise")
    for b, t in enumerate(token):
        torch.testing.assert_close(zero[b, ..., t], probs[b, ..., t] - mass[b])
        torch.testing.assert_close(renorm[b, ..., t], probs[b, ..., t] - mass[b])
    torch.testing.assert_close(zero.sum(-1), 1 - mass)
    torch.testing.assert_close(renorm.sum(-1), torch.ones_like(mass))
    expected = (probs[torch.arange(2), :, :, token] < mass).double().mean((1, 2))
    torch.testing.assert_close(negative_share(probs, reference, token), expected)
    # No reference mass: nothing moves.
    none = torch.zeros_like(reference)
    torch.testing.assert_close(move_matched_mass(probs, none, token, "renormalise"), probs)


@pytest.mark.parametrize("arch", ["bert", "mpnet"])
def test_ablation_of_nothing_changes_nothing(loaded_models, arch):
    loaded = loaded_models[arch]
    inputs = _inputs(loaded)
    before, _ = _run(loaded, inputs)
    nothing = torch.zeros_like(inputs["attention_mask"], dtype=torch.bool)
    for mode in ("zero", "renormalise"):
        with ablate_tokens(loaded, nothing, None, mode):
            after, _ = _run(loaded, inputs)
        assert torch.equal(before, after)
        with ablate_matched_random(loaded, nothing, torch.tensor([1, 1]), None, mode):
            control, _ = _run(loaded, inputs)
        assert torch.equal(before, control)


def test_ablation_touches_only_the_chosen_layer(loaded_models):
    loaded = loaded_models["roberta"]
    inputs = _inputs(loaded)
    _, before = _run(loaded, inputs)
    targets = inputs["input_ids"] == loaded.tokenizer.sep_token_id
    with ablate_tokens(loaded, targets, [1], "zero"):
        _, after = _run(loaded, inputs)
    assert torch.equal(before[0], after[0])
    assert torch.all(after[1][..., targets[0]][0] == 0)
    assert not torch.equal(before[2], after[2])  # later layers see the change


class _InlineSelfAttention(nn.Module):
    def forward(self, x):
        return torch.softmax(x @ x.transpose(-1, -2), -1) @ x


class _InlineEncoder(nn.Module):
    """Laid out like BERT (encoder.layer[i].attention.self), with a softmax no edit point reaches."""

    def __init__(self):
        super().__init__()
        self.config = SimpleNamespace(model_type="inline-softmax", num_hidden_layers=1, num_attention_heads=1)
        layer = nn.Module()
        layer.attention = nn.Module()
        layer.attention.self = _InlineSelfAttention()
        self.encoder = nn.Module()
        self.encoder.layer = nn.ModuleList([layer])


def test_unsupported_architectures_raise_clearly():
    with pytest.raises(UnsupportedArchitectureError, match="no model type"):
        self_attention_modules(nn.Linear(2, 2))
    with pytest.raises(UnsupportedArchitectureError, match=r"'inline-softmax'\) is not a registered"):
        with edit_attention(_InlineEncoder(), lambda layer, probs: None):
            pass
    # Registered without a dropout edit point, but not an AttentionInterface model: refused by name.
    bert = architectures.arch_spec(SimpleNamespace(model_type="bert"))
    with architectures.ARCHITECTURE_REGISTRY.registered(dataclasses.replace(bert, model_type="inline-softmax")):
        with pytest.raises(ModelNotAvailableError, match="AttentionInterface"):
            with edit_attention(_InlineEncoder(), lambda layer, probs: None):
                pass


def test_gate_shape_is_checked(loaded_models):
    loaded = loaded_models["electra"]
    with pytest.raises(ValueError, match="layers"):
        with gate_heads(loaded, torch.ones(loaded.num_layers + 1, loaded.num_heads)):
            pass


@pytest.mark.parametrize("arch", ["bert", "roberta", "distilbert", "electra", "mpnet"])
def test_first_token_readout_keeps_the_logits_and_runs_the_last_block_on_one_token(tiny_model_dirs, arch):
    torch.manual_seed(0)
    loaded = load_model(tiny_model_dirs[arch], head="sequence-classification", num_labels=3, device="cpu")
    model, inputs = loaded.model, _inputs(loaded)
    hooks = _hook_counts(model)
    _, last_norm = architectures.layer_norms(model, loaded.num_layers - 1)
    widths = []
    handle = last_norm.register_forward_hook(lambda _m, _a, out: widths.append(out.shape[1]))
    try:
        model.train()  # classifier_inference switches dropout off, and back on after
        with classifier_inference(model) as applies, torch.no_grad():
            assert applies and not model.training
            fast = model(**inputs).logits
        assert model.training
        model.eval()
        with torch.no_grad():
            full = model(**inputs).logits
    finally:
        handle.remove()
    assert widths == [1, inputs["input_ids"].shape[1]]  # the feed-forward block ran on one token, then on all
    torch.testing.assert_close(fast, full, atol=1e-5, rtol=1e-5)
    assert _hook_counts(model) == hooks


@pytest.mark.parametrize("arch", ["bert", "roberta", "distilbert", "electra", "mpnet"])
def test_first_token_readout_in_training_draws_the_full_passs_dropout_masks(tiny_model_dirs, arch):
    torch.manual_seed(0)
    loaded = load_model(tiny_model_dirs[arch], head="sequence-classification", num_labels=3, device="cpu")
    model, inputs, labels = loaded.model, _inputs(loaded), torch.tensor([0, 2])
    model.train()

    def step(seed, readout):
        model.zero_grad(set_to_none=True)
        torch.manual_seed(seed)
        with first_token_readout(model) if readout else contextlib.nullcontext():
            loss = model(**inputs, labels=labels).loss
        loss.backward()
        grads = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
        return loss.detach(), grads, torch.rand(4)  # the last: where the random stream stands after the pass

    full, fast, other = step(5, False), step(5, True), step(6, True)
    assert not torch.allclose(fast[0], other[0])  # dropout is on: another seed, another loss
    torch.testing.assert_close(fast[0], full[0], atol=1e-6, rtol=1e-6)  # the same masks ...
    torch.testing.assert_close(fast[1], full[1], atol=1e-6, rtol=1e-5)  # ... and gradients
    assert torch.equal(fast[2], full[2])  # as many random numbers drawn
    assert all("forward" not in vars(m) for m in model.modules())  # the dropouts are themselves again


def test_first_token_readout_under_host_dropout_draws_the_full_passs_masks(tiny_model_dirs):
    torch.manual_seed(0)
    loaded = load_model(tiny_model_dirs["bert"], head="sequence-classification", num_labels=3, device="cpu")
    model, inputs, labels = loaded.model, _inputs(loaded), torch.tensor([0, 2])
    model.train()

    def loss(seed, readout, global_seed=0):
        torch.manual_seed(global_seed)
        generator = torch.Generator().manual_seed(seed)
        with host_dropout(generator), first_token_readout(model) if readout else contextlib.nullcontext():
            value = model(**inputs, labels=labels).loss.detach()
        return value, torch.rand(4, generator=generator)  # where the generator stands after the pass

    full, fast = loss(5, False), loss(5, True)
    torch.testing.assert_close(fast[0], full[0], atol=1e-6, rtol=1e-6)
    assert torch.equal(fast[1], full[1])
    assert torch.equal(loss(5, True, global_seed=9)[0], fast[0])  # torch's own generators play no part
    assert not torch.allclose(loss(6, True)[0], fast[0])


def test_first_token_readout_leaves_other_models_alone(loaded_models):
    encoder = loaded_models["bert"].model  # no classification head: every position is an output
    with first_token_readout(encoder) as applies:
        assert not applies
        hidden, _ = _run(loaded_models["bert"], _inputs(loaded_models["bert"]))
    assert hidden.shape[1] == _inputs(loaded_models["bert"])["input_ids"].shape[1]
    # A classifier whose registered spec does not promise a first-token head, or whose last layer is shared.
    classifier = SimpleNamespace(model_type="bert")
    spec = architectures.arch_spec(classifier)

    class BertForSequenceClassification(nn.Module):  # the name is what marks a sequence classifier
        def __init__(self, shared: bool):
            super().__init__()
            self.config = SimpleNamespace(model_type="bert")
            self.encoder = nn.Module()
            first = nn.Linear(2, 2)
            self.encoder.layer = nn.ModuleList([first, first if shared else nn.Linear(2, 2)])

    no_first_token_head = dataclasses.replace(spec, classifier_reads_first_token=False)
    with architectures.ARCHITECTURE_REGISTRY.registered(no_first_token_head, replace=True):
        with first_token_readout(BertForSequenceClassification(shared=False)) as applies:
            assert not applies
    with first_token_readout(BertForSequenceClassification(shared=True)) as applies:
        assert not applies


def test_classifier_inference_runs_a_loaded_models_precision(tiny_model_dirs, monkeypatch):
    torch.manual_seed(0)
    loaded = load_model(tiny_model_dirs["bert"], head="sequence-classification", num_labels=3, device="cpu")
    inputs = _inputs(loaded)
    with classifier_inference(loaded), torch.no_grad():
        exact = loaded.model(**inputs).logits
    loaded.precision = "bf16"
    with classifier_inference(loaded), torch.no_grad():
        fast = loaded.model(**inputs).logits
    assert fast.dtype == torch.float32  # the head's bfloat16 product is handed out as float32
    gap = (fast - exact).abs().max()
    assert 0 < gap < 0.05 * exact.abs().max()
    with classifier_inference(loaded.model), torch.no_grad():  # a bare module has no precision: float32
        torch.testing.assert_close(loaded.model(**inputs).logits, exact)
    monkeypatch.setattr(models, "_native_bf16", lambda device: False)
    with pytest.warns(UserWarning, match="no bfloat16 kernels"), classifier_inference(loaded), torch.no_grad():
        loaded.model(**inputs)
    loaded.precision = "fp16"
    with pytest.raises(ValueError, match="precision must be one of fp32, bf16"), classifier_inference(loaded):
        pass
    with pytest.raises(ValueError, match="precision must be one of"):
        load_model(tiny_model_dirs["bert"], precision="half")
