"""Fine-tuning: GLUE metrics, learning a separable toy task, the cache (hits, misses, corrupt entries)."""

import json
import warnings

import numpy as np
import pytest
import torch

from bertology_utils.core.errors import BertologyError
from bertology_utils.core.files import is_partial
from bertology_utils.core.models import load_model
from bertology_utils.data import Corpus, Sentence, SentencePair
from bertology_utils.interventions.editing import gate_heads
from bertology_utils.interventions.finetuning import (
    DEFAULT_BUDGETS,
    Budget,
    FineTuneCacheWarning,
    default_budget,
    encode,
    evaluate,
    fine_tune,
    predict,
)
from bertology_utils.interventions.scoring import TASKS, glue_metrics, label_ids, majority_baseline, task_spec

POSITIVE = ["good", "great", "happy", "excellent", "nice", "wonderful"]
NEGATIVE = ["bad", "awful", "sad", "terrible", "poor", "horrible"]
FILLER = ["the", "movie", "was", "really", "quite", "story", "film", "acting", "and", "very"]


def toy_sentiment(n: int, seed: int) -> Corpus:
    """Sentences whose label is whether their one sentiment word is positive: separable by a single token."""
    rng = np.random.default_rng(seed)
    items, labels = [], []
    for i in range(n):
        label = int(rng.integers(2))
        words = list(rng.choice(FILLER, size=int(rng.integers(3, 7))))
        words.insert(int(rng.integers(len(words) + 1)), str(rng.choice(POSITIVE if label else NEGATIVE)))
        items.append(Sentence(f"toy{seed}:{i}", tuple(words)))
        labels.append(label)
    return Corpus.from_items(items, f"toy-{seed}", labels)


TOY_BUDGET = Budget(
    train_examples=None, epochs=5, batch_size=16, learning_rate=1e-2, max_tokens=32, warmup_fraction=0.0
)


@pytest.fixture(scope="module")
def toy():
    return toy_sentiment(128, 0), toy_sentiment(64, 1)


@pytest.fixture(scope="module")
def trained(tiny_model_dirs, toy, tmp_path_factory):
    cache = tmp_path_factory.mktemp("finetuned")
    train, dev = toy
    run = fine_tune(
        "SST-2",
        tiny_model_dirs["bert"],
        budget=TOY_BUDGET,
        seed=0,
        train=train,
        dev=dev,
        cache_dir=cache,
        progress=False,
    )
    return run, cache


def test_glue_metrics():
    logits = np.array([[2.0, 0.0], [0.0, 1.0], [0.0, 3.0], [1.0, 0.0]])
    assert glue_metrics("SST-2", logits, [0, 1, 0, 0]) == {"accuracy": 0.75, "score": 0.75}
    mrpc = glue_metrics("MRPC", logits, [1, 1, 0, 0])  # predicted 0, 1, 1, 0: one hit, one miss, one false alarm
    assert mrpc == {"f1": 0.5, "accuracy": 0.5, "score": 0.5}
    rte = glue_metrics("RTE", np.array([0, 1, 1]), ["entailment", "not_entailment", "entailment"])
    assert rte["accuracy"] == pytest.approx(2 / 3)
    sts = glue_metrics("STS-B", np.array([[0.1], [0.5], [0.4]]), [1.0, 3.0, 2.5])
    assert sts["pearson"] > 0.9 and sts["spearman"] == pytest.approx(1.0)
    assert glue_metrics("CoLA", np.array([1, 0, 1, 0]), [1, 0, 1, 0])["matthews"] == pytest.approx(1.0)
    with pytest.raises(BertologyError):
        task_spec("SQuAD")


def test_majority_baseline():
    assert majority_baseline("RTE", ["entailment", "not_entailment", "not_entailment"]) == pytest.approx(2 / 3)
    # MRPC's score is the mean of F1 and accuracy: always "equivalent" on 3 of 4 positives
    assert majority_baseline("MRPC", [1, 1, 1, 0]) == pytest.approx((6 / 7 + 0.75) / 2)
    assert np.isnan(majority_baseline("STS-B", [1.0, 2.0]))
    with pytest.raises(BertologyError):
        majority_baseline("SST-2", [])


def test_label_ids_and_budgets():
    assert label_ids("RTE", ["not_entailment", "entailment"]).tolist() == [1, 0]
    assert label_ids("STS-B", [4.5]).dtype == np.float32
    with pytest.raises(BertologyError):
        label_ids("SST-2", [2])
    assert set(DEFAULT_BUDGETS) == set(TASKS) and default_budget("sst2") == DEFAULT_BUDGETS["SST-2"]
    with pytest.raises(ValueError):
        Budget(train_examples=0)
    assert TASKS["STS-B"].is_regression and TASKS["STS-B"].num_labels == 1


def test_encode_truncates_pairs(tiny_model_dirs):
    tokenizer = load_model(tiny_model_dirs["bert"]).tokenizer
    pair = SentencePair("p", ("a",) * 30, ("b",) * 5)
    (encoded,) = encode(tokenizer, [pair], max_tokens=16)
    assert len(encoded["input_ids"]) == 16 and set(encoded["token_type_ids"]) == {0, 1}


def test_fine_tuning_learns_a_separable_task(trained):
    run, _ = trained
    assert not run.from_cache
    assert run.metrics["accuracy"] > 0.8, run.describe()
    assert run.loss_curve[-1] < run.loss_curve[0]
    assert run.loaded.model.training is False


def test_cache_hit_reuses_the_checkpoint(trained, tiny_model_dirs, toy):
    run, cache = trained
    train, dev = toy
    again = fine_tune(
        "SST-2",
        tiny_model_dirs["bert"],
        budget=TOY_BUDGET,
        seed=0,
        train=train,
        dev=dev,
        cache_dir=cache,
        progress=False,
    )
    assert again.from_cache and again.path == run.path
    assert again.loaded.weights_sha256 == run.loaded.weights_sha256
    assert again.metrics == run.metrics
    # Gates of one leave the classifier's predictions unchanged.
    with gate_heads(again.loaded, torch.ones(again.loaded.num_layers, again.loaded.num_heads)):
        gated = predict(again.loaded, dev)
    np.testing.assert_array_equal(gated, predict(again.loaded, dev))


def test_cache_misses_on_seed_budget_and_init(trained, tiny_model_dirs, toy):
    run, cache = trained
    train, dev = toy
    small = Budget(train_examples=16, epochs=1, batch_size=16, max_tokens=32)
    other = [
        fine_tune(
            "SST-2",
            tiny_model_dirs["bert"],
            budget=small,
            seed=seed,
            init=init,
            train=train,
            dev=dev,
            cache_dir=cache,
            progress=False,
        )
        for seed, init in [(0, "pretrained"), (1, "pretrained"), (0, "random")]
    ]
    assert len({run.path} | {o.path for o in other}) == 4
    assert not any(o.from_cache for o in other)


def test_random_init_starts_from_models_random_init_and_is_cached_apart(trained, tiny_model_dirs, toy):
    """Kovaleva et al.'s control: the same recipe from models.random_init's copy, its own cache entry."""
    from bertology_utils.core.models import random_init

    run, cache = trained
    train, dev = toy
    small = Budget(train_examples=16, epochs=1, batch_size=16, max_tokens=32)
    kwargs = dict(budget=small, seed=3, train=train, dev=dev, cache_dir=cache, progress=False)
    pre = fine_tune("SST-2", tiny_model_dirs["bert"], **kwargs)
    rand = fine_tune("SST-2", tiny_model_dirs["bert"], init="random", **kwargs)
    keys = [json.loads((r.path / "bertology.json").read_text())["key"] for r in (pre, rand)]
    assert rand.init == "random" and keys[1]["init"] == "random" and "-random-" in rand.path.name
    assert keys[0]["initial_weights_sha256"] != keys[1]["initial_weights_sha256"]
    # the random start is models.random_init of the pre-trained classifier with the run's seed
    torch.manual_seed(3)
    classifier = load_model(tiny_model_dirs["bert"], head="sequence-classification", num_labels=2)
    assert random_init(classifier, 3).weights_sha256 == keys[1]["initial_weights_sha256"]
    again = fine_tune("SST-2", tiny_model_dirs["bert"], init="random", **kwargs)
    assert again.from_cache and again.path == rand.path and again.metrics == rand.metrics
    with pytest.raises(ValueError):
        fine_tune("SST-2", tiny_model_dirs["bert"], init="scratch", **kwargs)


def test_corrupt_entry_is_rebuilt_not_loaded(tiny_model_dirs, toy, tmp_path):
    train, dev = toy
    budget = Budget(train_examples=32, epochs=1, batch_size=16, max_tokens=32)

    def run():
        return fine_tune(
            "SST-2",
            tiny_model_dirs["bert"],
            budget=budget,
            seed=0,
            train=train,
            dev=dev,
            cache_dir=tmp_path,
            progress=False,
        )

    first = run()
    weights = first.path / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-8:] = b"\x00\x00\x80\x7f" * 2  # the last weights become +inf: still a readable file
    weights.write_bytes(bytes(data))
    with pytest.warns(FineTuneCacheWarning, match="corrupt"):
        rebuilt = run()
    assert not rebuilt.from_cache
    assert rebuilt.loaded.weights_sha256 == first.loaded.weights_sha256  # training is deterministic
    record = json.loads((first.path / "bertology.json").read_text())
    assert record["weights_sha256"] == first.loaded.weights_sha256
    # An unreadable record is treated the same way.
    (first.path / "bertology.json").write_text("{not json")
    with pytest.warns(FineTuneCacheWarning):
        assert not run().from_cache
    with warnings.catch_warnings():
        warnings.simplefilter("error", FineTuneCacheWarning)
        assert run().from_cache
    assert not any(is_partial(p) for p in tmp_path.iterdir())  # no half-written entries left


def test_evaluate_reports_n(trained, toy):
    run, _ = trained
    metrics = evaluate(run.loaded, toy[1], "SST-2")
    assert metrics["n"] == 64 and metrics["accuracy"] == pytest.approx(run.metrics["accuracy"])


def test_bf16_precision_trains_learns_and_is_cached_apart(trained, tiny_model_dirs, toy):
    """precision="bf16": the steps and the classifier's passes run under bfloat16 autocast; the key of an
    fp32 checkpoint has no precision field (entries stored before it existed still match)."""
    run, cache = trained
    train, dev = toy
    kwargs = dict(budget=TOY_BUDGET, seed=0, train=train, dev=dev, cache_dir=cache, progress=False)
    fast = fine_tune("SST-2", tiny_model_dirs["bert"], precision="bf16", **kwargs)
    assert not fast.from_cache and fast.path != run.path and fast.loaded.precision == "bf16"
    assert fast.metrics["accuracy"] > 0.8 and "seed 0, bf16;" in fast.describe(), fast.describe()
    assert fast.loaded.weights_sha256 != run.loaded.weights_sha256  # another computation, not a copy
    record = json.loads((fast.path / "bertology.json").read_text())
    assert record["key"]["precision"] == "bf16"
    assert "precision" not in json.loads((run.path / "bertology.json").read_text())["key"]
    base = load_model(tiny_model_dirs["bert"], precision="bf16")
    again = fine_tune("SST-2", base, **kwargs)  # a LoadedModel's own precision is the default
    assert again.from_cache and again.path == fast.path and again.loaded.precision == "bf16"
    logits = predict(again.loaded, dev)
    assert logits.dtype == np.float32
    again.loaded.precision = "fp32"
    exact = predict(again.loaded, dev)
    assert 0 < np.abs(logits - exact).max() < 0.05 * np.abs(exact).max()  # bfloat16 rounding, no more
    with pytest.raises(ValueError, match="precision must be one of"):
        fine_tune("SST-2", tiny_model_dirs["bert"], precision="fp16", **kwargs)


def test_auto_precision_is_bf16_only_where_the_device_has_bfloat16_kernels(trained, tiny_model_dirs, toy, monkeypatch):
    from bertology_utils.core import models

    run, cache = trained
    train, dev = toy
    kwargs = dict(budget=TOY_BUDGET, seed=0, train=train, dev=dev, cache_dir=cache, progress=False)
    for native, picked in ((False, "fp32"), (True, "bf16")):
        monkeypatch.setattr(models, "_native_bf16", lambda device, native=native: native)
        assert models.resolve_precision("auto", "cpu") == picked
        assert load_model(tiny_model_dirs["bert"], precision="auto").precision == picked
        tuned = fine_tune("SST-2", tiny_model_dirs["bert"], precision="auto", **kwargs)
        # a concrete format is what is kept and keyed: auto on a CPU without bfloat16 is the fp32 checkpoint
        assert tuned.loaded.precision == picked and (tuned.path == run.path) == (picked == "fp32")
        assert tuned.from_cache or picked == "bf16"
    for precision in ("fp32", "bf16"):
        assert models.resolve_precision(precision, "cpu") == precision
