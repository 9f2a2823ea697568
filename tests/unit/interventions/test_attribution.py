"""Input x gradient, integrated gradients, blank-out and word sums — on tiny classifiers of every architecture.

The tiny models' default initialisation (std 0.02) makes a classifier's logits nearly constant, so
every attribution would be ~1e-6 and every check vacuous: :func:`classifier` redraws each Linear
layer with std gain / sqrt(fan_in), which gives score changes of order 0.1-1.
"""

import numpy as np
import pytest
import torch
from contracts import check_reference

from bertology_utils.attention.alignment import WORD
from bertology_utils.core.errors import BertologyError
from bertology_utils.core.models import load_model
from bertology_utils.data import Corpus, Sentence
from bertology_utils.interventions import references
from bertology_utils.interventions.attribution import (
    blank_out,
    input_x_gradient,
    integrated_gradients,
    predicted_labels,
    target_scores,
    token_to_word_scores,
)
from bertology_utils.interventions.objectives import PUNCT, token_batches

ARCHS = ("bert", "roberta", "distilbert", "electra", "mpnet")
WORDS = ["the", "movie", "was", "good", "bad", "and", "very", "story", "film", "acting"]
#: Completeness bound with the default steps: |delta| <= IG_TOLERANCE * max(1, |f(x) - f(x')|).
IG_TOLERANCE = 1e-3
#: DistilBERT's classifier has a ReLU: the integrand jumps and the error shrinks like 1/steps.
IG_STEPS = {"distilbert": 512}


def corpus(n: int = 8, seed: int = 0) -> Corpus:
    rng = np.random.default_rng(seed)
    items = [Sentence(f"t{i}", tuple(rng.choice(WORDS, size=int(rng.integers(3, 9))))) for i in range(n)]
    return Corpus.from_items(items, "toy", [int(x) for x in rng.integers(0, 2, size=n)])


def classifier(folder, num_labels: int = 2, dtype=torch.float32, gain: float = 1.0):
    loaded = load_model(folder, head="sequence-classification", num_labels=num_labels, device="cpu", dtype=dtype)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for module in loaded.model.modules():
            if isinstance(module, torch.nn.Linear):
                module.weight.copy_(
                    torch.randn(module.weight.shape, generator=generator) * gain / module.in_features**0.5
                )
                if module.bias is not None:
                    module.bias.copy_(torch.randn(module.bias.shape, generator=generator) * 0.1)
    return loaded


def one_batch(loaded, items=None):
    batches, skipped = token_batches(loaded, corpus() if items is None else items, batch_size=64)
    assert len(batches) == 1 and not skipped
    return batches[0]


@pytest.fixture(scope="module", params=ARCHS)
def model_and_batch(request, tiny_model_dirs):
    loaded = classifier(tiny_model_dirs[request.param])
    return request.param, loaded, one_batch(loaded)


def clean_logits(loaded, batch):
    with torch.no_grad():
        return loaded.model(**batch.model_inputs()).logits


def special_or_absent(batch) -> np.ndarray:
    width = max(a.n_words for a in batch.items)
    out = np.ones((len(batch.items), width), dtype=bool)
    for b, a in enumerate(batch.items):
        out[b, : a.n_words] = a.word_kinds != WORD
    return out


# --------------------------------------------------------------------------- integrated gradients


def test_integrated_gradients_are_complete(model_and_batch):
    arch, loaded, batch = model_and_batch
    steps = IG_STEPS.get(arch, 32)
    for baseline in ("zero", "mask"):
        ig = integrated_gradients(loaded, batch, baseline=baseline, steps=steps, internal_batch_size=256)
        change = ig.score - ig.baseline_score
        assert change.abs().max() > 0.05  # the check below is not vacuous
        assert (ig.delta.abs() <= IG_TOLERANCE * change.abs().clamp_min(1)).all(), (baseline, ig.delta)
        torch.testing.assert_close(ig.delta, ig.attributions.sum(-1) - change, rtol=0, atol=1e-6)
        torch.testing.assert_close(ig.score, target_scores(loaded, clean_logits(loaded, batch)), rtol=0, atol=1e-5)
        # only content tokens are attributed: zero on special tokens and padding
        content = batch.kinds >= PUNCT  # punctuation and other word tokens
        assert (ig.attributions[~content] == 0).all()
        assert (ig.attributions[content] != 0).all()
        # more nodes: no larger error
        coarse = integrated_gradients(loaded, batch, baseline=baseline, steps=2)
        assert ig.delta.abs().max() <= coarse.delta.abs().max() + 1e-6
        assert coarse.delta.abs().max() > ig.delta.abs().max()  # 2 nodes are visibly worse here


def test_integrated_gradients_chunks_do_not_matter(tiny_model_dirs):
    loaded = classifier(tiny_model_dirs["roberta"])
    batch = one_batch(loaded)
    whole = integrated_gradients(loaded, batch, steps=8, internal_batch_size=1000)
    chunked = integrated_gradients(loaded, batch, steps=8, internal_batch_size=7)
    torch.testing.assert_close(whole.attributions, chunked.attributions, rtol=0, atol=1e-6)
    assert whole.steps == 8


@pytest.mark.parametrize("arch", ("distilbert", "mpnet"))
def test_adaptive_integrated_gradients_reach_the_tolerance_and_the_integral(tiny_model_dirs, arch):
    """With ``tolerance`` each item's path is cut into panels until their estimated errors are within it.

    DistilBERT's ReLU kinks the path, so a fixed rule converges like 1/nodes; the 1,024-node rule
    is the reference. The ends (the clean and the baseline score) are the fixed rule's.
    """
    loaded = classifier(tiny_model_dirs[arch])
    batch = one_batch(loaded)
    fixed = integrated_gradients(loaded, batch, steps=2)
    scale = (fixed.score - fixed.baseline_score).abs().clamp_min(1)
    assert (fixed.panels == 1).all() and (fixed.delta.abs() / scale).max() > 1e-3
    adaptive = integrated_gradients(loaded, batch, steps=2, tolerance=1e-4, internal_batch_size=7)
    assert (adaptive.delta.abs() / scale).max() <= 1e-4
    assert 2 <= adaptive.panels.min() and adaptive.panels.max() <= 64 and adaptive.steps == 2
    assert adaptive.panels.double().mean() * 2 < 1024 / 5
    reference = integrated_gradients(loaded, batch, steps=1024, internal_batch_size=4096)
    top = reference.attributions.abs().max()
    torch.testing.assert_close(adaptive.attributions, reference.attributions, rtol=0, atol=float(1e-3 * top))
    assert (fixed.attributions - reference.attributions).abs().max() > 1e-2 * top
    torch.testing.assert_close(adaptive.score, fixed.score, rtol=0, atol=0)
    torch.testing.assert_close(adaptive.baseline_score, fixed.baseline_score, rtol=0, atol=0)
    content = batch.kinds >= PUNCT
    assert (adaptive.attributions[~content] == 0).all()
    loose = integrated_gradients(loaded, batch, steps=2, tolerance=0.1)
    assert (loose.panels >= 2).all() and loose.panels.double().mean() < adaptive.panels.double().mean()
    capped = integrated_gradients(loaded, batch, steps=2, tolerance=1e-12, max_panels=3)
    assert (capped.panels == 3).all()
    with pytest.raises(ValueError, match="tolerance"):
        integrated_gradients(loaded, batch, tolerance=0)


def test_integrated_gradients_of_a_regression_head(tiny_model_dirs):
    loaded = classifier(tiny_model_dirs["bert"], num_labels=1)
    batch = one_batch(loaded)
    ig = integrated_gradients(loaded, batch)
    logits = clean_logits(loaded, batch)
    torch.testing.assert_close(ig.score, logits[:, 0], rtol=0, atol=1e-5)
    assert (ig.delta.abs() <= IG_TOLERANCE * (ig.score - ig.baseline_score).abs().clamp_min(1)).all()
    torch.testing.assert_close(target_scores(loaded, logits), logits[:, 0])
    assert (predicted_labels(loaded, batch) == 0).all()


# --------------------------------------------------------------------------- input x gradient


def test_input_x_gradient_matches_finite_differences(tiny_model_dirs, model_and_batch):
    """In float64: d/ds f(word-piece embedding of token t scaled by 1 + s) at s = 0 is e_t . grad_t f."""
    arch, _, _ = model_and_batch
    loaded = classifier(tiny_model_dirs[arch], dtype=torch.float64)
    batch = one_batch(loaded)
    labels = predicted_labels(loaded, batch)
    values = input_x_gradient(loaded, batch)
    module, h = loaded.model.get_input_embeddings(), 1e-5
    expected = torch.zeros_like(values)
    for t in range(batch.input_ids.shape[1]):
        scored = []
        for s in (h, -h):

            def scale(_module, _args, output, s=s, t=t):
                output = output.clone()
                output[:, t] *= 1 + s
                return output

            handle = module.register_forward_hook(scale)
            try:
                scored.append(target_scores(loaded, clean_logits(loaded, batch), labels))
            finally:
                handle.remove()
        expected[:, t] = (scored[0] - scored[1]) / (2 * h)
    expected[~batch.real] = 0
    assert expected.abs().max() > 1e-2
    torch.testing.assert_close(values, expected, rtol=0, atol=1e-4)
    assert (values[~batch.real] == 0).all()


def test_input_x_gradient_matches_inputs_embeds_autograd(tiny_model_dirs):
    loaded = classifier(tiny_model_dirs["bert"])
    batch = one_batch(loaded)
    embeds = loaded.model.get_input_embeddings()(batch.input_ids).detach().requires_grad_(True)
    inputs = {k: v for k, v in batch.model_inputs().items() if k != "input_ids"}
    logits = loaded.model(inputs_embeds=embeds, **inputs).logits
    score = logits.gather(1, logits.argmax(-1, keepdim=True)).sum()
    (grad,) = torch.autograd.grad(score, embeds)
    expected = (embeds * grad).sum(-1).detach() * batch.attention_mask
    torch.testing.assert_close(input_x_gradient(loaded, batch), expected, rtol=0, atol=1e-4)


# --------------------------------------------------------------------------- blank-out


@pytest.mark.parametrize("measure", ["probability", "logit"])
def test_blank_out_matches_one_forward_per_word(model_and_batch, measure):
    _, loaded, batch = model_and_batch
    drops = blank_out(loaded, batch, measure=measure, internal_batch_size=5)
    labels = predicted_labels(loaded, batch)
    mask_id = loaded.tokenizer.mask_token_id
    expected = np.full(drops.shape, np.nan)

    def value(ids, types, label):
        inputs = {"input_ids": torch.tensor(ids)[None], "attention_mask": torch.ones(1, len(ids), dtype=torch.long)}
        if batch.token_type_ids is not None:
            inputs["token_type_ids"] = torch.tensor(types)[None]
        with torch.no_grad():
            logits = loaded.model(**inputs).logits[0]
        return float(logits[label] if measure == "logit" else logits.softmax(-1)[label])

    for b, a in enumerate(batch.items):
        label = int(labels[b])
        clean = value(a.input_ids, a.token_type_ids, label)
        for w in np.flatnonzero(a.word_kinds == WORD):
            ids = np.where(a.token_to_word == w, mask_id, a.input_ids)
            expected[b, w] = clean - value(ids, a.token_type_ids, label)
    np.testing.assert_allclose(drops.numpy(), expected, rtol=0, atol=1e-6)
    assert np.array_equal(np.isnan(drops.numpy()), special_or_absent(batch))
    assert np.nanmax(np.abs(expected)) > 1e-2


def test_blank_out_and_the_labels_it_explains_are_float32_whatever_the_models_precision(tiny_model_dirs):
    """A bf16 classifier (trained under autocast, its weights float32) is blanked out exactly as in float32,
    as its gradients are: bfloat16's rounding is the size of a small word's effect."""
    from bertology_utils.interventions.editing import classifier_inference

    loaded = classifier(tiny_model_dirs["bert"])
    batch = one_batch(loaded)
    exact = blank_out(loaded, batch), predicted_labels(loaded, batch)
    loaded.precision = "bf16"
    for got, want in zip((blank_out(loaded, batch), predicted_labels(loaded, batch)), exact):
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    with torch.no_grad(), classifier_inference(loaded):  # the classifier's own passes do take bf16
        rounded = loaded.model(**batch.model_inputs()).logits
    assert not torch.equal(rounded, clean_logits(loaded, batch))


# --------------------------------------------------------------------------- batches, labels, words


def test_an_item_alone_and_padded_beside_a_longer_one_gets_the_same_attributions(model_and_batch):
    _, loaded, _ = model_and_batch
    short = Sentence("short", ("the", "film", "was", "good"))
    long = Sentence("long", ("the", "very", "good", "story", "and", "the", "bad", "acting", "film", "movie"))
    alone, padded = one_batch(loaded, [short]), one_batch(loaded, [short, long])
    row = [a.item_id for a in padded.items].index("short")
    n = alone.input_ids.shape[1]
    assert padded.input_ids.shape[1] > n
    words = alone.items[0].n_words
    for compute in (input_x_gradient, lambda m, b: integrated_gradients(m, b, steps=8).attributions):
        one, both = compute(loaded, alone)[0], compute(loaded, padded)[row]
        torch.testing.assert_close(both[:n], one, rtol=0, atol=1e-5)
        assert (both[n:] == 0).all()
        torch.testing.assert_close(
            token_to_word_scores(compute(loaded, padded), padded)[row, :words],
            token_to_word_scores(compute(loaded, alone), alone)[0],
            rtol=0,
            atol=1e-5,
        )
    one, both = blank_out(loaded, alone)[0], blank_out(loaded, padded)[row]
    torch.testing.assert_close(both[:words], one, rtol=0, atol=1e-5, equal_nan=True)
    assert both[words:].isnan().all()


def test_labels_none_explains_the_prediction_and_given_labels_are_explained(tiny_model_dirs):
    loaded = classifier(tiny_model_dirs["electra"])
    batch = one_batch(loaded)
    logits = clean_logits(loaded, batch)
    predicted = predicted_labels(loaded, batch)
    assert torch.equal(predicted, logits.argmax(-1))
    other = 1 - predicted
    torch.testing.assert_close(target_scores(loaded, logits), logits.max(-1).values)
    torch.testing.assert_close(target_scores(loaded, logits, other.tolist()), logits.min(-1).values)
    for compute in (
        input_x_gradient,
        lambda m, b, labels=None: integrated_gradients(m, b, labels, steps=8).attributions,
        blank_out,
    ):
        default, given, flipped = (
            compute(loaded, batch),
            compute(loaded, batch, predicted),
            compute(loaded, batch, other),
        )
        torch.testing.assert_close(default, given, equal_nan=True)
        assert not torch.allclose(default.nan_to_num(), flipped.nan_to_num(), atol=1e-4)
    ig = integrated_gradients(loaded, batch, other, steps=8)
    assert torch.equal(ig.labels, other)
    torch.testing.assert_close(ig.score, logits.min(-1).values)
    # two classes: the probability one class loses, the other gains
    torch.testing.assert_close(blank_out(loaded, batch, other), -blank_out(loaded, batch), equal_nan=True)
    with pytest.raises(ValueError, match="class ids"):
        input_x_gradient(loaded, batch, [2] * len(batch.items))


def test_token_to_word_scores_sums_each_words_tokens(tiny_model_dirs):
    loaded = classifier(tiny_model_dirs["roberta"])
    batch = one_batch(loaded, [Sentence("s", ("unbelievably", "good", "storytelling")), Sentence("t", ("the", "film"))])
    scores = torch.randn(batch.input_ids.shape, generator=torch.Generator().manual_seed(1))
    words = token_to_word_scores(scores, batch)
    assert words.shape == (2, max(a.n_words for a in batch.items))
    for b, a in enumerate(batch.items):
        for w in range(words.shape[1]):
            if w < a.n_words:
                expected = float(scores[b, : a.n_tokens][torch.from_numpy(a.token_to_word == w)].sum())
                assert float(words[b, w]) == pytest.approx(expected, abs=1e-6)
            else:
                assert words[b, w].isnan()
    assert (batch.items[0].tokens_per_word > 1).any()  # some word has several tokens


# --------------------------------------------------------------------------- errors and model state


def test_a_model_without_a_classification_head_is_refused_and_left_as_it_was(tiny_model_dirs):
    base = load_model(tiny_model_dirs["bert"], device="cpu")
    batch = one_batch(base)
    base.model.train()
    for compute in (input_x_gradient, integrated_gradients, blank_out, predicted_labels):
        with pytest.raises(BertologyError, match="fine_tune"):
            compute(base, batch)
    assert base.model.training
    assert not base.model.get_input_embeddings()._forward_hooks
    mlm = load_model(tiny_model_dirs["bert"], head="masked-lm", device="cpu")
    with pytest.raises(BertologyError, match="no sequence-classification head"):
        input_x_gradient(mlm, batch)


def test_training_mode_is_restored_and_dropout_is_off_meanwhile(tiny_model_dirs):
    loaded = classifier(tiny_model_dirs["bert"])
    batch = one_batch(loaded)
    expected = input_x_gradient(loaded, batch)
    loaded.model.train()
    torch.testing.assert_close(input_x_gradient(loaded, batch), expected)
    assert loaded.model.training
    loaded.model.eval()
    assert not loaded.model.get_input_embeddings()._forward_hooks


def test_word_references_line_up_with_extraction_in_corpus_order(tiny_model_dirs):
    from bertology_utils.attention import attention_for
    from bertology_utils.interventions.references import REFERENCES, word_references

    loaded = classifier(tiny_model_dirs["bert"])
    items = corpus(10)
    long = Sentence("long", tuple(["film"] * 40))  # over the limit below: skipped by both
    data = Corpus.from_items([*items.items[:4], long, *items.items[4:]], "toy+long")
    refs = word_references(loaded, data, batch_size=3, max_tokens=20, steps=8)
    maps = attention_for(data, loaded, too_long="skip", max_tokens=20)
    assert [a.item_id for a in refs.skipped] == ["long"]
    assert set(refs.scores) == set(REFERENCES) and all(len(v) == len(maps) == 10 for v in refs.scores.values())
    for k, item in enumerate(maps):
        alone = one_batch(loaded, Corpus.from_items([data.items[item.index]], "one"))
        expected = blank_out(loaded, alone)[0].numpy()
        assert refs.scores["blank_out"][k].shape == (item.n_words,)
        np.testing.assert_allclose(refs.scores["blank_out"][k], expected, atol=1e-5, equal_nan=True)
        assert np.isnan(refs.scores["blank_out"][k][item.word_kinds != WORD]).all()
    assert 0 <= refs.ig_relative_gap < 1e-2


def test_word_references_are_stored_and_read_back(tiny_model_dirs, tmp_path, monkeypatch):
    from bertology_utils.core import settings

    monkeypatch.setenv(settings.CACHE_DIR_ENV, str(tmp_path / "cache"))
    loaded = classifier(tiny_model_dirs["bert"])
    long = Sentence("long", tuple(["film"] * 40))
    data = Corpus.from_items([*corpus(7).items[:3], long, *corpus(7).items[3:]], "toy+long")
    settings_ = dict(batch_size=3, max_tokens=20, steps=4, tolerance=0.01)
    fresh = references.word_references(loaded, data, **settings_)
    calls = []
    original = references.integrated_gradients
    monkeypatch.setattr(references, "integrated_gradients", lambda *a, **k: calls.append(1) or original(*a, **k))
    stored = references.word_references(loaded, data, cache=True, **settings_)
    computed = len(calls)
    assert computed == 3  # three batches of the seven kept items
    reused = references.word_references(loaded, data, cache=True, **settings_)
    assert len(calls) == computed  # read back: no integrated gradients run
    for refs in (stored, reused):
        assert [a.item_id for a in refs.skipped] == ["long"]
        assert (refs.ig_relative_gap, refs.ig_panels) == (fresh.ig_relative_gap, fresh.ig_panels)
        for name, rows in fresh.scores.items():
            assert len(refs.scores[name]) == len(rows) == 7
            for got, want in zip(refs.scores[name], rows):
                np.testing.assert_array_equal(got, want)  # NaN where fresh has NaN, bit for bit elsewhere
    references.word_references(loaded, data, cache=True, **{**settings_, "steps": 8})  # other settings
    assert len(calls) == computed + 3
    references.word_references(loaded, data[:5], cache=True, **settings_)  # other items
    assert len(calls) == computed + 5


# --------------------------------------------------------------------------- the registry of references


@pytest.mark.parametrize("name", references.REFERENCES)
def test_every_registered_reference_scores_each_word_of_each_item(tiny_model_dirs, name):
    loaded = classifier(tiny_model_dirs["roberta"])
    check_reference(loaded, one_batch(loaded), name)


class WordPosition(references.Reference):
    """A null reference, as a new reference's file would define it: later words matter more."""

    name = "word_position_for_test"

    def scores(self, loaded, batch, labels, settings):
        width = max(a.n_words for a in batch.items)
        rows = [np.r_[np.arange(a.n_words, dtype=np.float32), np.full(width - a.n_words, np.nan)] for a in batch.items]
        return references.ReferenceScores(torch.from_numpy(np.stack(rows)))


def test_a_new_reference_is_one_registered_class_that_word_references_and_faithfulness_take(tiny_model_dirs):
    from bertology_utils.attention import attention_for
    from bertology_utils.interventions import mixing

    loaded = classifier(tiny_model_dirs["bert"])
    data = corpus(6)
    references.register_reference(WordPosition())
    try:
        assert references.REFERENCES[-1] == WordPosition.name
        refs = references.word_references(loaded, data, batch_size=4, steps=4)
        only = references.word_references(
            loaded, data, references=[WordPosition.name, "blank_out"], batch_size=4, steps=4
        )
        with pytest.raises(ValueError, match="already registered"):
            references.register_reference(WordPosition())
    finally:
        references.REFERENCE_REGISTRY.unregister(WordPosition.name)
    assert list(refs.scores) == ["blank_out", "input_x_gradient", "integrated_gradients", WordPosition.name]
    for scores, item in zip(refs.scores[WordPosition.name], data.items):
        np.testing.assert_array_equal(scores, np.arange(len(scores)))
        assert len(scores) >= len(item.words)
    maps = {"attention": attention_for(data, loaded)}
    table = mixing.faithfulness(maps, refs.scores)
    assert set(table.reference) == {*references.REFERENCES, WordPosition.name}
    assert list(only.scores) == [WordPosition.name, "blank_out"] and (only.ig_relative_gap, only.ig_panels) == (0, 1)
    for a, b in zip(only.scores["blank_out"], refs.scores["blank_out"]):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="unknown attribution reference 'saliency'; choose from blank_out"):
        references.word_references(loaded, data, references=["saliency"])


def test_a_reference_is_called_by_its_title_else_by_its_name_with_its_words_apart():
    import bertology_utils.interventions.lrp  # noqa: F401  registers attnlrp and cp_lrp
    from bertology_utils.interventions.references import reference_title

    assert [reference_title(n) for n in ("blank_out", "input_x_gradient", "integrated_gradients")] == [
        "blank-out",
        "input × gradient",
        "integrated gradients",
    ]
    assert (reference_title("attnlrp"), reference_title("cp_lrp")) == ("AttnLRP", "CP-LRP")
    assert reference_title("my_own_reference") == "my own reference"  # not registered


def test_labels_on_a_device_are_checked_there(tiny_model_dirs):
    """Labels already on a device are checked without reading them (the meta device fails on a read); labels
    from the host keep their clear error."""
    loaded = classifier(tiny_model_dirs["electra"])
    logits = torch.zeros(3, 2, device="meta")
    scores = target_scores(loaded, logits, torch.zeros(3, dtype=torch.long, device="meta"))
    assert scores.shape == (3,) and scores.device.type == "meta"
    with pytest.raises(ValueError, match="class ids"):
        target_scores(loaded, torch.zeros(3, 2), [0, 2, 1])
