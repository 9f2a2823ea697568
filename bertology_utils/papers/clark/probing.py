"""Clark et al. (2019)'s claims on what heads know: syntax (Table 1), coreference (Table 2), probing
classifiers (Table 3) and clustering (Section 6)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from bertology_utils.papers.claims import (
    Claim,
    Interval,
    Verdict,
    bootstrap_interval,
    permutation_interval,
)
from bertology_utils.papers.clark.patterns import PAPER

if TYPE_CHECKING:
    from bertology_utils.analyses.clustering.same_layer import SameLayerTest
    from bertology_utils.analyses.coreference import CorefResult
    from bertology_utils.analyses.probes import ProbeEvaluation
    from bertology_utils.analyses.syntax.result import SyntaxResult

__all__ = [
    "head_beats_offset",
    "table1_claims",
    "coref_beats_nearest",
    "coref_below_rule_based",
    "PROBE_CLAIMS",
    "probe_margin",
    "table3_claims",
    "same_layer_close",
    "heads_cluster_by_behaviour",
]


# --------------------------------------------------------------------------- syntax (Table 1)


def _pooled(hits: np.ndarray, dependents: np.ndarray, axis: int = -1) -> np.ndarray:
    """Accuracy difference pooled over the resampled sentences: summed per-sentence hit differences over summed
    dependents (a sentence weighs by its dependents, as in the accuracy itself)."""
    return np.sum(hits, axis=axis) / np.sum(dependents, axis=axis)


def head_beats_offset(result: SyntaxResult, relation: str, *, seed: int = 0) -> Claim:
    """A row of Table 1: the best single head beats the best fixed offset for ``relation`` (Stanford label).

    Ours is the *held-out* accuracy (the head chosen on the other half of the sentences), so the
    choice of the best of many heads does not decide it; the paper's row compares its best head
    with its baseline. The statistic, held-out accuracy minus the best offset's, gets a 95% percentile
    bootstrap interval over the sentences with a dependent of the relation (``seed``; a sentence's
    dependents are resampled together, since they are not independent). Our head beats the offset when the
    interval lies above 0, does not when it lies at or below 0; the claim holds when that agrees with the
    paper's row, differs when not, and is inconclusive when the interval straddles 0. Not testable without
    a UD twin, without dependents, with too few to hold out, or with fewer than 3 such sentences.
    """
    from bertology_utils.analyses.syntax.result import PAPER_NOTES, PAPER_TABLE1, STANFORD_TO_UD

    head, accuracy, baseline, offset = PAPER_TABLE1[relation]
    ud = STANFORD_TO_UD[relation]
    paper_beats = accuracy > baseline
    values = {"held_out_accuracy": math.nan, "baseline_accuracy": math.nan, "dependents": 0}
    interval: Interval | None = None  # none where nothing was measured
    if ud is None:
        ours, testable = "no UD twin", False
    elif ud not in result.relations:
        ours, testable = f"{ud}: not in the data", False
    else:
        best = result.best(ud)
        values = {
            "held_out_accuracy": best["held_out_accuracy"],
            "baseline_accuracy": best["baseline_accuracy"],
            "dependents": int(best["count"]),  # one of them decided otherwise moves the accuracy by 1 / dependents
        }
        testable = math.isfinite(best["held_out_accuracy"])
        interval = bootstrap_interval(_pooled, *result.held_out_margins(ud), over="sentences", seed=seed)
        ours = (
            f"{ud}: head {best['best_head']} {100 * best['accuracy']:.1f}, held out "
            f"{100 * best['held_out_accuracy']:.1f}, vs {100 * best['baseline_accuracy']:.1f} "
            f"({best['baseline_offset']:+d}); {best['count']} dependents"
        )
        if not testable:
            ours += ", too few to hold out"
        elif not interval.finite:
            ours += ", too few sentences for an interval"
    beats = Verdict.by_interval(interval) if testable and interval is not None else Verdict.NOT_TESTABLE
    if beats in (Verdict.HOLDS, Verdict.DIFFERS):  # the interval decided whether ours beats: agree with the paper?
        verdict = Verdict.of((beats is Verdict.HOLDS) == paper_beats)
    else:
        verdict = beats
    return Claim(
        f"table1.{relation}",
        f"{relation}: the best head beats the best fixed offset",
        PAPER,
        f"head {head} {accuracy} vs {baseline} ({offset:+d})",
        ours,
        verdict,
        "ours beats: the 95% bootstrap interval over sentences of our best head's held-out accuracy - the best "
        "offset's lies above 0 (does not: at or below 0); holds: that agrees with the paper's row; differs: it "
        "does not; inconclusive: the interval straddles 0",
        values,
        note=PAPER_NOTES.get(relation, ""),
        interval=interval,
    )


def table1_claims(result: SyntaxResult, *, seed: int = 0) -> list[Claim]:
    """:func:`head_beats_offset` for every row of the paper's Table 1 (intervals over sentences, ``seed``)."""
    from bertology_utils.analyses.syntax.result import PAPER_TABLE1

    return [head_beats_offset(result, relation, seed=seed) for relation in PAPER_TABLE1]


# --------------------------------------------------------------------------- coreference (Table 2)


def _coref_numbers(result: CorefResult) -> tuple[float, dict]:
    ours = result.table()["all"]
    return float(ours["best head, held out"]), {name: float(ours[name]) for name in ("nearest name", "salience rule")}


def _coref_interval(result: CorefResult, baseline: str, head_better: bool, seed: int) -> Interval:
    """95% bootstrap interval over GAP examples of the held-out head's accuracy minus ``baseline``'s (the reverse
    when not ``head_better``), in points; paired: an example's two answers are resampled together."""
    gain = 100 * (result.held_out() - np.asarray(result.baselines[baseline], dtype=np.float64))
    return bootstrap_interval(np.mean, gain if head_better else -gain, over="GAP examples", seed=seed)


def coref_beats_nearest(result: CorefResult, *, seed: int = 0) -> Claim:
    """ "The best head beats the nearest-mention baseline" (Table 2: 65 vs 27), on GAP, held out.

    Decided by the 95% bootstrap interval over GAP examples (``seed``) of the held-out accuracy minus nearest
    name's: holds above 0, differs at or below 0, inconclusive when it straddles 0; not testable with fewer
    than 3 examples."""
    from bertology_utils.analyses.coreference import PAPER_TABLE2

    held_out, ours = _coref_numbers(result)
    interval = _coref_interval(result, "nearest name", True, seed)
    return Claim(
        "coref_beats_nearest",
        "The best coreference head beats the nearest-candidate baseline",
        PAPER,
        f"{PAPER_TABLE2['best head (5-4)']:.0f} vs {PAPER_TABLE2['nearest mention']:.0f}",
        f"held out {held_out:.1f} vs nearest name {ours['nearest name']:.1f}",
        Verdict.by_interval(interval),
        "holds: the 95% bootstrap interval over GAP examples of the best head's held-out accuracy - nearest "
        "name's lies above 0; differs: at or below 0; inconclusive: it straddles 0",
        {"held_out_accuracy": held_out, "nearest_accuracy": ours["nearest name"]},
        note="Clark: every earlier CoNLL-2012 mention; GAP: two names, chance 50",
        interval=interval,
    )


def coref_below_rule_based(result: CorefResult, *, seed: int = 0) -> Claim:
    """ "The best head falls short of the rule-based system" (Table 2: 65 vs 69); ours: a salience rule.

    Decided by the 95% bootstrap interval over GAP examples (``seed``) of the salience rule's accuracy minus
    the held-out head's: holds above 0, differs at or below 0, inconclusive when it straddles 0; not testable
    with fewer than 3 examples."""
    from bertology_utils.analyses.coreference import PAPER_TABLE2

    held_out, ours = _coref_numbers(result)
    interval = _coref_interval(result, "salience rule", False, seed)
    return Claim(
        "coref_below_rule_based",
        "The best coreference head falls short of a rule-based system",
        PAPER,
        f"{PAPER_TABLE2['best head (5-4)']:.0f} vs {PAPER_TABLE2['rule-based system']:.0f}",
        f"held out {held_out:.1f} vs salience rule {ours['salience rule']:.1f}",
        Verdict.by_interval(interval),
        "holds: the 95% bootstrap interval over GAP examples of the salience rule's accuracy - the best head's "
        "held-out accuracy lies above 0; differs: at or below 0; inconclusive: it straddles 0",
        {"held_out_accuracy": held_out, "rule_accuracy": ours["salience rule"]},
        note="Clark: Lee et al.'s sieves; ours: a three-line rule",
        interval=interval,
    )


# --------------------------------------------------------------------------- probes (Table 3)

#: The paper's claims that Table 3 supports: id -> (claim, better row, worse row).
PROBE_CLAIMS = {
    "attn_beats_right_branching": ("attention alone beats right-branching", "Attn", "Right-branching"),
    "attn_words_beats_distances": (
        "attention adds syntax beyond words and distances",
        "Attn + words",
        "Distances + words",
    ),
    "trained_beats_random_init": (
        "trained attention beats a random-init model's attention",
        "Attn + words",
        "Random-init Attn + words",
    ),
    "words_help_attn": ("word vectors help the attention probe", "Attn + words", "Attn"),
    "random_init_below_distances": (
        "random-init attention + words falls below distances + words",
        "Distances + words",
        "Random-init Attn + words",
    ),
}


def _uas_difference(
    right_a: np.ndarray, scored_a: np.ndarray, right_b: np.ndarray, scored_b: np.ndarray, axis: int = -1
) -> np.ndarray:
    """UAS points of row a minus row b over the resampled sentences (each row's words pooled)."""
    return 100 * (
        np.sum(right_a, axis=axis) / np.sum(scored_a, axis=axis)
        - np.sum(right_b, axis=axis) / np.sum(scored_b, axis=axis)
    )


def _uas_interval(better: ProbeEvaluation, worse: ProbeEvaluation, seed: int) -> Interval:
    """95% bootstrap interval over test sentences of the UAS difference ``better`` - ``worse``, paired: a sentence's
    words (not independent) are resampled together, in both rows. Sentences that both rows scored words of."""
    (index_a, right_a, scored_a), (index_b, right_b, scored_b) = better.by_sentence(), worse.by_sentence()
    _, a, b = np.intersect1d(index_a, index_b, return_indices=True)
    keep = (scored_a[a] > 0) & (scored_b[b] > 0)
    a, b = a[keep], b[keep]
    return bootstrap_interval(
        _uas_difference, right_a[a], scored_a[a], right_b[b], scored_b[b], over="test sentences", seed=seed
    )


def probe_margin(
    claim_id: str,
    test: Mapping[str, ProbeEvaluation],
    dev: Mapping[str, ProbeEvaluation] | None = None,
    *,
    seed: int = 0,
) -> Claim:
    """One :data:`PROBE_CLAIMS` entry: the better row's test UAS beats the worse row's (margins in UAS points).

    Decided by the 95% bootstrap interval over test sentences (``seed``) of the test UAS difference: holds above
    0, differs at or below 0, inconclusive when it straddles 0; not testable without both rows or with fewer
    than 3 sentences. The dev margin is recorded beside, not read."""
    from bertology_utils.analyses.probes import PAPER_TABLE3

    text, better, worse = PROBE_CLAIMS[claim_id]
    paper = PAPER_TABLE3[better] - PAPER_TABLE3[worse]
    missing = [row for row in (better, worse) if row not in test]
    margin = math.nan if missing else 100 * (test[better].uas - test[worse].uas)
    interval = None if missing else _uas_interval(test[better], test[worse], seed)
    dev_margin = (
        100 * (dev[better].uas - dev[worse].uas) if dev is not None and better in dev and worse in dev else math.nan
    )
    return Claim(
        f"table3.{claim_id}",
        text,
        PAPER,
        f"{better} > {worse} by {paper:+.0f} UAS",
        f"not testable: no {' or '.join(missing)} row"
        if missing
        else f"{margin:+.1f} on test ({dev_margin:+.1f} on dev)",
        Verdict.NOT_TESTABLE if interval is None else Verdict.by_interval(interval),
        f"holds: the 95% bootstrap interval over test sentences of the test UAS of {better} - {worse} lies above 0; "
        "differs: at or below 0; inconclusive: it straddles 0",
        {"test_margin": margin, "dev_margin": dev_margin},
        note="" if paper > 0 else "the paper's numbers do not support it either",
        interval=interval,
    )


def table3_claims(
    test: Mapping[str, ProbeEvaluation], dev: Mapping[str, ProbeEvaluation] | None = None, *, seed: int = 0
) -> list[Claim]:
    """:func:`probe_margin` for every :data:`PROBE_CLAIMS` entry (intervals over test sentences, ``seed``)."""
    return [probe_margin(claim_id, test, dev, seed=seed) for claim_id in PROBE_CLAIMS]


# --------------------------------------------------------------------------- clustering (Section 6)


def _closeness(test: SameLayerTest, alpha: float) -> tuple[Verdict, Interval]:
    """The verdict and the permutation interval at level 1 - ``alpha`` of ``test``'s statistic (other-group mean
    distance - same-group mean) over its null: holds above 0, differs at or below, inconclusive straddling."""
    null = np.asarray(getattr(test, "null", ()), dtype=np.float64).ravel()
    method = f"permutation, {null.size} relabellings of the heads" if null.size else "permutation"
    observed = test.other_mean - test.same_mean if test.testable else math.nan
    interval = permutation_interval(observed, null, level=1 - alpha, method=method)
    return (Verdict.by_interval(interval) if test.testable else Verdict.NOT_TESTABLE), interval


def _distances_observed(test: SameLayerTest) -> str:
    if not test.testable:
        return f"not testable: {test.not_testable}"
    return f"same {test.same_mean:.1f} vs other {test.other_mean:.1f}, p = {test.p_value:.2g}"


def _closeness_rule(group: str, alpha: float) -> str:
    return (
        f"holds: the other-{group} mean distance minus the same-{group} mean, less its permutation null's central "
        f"{1 - alpha:.0%} range, lies above 0; differs: at or below 0; inconclusive: it straddles 0; not testable: "
        "no group of two heads, or one group only"
    )


def same_layer_close(test: SameLayerTest, alpha: float = 0.05) -> Claim:
    """ "Heads in the same layer tend to be close" (Figure 6), against the permutation null of ``test``
    (:func:`~bertology_utils.analyses.clustering.same_layer_statistic`).

    The statistic is the other-layer mean distance minus the same-layer mean; its interval is that minus the
    central 1 - ``alpha`` range of the statistic under the test's label permutations
    (:func:`~bertology_utils.papers.claims.permutation_interval`). Holds when the interval lies above 0 (same-layer
    heads closer than chance), differs at or below 0, inconclusive when it straddles 0. The one-sided permutation
    p-value is kept as a value.
    """
    verdict, interval = _closeness(test, alpha)
    return Claim(
        "same_layer_close",
        "Heads in the same layer tend to be close",
        PAPER,
        "seen in the MDS plot (Figure 6), no test",
        _distances_observed(test),
        verdict,
        _closeness_rule("layer", alpha),
        {"ratio": test.ratio, "p_value": test.p_value},
        interval=interval,
    )


def heads_cluster_by_behaviour(test: SameLayerTest, alpha: float = 0.05) -> Claim:
    """ "Heads cluster by behaviour": the same test and interval as :func:`same_layer_close`, with each head's
    dominant behaviour as its group."""
    verdict, interval = _closeness(test, alpha)
    return Claim(
        "behaviour_clusters",
        "Heads cluster by behaviour",
        PAPER,
        "clusters of [SEP], broad, next/previous-token heads",
        _distances_observed(test),
        verdict,
        _closeness_rule("behaviour", alpha),
        {"ratio": test.ratio, "p_value": test.p_value},
        note="partly by construction: the behaviour groups come from the same attention",
        interval=interval,
    )
