"""Model loading: eager attentions, shapes, limits, fingerprints and error messages, on tiny offline models."""

import dataclasses
import json
import shutil
import traceback
from types import SimpleNamespace

import pytest
import torch
import transformers
from tiny_models import ALL_FAMILIES, MAX_POSITIONS, POSITION_OFFSET, TINY_SHAPES, build_tiny_model

from bertology_utils.core import models, settings
from bertology_utils.core.errors import ModelNotAvailableError
from bertology_utils.core.models import (
    LoadedModel,
    check_attentions,
    default_model_path,
    describe_model,
    fast_fp32_products,
    frozen,
    load_model,
    resolve_precision,
)


@pytest.fixture
def tiny(tiny_model_dir):
    return load_model(tiny_model_dir, device="cpu")


def _copy(folder, tmp_path, *, keep_tokenizer=True):
    """A copy of a model folder, optionally without its tokenizer files."""
    target = tmp_path / folder.name
    shutil.copytree(folder, target, ignore=None if keep_tokenizer else shutil.ignore_patterns("tokenizer*"))
    return target


def _attentions(loaded, texts):
    batch = loaded.tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        return batch, loaded.model(**batch, output_attentions=True).attentions


def test_tiny_models_return_eager_attentions(tiny, tiny_model_dir):
    layers, heads = TINY_SHAPES[tiny_model_dir.name]
    assert (tiny.num_layers, tiny.num_heads) == (layers, heads)
    assert tiny.model.config._attn_implementation == "eager"
    assert not tiny.model.training
    batch, attentions = _attentions(tiny, ["the cat sat on the mat", "hello"])
    T = batch["input_ids"].shape[1]
    assert len(attentions) == layers
    for layer in attentions:
        assert layer.shape == (2, heads, T, T)
        torch.testing.assert_close(layer.sum(-1), torch.ones(2, heads, T))


def test_max_tokens_is_the_real_limit(tiny, tiny_model_dir):
    expected = MAX_POSITIONS - POSITION_OFFSET.get(tiny_model_dir.name, 0)
    assert tiny.max_tokens == expected
    word = tiny.tokenizer("hello", add_special_tokens=False)["input_ids"][0]
    ids = lambda n: torch.tensor([[tiny.tokenizer.cls_token_id] + [word] * (n - 2) + [tiny.tokenizer.sep_token_id]])
    with torch.no_grad():
        assert len(tiny.model(input_ids=ids(expected), output_attentions=True).attentions) == tiny.num_layers
        with pytest.raises((RuntimeError, IndexError)):
            tiny.model(input_ids=ids(expected + 1))
    tiny.tokenizer.model_max_length = 10
    assert tiny.max_tokens == 10


def test_pre_split_words_map_back(tiny):
    encoding = tiny.tokenizer(["Hello", "wörld"], is_split_into_words=True)
    word_ids = encoding.word_ids()
    assert word_ids[0] is None and word_ids[-1] is None
    assert sorted({w for w in word_ids if w is not None}) == [0, 1]
    # With a prefix space, byte-level BPE splits the words as it would inside running text.
    assert encoding["input_ids"] == tiny.tokenizer(" Hello wörld")["input_ids"]
    assert tiny.tokenizer.is_fast


def test_special_token_ids(tiny):
    specials = tiny.special_token_ids
    assert {tiny.tokenizer.cls_token_id, tiny.tokenizer.sep_token_id, tiny.tokenizer.pad_token_id} <= specials
    assert tiny.tokenizer.unk_token_id not in specials


def test_fingerprint_stable_and_sensitive(tiny, tiny_model_dir):
    again = load_model(tiny_model_dir, device="cpu")
    assert again.fingerprint() == tiny.fingerprint()
    assert tiny.fingerprint()["num_heads"] == TINY_SHAPES[tiny_model_dir.name][1]
    assert tiny.fingerprint()["transformers_version"] == transformers.__version__
    # Tokenizing with truncation leaves state on the backend; the tokenizer hash must not see it.
    again.tokenizer("a b c d e f", truncation=True, max_length=4)
    with torch.no_grad():
        next(again.model.parameters()).view(-1)[0] += 1.0
    changed = dataclasses.replace(again)  # a fresh instance: the hashes are cached per instance
    assert changed.weights_sha256 != tiny.weights_sha256
    assert changed.tokenizer_sha256 == tiny.tokenizer_sha256


def test_of_keeps_a_loaded_model_and_loads_a_name(tiny_model_dirs):
    loaded = load_model(tiny_model_dirs["bert"], device="cpu")
    assert LoadedModel.of(loaded) is loaded
    again = LoadedModel.of(tiny_model_dirs["bert"])
    assert again is not loaded and again.source == loaded.source


def test_build_is_deterministic(tmp_path):
    first, second, other = (
        load_model(build_tiny_model("bert", tmp_path / name, seed=seed), device="cpu")
        for name, seed in [("a", 0), ("b", 0), ("c", 1)]
    )
    assert first.weights_sha256 == second.weights_sha256 != other.weights_sha256


def test_dtype_and_device(tiny_model_dirs):
    loaded = load_model(tiny_model_dirs["bert"], device="cpu", dtype=torch.bfloat16)
    assert describe_model(loaded)["dtype"] == "bfloat16" and loaded.device == torch.device("cpu")
    assert len(loaded.weights_sha256) == 64
    _, attentions = _attentions(loaded, ["hello world"])
    assert attentions[0].dtype == torch.bfloat16


def test_heads(tiny_model_dirs, tmp_path):
    mlm = load_model(build_tiny_model("bert", tmp_path / "mlm", with_mlm_head=True), head="masked-lm", device="cpu")
    assert mlm.architecture == "BertForMaskedLM" and mlm.num_heads == TINY_SHAPES["bert"][1]
    classifier = load_model(tiny_model_dirs["roberta"], head="sequence-classification", num_labels=3, device="cpu")
    batch = classifier.tokenizer("hello world", return_tensors="pt")
    with torch.no_grad():
        assert classifier.model(**batch).logits.shape == (1, 3)
    with pytest.raises(ValueError, match="head must be one of"):
        load_model(tiny_model_dirs["bert"], head="causal-lm")


def test_describe_model(tiny_model_dirs):
    loaded = load_model(tiny_model_dirs["distilbert"], device="cpu")
    info = describe_model(loaded)
    assert info["architecture"] == "DistilBertModel"
    assert (info["layers"], info["heads"], info["max_tokens"]) == (*TINY_SHAPES["distilbert"], MAX_POSITIONS)
    assert info["parameters"] == sum(p.numel() for p in loaded.model.parameters())
    assert info["device"] == "cpu" and info["source"] == str(tiny_model_dirs["distilbert"])
    assert info["precision"] == "fp32" and info["auto_precision"] == resolve_precision("auto", "cpu")


@pytest.mark.parametrize("key", ["attn_implementation", "_attn_implementation"])
def test_sdpa_in_saved_config_is_overridden(tiny_model_dirs, tmp_path, key):
    folder = _copy(tiny_model_dirs["bert"], tmp_path)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, key: "sdpa"}))
    loaded = load_model(folder, device="cpu")
    assert len(_attentions(loaded, ["hello world"])[1]) == TINY_SHAPES["bert"][0]


def test_default_model_loads_offline(default_model_dir, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert default_model_path() == default_model_dir
    loaded = load_model(device="cpu")
    assert loaded.name == settings.DEFAULT_MODEL and loaded.source == str(default_model_dir)
    assert (loaded.num_layers, loaded.num_heads, loaded.max_tokens) == (6, 12, 512)
    batch, attentions = _attentions(loaded, ["attention is all you need"])
    assert len(attentions) == 6 and attentions[0].shape[1] == 12
    assert load_model(settings.DEFAULT_MODEL, device="cpu").source == loaded.source


def test_unknown_hub_name_offline_is_short_and_clear(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    name = "no-such-org/no-such-model"
    with pytest.raises(ModelNotAvailableError) as info:
        load_model(name)
    message = str(info.value)
    assert name in message and "hf download" in message and len(message) < 400
    # The hub client's error is kept for debugging but not printed above ours.
    assert isinstance(info.value.__context__, OSError)
    assert "".join(traceback.format_exception(info.value)).count("Traceback") == 1


def test_hub_failure_online_names_the_reason(monkeypatch):
    monkeypatch.setattr(settings, "is_offline", lambda: False)

    def refuse(*args, **kwargs):
        raise OSError("connection refused\nlong hub-client detail")

    monkeypatch.setattr(transformers.AutoModel, "from_pretrained", refuse)
    with pytest.raises(ModelNotAvailableError, match=r"'org/model' .*\(connection refused\)\. .*hf download org/model"):
        load_model("org/model")


@pytest.mark.parametrize(
    "case, match",
    [
        ("empty", "no config.json"),
        ("missing", "does not exist"),
        ("file", "is a file"),
        ("no-tokenizer", "tokenizer files"),
        ("unknown-type", "Could not load"),
    ],
)
def test_bad_folders(tiny_model_dirs, tmp_path, case, match):
    paths = {
        "empty": lambda: tmp_path,
        "missing": lambda: tmp_path / "nowhere" / "model",
        "file": lambda: tiny_model_dirs["bert"] / "config.json",
        "no-tokenizer": lambda: _copy(tiny_model_dirs["bert"], tmp_path, keep_tokenizer=False),
        "unknown-type": lambda: (tmp_path / "config.json").write_text('{"model_type": "no-such-type"}') and tmp_path,
    }
    with pytest.raises(ModelNotAvailableError, match=match):
        load_model(paths[case]())


def test_model_without_attentions_is_rejected(tiny_model_dirs, tmp_path, monkeypatch):
    folder = _copy(tiny_model_dirs["bert"], tmp_path)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "_attn_implementation": "sdpa"}))
    # Simulate a model whose attention implementation cannot be switched to eager.
    monkeypatch.setattr(transformers.PreTrainedModel, "set_attn_implementation", lambda self, impl: None)
    with pytest.raises(ModelNotAvailableError, match="sdpa"):
        load_model(folder, device="cpu")


@pytest.mark.parametrize(
    "attentions, match",
    [
        (None, "no attention weights"),
        ((), "no attention weights"),
        ((torch.ones(1, 4, 3, 3),), "for 1 layers, expected 2"),
        ((torch.ones(1, 4, 3, 3), torch.ones(1, 3, 3, 3)), "Layer 1"),
    ],
)
def test_check_attentions(attentions, match):
    with pytest.raises(ModelNotAvailableError, match=match) as info:
        check_attentions(SimpleNamespace(attentions=attentions), num_layers=2, num_heads=4)
    assert "eager" in str(info.value)
    check_attentions(SimpleNamespace(attentions=(torch.ones(1, 4, 3, 3),) * 2), num_layers=2, num_heads=4)


def test_loaded_model_checks_its_own_shape(tiny_model_dirs):
    loaded = load_model(tiny_model_dirs["electra"], device="cpu")
    _, attentions = _attentions(loaded, ["hello world"])
    loaded.check_attentions(SimpleNamespace(attentions=attentions))
    with pytest.raises(ModelNotAvailableError, match="expected 2"):
        loaded.check_attentions(SimpleNamespace(attentions=attentions[:1]))


def test_random_init_copy(tiny_model_dirs):
    from bertology_utils.core.models import random_init

    loaded = load_model(tiny_model_dirs["roberta"])
    copy, again = random_init(loaded, seed=1), random_init(loaded, seed=1)
    assert (copy.num_layers, copy.num_heads) == (loaded.num_layers, loaded.num_heads)
    assert copy.weights_sha256 == again.weights_sha256 != loaded.weights_sha256
    assert copy.tokenizer_sha256 == loaded.tokenizer_sha256 and "random init" in copy.name


def test_fast_fp32_products_set_the_devices_backend_while_any_block_is_open(monkeypatch):
    """bf16 (or auto) on a device with the units: oneDNN's bfloat16 on a CPU, TF32 on CUDA, until the last of
    overlapping blocks (other threads') closes; fp32, or no units, changes nothing."""
    cpu, cuda = torch.backends.mkldnn.matmul, torch.backends.cuda.matmul
    before = (cpu.fp32_precision, cuda.fp32_precision)
    monkeypatch.setattr(models, "_native_bf16", lambda device: False)
    with fast_fp32_products("bf16", "cpu"), fast_fp32_products("auto", "cuda"):
        assert (cpu.fp32_precision, cuda.fp32_precision) == before
    monkeypatch.setattr(models, "_native_bf16", lambda device: True)
    with fast_fp32_products("fp32", "cpu"):
        assert cpu.fp32_precision == before[0]
    outer = fast_fp32_products("auto", "cpu")
    outer.__enter__()
    with fast_fp32_products("bf16", "cpu"), fast_fp32_products("bf16", "cuda"):
        assert (cpu.fp32_precision, cuda.fp32_precision) == ("bf16", "tf32")
    assert (cpu.fp32_precision, cuda.fp32_precision) == ("bf16", before[1])  # the outer block is still open
    outer.__exit__(None, None, None)
    assert (cpu.fp32_precision, cuda.fp32_precision) == before
    with pytest.raises(ValueError, match="precision must be one of"), fast_fp32_products("half", "cpu"):
        pass


@pytest.mark.skipif(resolve_precision("auto", "cpu") == "fp32", reason="needs a CPU with bfloat16 units")
def test_fast_fp32_products_round_the_inputs_and_keep_float32():
    """On a CPU with bfloat16 units a product inside the block is about bfloat16's rounding off float64's (not
    float32's), and float32 still."""
    generator = torch.Generator().manual_seed(0)
    a, b = torch.randn(64, 384, generator=generator), torch.randn(384, 96, generator=generator)
    exact = a.double() @ b.double()
    with fast_fp32_products("auto", "cpu"):
        fast = a @ b
    plain = a @ b
    assert fast.dtype == torch.float32
    assert (plain - exact).abs().max() < 1e-4 < (fast - exact).abs().max() < 0.5


def _gated_pass(loaded, batch, hold):
    """Logits and the gradient of their sum for a scale on the embeddings' output, weights frozen, under bf16
    autocast: inside :func:`frozen` (``hold``) or with the float32 weights only made not to require grad."""
    scale = torch.ones((), requires_grad=True)
    handle = loaded.model.get_input_embeddings().register_forward_hook(lambda _m, _a, out: out * scale)
    weights = list(loaded.model.parameters())
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            if hold:
                with frozen(loaded, "bf16"):
                    assert not any(p.requires_grad for p in weights)
                    logits = loaded.model(**batch).logits.float()
            else:
                for p in weights:
                    p.requires_grad_(False)
                logits = loaded.model(**batch).logits.float()
                for p in weights:
                    p.requires_grad_(True)
        logits.sum().backward()
    finally:
        handle.remove()
    return logits.detach(), scale.grad


@pytest.mark.parametrize("family", ALL_FAMILIES)
def test_frozen_holds_bf16_linear_weights_with_the_same_outputs(family_model_dirs, family):
    """Under bf16 the linear layers' weights are bfloat16 inside the block, the logits and a gradient through the
    model the same to the bit as autocast's copies of the float32 weights, and every weight back as it was."""
    torch.manual_seed(0)
    loaded = load_model(family_model_dirs[family], head="sequence-classification", num_labels=2, device="cpu")
    batch = loaded.tokenizer(["hello world", "the story was very good and the acting bad"], padding=True,
                             return_tensors="pt")  # fmt: skip
    before = {name: p.detach().clone() for name, p in loaded.model.named_parameters()}
    first = next(loaded.model.parameters())  # the model's dtype reads it: a linear layer's in some checkpoints
    linear = [m.weight for m in loaded.model.modules() if isinstance(m, torch.nn.Linear) and m.weight is not first]
    with frozen(loaded, "bf16"):
        assert {w.dtype for w in linear} == {torch.bfloat16}
        assert loaded.model.dtype == first.dtype == torch.float32
    expected, held = _gated_pass(loaded, batch, hold=False), _gated_pass(loaded, batch, hold=True)
    assert torch.equal(expected[0], held[0]) and torch.equal(expected[1], held[1])
    for name, p in loaded.model.named_parameters():
        assert p.dtype == torch.float32 and p.requires_grad and p.grad is None and torch.equal(p, before[name]), name


def test_frozen_in_fp32_and_with_tied_weights(tiny_model_dirs, tmp_path):
    """fp32 keeps every weight float32; a masked-LM head's decoder, tied to the word embeddings, stays float32."""
    loaded = load_model(tiny_model_dirs["bert"], device="cpu")
    with frozen(loaded):
        assert all(p.dtype == torch.float32 and not p.requires_grad for p in loaded.model.parameters())
    assert all(p.requires_grad for p in loaded.model.parameters())
    mlm = load_model(build_tiny_model("bert", tmp_path / "mlm", with_mlm_head=True), head="masked-lm", device="cpu")
    decoder = mlm.model.get_output_embeddings()
    assert decoder.weight is mlm.model.get_input_embeddings().weight
    with frozen(mlm, "bf16"):
        assert decoder.weight.dtype == torch.float32
        assert mlm.model.bert.encoder.layer[0].attention.self.query.weight.dtype == torch.bfloat16
    assert all(p.dtype == torch.float32 for p in mlm.model.parameters())
