"""Notebook 10's claims on measures built by hand, where the verdict is known."""

import numpy as np
import pytest

from bertology_utils.interventions.objectives import CLS, OTHER
from bertology_utils.interventions.sink_interventions import SinkInterventions
from bertology_utils.interventions.sinks import SinkStatistics
from bertology_utils.papers import sinks
from bertology_utils.papers.claims import Verdict

N, L, H, E = 40, 3, 4, 8


def make_stats(*, sinks_small=True, massive=50.0, peak_kind=CLS, seed=0) -> SinkStatistics:
    """n sentences of a model whose heads park more the further they are along the grid: their sink tokens' norms
    shrink (or grow) with the parking; the largest activation ``massive`` times the median, on ``peak_kind``."""
    rng = np.random.default_rng(seed)
    parking = np.linspace(0.1, 0.9, L * H).reshape(L, H)
    noise = lambda scale: rng.normal(0, scale, (N, L, H))  # noqa: E731
    mass = np.zeros((N, 3, L, H))
    mass[:, 0] = np.clip(parking + noise(0.05), 0, 1)
    sink_norm = np.exp((-2 if sinks_small else 2) * parking + noise(0.1))
    update = np.exp(-parking + noise(0.1))
    tokens = np.tile([1, 1, 2, 16], (N, 1))  # [SEP], [CLS], punctuation, other
    return SinkStatistics(
        model="hand-made",
        num_layers=L,
        num_heads=H,
        multiple=10.0,
        items=np.arange(N),
        mass=mass,
        norm_share=mass * 0.5,
        sink_norm=sink_norm,
        other_norm=np.ones((N, L, H)),
        update=update,
        peak_mass=mass[:, 0] * 0.9,
        layer_norm_share=np.full((N, 3, L), 0.1),
        ratio=np.exp(np.log(massive) + rng.normal(0, 0.1, (N, L + 1))),
        inf_norm=np.full((N, L + 1), 5.0),
        kurtosis=np.full((N, L + 1), 3.0),
        peak_kind=np.full((N, L + 1), peak_kind),
        peak_dim=np.full((N, L + 1), 2),
        outliers_by_kind=np.zeros((N, L + 1, 4), dtype=np.int64),
        tokens_by_kind=tokens,
        outlier_dims=np.zeros((L + 1, E), dtype=np.int64),
    )


def by_id(claims):
    return {c.id: c for c in claims}


def test_a_model_that_parks_on_small_vectors_gives_every_measured_claim():
    claims = by_id(sinks.sink_claims(make_stats(), None, -0.03))
    assert len(claims) == 6
    assert {c.verdict for c in claims.values()} == {Verdict.HOLDS}
    assert claims["kobayashi.small_sink_vectors"].values["norm_ratio"] < 1
    assert claims["kobayashi.mass_against_norm"].values["rho"] < -0.9
    assert claims["sun.massive_activations"].values["ratio"] == pytest.approx(50, rel=0.1)
    assert claims["sun.peaks_on_sinks"].values["chance"] == pytest.approx(4 / 20)
    assert all(c.interval is not None and c.interval.finite for c in claims.values())


def test_the_opposite_model_differs():
    claims = by_id(sinks.sink_claims(make_stats(sinks_small=False, massive=3.0, peak_kind=OTHER), None, -0.03))
    for claim_id in ("kobayashi.small_sink_vectors", "kobayashi.mass_against_norm", "sun.massive_activations"):
        assert claims[claim_id].verdict is Verdict.DIFFERS, claim_id
    assert claims["sun.peaks_on_sinks"].verdict is Verdict.DIFFERS  # every peak on an ordinary token


def test_intervals_are_seeded():
    a = sinks.sink_claims(make_stats(), None, -0.03, seed=4)
    b = sinks.sink_claims(make_stats(), None, -0.03, seed=4)
    assert [c.interval for c in a] == [c.interval for c in b]


def interventions(sink_change: float, control_change: float, clip_factor: float) -> SinkInterventions:
    rng = np.random.default_rng(1)
    base = rng.uniform(0.4, 0.6, N)
    ratios = np.exp(rng.normal(3, 0.2, (N, L)))
    return SinkInterventions(
        objective="hand-made",
        items=np.arange(N),
        losses={
            "none": base,
            "sink heads": base + sink_change + rng.normal(0, 0.01, N),
            "control 1": base + control_change + rng.normal(0, 0.01, N),
            "clipped softmax": base,
        },
        ratios={
            "none": ratios,
            "sink heads": ratios,
            "control 1": ratios,
            "clipped softmax": ratios * clip_factor * np.exp(rng.normal(0, 0.01, (N, 1))),
        },
        n_heads_removed=4,
    )


def test_the_intervention_claims_read_the_per_sentence_changes():
    holding = by_id(sinks.sink_claims(make_stats(), interventions(-0.01, 0.2, 0.5), -0.03))
    assert holding["no_op.removal_matters_less"].verdict is Verdict.HOLDS
    assert holding["no_op.removal_matters_less"].values["controls"] == pytest.approx(0.2, abs=0.01)
    assert holding["bondarenko.clipping_lowers_outliers"].verdict is Verdict.HOLDS
    assert holding["bondarenko.clipping_lowers_outliers"].values["factor"] == pytest.approx(0.5, rel=0.02)
    differing = by_id(sinks.sink_claims(make_stats(), interventions(0.3, 0.0, 2.0), -0.03))
    assert differing["no_op.removal_matters_less"].verdict is Verdict.DIFFERS
    assert differing["bondarenko.clipping_lowers_outliers"].verdict is Verdict.DIFFERS


def test_removal_without_a_control_is_not_testable():
    result = interventions(0.0, 0.0, 1.0)
    del result.losses["control 1"]
    claim = sinks.removal_matters_less(result)
    assert claim.verdict is Verdict.NOT_TESTABLE and claim.interval is None
