"""Hard Concrete gates and L0 head pruning (Voita et al. 2019) on tiny models of several architectures."""

import copy
import math

import numpy as np
import pytest
import torch

from bertology_utils.core.models import frozen, load_model
from bertology_utils.data import Corpus, Sentence
from bertology_utils.interventions import l0
from bertology_utils.interventions.dev_sets import dev_set
from bertology_utils.interventions.editing import edit_attention
from bertology_utils.interventions.gated_logits import gate_shape, predict_with_gates, scores_for_gates
from bertology_utils.interventions.hard_concrete import HardConcreteGates
from bertology_utils.interventions.head_gates import gate_edit
from bertology_utils.interventions.head_removal import prune_heads
from bertology_utils.interventions.l0 import L0Sweep, _pieces, l0_sweep, train_gates

WORDS = ["the", "movie", "was", "good", "bad", "and", "very", "story", "film", "acting"]
GATED_ARCHS = ("bert", "roberta", "distilbert", "electra", "mpnet")
PRUNABLE_ARCHS = ("bert", "roberta", "electra", "distilbert")
BETA, (LOW, HIGH) = 2 / 3, (-0.1, 1.1)
#: Few steps suffice on the tiny models: Adam moves log_alpha by about lr per step.
STEPS = 60


def classifier(folder):
    torch.manual_seed(0)
    return load_model(folder, head="sequence-classification", num_labels=2, device="cpu")


def corpus(n: int = 16, seed: int = 0) -> Corpus:
    rng = np.random.default_rng(seed)
    items = [Sentence(f"t{i}", tuple(rng.choice(WORDS, size=int(rng.integers(3, 9))))) for i in range(n)]
    return Corpus.from_items(items, "toy", [0] * n)


def logits_by_batch(loaded, dev) -> np.ndarray:
    with torch.no_grad():
        return np.concatenate([loaded.model(**b).logits.numpy() for b in dev.batches])


def self_labelled(loaded, n: int = 16, batch_size: int = 6, spread: float = 5.0):
    """A toy set labelled with the model's own predictions: a task the model solves with every head.

    A random tiny model's logits hardly differ between inputs, so its output layer is first rescaled
    and shifted once (on the first call): the logit difference gets median 0 and standard deviation
    ``spread``, half the items fall in each class and removing heads flips some predictions.
    """
    items = corpus(n)
    probe = dev_set(loaded, items, "SST-2", batch_size=batch_size)
    out = [m for m in loaded.model.modules() if isinstance(m, torch.nn.Linear) and m.out_features == 2][-1]
    if not getattr(out, "_rescaled", False):
        logits = logits_by_batch(loaded, probe)
        diff = logits[:, 1] - logits[:, 0]
        with torch.no_grad():
            out.weight.mul_(spread / diff.std())
            out.bias.mul_(spread / diff.std())
            out.bias[1] -= float(np.median(diff)) * spread / diff.std()
        out._rescaled = True
    logits = logits_by_batch(loaded, probe)
    labels = np.empty(n, dtype=int)
    labels[np.concatenate(probe.rows)] = logits.argmax(-1)
    return dev_set(
        loaded, Corpus.from_items(list(items), "toy", [int(x) for x in labels]), "SST-2", batch_size=batch_size
    )


# --------------------------------------------------------------------------- the gates


def test_sampler_matches_the_closed_forms():
    """Empirical P(z = 0), P(z = 1) and P(z != 0) over 100,000 draws, each within 0.008 of its closed form.

    0.008 is five standard errors of a proportion near 1/2 (sqrt(0.25 / 1e5) = 0.0016).
    """
    values = torch.tensor([[-3.0, -1.0, 0.0, 1.5, 4.0]])
    gates = HardConcreteGates(tuple(values.shape))
    with torch.no_grad():
        gates.log_alpha.copy_(values)
        z = gates.sample(100_000, torch.Generator().manual_seed(0))
    assert z.shape == (100_000, *values.shape) and z.min() >= 0 and z.max() <= 1
    la = values.double()
    sigmoid = torch.sigmoid
    # s is below -l / (r - l) (z = 0) when logit(u) + log_alpha < beta log(-l / r); above (1 - l) / (r - l)
    # (z = 1) when it exceeds beta log((1 - l) / (r - 1)); logit(u) is standard logistic.
    p_zero = sigmoid(BETA * math.log(-LOW / HIGH) - la)
    p_one = 1 - sigmoid(BETA * math.log((1 - LOW) / (HIGH - 1)) - la)
    tol = 0.008
    np.testing.assert_allclose((z == 0).double().mean(0), p_zero, atol=tol)
    np.testing.assert_allclose((z == 1).double().mean(0), p_one, atol=tol)
    np.testing.assert_allclose((z != 0).double().mean(0), 1 - p_zero, atol=tol)
    np.testing.assert_allclose(gates.open_probability().detach().double(), 1 - p_zero, atol=1e-6)
    np.testing.assert_allclose(gates.full_probability().detach().double(), p_one, atol=1e-6)
    assert gates.expected_l0().item() == pytest.approx(float((1 - p_zero).sum()), abs=1e-5)
    # the keep mask is P(z != 0) > 0.5
    assert gates.keep_mask().tolist() == (1 - p_zero > 0.5).tolist()


def test_expected_l0_and_samples_are_differentiable():
    gates = HardConcreteGates((2, 3), init=0.5)
    gates.expected_l0().backward()
    p = gates.open_probability().detach()
    np.testing.assert_allclose(gates.log_alpha.grad, p * (1 - p), atol=1e-6)  # d sigmoid = p (1 - p)
    gates.zero_grad()
    gates.sample(64, torch.Generator().manual_seed(0)).sum().backward()
    assert (gates.log_alpha.grad > 0).all()  # more log_alpha, more open


def test_init_is_almost_surely_open_and_deterministic_gates_are_one():
    gates = HardConcreteGates((3, 5))
    assert (gates.open_probability() > 0.99).all() and (gates.full_probability() > 0.8).all()
    assert (gates.deterministic() == 1).all() and gates.keep_mask().all()
    with torch.no_grad():
        gates.log_alpha.fill_(-8.0)
    assert (gates.deterministic() == 0).all() and not gates.keep_mask().any()


@pytest.mark.parametrize("arch", GATED_ARCHS)
def test_open_gates_change_nothing_and_every_gate_gets_a_gradient(tiny_model_dirs, arch):
    loaded = classifier(tiny_model_dirs[arch])
    dev = dev_set(loaded, corpus(), "SST-2", batch_size=5)
    gates = HardConcreteGates.for_model(loaded)
    assert gates.shape == gate_shape(loaded) == (loaded.num_layers, loaded.num_heads)
    plain = logits_by_batch(loaded, dev)
    gated = []
    for batch in dev.batches:
        z = gates.deterministic().expand(len(batch["input_ids"]), *gates.shape)
        with edit_attention(loaded.model, gate_edit(z)), torch.no_grad():
            gated.append(loaded.model(**batch).logits.numpy())
    np.testing.assert_allclose(np.concatenate(gated), plain, atol=1e-5)
    # sampled gates reach the loss through the edit point of every head
    half_open = HardConcreteGates(gates.shape, init=0.0)
    batch = dev.batches[0]
    z = half_open.sample(len(batch["input_ids"]), torch.Generator().manual_seed(0))
    with edit_attention(loaded.model, gate_edit(z)):
        loaded.model(**batch).logits.pow(2).sum().backward()
    assert (half_open.log_alpha.grad != 0).all()


@pytest.mark.parametrize("arch", PRUNABLE_ARCHS)
def test_keep_mask_as_binary_gates_equals_physical_pruning(tiny_model_dirs, arch):
    loaded = classifier(tiny_model_dirs[arch])
    dev = dev_set(loaded, corpus(), "SST-2", batch_size=5)
    gates = HardConcreteGates.for_model(loaded)
    with torch.no_grad():
        gates.log_alpha.uniform_(-4.0, 4.0, generator=torch.Generator().manual_seed(1))
        gates.log_alpha[:, 0] = 4.0  # every layer keeps a head (prune_heads refuses an empty layer)
        gates.log_alpha[-1, -1] = -4.0
    mask = gates.keep_mask().numpy()
    assert mask.any() and not mask.all()
    gated = predict_with_gates(loaded, dev, mask[None].astype(np.float32))[0]
    pruned = copy.deepcopy(loaded)
    prune_heads(pruned, mask)
    np.testing.assert_allclose(logits_by_batch(pruned, dev), gated[np.concatenate(dev.rows)], atol=1e-5)


# --------------------------------------------------------------------------- training


def test_batches_cut_for_training_keep_every_row_and_its_logits(tiny_model_dirs):
    loaded = classifier(tiny_model_dirs["bert"])
    dev = dev_set(loaded, corpus(), "SST-2", batch_size=6)
    pieces = _pieces(dev, 4)
    assert max(len(rows) for _, rows in pieces) == 4
    rows = np.concatenate([rows for _, rows in pieces])
    np.testing.assert_array_equal(np.sort(rows), np.arange(len(dev)))
    with torch.no_grad():
        cut = np.concatenate([loaded.model(**b).logits.numpy() for b, _ in pieces])
    whole = np.zeros_like(cut)
    whole[np.concatenate(dev.rows)] = logits_by_batch(loaded, dev)
    np.testing.assert_allclose(cut, whole[rows], atol=1e-5)
    assert _pieces(dev, None)[0][0] is dev.batches[0]


def test_training_is_deterministic_and_penalty_prunes(tiny_model_dirs):
    loaded = classifier(tiny_model_dirs["bert"])
    train = self_labelled(loaded)
    weights = [p.detach().clone() for p in loaded.model.parameters()]
    runs = [train_gates(loaded, train, 10.0, steps=STEPS, seed=seed, batch_size=4) for seed in (0, 0, 1)]
    np.testing.assert_array_equal(runs[0].log_alpha, runs[1].log_alpha)
    np.testing.assert_array_equal(runs[0].task_loss, runs[1].task_loss)
    assert not np.array_equal(runs[0].log_alpha, runs[2].log_alpha)
    # the model's weights are frozen and left as they were, trainable again
    assert all(torch.equal(a, b) for a, b in zip(weights, loaded.model.parameters()))
    assert all(p.requires_grad for p in loaded.model.parameters()) and not loaded.model.training
    run = runs[0]
    assert run.task_loss.shape == run.expected_l0_history.shape == (STEPS,) and np.isfinite(run.objective).all()
    assert run.expected_l0_history[-1] < run.expected_l0_history[0]


@pytest.mark.filterwarnings("ignore:precision 'bf16' on cpu")
def test_bf16_training_holds_bfloat16_weights_with_the_same_gates(tiny_model_dirs, monkeypatch):
    """Under bf16 the gates train on bfloat16 copies of the linear weights (made once, not by autocast at every
    step): the same gates to the bit as with the float32 weights only frozen, and the weights back as they were."""
    torch.manual_seed(0)
    loaded = load_model(tiny_model_dirs["bert"], head="sequence-classification", num_labels=2, device="cpu",
                        precision="bf16")  # fmt: skip
    train = self_labelled(loaded)
    weights = [p.detach().clone() for p in loaded.model.parameters()]
    held = train_gates(loaded, train, 1.0, steps=20, batch_size=4)
    monkeypatch.setattr(l0, "frozen", lambda model: frozen(model, "fp32"))  # frozen float32 weights, as before
    cast = train_gates(loaded, train, 1.0, steps=20, batch_size=4)
    np.testing.assert_array_equal(held.log_alpha, cast.log_alpha)
    np.testing.assert_array_equal(held.task_loss, cast.task_loss)
    assert not np.array_equal(held.log_alpha, train_gates(loaded, train, 1.0, steps=20, batch_size=4, seed=1).log_alpha)
    for before, p in zip(weights, loaded.model.parameters()):
        assert p.dtype == torch.float32 and p.requires_grad and torch.equal(p, before)


def test_sweep_from_no_penalty_to_a_huge_one(tiny_model_dirs):
    loaded = classifier(tiny_model_dirs["roberta"])
    train = self_labelled(loaded)
    dev = self_labelled(loaded, n=10)
    layers, heads = gate_shape(loaded)
    lambdas = [0.0, 5.0, 30.0, 1e3]
    sweep = l0_sweep(loaded, train, dev, lambdas, steps=STEPS)
    assert sweep.masks.shape == (len(lambdas), layers, heads) and sweep.masks.dtype == bool
    assert sweep.kept[0] == layers * heads and sweep.kept[-1] == 0
    l0 = sweep.table()["expected_l0"].to_numpy()
    assert (np.diff(l0) < 0).all(), l0  # a larger penalty, fewer expected open gates
    table = sweep.table()
    assert list(table.columns) == ["lambda", "kept", "expected_l0", "score"] and len(table) == len(lambdas)
    assert sweep.base == sweep.scores[0] == 1.0  # labels are the model's own predictions
    assert sweep.scores[-1] < 1 and sweep.degenerate == ""
    fractions, scores = sweep.curve()
    assert (np.diff(fractions) >= 0).all() and fractions[0] == 0 and fractions[-1] == 1
    np.testing.assert_array_equal(np.sort(scores), np.sort(sweep.scores))

    # degenerate sweeps say so (the same trainings, fewer lambdas)
    def part(*index):
        index = list(index)
        trainings = [sweep.trainings[i] for i in index]
        return L0Sweep(
            sweep.task,
            sweep.metric,
            sweep.lambdas[index],
            trainings,
            sweep.masks[index],
            sweep.scores[index],
            sweep.base,
        )

    assert "kept all" in part(0).degenerate
    assert "pruned every head" in part(3).degenerate and "pruned every head" in part(3, 3).degenerate
    assert "all" in part(0, 3).degenerate and "none" in part(0, 3).degenerate
    assert part(0, 1).degenerate == ""


def test_regression_tasks_train_on_their_own_loss(tiny_model_dirs):
    torch.manual_seed(0)
    loaded = load_model(tiny_model_dirs["distilbert"], head="sequence-classification", num_labels=1, device="cpu")
    items = corpus(12)
    train = dev_set(loaded, Corpus.from_items(list(items), "toy", [float(i % 5) for i in range(12)]), "STS-B")
    run = train_gates(loaded, train, 0.01, steps=10)
    assert np.isfinite(run.task_loss).all() and run.task_loss.mean() > 0.1  # squared errors of scores 0..4


def test_cached_sweep_equals_a_fresh_one(tiny_model_dirs, monkeypatch, tmp_path):
    from bertology_utils.core import settings
    from bertology_utils.interventions import l0

    monkeypatch.setenv(settings.CACHE_DIR_ENV, str(tmp_path / "cache"))
    loaded = classifier(tiny_model_dirs["electra"])
    train, dev = self_labelled(loaded), self_labelled(loaded, n=10)
    lambdas = [0.0, 0.05]
    fresh = l0_sweep(loaded, train, dev, lambdas, steps=20)
    calls = []
    original = l0._train
    monkeypatch.setattr(l0, "_train", lambda *a, **k: calls.extend(a[2]) or original(*a, **k))  # lambdas trained
    stored = l0_sweep(loaded, train, dev, lambdas, steps=20, cache=True)
    assert len(calls) == len(lambdas)
    reused = l0_sweep(loaded, train, dev, lambdas, steps=20, cache=True)
    assert len(calls) == len(lambdas)  # every lambda read back
    assert all(t.from_cache for t in reused.trainings) and not any(t.from_cache for t in stored.trainings)
    for sweep in (stored, reused):
        np.testing.assert_array_equal(sweep.masks, fresh.masks)
        np.testing.assert_array_equal(sweep.scores, fresh.scores)
        for got, want in zip(sweep.trainings, fresh.trainings):
            np.testing.assert_array_equal(got.log_alpha, want.log_alpha)
            np.testing.assert_array_equal(got.task_loss, want.task_loss)
            np.testing.assert_array_equal(got.expected_l0_history, want.expected_l0_history)
    # another lambda, step count or seed is another entry
    l0_sweep(loaded, train, dev, [0.05], steps=20, seed=1, cache=True)
    l0_sweep(loaded, train, dev, [0.05], steps=21, cache=True)
    assert len(calls) == len(lambdas) + 2
    # a sweep trains only the lambdas the cache lacks
    more = l0_sweep(loaded, train, dev, [0.0, 0.5, 0.05], steps=20, cache=True)
    assert calls[len(lambdas) + 2 :] == [0.5] and [t.from_cache for t in more.trainings] == [True, False, True]
    np.testing.assert_array_equal(more.trainings[2].log_alpha, fresh.trainings[1].log_alpha)


def test_orders_at_l0_counts_and_the_l0_plot(tiny_model_dirs):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bertology_utils.interventions.l0 import orders_at_l0_counts, plot_l0_pruning
    from bertology_utils.interventions.pruning import pruning_curve, random_pruning_curves

    loaded = classifier(tiny_model_dirs["roberta"])
    train, dev = self_labelled(loaded), self_labelled(loaded, n=10)
    sweep = l0_sweep(loaded, train, dev, [0.0, 5.0, 1e3], steps=STEPS)
    curve = pruning_curve(loaded, dev, step=0.25)
    randoms = random_pruning_curves(loaded, dev, seeds=[0, 1], step=0.25)
    table = orders_at_l0_counts(loaded, dev, sweep, curve, randoms)
    assert list(table.columns) == ["lambda", "kept", "expected_l0", "score", "importance order", "random order"]
    shape = gate_shape(loaded)
    np.testing.assert_allclose(
        table["importance order"], scores_for_gates(loaded, dev, curve.masks_keeping(sweep.kept, shape))
    )
    # keeping every head or none, the order does not matter: every column scores what the L0 mask scores
    ends = np.isin(sweep.kept, (0, np.prod(shape)))
    assert ends.sum() >= 2
    for column in ("importance order", "random order"):
        np.testing.assert_allclose(table[column][ends], sweep.scores[ends])

    fig = plot_l0_pruning(sweep, curve, randoms, keep=0.9, task="toy")
    ax = fig.axes[0]
    assert ax.get_title() == "toy: L0 gates vs importance vs random"
    assert sorted(t.get_text() for t in ax.texts) == ["λ=0", "λ=1000", "λ=5"]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[0].startswith("by importance (prunable") and labels[-1] == "L0 gates (one point per λ)"
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), curve.scores)
    plt.close("all")


@pytest.mark.parametrize("family", ["bert", "distilbert"])
def test_a_sweep_trains_each_lambda_as_it_would_alone(tiny_model_dirs, family):
    loaded = classifier(tiny_model_dirs[family])
    train, dev = self_labelled(loaded), self_labelled(loaded, n=10)
    lambdas = [0.0, 5.0, 30.0]
    sweep = l0_sweep(loaded, train, dev, lambdas, steps=STEPS, seed=2, batch_size=4)
    assert len({t.seconds for t in sweep.trainings}) == 1  # one training for all three
    for lam, together in zip(lambdas, sweep.trainings):
        alone = train_gates(loaded, train, lam, steps=STEPS, seed=2, batch_size=4)
        assert together.lam == lam and not together.from_cache
        np.testing.assert_allclose(together.log_alpha, alone.log_alpha, rtol=0, atol=2e-3)
        # a batch three times as tall is summed in another order; self_labelled's rescaled logits magnify that
        np.testing.assert_allclose(together.task_loss, alone.task_loss, rtol=2e-3, atol=1e-5)
        # a sum of one sigmoid of log_alpha per head: within what log_alpha's gap allows, on any thread count
        np.testing.assert_allclose(together.expected_l0_history, alone.expected_l0_history, rtol=0, atol=1e-2)
        decided = np.abs(alone.open_probability() - 0.5) > 0.05  # a gate still at a toss-up may go either way
        np.testing.assert_array_equal(together.keep_mask()[decided], alone.keep_mask()[decided])
        assert decided.mean() > 0.8
