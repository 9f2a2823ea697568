"""Sinks, no-op heads and outlier dimensions: Kobayashi's, Sun's and Bondarenko's findings on notebook 10's numbers.

Each claim is one a frozen encoder can test, decided by a 95% bootstrap interval over the sentences
(:meth:`~bertology_utils.interventions.sinks.SinkStatistics.draws`; the interventions' per-sentence changes with
:func:`~bertology_utils.core.uncertainty.bootstrap_interval`):

* Kobayashi et al. 2020, `Attention is Not Only a Weight <https://arxiv.org/abs/2004.10102>`_:
  :func:`small_sink_vectors` (the vectors the sink tokens send are smaller than the other tokens') and
  :func:`mass_against_norm` (the more a head parks, the smaller what it parks on sends);
* Sun et al. 2024, `Massive Activations in Large Language Models <https://arxiv.org/abs/2402.17762>`_:
  :func:`massive_activations` (some activation is many times the median) and :func:`peaks_on_sinks` (the largest
  sits on the first or a delimiter token);
* Bondarenko et al. 2023, `Quantizable Transformers <https://arxiv.org/abs/2306.12929>`_: :func:`sinks_do_little`
  (the heads that park change the residual stream least), :func:`sinks_on_outlier_token` (they park on the token
  carrying the largest activation), :func:`removal_matters_less` (removing them costs less than removing other
  heads; Clark et al.'s no-op reading) and :func:`clipping_lowers_outliers` (clipped softmax, which the paper trains
  with, applied at inference).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import numpy as np

from bertology_utils.core.uncertainty import bootstrap_interval, spearman_rho
from bertology_utils.papers.claims import Claim, Verdict

if TYPE_CHECKING:
    from bertology_utils.interventions.sink_interventions import SinkInterventions
    from bertology_utils.interventions.sinks import SinkStatistics

__all__ = [
    "KOBAYASHI",
    "SUN",
    "BONDARENKO",
    "small_sink_vectors",
    "mass_against_norm",
    "massive_activations",
    "peaks_on_sinks",
    "sinks_do_little",
    "sinks_on_outlier_token",
    "removal_matters_less",
    "clipping_lowers_outliers",
    "sink_claims",
]

KOBAYASHI = "Kobayashi et al. 2020"
SUN = "Sun et al. 2024"
BONDARENKO = "Bondarenko et al. 2023"
_SINKS = "[CLS], [SEP] and punctuation"


def _rule(statistic: str, *, below: bool = False) -> str:
    side, other = ("below", "at or above") if below else ("above", "at or below")
    return (
        f"holds: the 95% bootstrap interval over sentences of {statistic} lies {side} 0; differs: {other} 0; "
        "inconclusive: it straddles 0"
    )


def _log_value_ratio(means: Mapping[str, np.ndarray]) -> np.ndarray:
    """Per head (with any leading draws axis), log(sink tokens' ‖f(x)‖ / other tokens')."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.log(means["sink_norm"] / means["other_norm"])


def _flat_heads(values: np.ndarray, draws: bool) -> np.ndarray:
    return values.reshape(values.shape[0], -1) if draws else values.reshape(-1)


def small_sink_vectors(stats: SinkStatistics, *, seed: int = 0) -> Claim:
    """The vectors the sink tokens send are smaller than the other tokens': per head, the attention-weighted mean
    ||f_h(x_j)|| of [CLS], [SEP] and punctuation over that of the other tokens, its log averaged over heads
    weighted by each head's sink mass, lies below 0.

    :param stats: the measures.
    :param seed: the bootstrap's seed.
    :returns: the claim.
    """
    observed, drawn = stats.means(), stats.draws(seed=seed)

    def statistic(means: Mapping[str, np.ndarray], draws: bool) -> np.ndarray:
        logs, mass = _flat_heads(_log_value_ratio(means), draws), _flat_heads(means["sink_mass"], draws)
        finite = np.isfinite(logs)
        return np.where(finite, logs * mass, 0).sum(-1) / np.where(finite, mass, 0).sum(-1)

    value = float(statistic(observed, False))
    interval = drawn.interval(statistic(drawn.values, True))
    return Claim(
        "kobayashi.small_sink_vectors",
        f"The tokens heads park on ({_SINKS}) send small vectors ‖f(x)‖",
        KOBAYASHI,
        "BERT's norm-weighted attention to [CLS], [SEP] and punctuation is far below its raw weight",
        f"sink tokens' ‖f(x)‖ is {math.exp(value):.2f}x the other tokens' (mean over heads, weighted by sink mass)",
        Verdict.by_interval(interval, below=True),
        _rule("the sink-mass-weighted mean over heads of log(sink tokens' ‖f(x)‖ / other tokens')", below=True),
        {"norm_ratio": math.exp(value), "log_norm_ratio": value},
        interval=interval,
    )


def _spearman_claim(
    stats: SinkStatistics,
    seed: int,
    texts: tuple[str, str, str, str],
    x: Callable[[Mapping[str, np.ndarray]], np.ndarray],
    y: Callable[[Mapping[str, np.ndarray]], np.ndarray],
    what: str,
    *,
    below: bool,
) -> Claim:
    """A rank correlation over heads of ``x`` and ``y`` (each read from :meth:`SinkStatistics.means`), with its
    interval over the sentences' resamples. ``texts``: the claim's id, claim, paper and paper value."""
    claim_id, claim, paper, paper_value = texts
    observed, drawn = stats.means(), stats.draws(seed=seed)
    xs, ys = x(observed).reshape(-1), y(observed).reshape(-1)
    keep = np.isfinite(xs) & np.isfinite(ys)
    rule = _rule(f"Spearman's rho over heads of {what}", below=below)
    if keep.sum() < 3:
        return Claim(*texts, "not testable: fewer than 3 heads", Verdict.NOT_TESTABLE, rule)
    rho = float(spearman_rho(xs[keep], ys[keep]))
    x_drawn, y_drawn = (v.reshape(len(v), -1)[:, keep] for v in (x(drawn.values), y(drawn.values)))
    interval = drawn.interval(spearman_rho(x_drawn, y_drawn, axis=-1))
    return Claim(
        claim_id,
        claim,
        paper,
        paper_value,
        f"Spearman's rho {rho:+.2f} over {int(keep.sum())} heads",
        Verdict.by_interval(interval, below=below),
        rule,
        {"rho": rho, "heads": int(keep.sum())},
        interval=interval,
    )


def _sink_mass(means: Mapping[str, np.ndarray]) -> np.ndarray:
    return means["sink_mass"]


def mass_against_norm(stats: SinkStatistics, *, seed: int = 0) -> Claim:
    """The more attention a head parks on sinks, the smaller the vectors it parks on: Spearman's rho over heads of
    sink mass and log(sink tokens' ‖f(x)‖ / other tokens') lies below 0.

    :param stats: the measures.
    :param seed: the bootstrap's seed.
    :returns: the claim.
    """
    texts = (
        "kobayashi.mass_against_norm",
        "Heads that park more attention park it on smaller vectors",
        KOBAYASHI,
        "high weights on [CLS], [SEP] and punctuation meet small ‖f(x)‖: the weight and the norm cancel",
    )
    what = "sink mass and log(sink tokens' ‖f(x)‖ / other tokens')"
    return _spearman_claim(stats, seed, texts, _sink_mass, _log_value_ratio, what, below=True)


def massive_activations(stats: SinkStatistics, *, seed: int = 0) -> Claim:
    """Some hidden state's largest activation is more than ``stats.multiple`` times its median magnitude: the
    largest over hidden states of the mean log(largest / median) over sentences, minus log(multiple), lies above 0.

    :param stats: the measures.
    :param seed: the bootstrap's seed.
    :returns: the claim.
    """
    observed, drawn = stats.means(), stats.draws(seed=seed)
    threshold = math.log(stats.multiple)
    peak = int(np.argmax(observed["log_ratio"]))
    ratio = math.exp(float(observed["log_ratio"][peak]))
    interval = drawn.interval(drawn["log_ratio"].max(-1) - threshold)
    return Claim(
        "sun.massive_activations",
        "A few activations are many times the median magnitude",
        SUN,
        "a very few activations orders of magnitude above the others (large language models)",
        f"largest / median {ratio:.0f}x at hidden state {peak} of 0-{stats.num_layers} (geometric mean over sentences)",
        Verdict.by_interval(interval),
        _rule(f"the largest over hidden states of the mean log(largest / median) minus log({stats.multiple:g})"),
        {"peak_state": peak, "ratio": ratio, "multiple": stats.multiple},
        interval=interval,
    )


def peaks_on_sinks(stats: SinkStatistics, *, seed: int = 0) -> Claim:
    """The largest activation sits on the first or a delimiter token: the share of (sentence, hidden state) pairs
    whose largest activation sits on [CLS], [SEP] or punctuation, minus those tokens' share of the tokens (where
    it would sit by chance), lies above 0.

    :param stats: the measures.
    :param seed: the bootstrap's seed.
    :returns: the claim.
    """
    observed, drawn = stats.means(), stats.draws(seed=seed)
    share, chance = float(observed["peaks_on_sinks"].mean()), float(observed["sink_tokens"])
    interval = drawn.interval(drawn["peaks_on_sinks"].mean(-1) - drawn["sink_tokens"])
    return Claim(
        "sun.peaks_on_sinks",
        f"The largest activations sit on the first and delimiter tokens ({_SINKS})",
        SUN,
        "on the starting token and the first delimiter ('.', newline), at fixed dimensions",
        f"{share:.0%} of the largest activations on them; they are {chance:.0%} of the tokens",
        Verdict.by_interval(interval),
        _rule("the share of largest activations on those tokens minus their share of the tokens"),
        {"share": share, "chance": chance},
        interval=interval,
    )


def sinks_do_little(stats: SinkStatistics, *, seed: int = 0) -> Claim:
    """The heads that park change the residual stream least: Spearman's rho over heads of sink mass and the mean
    norm of the head's output ‖sum_j alpha_ij f_h(x_j)‖ lies below 0.

    :param stats: the measures.
    :param seed: the bootstrap's seed.
    :returns: the claim.
    """
    texts = (
        "bondarenko.sinks_do_little",
        "Heads that park their attention leave the residual stream nearly unchanged (a no-op)",
        BONDARENKO,
        "no-op heads put their mass on delimiters with small values, so the update is small",
    )
    what = "sink mass and the norm of the head's output"
    return _spearman_claim(stats, seed, texts, _sink_mass, lambda m: m["update"], what, below=True)


def sinks_on_outlier_token(stats: SinkStatistics, *, seed: int = 0) -> Claim:
    """Heads park on the token carrying the largest activation: Spearman's rho over heads of sink mass and the
    attention on that token (of the layer's input) lies above 0.

    :param stats: the measures.
    :param seed: the bootstrap's seed.
    :returns: the claim.
    """
    texts = (
        "bondarenko.sinks_on_outlier_token",
        "Heads park their attention on the token that carries the outlier activation",
        BONDARENKO,
        "the outliers sit on the delimiter tokens the no-op heads attend to",
    )
    what = "sink mass and the attention on the token with the layer input's largest activation"
    return _spearman_claim(stats, seed, texts, _sink_mass, lambda m: m["peak_mass"], what, below=False)


def _paired_claim(
    claim_id: str, claim: str, paper: str, paper_value: str, ours: str, values: np.ndarray, what: str, extra: dict
) -> Claim:
    interval = bootstrap_interval(np.mean, values, over="sentences")
    return Claim(
        claim_id,
        claim,
        paper,
        paper_value,
        ours,
        Verdict.by_interval(interval, below=True),
        _rule(f"the mean over sentences of {what}", below=True),
        {"mean": float(np.mean(values)), **extra},
        interval=interval,
    )


def removal_matters_less(result: SinkInterventions) -> Claim:
    """Removing the sink heads changes the loss less than removing as many other heads of the same layers: the
    mean over sentences of (the loss change without the sink heads - the mean loss change without each control set)
    lies below 0.

    :param result: the interventions' results.
    :returns: the claim; not testable without sink heads or a control.
    """
    claim, paper = "Removing the no-op heads costs less than removing other heads", "Clark et al. 2019; " + BONDARENKO
    paper_value = "heads that attend to [SEP] and delimiters do nothing: removing their attention changes little"
    if "sink heads" not in result.losses or not result.controls:
        return Claim(
            "no_op.removal_matters_less",
            claim,
            paper,
            paper_value,
            "not testable: no sink heads, or no other heads to remove instead",
            Verdict.NOT_TESTABLE,
            _rule("the sink heads' loss change minus the controls'", below=True),
        )
    sinks, controls = result.loss_change("sink heads"), result.loss_change("controls")
    return _paired_claim(
        "no_op.removal_matters_less",
        claim,
        paper,
        paper_value,
        f"loss change {sinks.mean():+.3f} without {result.n_heads_removed} sink heads, {controls.mean():+.3f} "
        f"without as many others",
        sinks - controls,
        "the loss change without the sink heads minus that without the control heads",
        {"sink_heads": float(sinks.mean()), "controls": float(controls.mean()), "heads": result.n_heads_removed},
    )


def clipping_lowers_outliers(result: SinkInterventions, gamma: float) -> Claim:
    """Clipped softmax lowers the largest activations: the mean over sentences of log10(the largest activation
    ratio over the layers with clipped softmax / without) lies below 0.

    :param result: the interventions' results.
    :param gamma: the clipped softmax's gamma (for the text).
    :returns: the claim.
    """
    change = result.ratio_change("clipped softmax")
    return _paired_claim(
        "bondarenko.clipping_lowers_outliers",
        "Letting heads give exactly zero (clipped softmax) lowers the outliers",
        BONDARENKO,
        "trained with clipped softmax, BERT's outliers (largest magnitude, kurtosis) shrink sharply",
        f"at inference (gamma {gamma:g}, no retraining): largest activation ratio x{10 ** change.mean():.2f}",
        change,
        "log10(largest activation ratio with clipped softmax / without)",
        {"factor": float(10 ** change.mean()), "loss_change": float(result.loss_change("clipped softmax").mean())},
    )


def sink_claims(stats: SinkStatistics, result: SinkInterventions | None, gamma: float, *, seed: int = 0) -> list[Claim]:
    """Every claim of this module: the measures' six, and the interventions' two where they ran.

    :param stats: the measures.
    :param result: the interventions' results, or None.
    :param gamma: the clipped softmax's gamma.
    :param seed: the bootstraps' seed.
    :returns: the claims.
    """
    claims = [
        claim(stats, seed=seed)
        for claim in (
            small_sink_vectors,
            mass_against_norm,
            massive_activations,
            peaks_on_sinks,
            sinks_do_little,
            sinks_on_outlier_token,
        )
    ]
    if result is not None:
        claims += [removal_matters_less(result), clipping_lowers_outliers(result, gamma)]
    return claims
