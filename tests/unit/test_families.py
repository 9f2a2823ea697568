"""Conformance of every encoder family (issue 41): one tiny random model each, the same checks for all.

A new family is one ArchSpec in ``core/architectures.py`` and one line of ``FAMILY_SHAPES`` in
``tests/tiny_models.py`` (and its tokenizer there); ``EXPECTED`` below says what it can do.
"""

import copy
import inspect
from pathlib import Path

import numpy as np
import pytest
import torch
from tiny_models import (
    ALL_FAMILIES,
    FAMILY_SHAPES,
    MAX_POSITIONS,
    MODERNBERT_LOCAL_ATTENTION,
    POSITION_OFFSET,
    TINY_SHAPES,
)
from transformers import AutoConfig, AutoModel

from bertology_utils.attention.alignment import LEADING_SPECIAL, SEPARATOR, WORD, align
from bertology_utils.attention.extraction import attention_for, extract_attention
from bertology_utils.attention.word_attention import word_attention_single
from bertology_utils.core import architectures
from bertology_utils.core.errors import BertologyError, ModelNotAvailableError, UnsupportedArchitectureError
from bertology_utils.core.models import describe_model, load_model, random_init_keeping_embeddings
from bertology_utils.data import Corpus
from bertology_utils.interventions.attribution import integrated_gradients
from bertology_utils.interventions.editing import capture_attention, first_token_readout, gate_heads
from bertology_utils.interventions.gated_logits import gate_shape
from bertology_utils.interventions.head_removal import prune_heads
from bertology_utils.interventions.objectives import token_batches
from bertology_utils.interventions.query_key import capture_query_key

SHAPES = TINY_SHAPES | FAMILY_SHAPES
#: What each family refuses, and the words its refusal must give: every other family supports it.
REFUSES = {
    # per-layer hooks and edits: the one shared module runs at every depth
    "albert": {
        "qkv": "shared_layers",
        "layer_norms": "shared_layers",
        "query_key": "shared_layers",
    },
    # one fused Wqkv; pre-LN blocks
    "modernbert": {"qkv": "fused", "layer_norms": "pre-LN", "query_key": "fused"},
    # content-to-position and position-to-content terms computed inside its self-attention
    "deberta-v2": {"query_key": "internal_score_terms"},
}
SENTENCE = "The old sailor reads an interesting story near the station .".split()
PAIR = ("Where did you put the keys ?".split(), "They are on the kitchen table .".split())
ITEMS = [SENTENCE, PAIR, "Hello world !".split()]


@pytest.fixture(scope="module")
def families(family_model_dirs):
    """family -> its tiny model loaded with load_model."""
    return {arch: load_model(folder) for arch, folder in family_model_dirs.items()}


@pytest.fixture(scope="module")
def extracted(families):
    """family -> attention_for(ITEMS) with the token maps kept (one batch: the items are padded together)."""
    return {arch: attention_for(ITEMS, loaded, keep_tokens=True) for arch, loaded in families.items()}


def _encode(loaded, words):
    inputs = loaded.tokenizer([words], is_split_into_words=True, return_tensors="pt")
    if not architectures.uses_token_types(loaded):
        inputs.pop("token_type_ids", None)
    return inputs


@pytest.mark.parametrize("arch", ALL_FAMILIES)
def test_loads_with_its_spec_and_shape(families, arch):
    loaded = families[arch]
    n_layers, n_heads = SHAPES[arch]
    assert architectures.check_architecture(loaded).model_type == arch
    assert (loaded.num_layers, loaded.num_heads) == (n_layers, n_heads)
    # What the model's forward accepts (ModernBERT's takes none), not a name guess.
    takes = "token_type_ids" in inspect.signature(loaded.model.forward).parameters
    assert architectures.uses_token_types(loaded) == takes
    assert architectures.pad_token_id(loaded) == loaded.tokenizer.pad_token_id
    # the longest input it takes runs (positions after the padding index are lost where it numbers them so)
    assert loaded.max_tokens == MAX_POSITIONS - POSITION_OFFSET.get(arch, 0)
    longest = torch.full((1, loaded.max_tokens), loaded.tokenizer.unk_token_id)
    with torch.no_grad():
        assert loaded.model(input_ids=longest).last_hidden_state.shape[1] == loaded.max_tokens


@pytest.mark.parametrize("arch", ALL_FAMILIES)
def test_the_random_init_control_keeps_its_embeddings_alone(families, arch):
    loaded = families[arch]
    control = random_init_keeping_embeddings(loaded, seed=1)  # the tiny models were built with seed 0
    mine, theirs = architectures.embeddings(loaded).state_dict(), architectures.embeddings(control).state_dict()
    assert all(torch.equal(mine[k], theirs[k]) for k in mine)
    assert control.weights_sha256 != loaded.weights_sha256
    assert describe_model(control)["layers"] == loaded.num_layers


@pytest.mark.parametrize("arch", ALL_FAMILIES)
def test_rows_sum_to_one_over_real_tokens_and_match_the_models_own_attention(families, extracted, arch):
    loaded = families[arch]
    for words, item in zip(ITEMS, extracted[arch]):
        maps = item.token_attention
        assert maps.shape == (loaded.num_layers, loaded.num_heads, item.n_tokens, item.n_tokens)
        np.testing.assert_allclose(maps.astype(np.float64).sum(-1), 1.0, atol=2e-3)  # float16 storage
        first, second = (words, None) if isinstance(words, list) else words
        inputs = loaded.tokenizer(
            [first], None if second is None else [second], is_split_into_words=True, return_tensors="pt"
        )
        inputs = {k: v for k, v in inputs.items() if k != "token_type_ids" or architectures.uses_token_types(loaded)}
        with torch.no_grad():
            own = torch.stack(loaded.model(**inputs, output_attentions=True).attentions)[:, 0]
        np.testing.assert_allclose(maps, own.numpy(), atol=2e-3)  # padded in a batch, then float16


@pytest.mark.parametrize("arch", ALL_FAMILIES)
def test_a_store_holds_what_attention_for_returns(families, extracted, arch, tmp_path):
    store = extract_attention(ITEMS, tmp_path / "store.zarr", families[arch], keep_tokens=True, progress=False)
    assert store.is_complete and not store.skipped()
    for item, stored in zip(extracted[arch], store):
        assert stored.words == item.words and np.array_equal(stored.word_kinds, item.word_kinds)
        np.testing.assert_array_equal(stored.attention, item.attention.astype(np.float32))
        np.testing.assert_array_equal(stored.token_attention, item.token_attention.astype(np.float32))


def test_modernbert_local_layers_are_full_masked_maps(families, extracted):
    """Layer 0 is global; the others see MODERNBERT_LOCAL_ATTENTION // 2 tokens either side, zeros beyond."""
    item = extracted["modernbert"][0]
    maps = item.token_attention.astype(np.float32)
    distance = np.abs(np.subtract.outer(np.arange(item.n_tokens), np.arange(item.n_tokens)))
    outside = distance > MODERNBERT_LOCAL_ATTENTION // 2
    assert outside.any() and (maps[0][:, outside] > 0).all()
    assert (maps[1:][:, :, outside] == 0).all() and (maps[1:][:, :, ~outside] > 0).all()


@pytest.mark.parametrize("arch", ALL_FAMILIES)
def test_word_maps_are_the_conversion_of_the_token_maps(extracted, arch):
    for item in extracted[arch]:
        expected = word_attention_single(item.token_attention.astype(np.float32), item.token_to_word)
        np.testing.assert_allclose(item.attention.astype(np.float32), expected, atol=2e-3)


@pytest.mark.parametrize("arch", ALL_FAMILIES)
def test_a_pair_aligns_with_typed_specials(families, arch):
    tokenizer = families[arch].tokenizer
    first, second = PAIR
    item = align(tokenizer, [PAIR])[0]
    kinds, words = np.asarray(item.word_kinds), np.asarray(item.words, dtype=object)
    assert list(words[kinds == WORD]) == first + second
    assert list(item.segments[kinds == WORD]) == [0] * len(first) + [1] * len(second)
    assert kinds[0] == LEADING_SPECIAL and words[0] in (tokenizer.cls_token, tokenizer.bos_token)
    separators = words[kinds == SEPARATOR]
    assert len(separators) in (2, 3) and set(separators) <= {tokenizer.sep_token, tokenizer.eos_token}
    assert kinds[-1] == SEPARATOR and kinds[len(first) + 1] == SEPARATOR  # after each text (</s></s> for pairs)


@pytest.mark.parametrize("arch", ALL_FAMILIES)
def test_words_after_the_first_are_tokenized_as_in_running_text(families, arch):
    """▁-marked (SentencePiece) and Ġ-marked (byte-level BPE) pieces: a pre-split word keeps its word-start mark."""
    tokenizer = families[arch].tokenizer
    split = tokenizer([SENTENCE], is_split_into_words=True, add_special_tokens=False)
    running = tokenizer([" ".join(SENTENCE)], add_special_tokens=False)
    ids, word_ids = split["input_ids"][0], split.word_ids(0)
    later = [i for i, w in zip(ids, word_ids) if w != 0]
    assert later == running["input_ids"][0][-len(later) :]


@pytest.mark.parametrize("arch", ALL_FAMILIES)
def test_capture_attention_captures_what_the_model_returns(families, arch):
    loaded = families[arch]
    inputs = _encode(loaded, SENTENCE)
    refusal = REFUSES.get(arch, {}).get("capture")
    if refusal is not None:
        with pytest.raises(UnsupportedArchitectureError, match=refusal):
            with capture_attention(loaded):
                pass
        return
    with torch.no_grad(), capture_attention(loaded, retain_grad=False) as captured:
        outputs = loaded.model(**inputs, output_attentions=True)
    assert len(captured.probs) == len(outputs.attentions) == loaded.num_layers
    for mine, theirs in zip(captured.probs, outputs.attentions):
        assert torch.equal(mine, theirs)


@pytest.mark.parametrize("arch", ALL_FAMILIES)
def test_a_gate_acts_on_its_own_layer_and_head_only(families, arch):
    """Gates of 1 change nothing; a closed gate changes that head's layer and what follows, not what precedes
    (for ALBERT, whose layers all run one module: that layer's call alone)."""
    loaded = families[arch]
    inputs = _encode(loaded, SENTENCE)
    with torch.no_grad():
        plain = loaded.model(**inputs, output_attentions=True, output_hidden_states=True)
        with gate_heads(loaded, torch.ones(loaded.num_layers, loaded.num_heads)):
            ones = loaded.model(**inputs, output_hidden_states=True)
        gates = torch.ones(loaded.num_layers, loaded.num_heads)
        gates[1, 0] = 0
        with gate_heads(loaded, gates), capture_attention(loaded, retain_grad=False) as captured:
            gated = loaded.model(**inputs, output_hidden_states=True)
    assert torch.equal(ones.last_hidden_state, plain.last_hidden_state)
    # hidden_states[l] is layer l's input: layers 0 and 1 see no change, layer 2 does
    assert torch.equal(gated.hidden_states[1], plain.hidden_states[1])
    assert not torch.allclose(gated.hidden_states[2], plain.hidden_states[2])
    assert (captured.probs[1][:, 0] == 0).all() and torch.equal(captured.probs[0], plain.attentions[0])


@pytest.mark.parametrize("arch", ALL_FAMILIES)
def test_queries_and_keys_rebuild_the_attention_or_refuse(families, arch):
    loaded = families[arch]
    refusal = REFUSES.get(arch, {}).get("query_key")
    if refusal is not None:
        with pytest.raises(UnsupportedArchitectureError, match=refusal):
            with capture_query_key(loaded):
                pass
        return
    with torch.no_grad(), capture_query_key(loaded) as captured:
        outputs = loaded.model(**_encode(loaded, SENTENCE), output_attentions=True)
    for layer, theirs in enumerate(outputs.attentions):
        torch.testing.assert_close(captured.probabilities(layer), theirs, atol=1e-5, rtol=0)


@pytest.mark.parametrize("arch", ALL_FAMILIES)
def test_parts_resolve_or_refuse_saying_why(families, arch):
    loaded = families[arch]
    refuses = REFUSES.get(arch, {})
    spec = architectures.arch_spec(loaded)
    hidden = SHAPES[arch][1] * 8
    if "qkv" in refuses:
        with pytest.raises(UnsupportedArchitectureError, match=refuses["qkv"]):
            architectures.qkv(loaded, 0)
    else:
        assert all(p.out_features == hidden for p in architectures.qkv(loaded, 0))
    if spec.fused_qkv is not None:
        assert architectures.fused_qkv(loaded, 0).out_features == 3 * hidden
    if "layer_norms" in refuses:
        with pytest.raises(UnsupportedArchitectureError, match=refuses["layer_norms"]):
            architectures.layer_norms(loaded, 0)
    else:
        assert len(architectures.layer_norms(loaded, 0)) == 2
    if spec.pre_layer_norm:
        assert len(architectures.layer_norms(loaded, 1, pre_ln=True)) == 2
        assert architectures.final_layer_norm(loaded) is not None
    if spec.shared_layers:
        stack = architectures.layers(loaded, shared=True)
        assert len(stack) == loaded.num_layers and len({id(layer) for layer in stack}) < loaded.num_layers
    else:
        assert len(architectures.layers(loaded)) == loaded.num_layers
    # read-only, so ALBERT answers too: a gate acts on one layer's call (gate_heads), one row per layer run
    assert architectures.attention_heads(loaded, loaded.num_layers - 1) == loaded.num_heads
    assert gate_shape(loaded) == (loaded.num_layers, loaded.num_heads)


@pytest.mark.parametrize("arch", ALL_FAMILIES)
def test_the_first_token_readout_gives_the_classifiers_logits(family_model_dirs, arch):
    """Where the spec says the head reads the first token (and the last layer is its own: not ALBERT's), the
    readout applies and changes the logits by float rounding only; elsewhere it leaves the model whole."""
    classifier = load_model(family_model_dirs[arch], head="sequence-classification", num_labels=3)
    spec = architectures.arch_spec(classifier)
    inputs = classifier.tokenizer([" ".join(SENTENCE), "Hello world !"], padding=True, return_tensors="pt")
    with torch.no_grad():
        full = classifier.model(**inputs).logits
        with first_token_readout(classifier.model) as applies:
            short = classifier.model(**inputs).logits
    assert applies == (spec.classifier_reads_first_token and not spec.shared_layers)
    torch.testing.assert_close(short, full, atol=1e-6, rtol=0)


def test_albert_groups_of_several_layers_are_refused_and_several_groups_map_to_depths(family_model_dirs):
    folder = family_model_dirs["albert"]
    with pytest.raises(UnsupportedArchitectureError, match="groups of several layers are not supported"):
        architectures.check_architecture(AutoModel.from_config(AutoConfig.from_pretrained(folder, inner_group_num=2)))
    config = AutoConfig.from_pretrained(folder, num_hidden_groups=2, num_hidden_layers=4)
    model = AutoModel.from_config(config)
    groups = model.encoder.albert_layer_groups
    assert architectures.layers(model, shared=True) == [groups[0], groups[0], groups[1], groups[1]]


# --------------------------------------------------------------------------- interventions and the capability table


@pytest.mark.parametrize("arch", ALL_FAMILIES)
def test_a_closed_gate_equals_the_physically_pruned_head_where_the_family_allows_pruning(families, arch):
    loaded = families[arch]
    inputs = _encode(loaded, SENTENCE)
    pruned = copy.deepcopy(loaded.model)
    try:
        prune_heads(pruned, {1: [0]})
    except BertologyError as error:  # MPNet's shared position bias, ALBERT's shared layers, ModernBERT's fused qkv
        assert arch in {"mpnet", "albert", "modernbert"}, error
        return
    gates = torch.ones(loaded.num_layers, loaded.num_heads)
    gates[1, 0] = 0
    with torch.no_grad():
        with gate_heads(loaded, gates):
            gated = loaded.model(**inputs).last_hidden_state
        removed = pruned(**inputs).last_hidden_state
    torch.testing.assert_close(removed, gated, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("arch", ALL_FAMILIES)
def test_integrated_gradients_are_complete_on_every_family(family_model_dirs, arch):
    classifier = load_model(family_model_dirs[arch], head="sequence-classification", num_labels=2)
    (batch,), _ = token_batches(classifier, Corpus.from_texts([" ".join(SENTENCE), "Hello world !"], name="t"))
    ig = integrated_gradients(classifier, batch, tolerance=1e-4)
    scale = (ig.score - ig.baseline_score).abs().clamp_min(1)
    assert ((ig.delta.abs() / scale) < 1e-3).all(), (ig.delta, ig.panels)


def test_the_capability_tables_are_generated(family_model_dirs):
    from capabilities import BLOCK, PAGES, capability_table

    from bertology_utils.present.generated import read_block

    table = capability_table(family_model_dirs)
    for page in PAGES:
        assert read_block(page, BLOCK) == table, f"{page}: run python scripts/capability_table.py"


@pytest.fixture(scope="module")
def unregistered_model(tmp_path_factory):
    """A tiny RoFormer (rotary positions, a model type with no ArchSpec) with BERT's tokenizer, as a user's folder."""
    from tiny_models import build_tiny_model

    return build_tiny_model("roformer", tmp_path_factory.mktemp("unregistered") / "roformer")


def test_an_unregistered_model_gets_what_reads_its_maps_and_a_reason_for_the_rest(unregistered_model):
    from bertology_utils.core.errors import UnregisteredArchitectureWarning
    from bertology_utils.interventions import mixing

    with pytest.warns(UnregisteredArchitectureWarning, match=r"register_architecture\(ArchSpec\(model_type='roformer'"):
        loaded = load_model(unregistered_model)
    assert (loaded.num_layers, loaded.num_heads) == (2, 3) and not architectures.is_registered(loaded)
    items = attention_for(ITEMS, loaded, keep_tokens=True)
    with torch.no_grad():
        theirs = loaded.model(**_encode(loaded, SENTENCE), output_attentions=True).attentions
    np.testing.assert_allclose(items[0].token_attention, torch.stack(theirs, 1)[0].numpy(), atol=1e-3)
    np.testing.assert_allclose(items[0].attention.astype(np.float64).sum(-1), 1, atol=2e-3)
    inputs = {k: v for k, v in _encode(loaded, SENTENCE).items()}
    rollout = mixing.mixing_maps(loaded, inputs, ("rollout", "flow"))
    torch.testing.assert_close(rollout["rollout"][-1].sum(-1), torch.ones(1, 1, inputs["input_ids"].shape[1]))
    for refused in (
        lambda: mixing.mixing_maps(loaded, inputs, ("alti",)),
        lambda: gate_heads(loaded, torch.ones(2, 3)).__enter__(),
    ):
        with pytest.raises(UnsupportedArchitectureError, match="not a registered architecture"):
            refused()


def test_an_unregistered_model_laid_out_like_a_registered_one_is_told_the_recipe_that_borrows_it(
    unregistered_model,
):
    import dataclasses
    import re

    import transformers

    from bertology_utils.core.architectures import arch_spec, register_architecture

    with pytest.warns(UserWarning):
        loaded = load_model(unregistered_model)
    with pytest.raises(UnsupportedArchitectureError) as info:
        arch_spec(loaded)
    message = str(info.value)
    assert "every part is where the layout of bert" in message and "check its positions" in message
    recipe = re.search(r"register_architecture\(dataclasses\.replace\(.*?model_type=[^)]*\)\)", message).group(0)
    eval(recipe, {"register_architecture": register_architecture, "dataclasses": dataclasses, "arch_spec": arch_spec,
                  "transformers": transformers})  # fmt: skip
    try:  # the registration is dropped after
        assert architectures.is_registered(loaded)
        inputs = _encode(loaded, SENTENCE)
        # RoFormer applies its softmax inline, not through transformers' AttentionInterface: the gate says so and
        # names the one field to add, after which a closed gate removes exactly that head's context.
        with pytest.raises(ModelNotAvailableError, match="give its ArchSpec a dropout_edit_point"):
            gate_heads(loaded, torch.ones(2, 3)).__enter__()
        register_architecture(dataclasses.replace(arch_spec(loaded), dropout_edit_point="dropout"), replace=True)
        with torch.no_grad():
            plain = loaded.model(**inputs, output_hidden_states=True)
            with gate_heads(loaded, torch.ones(2, 3)):
                opened = loaded.model(**inputs).last_hidden_state
            gates = torch.ones(2, 3)
            gates[1, 2] = 0
            with gate_heads(loaded, gates):
                closed = loaded.model(**inputs, output_hidden_states=True)
        torch.testing.assert_close(opened, plain.last_hidden_state, rtol=0, atol=1e-6)
        torch.testing.assert_close(
            closed.hidden_states[1], plain.hidden_states[1], rtol=0, atol=0
        )  # layer 0: untouched
        assert not torch.allclose(closed.last_hidden_state, plain.last_hidden_state, atol=1e-4)
    finally:
        architectures.ARCHITECTURE_REGISTRY.unregister(loaded.config.model_type)


@pytest.mark.parametrize(
    ("model_type", "kind", "sizes"),
    [
        ("gpt2", "decoder-only", dict(n_embd=16, n_layer=2, n_head=2, n_positions=MAX_POSITIONS)),
        ("t5", "encoder-decoder", dict(d_model=16, d_kv=8, d_ff=32, num_layers=2, num_heads=2)),
    ],
)
def test_a_decoder_or_an_encoder_decoder_is_refused_saying_what_it_is(
    family_model_dirs, tmp_path, model_type, kind, sizes
):
    roberta = family_model_dirs["roberta"]
    config = AutoConfig.for_model(model_type, vocab_size=AutoConfig.from_pretrained(roberta).vocab_size, **sizes)
    AutoModel.from_config(config).save_pretrained(tmp_path)
    load_model(roberta).tokenizer.save_pretrained(tmp_path)
    with pytest.raises(ModelNotAvailableError, match=f"is an? {kind}.*Load an encoder checkpoint"):
        load_model(tmp_path)


def test_a_checkpoint_that_needs_its_own_code_is_refused_saying_how_to_opt_in(family_model_dirs, tmp_path):
    import json
    import shutil

    shutil.copytree(family_model_dirs["bert"], tmp_path, dirs_exist_ok=True)
    config = json.loads((tmp_path / "config.json").read_text())
    config.update(
        model_type="custom-encoder",
        auto_map={"AutoConfig": "configuration_custom.CustomConfig", "AutoModel": "modeling_custom.CustomModel"},
    )
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelNotAvailableError, match=r"never runs implicitly.*trust_remote_code=True"):
        load_model(tmp_path)


def test_the_documented_family_benchmark_is_the_recorded_run():
    import json
    import sys

    from bertology_utils.present.generated import read_block

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    import bench_families

    record = json.loads(bench_families.RECORD.read_text())
    shown = read_block(bench_families.PAGE, bench_families.BLOCK)
    assert shown == bench_families.doc_block(record).strip(), "run python bench/bench_families.py --record"
    assert {(r["family"], r["size"]) for r in record["rows"]} == {
        (f, s) for f in ALL_FAMILIES for s in bench_families.SIZES
    }
