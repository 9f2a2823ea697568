"""Clark et al. (2019), *What Does BERT Look At?*: each claim, checked against our numbers.

One function per claim; each takes analysis results (arrays are ``(layers, heads)`` means, one
per head) and returns a :class:`~bertology_utils.papers.claims.Claim`. The paper measured
BERT-base (12 layers); layer ranges are scaled to the model's depth with
:func:`~bertology_utils.papers.claims.depth_scaled_layers`, so "layers 6-10 of 12" is the same
share of depth in a 6-layer model. Paper values are from ../shared/reference/papers.md. A claim
computed with a fine-tuned classifier's objective (notebook 02's SST-2 loss) goes through
:func:`~bertology_utils.papers.claims.on_classifier` in the notebook, with the classifier's dev score
and its baseline's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from bertology_utils.core.heads import Head
from bertology_utils.papers.claims import Claim, Verdict, depth_scaled_layers, layer_mean

if TYPE_CHECKING:
    import pandas as pd

    from bertology_utils.analyses.clustering import SameLayerTest
    from bertology_utils.analyses.coreference import CorefResult
    from bertology_utils.analyses.probes import ProbeEvaluation
    from bertology_utils.analyses.syntax import SyntaxResult
    from bertology_utils.interventions.gradients import GradientStats

__all__ = [
    "PAPER",
    "current_token",
    "neighbour_heads",
    "sep_middle_layers",
    "cls_early_layers",
    "punctuation_last_layers",
    "sep_attends_to_sep",
    "early_layers_broad",
    "cls_entropy_last_layer",
    "special_gradient_small",
    "gradients_shrink",
    "attention_removal",
    "objective_claims",
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

PAPER = "Clark et al. 2019"
_TOKENS = {"sep": "[SEP]", "cls": "[CLS]", "punct": "punctuation"}


def _finite(*values) -> bool:
    return all(v is not None and math.isfinite(v) for v in values)


# --------------------------------------------------------------------------- surface patterns (Section 3)


def current_token(self_share) -> Claim:
    """ "Most heads put little attention on the current token": the median head's share on its own position."""
    values = np.asarray(self_share, dtype=np.float64)
    median = float(np.nanmedian(values)) if np.isfinite(values).any() else math.nan
    return Claim(
        "current_token",
        "Most heads put little attention on the current token",
        PAPER,
        "most heads",
        f"median self share {median:.2f}",
        Verdict.of(median < 0.1, _finite(median)),
        "median over heads of the share on the current position < 0.10",
        {"median_self_share": median},
    )


def neighbour_heads(share, position: str) -> Claim:
    """ "Some early heads put > 50% on the previous (about 4 heads) / next (about 5) token": all such heads early."""
    paper_n = {"previous": 4, "next": 5}[position]
    values = np.asarray(share, dtype=np.float64)
    strong = [Head(int(l), int(h)) for l, h in np.argwhere(values > 0.5)]
    early = depth_scaled_layers(1, 6, values.shape[0])[1]
    listed = ", ".join(map(str, strong)) or "none"
    return Claim(
        f"{position}_token_heads",
        f"Some heads put > 50% on the {position} token, in early layers",
        PAPER,
        f"about {paper_n} of 144 heads",
        f"{len(strong)} of {values.size} heads ({listed})",
        Verdict.of(bool(strong) and all(h.layer + 1 <= early for h in strong), bool(np.isfinite(values).any())),
        f">= 1 head above 0.5, all in layers 1-{early} (the first half of the depth)",
        {"heads": len(strong), "last_early_layer": early},
    )


def sep_middle_layers(sep_share, testable: bool = True) -> Claim:
    """ "More than half of the attention in layers 6-10 goes to [SEP]" (Clark's Figure 2, Section 3.2).

    The one definition every notebook uses: the mean [SEP] share over the heads of the layers that
    cover depths 6/12 to 10/12 (layers 6-10 of BERT-base) must exceed 0.5. Figure 2 plots each
    layer's average attention to [SEP], and the claim is about those layers together; the
    maximum over any one layer (an earlier definition here) would pass a model whose [SEP]
    peak sits elsewhere, and fail none that the paper's statement fails. ``testable``: the inputs
    had separators at all (a corpus without [SEP] cannot show it).
    """
    mean, layers = layer_mean(sep_share, 6, 10)
    return Claim(
        "sep_middle_layers",
        "More than half of the attention in layers 6-10 goes to [SEP]",
        PAPER,
        "> 0.5 in layers 6-10",
        f"{mean:.2f} in layers {layers}",
        Verdict.of(mean > 0.5, testable and _finite(mean)),
        "mean [SEP] share over the heads of the depth-scaled layers 6-10 > 0.5",
        {"sep_share": mean},
    )


def cls_early_layers(cls_share) -> Claim:
    """ "[CLS] draws attention in early layers": the depth-scaled layers 1-4 against 5-12."""
    early, lay_e = layer_mean(cls_share, 1, 4)
    late, lay_l = layer_mean(cls_share, 5, 12)
    return Claim(
        "cls_early_layers",
        "[CLS] draws attention in early layers",
        PAPER,
        "early > later",
        f"{early:.2f} (layers {lay_e}) vs {late:.2f} (layers {lay_l})",
        Verdict.of(early > late, _finite(early, late)),
        "mean [CLS] share, depth-scaled layers 1-4 > layers 5-12",
        {"early": early, "later": late},
    )


def punctuation_last_layers(period_share, comma_share, testable: bool = True) -> Claim:
    """'"." and "," draw attention in the last layers': their summed share, layers 11-12 (scaled) vs 1-10."""
    punct = np.asarray(period_share, dtype=np.float64) + np.asarray(comma_share, dtype=np.float64)
    last, lay = layer_mean(punct, 11, 12)
    rest, _ = layer_mean(punct, 1, 10)
    return Claim(
        "punctuation_last_layers",
        '"." and "," draw attention in the last layers',
        PAPER,
        "last > earlier",
        f"{last:.3f} (layers {lay}) vs {rest:.3f}",
        Verdict.of(last > rest, testable and _finite(last, rest)),
        'mean "." + "," share, depth-scaled layers 11-12 > layers 1-10',
        {"last": last, "earlier": rest},
    )


def sep_attends_to_sep(sep_to_sep, testable: bool = True) -> Claim:
    """ "From [SEP], heads attend to [SEP] (> 90%)": separator rows, depth-scaled layers 6-10."""
    mean, lay = layer_mean(sep_to_sep, 6, 10)
    return Claim(
        "sep_to_sep",
        "From [SEP], heads attend to [SEP]",
        PAPER,
        "> 0.9",
        f"{mean:.2f} in layers {lay}",
        Verdict.of(mean > 0.9, testable and _finite(mean)),
        "mean [SEP]->[SEP] share over the depth-scaled layers 6-10 > 0.9",
        {"sep_to_sep": mean},
    )


def early_layers_broad(entropy, uniform_entropy: float) -> Claim:
    """ "Early layers attend broadly (high entropy, about a bag of words)".

    Holds when the first 2/12 of the depth reach 0.8 of the uniform entropy (near a bag of words);
    partly when they only attend more broadly than the last layer.
    """
    values = np.asarray(entropy, dtype=np.float64)
    early, lay = layer_mean(values, 1, 2)
    last = float(np.nanmean(values[-1])) if np.isfinite(values[-1]).any() else math.nan
    ratio = early / uniform_entropy if _finite(early, uniform_entropy) and uniform_entropy > 0 else math.nan
    verdict = (
        Verdict.NOT_TESTABLE
        if not _finite(ratio, last)
        else Verdict.HOLDS
        if ratio >= 0.8
        else Verdict.PARTLY
        if early > last
        else Verdict.DIFFERS
    )
    return Claim(
        "early_layers_broad",
        "Early layers attend broadly (near bag-of-words)",
        PAPER,
        "high entropy",
        f"{ratio:.2f} of uniform (layers {lay}); {early:.2f} vs {last:.2f} nats in the last layer",
        verdict,
        "holds: mean entropy / uniform >= 0.8 in the depth-scaled layers 1-2; partly: below that but above "
        "the last layer's",
        {"early_entropy": early, "last_entropy": last, "early_ratio_to_uniform": ratio},
    )


def cls_entropy_last_layer(cls_entropy, uniform_cls_entropy: float) -> Claim:
    """ "In the last layer the [CLS] token's attention has entropy about 3.89 nats", relative to uniform.

    Clark's inputs were about 128 tokens, so log 128 is taken as their uniform reference (an assumption).
    """
    values = np.asarray(cls_entropy, dtype=np.float64)
    last = float(np.nanmean(values[-1])) if np.isfinite(values[-1]).any() else math.nan
    paper_ratio = 3.89 / np.log(128)
    ours = last / uniform_cls_entropy if _finite(last, uniform_cls_entropy) and uniform_cls_entropy > 0 else math.nan
    return Claim(
        "cls_entropy_last_layer",
        "Last layer: [CLS] attention entropy about 3.89 nats",
        PAPER,
        f"3.89 nats ({paper_ratio:.2f} of log 128)",
        f"{last:.2f} nats ({ours:.2f} of uniform)",
        Verdict.of(abs(ours - paper_ratio) <= 0.1, _finite(ours)),
        "entropy / uniform within 0.10 of the paper's 3.89 / log 128",
        {"entropy": last, "ratio_to_uniform": ours},
        note="log 128 as Clark's uniform reference is an assumption",
    )


# --------------------------------------------------------------------------- [SEP] as a no-op (Section 3.3)


def special_gradient_small(stats: GradientStats, kind: str = "sep", objective: str = "") -> Claim:
    """ "From layer 5 on, gradients for attention to [SEP] are small" (Figure 3), for [SEP] or, as a control, [CLS].

    The layers with the most attention to the token (the top half) must have a gradient per
    weight for it below ordinary tokens' (ratio < 1) and below its own ratio in the other layers.
    """
    token = _TOKENS.get(kind, kind)
    share = np.nanmean(stats.attention[kind], axis=1)
    ratio = stats.gradient_ratio(kind)
    order = np.argsort(-share, kind="stable")
    high, low = order[: max(1, len(order) // 2)], order[max(1, len(order) // 2) :]
    high_ratio = float(np.nanmean(ratio[high])) if np.isfinite(ratio[high]).any() else math.nan
    low_ratio = float(np.nanmean(ratio[low])) if np.isfinite(ratio[low]).any() else math.nan
    holds = high_ratio < 1 and (math.isnan(low_ratio) or high_ratio < low_ratio)
    suffix = f".{objective}" if objective else ""
    return Claim(
        f"{kind}_gradient_small{suffix}",
        f"In the layers with most attention to {token}, the gradient per weight for it is small "
        "(below ordinary tokens', and below its own in the other layers)",
        PAPER,
        "from layer 5 on, [SEP] gradients small" if kind == "sep" else "not claimed (a control)",
        f"{token}/other gradient per weight: {high_ratio:.2f} in the {len(high)} layers with most {token} "
        f"attention (mean share {share[high].mean():.2f}), {low_ratio:.2f} in the rest",
        Verdict.of(holds, _finite(high_ratio)),
        "top half of layers by attention share: gradient ratio to ordinary tokens < 1 and < the other layers' ratio",
        {"high_ratio": high_ratio, "low_ratio": low_ratio},
        note=f"objective: {objective}" if objective else "",
    )


def gradients_shrink(stats: GradientStats, objective: str = "") -> Claim:
    """ "Gradients shrink with depth": Spearman's rho of the per-layer gradient norm with the layer index < 0."""
    from scipy.stats import spearmanr

    norm = np.asarray(stats.gradient_norm, dtype=np.float64)
    rho = float(spearmanr(np.arange(len(norm)), norm)[0]) if len(norm) > 1 else math.nan
    suffix = f".{objective}" if objective else ""
    return Claim(
        f"gradients_shrink{suffix}",
        "Gradients shrink with depth",
        PAPER,
        "smaller in deeper layers",
        f"norm layer 1: {norm[0]:.3g}, layer {len(norm)}: {norm[-1]:.3g} (Spearman with depth {rho:.2f})",
        Verdict.of(rho < 0, _finite(rho)),
        "Spearman rho of the layer's gradient norm with depth < 0",
        {"spearman_with_depth": rho},
        note=f"objective: {objective}" if objective else "",
    )


def objective_claims(stats: GradientStats, ablation: pd.DataFrame, objective: str = "") -> list[Claim]:
    """Every claim on one objective: small gradients for attention to [SEP] (and [CLS], the control), gradients
    shrinking with depth, and :func:`attention_removal` for each row of its ``ablation`` summary
    (:func:`~bertology_utils.interventions.gradients.ablation_summary`)."""
    return [
        special_gradient_small(stats, "sep", objective),
        special_gradient_small(stats, "cls", objective),
        gradients_shrink(stats, objective),
        *(attention_removal(row, objective) for _, row in ablation.iterrows()),
    ]


def attention_removal(row: Mapping, objective: str = "") -> Claim:
    """Beyond the paper, what a no-op predicts: moving the attention on a token away changes the output less
    than moving the same mass off a random ordinary token. ``row``: one row of
    :func:`~bertology_utils.interventions.gradients.ablation_summary` (target, mode, changes, ratio, mass)."""
    target, mode, ratio = row["target"], row["mode"], float(row["ratio"])
    token = _TOKENS.get(target, target)
    suffix = f".{objective}" if objective else ""
    return Claim(
        f"ablation{suffix}.{target}.{mode}",
        f"Moving the attention on {token} away ({mode}) changes the output less than moving the same mass "
        "off a random token",
        PAPER,
        "not tested; what a no-op predicts" if target == "sep" else "not tested",
        f"hidden-state change {row['hidden_change (target)']:.3g} vs {row['hidden_change (control)']:.3g} "
        f"(ratio {ratio:.2f}; mean mass moved {row['mean mass moved']:.2f})",
        Verdict.of(ratio < 1, _finite(ratio)),
        "hidden-state change, target / matched control < 1",
        {"ratio": ratio},
        note="beyond the paper" + (f"; objective: {objective}" if objective else ""),
    )


# --------------------------------------------------------------------------- syntax (Table 1)


def head_beats_offset(result: SyntaxResult, relation: str) -> Claim:
    """A row of Table 1: the best single head beats the best fixed offset for ``relation`` (Stanford label).

    Ours is the *held-out* accuracy (the head chosen on the other half of the sentences), so the
    choice of the best of many heads does not decide it; the paper's row compares its best head
    with its baseline. Not testable without a UD twin, without dependents, or with too few to hold out.
    """
    from bertology_utils.analyses.syntax import PAPER_NOTES, PAPER_TABLE1, STANFORD_TO_UD

    head, accuracy, baseline, offset = PAPER_TABLE1[relation]
    ud = STANFORD_TO_UD[relation]
    paper_beats = accuracy > baseline
    values = {"held_out_accuracy": math.nan, "baseline_accuracy": math.nan, "dependents": 0}
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
        testable = _finite(best["held_out_accuracy"])
        ours = (
            f"{ud}: head {best['best_head']} {100 * best['accuracy']:.1f}, held out "
            f"{100 * best['held_out_accuracy']:.1f}, vs {100 * best['baseline_accuracy']:.1f} "
            f"({best['baseline_offset']:+d}); {best['count']} dependents"
        )
        if not testable:
            ours += ", too few to hold out"
    ours_beats = testable and values["held_out_accuracy"] > values["baseline_accuracy"]
    return Claim(
        f"table1.{relation}",
        f"{relation}: the best head beats the best fixed offset",
        PAPER,
        f"head {head} {accuracy} vs {baseline} ({offset:+d})",
        ours,
        Verdict.of(ours_beats == paper_beats, testable),
        "held-out accuracy of our best head > best offset's, as in the paper's row",
        values,
        note=PAPER_NOTES.get(relation, ""),
    )


def table1_claims(result: SyntaxResult) -> list[Claim]:
    """:func:`head_beats_offset` for every row of the paper's Table 1."""
    from bertology_utils.analyses.syntax import PAPER_TABLE1

    return [head_beats_offset(result, relation) for relation in PAPER_TABLE1]


# --------------------------------------------------------------------------- coreference (Table 2)


def _coref_numbers(result: CorefResult) -> tuple[float, dict]:
    ours = result.table()["all"]
    return float(ours["best head, held out"]), {name: float(ours[name]) for name in ("nearest name", "salience rule")}


def coref_beats_nearest(result: CorefResult) -> Claim:
    """ "The best head beats the nearest-mention baseline" (Table 2: 65 vs 27), on GAP, held out."""
    from bertology_utils.analyses.coreference import PAPER_TABLE2

    held_out, ours = _coref_numbers(result)
    return Claim(
        "coref_beats_nearest",
        "The best coreference head beats the nearest-candidate baseline",
        PAPER,
        f"{PAPER_TABLE2['best head (5-4)']:.0f} vs {PAPER_TABLE2['nearest mention']:.0f}",
        f"held out {held_out:.1f} vs nearest name {ours['nearest name']:.1f}",
        Verdict.of(held_out > ours["nearest name"], _finite(held_out, ours["nearest name"])),
        "held-out accuracy of the best head > nearest name's",
        {"held_out_accuracy": held_out, "nearest_accuracy": ours["nearest name"]},
        note="Clark: every earlier CoNLL-2012 mention; GAP: two names, chance 50",
    )


def coref_below_rule_based(result: CorefResult) -> Claim:
    """ "The best head falls short of the rule-based system" (Table 2: 65 vs 69); ours: a salience rule."""
    from bertology_utils.analyses.coreference import PAPER_TABLE2

    held_out, ours = _coref_numbers(result)
    return Claim(
        "coref_below_rule_based",
        "The best coreference head falls short of a rule-based system",
        PAPER,
        f"{PAPER_TABLE2['best head (5-4)']:.0f} vs {PAPER_TABLE2['rule-based system']:.0f}",
        f"held out {held_out:.1f} vs salience rule {ours['salience rule']:.1f}",
        Verdict.of(held_out < ours["salience rule"], _finite(held_out, ours["salience rule"])),
        "held-out accuracy of the best head < salience rule's",
        {"held_out_accuracy": held_out, "rule_accuracy": ours["salience rule"]},
        note="Clark: Lee et al.'s sieves; ours: a three-line rule",
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


def probe_margin(
    claim_id: str, test: Mapping[str, ProbeEvaluation], dev: Mapping[str, ProbeEvaluation] | None = None
) -> Claim:
    """One :data:`PROBE_CLAIMS` entry: the better row's test UAS beats the worse row's (margins in UAS points)."""
    from bertology_utils.analyses.probes import PAPER_TABLE3

    text, better, worse = PROBE_CLAIMS[claim_id]
    paper = PAPER_TABLE3[better] - PAPER_TABLE3[worse]
    missing = [row for row in (better, worse) if row not in test]
    margin = math.nan if missing else 100 * (test[better].uas - test[worse].uas)
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
        Verdict.of(margin > 0, _finite(margin)),
        f"test UAS of {better} - {worse} > 0",
        {"test_margin": margin, "dev_margin": dev_margin},
        note="" if paper > 0 else "the paper's numbers do not support it either",
    )


def table3_claims(test: Mapping[str, ProbeEvaluation], dev: Mapping[str, ProbeEvaluation] | None = None) -> list[Claim]:
    """:func:`probe_margin` for every :data:`PROBE_CLAIMS` entry."""
    return [probe_margin(claim_id, test, dev) for claim_id in PROBE_CLAIMS]


# --------------------------------------------------------------------------- clustering (Section 6)


def _closer(test: SameLayerTest, alpha: float) -> Verdict:
    return Verdict.of(test.p_value < alpha and test.ratio < 1, test.testable and _finite(test.p_value, test.ratio))


def _distances_observed(test: SameLayerTest) -> str:
    if not test.testable:
        return f"not testable: {test.not_testable}"
    return f"same {test.same_mean:.1f} vs other {test.other_mean:.1f}, p = {test.p_value:.2g}"


def same_layer_close(test: SameLayerTest, alpha: float = 0.05) -> Claim:
    """ "Heads in the same layer tend to be close" (Figure 6), as a one-sided permutation test."""
    return Claim(
        "same_layer_close",
        "Heads in the same layer tend to be close",
        PAPER,
        "seen in the MDS plot (Figure 6), no test",
        _distances_observed(test),
        _closer(test, alpha),
        f"permutation p < {alpha} and same-layer mean < other-layer mean",
        {"ratio": test.ratio, "p_value": test.p_value},
    )


def heads_cluster_by_behaviour(test: SameLayerTest, alpha: float = 0.05) -> Claim:
    """ "Heads cluster by behaviour": the same test with each head's dominant behaviour as its group."""
    return Claim(
        "behaviour_clusters",
        "Heads cluster by behaviour",
        PAPER,
        "clusters of [SEP], broad, next/previous-token heads",
        _distances_observed(test),
        _closer(test, alpha),
        f"permutation p < {alpha} and same-behaviour mean < other mean",
        {"ratio": test.ratio, "p_value": test.p_value},
        note="partly by construction: the behaviour groups come from the same attention",
    )
