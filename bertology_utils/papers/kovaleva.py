"""Kovaleva et al. (2019), *Revealing the Dark Secrets of BERT*: each claim, checked against our numbers.

One function per claim, each returning a :class:`~bertology_utils.papers.claims.Claim`; paper values
are from ../shared/reference/papers.md. A claim about one fine-tuned classifier goes through
:func:`~bertology_utils.papers.claims.on_classifier` in the notebook; those pooling several tasks'
classifiers leave out, by :func:`~bertology_utils.papers.claims.below_floor`, each task whose
classifier does not beat its baseline.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from bertology_utils.papers.claims import (
    BY_INTERVAL,
    Claim,
    Draws,
    Interval,
    Verdict,
    below_floor,
    bootstrap_interval,
    depth_scaled_layers,
    tagged,
)

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from bertology_utils.interventions.pruning import AblationResult

__all__ = [
    "PAPER",
    "heterogeneous_share",
    "pattern_types_recognisable",
    "last_layers_change_most",
    "single_heads_dispensable",
    "layer_ablation_improves",
    "pretrained_beats_random_init",
    "layer_thirds",
    "cls_early_sep_late",
    "sst2_largest_sep",
    "plot_special_token_shares",
    "plot_head_ablation",
    "plot_init_comparison",
]

PAPER = "Kovaleva et al. 2019"


def heterogeneous_share(mrpc_share: float, *, per_pair: npt.ArrayLike | None = None, seed: int = 0) -> Claim:
    """ "Heterogeneous maps are at most 32% (MRPC) to 61% (QQP)": our classifier's share on MRPC; not testable without it.

    ``per_pair``: each MRPC pair's share of heterogeneous maps (its heads' maps, e.g.
    ``type_proportions(kinds, ["dataset", "item"]).loc["MRPC", "heterogeneous"]``); its bootstrap interval over the
    pairs decides, inconclusive where it straddles 0.32."""
    interval = None if per_pair is None else bootstrap_interval(np.mean, per_pair, over="MRPC pairs", seed=seed)
    return Claim(
        "heterogeneous_share",
        "Heterogeneous maps are at most 32% (MRPC) to 61% (QQP) of all maps",
        PAPER,
        "<= 0.32 on MRPC",
        f"{mrpc_share:.2f} on MRPC",
        Verdict.of(mrpc_share <= 0.32, math.isfinite(mrpc_share), interval, 0.32, below=True),
        "our classifier's heterogeneous share on MRPC <= 0.32" + BY_INTERVAL * (interval is not None),
        {"mrpc_share": mrpc_share},
        interval=interval,
    )


def pattern_types_recognisable(macro_f1: float, method: str = "template", *, interval: Interval | None = None) -> Claim:
    """ "Pattern types can be recognised automatically" (a CNN, F1 about 0.86): our ``method``'s macro F1
    on the project's labelled maps (cross-validated for a trained classifier). ``interval``: the macro F1's
    bootstrap interval over the labelled maps (``CrossValidation.interval``), which then decides."""
    return Claim(
        "pattern_types_recognisable",
        "The five pattern types can be recognised automatically",
        PAPER,
        "CNN macro F1 about 0.86",
        f"{method} macro F1 {macro_f1:.2f}",
        Verdict.of(macro_f1 >= 0.81, math.isfinite(macro_f1), interval, 0.81),
        "macro F1 on our labelled maps >= 0.86 - 0.05" + BY_INTERVAL * (interval is not None),
        {"macro_f1": macro_f1, "method": method},
        interval=interval,
    )


def last_layers_change_most(cosine: npt.ArrayLike, task: str = "") -> Claim:
    """ "Fine-tuning changes the last two layers most": per-layer mean cosine of the maps before and after.

    Holds when the two least similar layers are the last two, partly when the least similar one is.
    """
    by_layer = np.asarray(cosine, dtype=np.float64).mean(-1)
    testable = len(by_layer) >= 2 and bool(np.isfinite(by_layer).all())
    lowest = set(np.argsort(by_layer)[:2].tolist())
    last_two = {len(by_layer) - 1, len(by_layer) - 2}
    verdict = (
        Verdict.NOT_TESTABLE
        if not testable
        else Verdict.HOLDS
        if lowest == last_two
        else Verdict.PARTLY
        if int(np.argmin(by_layer)) in last_two
        else Verdict.DIFFERS
    )
    return Claim(
        tagged("last_layers_change_most", task),
        "The last two layers change most in fine-tuning",
        PAPER,
        "the last two layers (except QQP)",
        "mean cosine by layer: " + ", ".join(f"{v:.3f}" for v in by_layer),
        verdict,
        "holds: the two lowest layer-mean cosines are the last two layers; partly: the lowest is",
        {"least_similar_layer": int(np.argmin(by_layer)) + 1 if testable else None},
        note=f"task: {task}" if task else "",
    )


def single_heads_dispensable(
    ablation: AblationResult, tolerance: float = 0.0, task: str = "", *, n_resamples: int = 2000, seed: int = 0
) -> Claim:
    """ "Disabling a single head often does not hurt, and sometimes improves the score" (Fig. 6).

    Holds when at least half the heads do not hurt and some improve; partly when only one of
    the two; not testable when no single-head removal changes the metric at all (too few examples).

    With the ablation's per-example predictions
    (:meth:`~bertology_utils.interventions.pruning.AblationResult.draws`), each half is decided by an interval over
    ``n_resamples`` bootstrap resamples of the dev examples (``seed``): "do not hurt", by the share of heads whose
    metric change is >= -``tolerance``, recomputed on every resample, against 50% (the claim's interval);
    "improve", by the metric change of the head that improves most on the whole dev set, against ``tolerance``.
    Holds when both intervals lie above their thresholds; partly when one does and the other lies at or below;
    differs when both lie at or below; inconclusive when one straddles and the other does not settle the verdict.
    Without them (a result made by hand), the point shares decide. Not testable (by NaN intervals) also with fewer
    than 3 dev examples.
    """
    d = np.asarray(ablation.head_deltas, dtype=np.float64)
    not_hurting, improve = float((d >= -tolerance).mean()), float((d > tolerance).mean())
    lower_loss = float((np.asarray(ablation.head_loss_deltas) < 0).mean())
    ours = (
        f"{not_hurting:.0%} of heads do not hurt, {improve:.0%} improve (base {ablation.base:.3f}); "
        f"{lower_loss:.0%} lower the dev loss"
    )
    resampled = getattr(ablation, "draws", None)
    draws = resampled(n_resamples, seed) if callable(resampled) and np.isfinite(d).any() else None
    interval = None
    if draws is None:
        verdict = (
            Verdict.NOT_TESTABLE
            if not np.any(d)
            else Verdict.HOLDS
            if not_hurting >= 0.5 and improve > 0
            else Verdict.PARTLY
            if not_hurting >= 0.5 or improve > 0
            else Verdict.DIFFERS
        )
        rule = "holds: >= 50% of heads do not lower the metric and > 0 raise it; partly: one of the two"
    else:
        heads = draws["head_deltas"]  # (resamples, layers, heads)
        flat = heads.reshape(len(heads), -1)
        shares = np.where(np.isfinite(flat).all(1), (flat >= -tolerance).mean(1), np.nan)
        interval = draws.interval(shares)
        best = int(np.nanargmax(d))
        best_interval = draws.interval(flat[:, best])
        halves = (Verdict.by_interval(interval, 0.5), Verdict.by_interval(best_interval, tolerance))
        verdict = (
            Verdict.NOT_TESTABLE if not np.any(d) else Verdict.stepwise(Verdict.all_of(halves), Verdict.any_of(halves))
        )
        layer, head = np.unravel_index(best, d.shape)
        ours += f"; most improving head L{layer + 1}H{head + 1} {d.flat[best]:+.3f}, {best_interval.describe(True)}"
        rule = (
            "holds: the share of heads not lowering the metric lies above 50% and the most improving head's change "
            f"(chosen on the whole dev set) above {tolerance:g}, each by its bootstrap interval over resampled dev "
            "examples (the claim's interval: the share's); partly: one of the two, the other at or below; "
            "inconclusive where an interval that decides straddles"
        )
    return Claim(
        tagged("single_heads_dispensable", task),
        "Disabling one head often does not hurt, sometimes improves",
        PAPER,
        "often no drop; some heads improve the score",
        ours,
        verdict,
        rule + "; not testable: no head changes the metric",
        {"share_not_hurting": not_hurting, "share_improve": improve},
        note=f"task: {task}" if task else "",
        interval=interval,
    )


def layer_ablation_improves(
    ablation: AblationResult, tolerance: float = 0.0, task: str = "", *, n_resamples: int = 2000, seed: int = 0
) -> Claim:
    """ "Disabling a whole layer sometimes improves the score" (RTE: layer 1, about +3 points).

    The best layer is the one whose removal changes the dev metric most favourably on the whole dev set. With the
    ablation's per-example predictions (:meth:`~bertology_utils.interventions.pruning.AblationResult.draws`), that
    layer's metric change is recomputed on ``n_resamples`` bootstrap resamples of the dev examples (``seed``), and its
    interval decides: holds when it lies above ``tolerance``, differs when at or below, inconclusive when it
    straddles (the layer is chosen once, on the whole dev set, so the interval does not widen for the choice).
    Without them (a result made by hand), the point change decides. Not testable when no layer changes the metric,
    and (by a NaN interval) with fewer than 3 dev examples.
    """
    d = np.asarray(ablation.layer_deltas, dtype=np.float64)
    testable = bool(np.isfinite(d).any() and np.any(np.nan_to_num(d)))
    best = int(np.nanargmax(d)) if np.isfinite(d).any() else None
    resampled = getattr(ablation, "draws", None)
    draws = resampled(n_resamples, seed) if callable(resampled) else None
    interval = None if draws is None or best is None else draws.interval(draws["layer_deltas"][:, best])
    ours = (
        f"best: layer {best + 1}, {d[best]:+.3f}; worst {np.nanmin(d):+.3f}"
        if best is not None
        else "no layer was disabled"
    )
    rule = f"the best layer's metric change > {tolerance:g}"
    if interval is not None:
        rule += " (the layer chosen on the whole dev set; its change's interval over resampled dev examples)"
    return Claim(
        tagged("layer_ablation_improves", task),
        "Disabling a whole layer sometimes improves the score",
        PAPER,
        "RTE: layer 1, about +3 points",
        ours,
        Verdict.of(best is not None and d[best] > tolerance, testable, interval, tolerance),
        rule + BY_INTERVAL * (interval is not None) + "; not testable when no layer changes the metric",
        {
            "best_layer": best + 1 if best is not None else None,
            "best_layer_delta": float(d[best]) if best is not None else math.nan,
        },
        note=f"task: {task}" if task else "",
        interval=interval,
    )


def pretrained_beats_random_init(
    scores: Mapping[str, tuple[float, float]], *, majority: Mapping[str, float] | None = None
) -> Claim:
    """ "Pre-trained BERT fine-tuned beats the same architecture from random init on every task".

    ``scores``: task -> (dev score fine-tuned from the pre-trained weights, from random init), same
    recipe and budget; ``majority``: task -> the dev score of always predicting the majority class.
    A task where the pre-trained run does not beat the majority class (:func:`below_floor`) learned
    nothing under its budget: it says nothing about pre-training and counts as neither a win nor a
    loss. Holds when pre-trained wins on every task, partly on some, not testable when no task
    learned. A nan score (a regression model predicting a constant has no correlation) counts as
    below any number.
    """
    if not scores:
        raise ValueError("no task scores to compare")
    majority = majority or {}
    outcome, parts = {}, []
    for task, (pre, rand) in scores.items():
        pre_, rand_ = (np.nan_to_num(x, nan=-np.inf) for x in (pre, rand))
        outcome[task] = "no signal" if below_floor(pre, majority.get(task)) else "win" if pre_ > rand_ else "loss"
        base = f", majority class {majority[task]:.3f}" if task in majority and not np.isnan(majority[task]) else ""
        note = " (pre-trained not above the majority class: learned nothing)" if outcome[task] == "no signal" else ""
        parts.append(f"{task}: {pre:.3f} vs {rand:.3f}{base}{note}")
    counted = [o for o in outcome.values() if o != "no signal"]
    verdict = (
        Verdict.NOT_TESTABLE
        if not counted
        else Verdict.HOLDS
        if all(o == "win" for o in outcome.values())
        else Verdict.PARTLY
        if "win" in counted
        else Verdict.DIFFERS
    )
    return Claim(
        "pretrained_beats_random_init",
        "Fine-tuning the pre-trained model beats the same architecture from random init, on every task",
        PAPER,
        "every GLUE task",
        "pre-trained vs random init: " + "; ".join(parts),
        verdict,
        "holds: pre-trained above random init on every task; partly: on some; tasks where pre-trained is "
        "not above the majority class are not counted",
        {"wins": counted.count("win"), "losses": counted.count("loss"), "tasks": len(outcome)},
    )


# --------------------------------------------------------------------------- Figure 5: [CLS], [SEP], punctuation by layer


def _key(task: str) -> str:
    """A task name as a metric-name part: lower case letters and digits ("SST-2" -> "sst2")."""
    return re.sub(r"[^a-z0-9]+", "", task.lower()) or "task"


def _layer_frame(frame: pd.DataFrame, task: str, columns: Sequence[str] = ("cls", "sep")) -> pd.DataFrame:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{task}: the per-layer shares lack the columns {missing} (have {list(frame.columns)})")
    return frame.sort_index()


def layer_thirds(n_layers: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """The first and the last third of ``n_layers`` layers, as (first, last) layer ranges counted from 1.

    Layers overlapping depth (0, 1/3] and (2/3, 1] (:func:`~bertology_utils.papers.claims.depth_scaled_layers`
    with 3 "paper layers"): 12 layers give 1-4 and 9-12, 6 give 1-2 and 5-6, 3 give 1 and 3.
    """
    if n_layers < 3:
        raise ValueError(f"thirds need at least 3 layers, not {n_layers}")
    return depth_scaled_layers(1, 1, n_layers, 3), depth_scaled_layers(3, 3, n_layers, 3)


def _third_means(
    frame: pd.DataFrame, column: str, first: tuple[int, int], last: tuple[int, int]
) -> tuple[float, float]:
    values = frame[column].to_numpy(dtype=np.float64)
    return float(np.mean(values[first[0] - 1 : first[1]])), float(np.mean(values[last[0] - 1 : last[1]]))


def _drawn_third_means(
    draws: Draws, column: str, first: tuple[int, int], last: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_third_means` of each draw: the heads' mean per layer (as ``per_layer()``), then the thirds'."""
    with warnings.catch_warnings():  # a layer without any finite head is NaN, as in the frame
        warnings.simplefilter("ignore", RuntimeWarning)
        layers = np.nanmean(np.asarray(draws[column], dtype=np.float64), axis=-1)
    return layers[:, first[0] - 1 : first[1]].mean(-1), layers[:, last[0] - 1 : last[1]].mean(-1)


def _span(layers: tuple[int, int]) -> str:
    return f"{layers[0]}-{layers[1]}" if layers[0] != layers[1] else str(layers[0])


def _not_counted(
    tasks: Iterable[str], scores: Mapping[str, float] | None, majority: Mapping[str, float] | None
) -> dict:
    """Task -> why its classifier is left out of a claim pooling tasks: it does not beat its baseline
    (:func:`~bertology_utils.papers.claims.below_floor`); a task without a score or floor is counted."""
    scores, majority = scores or {}, majority or {}
    reasons = {task: below_floor(scores.get(task), majority.get(task)) for task in tasks}
    return {task: why for task, why in reasons.items() if why}


def _pretrained_for(pretrained: pd.DataFrame | Mapping[str, pd.DataFrame] | None, task: str) -> pd.DataFrame | None:
    """The pre-trained model's per-layer shares for ``task``'s inputs: one frame for all, or a task's own."""
    if pretrained is None:
        return None
    if isinstance(pretrained, Mapping):
        return pretrained.get(task)
    return pretrained


def cls_early_sep_late(
    shares: Mapping[str, pd.DataFrame],
    pretrained: pd.DataFrame | Mapping[str, pd.DataFrame] | None = None,
    *,
    scores: Mapping[str, float] | None = None,
    majority: Mapping[str, float] | None = None,
    draws: Mapping[str, Draws] | None = None,
) -> Claim:
    """ "Early layers attend to [CLS], later ones to [SEP]" (Fig. 5), for every fine-tuned task.

    ``shares``: task -> per-layer shares of the fine-tuned model (index: layers from 1; columns
    ``cls`` and ``sep``, e.g. ``surface_statistics(items).per_layer()``). With the model's own
    depth cut in thirds (:func:`layer_thirds`), a task shows the claim when its mean [CLS] share
    over the first third exceeds the last third's and its [SEP] share over the last third exceeds
    the first third's. Holds when every task does; partly when some task does, or one of the two
    halves holds somewhere; differs otherwise; not testable with no task or fewer than 3 layers.
    ``pretrained`` (the pre-trained model on the same inputs: one frame, or task -> frame) is
    recorded next to each task's numbers and does not enter the verdict. ``scores`` and ``majority``:
    task -> the classifier's dev score and its majority-class score; a task whose classifier does not
    beat it (:func:`~bertology_utils.papers.claims.below_floor`) is recorded but not counted.

    ``draws``: task -> the fine-tuned model's :meth:`~bertology_utils.analyses.patterns.SurfaceStats.bootstrap` over
    that task's examples. The claim's margins (each counted task's [CLS] first - last third and [SEP] last - first
    third) are then taken in every draw: the interval of the smallest margin decides holds (above 0: every task
    shows both), and where it lies under 0, the interval of the largest decides partly or differs; an interval
    straddling 0 reads inconclusive.
    """
    if not shares:
        return Claim(
            "cls_early_sep_late",
            "Early layers attend to [CLS], later ones to [SEP]",
            PAPER,
            "[CLS] early, [SEP] late on every task (Fig. 5)",
            "no task",
            Verdict.NOT_TESTABLE,
            "per task: [CLS] share of the first third of the layers > the last third's, and [SEP] share of the "
            "last third > the first third's",
            {"tasks": 0},
        )
    frames = {task: _layer_frame(frame, task) for task, frame in shares.items()}
    left_out = _not_counted(frames, scores, majority)
    depth = min(len(f) for f in frames.values())
    values: dict = {"tasks": len(frames) - len(left_out), "layers": depth}
    judged: list[float] = []  # the numbers the verdict reads
    if depth < 3:
        outcome: dict = {}
        parts = [f"{depth} layers: thirds need at least 3"]
        first = last = (0, 0)
    else:
        first, last = layer_thirds(depth)
        outcome, parts = {}, []
        for task, frame in frames.items():
            key = _key(task)
            cls_first, cls_last = _third_means(frame, "cls", first, last)
            sep_first, sep_last = _third_means(frame, "sep", first, last)
            if task not in left_out:
                judged += [cls_first, cls_last, sep_first, sep_last]
                outcome[task] = (cls_first > cls_last, sep_last > sep_first)
            values.update(
                {
                    f"{key}.cls_first": cls_first,
                    f"{key}.cls_last": cls_last,
                    f"{key}.sep_first": sep_first,
                    f"{key}.sep_last": sep_last,
                }
            )
            if "punct" in frame.columns:  # Fig. 5's third kind, recorded (the claim is about [CLS] and [SEP])
                values[f"{key}.punct_first"], values[f"{key}.punct_last"] = _third_means(frame, "punct", first, last)
            text = f"{task}: [CLS] {cls_first:.2f} -> {cls_last:.2f}, [SEP] {sep_first:.2f} -> {sep_last:.2f}"
            base = _pretrained_for(pretrained, task)
            if base is not None:
                base = _layer_frame(base, f"pre-trained ({task})")
                if len(base) == len(frame):
                    pre_cls = _third_means(base, "cls", first, last)
                    pre_sep = _third_means(base, "sep", first, last)
                    values.update(
                        {
                            f"{key}.pretrained_cls_first": pre_cls[0],
                            f"{key}.pretrained_cls_last": pre_cls[1],
                            f"{key}.pretrained_sep_first": pre_sep[0],
                            f"{key}.pretrained_sep_last": pre_sep[1],
                        }
                    )
                    text += (
                        f" (pre-trained [CLS] {pre_cls[0]:.2f} -> {pre_cls[1]:.2f}, "
                        f"[SEP] {pre_sep[0]:.2f} -> {pre_sep[1]:.2f})"
                    )
            parts.append(text + (f" (not counted: {left_out[task]})" if task in left_out else ""))
    both = sum(c and s for c, s in outcome.values())
    some_half = any(c or s for c, s in outcome.values())
    values.update({"tasks_both": both, "tasks_cls_early": sum(c for c, _ in outcome.values())})
    values["tasks_sep_late"] = sum(s for _, s in outcome.values())
    finite = all(math.isfinite(v) for v in judged)
    testable = depth >= 3 and finite and bool(outcome)
    verdict = Verdict.graded(both == len(outcome), both > 0 or some_half, testable)
    interval = None
    if testable and draws is not None and all(task in draws for task in outcome):
        margins = []
        for task in outcome:
            drawn_cls = _drawn_third_means(draws[task], "cls", first, last)
            drawn_sep = _drawn_third_means(draws[task], "sep", first, last)
            margins += [drawn_cls[0] - drawn_cls[1], drawn_sep[1] - drawn_sep[0]]
        drawn = np.stack(margins, axis=-1)
        over = next(iter(draws.values()))
        interval = over.interval(drawn.min(-1))
        if Verdict.by_interval(interval) is Verdict.DIFFERS:  # some task lacks one: does any show either?
            interval = over.interval(drawn.max(-1))
            verdict = Verdict.stepwise(Verdict.DIFFERS, Verdict.by_interval(interval))
        else:
            verdict = Verdict.by_interval(interval)
        interval = replace(
            interval, method=f"bootstrap over each task's examples ({', '.join(d.over for d in draws.values())})"
        )
    thirds = f"layers {_span(first)} vs {_span(last)} of {depth}" if depth >= 3 else ""
    return Claim(
        "cls_early_sep_late",
        "Early layers attend to [CLS], later ones to [SEP]",
        PAPER,
        "[CLS] early, [SEP] late on every task (Fig. 5)",
        (f"{thirds}: " if thirds else "") + "; ".join(parts),
        verdict,
        "per task: mean [CLS] share of the first third of the layers > the last third's, and mean [SEP] share of "
        "the last third > the first third's. holds: every task; partly: some task, or one of the two somewhere; "
        "a task whose classifier does not beat its baseline (the majority class) is not counted"
        + (
            "; by the intervals of the smallest and the largest margin, inconclusive where one straddles 0"
            if interval
            else ""
        ),
        values,
        note="shares of the fine-tuned models; the pre-trained model's on the same inputs are recorded beside them"
        if pretrained is not None
        else "shares of the fine-tuned models",
        interval=interval,
    )


def sst2_largest_sep(
    shares: Mapping[str, pd.DataFrame],
    pretrained: pd.DataFrame | Mapping[str, pd.DataFrame] | None = None,
    *,
    scores: Mapping[str, float] | None = None,
    majority: Mapping[str, float] | None = None,
    draws: Mapping[str, Draws] | None = None,
) -> Claim:
    """ "SST-2, whose inputs have one [SEP], shows the largest [SEP] share" (Fig. 5).

    ``shares`` as for :func:`cls_early_sep_late`; the mean over layers of each task's [SEP]
    share. Holds when SST-2's (the task named "SST-2", "sst2"...) is the largest; not testable
    when SST-2 is absent or there are fewer than 2 tasks. ``pretrained`` is recorded, not judged.
    ``scores`` and ``majority`` as for :func:`cls_early_sep_late`: a task whose classifier does not
    beat its baseline is recorded but not ranked. ``draws`` as for :func:`cls_early_sep_late`: the interval of
    SST-2's share minus the largest other task's, in every draw, decides (inconclusive where it straddles 0).
    """
    means = {task: float(_layer_frame(frame, task, ("sep",))["sep"].mean()) for task, frame in shares.items()}
    left_out = _not_counted(means, scores, majority)
    values: dict = {f"sep_mean.{_key(task)}": v for task, v in means.items()}
    for task in means:
        base = _pretrained_for(pretrained, task)
        if base is not None:
            values[f"pretrained_sep_mean.{_key(task)}"] = float(_layer_frame(base, task, ("sep",))["sep"].mean())
    counted = {task: v for task, v in means.items() if task not in left_out}
    sst2 = next((task for task in counted if _key(task) == "sst2"), None)
    testable = sst2 is not None and len(counted) >= 2 and all(math.isfinite(v) for v in counted.values())
    ranked = sorted(counted, key=lambda task: -counted[task])
    if sst2 is not None:
        values["sst2_rank"] = ranked.index(sst2) + 1
    values["tasks"] = len(counted)
    ours = ", ".join(f"{task} {means[task]:.3f}" for task in ranked) or "no task"
    ours += "".join(f"; {task} {means[task]:.3f} not ranked: {why}" for task, why in left_out.items())
    why = "" if testable else "; SST-2 is not among the tasks ranked" if sst2 is None else "; fewer than 2 tasks ranked"
    interval = None
    if testable and sst2 is not None and draws is not None and all(task in draws for task in counted):

        def drawn(task: str) -> np.ndarray:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                return np.nanmean(np.nanmean(np.asarray(draws[task]["sep"], dtype=np.float64), axis=-1), axis=-1)

        others = np.max([drawn(task) for task in counted if task != sst2], axis=0)
        interval = draws[sst2].interval(drawn(sst2) - others)
        interval = replace(
            interval, method=f"bootstrap over each task's examples ({', '.join(d.over for d in draws.values())})"
        )
    return Claim(
        "sst2_largest_sep",
        "SST-2 (one [SEP] per input) shows the largest [SEP] share",
        PAPER,
        "SST-2 largest (Fig. 5)",
        "mean [SEP] share over layers: " + ours + why,
        Verdict.of(sst2 is not None and ranked[0] == sst2, testable, interval),
        "SST-2's mean over layers of the [SEP] share is the largest of the tasks; not testable without SST-2 "
        "or with fewer than 2 tasks; a task whose classifier does not beat its baseline (the majority class) "
        "is not ranked"
        + ("; by the interval of SST-2's share minus the largest other's" + BY_INTERVAL if interval else ""),
        values,
        note="shares of the fine-tuned models"
        + ("; pre-trained values recorded beside them" if pretrained is not None else ""),
        interval=interval,
    )


def plot_special_token_shares(
    fine_tuned: Mapping[str, pd.DataFrame],
    pretrained: Mapping[str, pd.DataFrame],
    kinds: Sequence[str] = ("cls", "sep", "punct"),
) -> Figure:
    """Fig. 5: per layer, the share of attention on each of ``kinds`` (one panel each), one line per fine-tuned
    task (``fine_tuned``: task -> frame indexed by layer, a column per kind), its pre-trained model's dotted in
    the same colour. Returns the figure."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    titles = {"cls": "[CLS]", "sep": "[SEP]", "punct": "punctuation"}
    fig, axes = plt.subplots(
        1, len(kinds), figsize=(13 / 3 * len(kinds) + 2, 3.6), sharex=True, squeeze=False, layout="constrained"
    )
    for ax, kind in zip(axes[0], kinds):
        for i, task in enumerate(fine_tuned):
            color = f"C{i}"
            ax.plot(fine_tuned[task].index, fine_tuned[task][kind], "o-", color=color, label=task)
            ax.plot(pretrained[task].index, pretrained[task][kind], ":", color=color)
        ax.set(title=f"attention on {titles.get(kind, kind)}", xlabel="layer")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # layers are whole numbers
    axes[0, 0].set_ylabel("share")
    # one legend for the figure, beside the panels: one inside the first panel covers its lines
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, title="fine-tuned\n(dotted: pre-trained)", loc="outside right center")
    return fig


def plot_head_ablation(result: AblationResult, *, task: str = "") -> Figure:
    """Fig. 6: the dev metric's change (top) and the dev loss's, in thousandths (bottom), with each head
    disabled alone (left, layers x heads) and each layer disabled (right), red worse in both rows. Returns
    the figure."""
    import matplotlib.pyplot as plt

    from bertology_utils.core.figures import plot_layer_head_grid

    layers, heads = np.shape(result.head_deltas)
    fig, axes = plt.subplots(
        2, 2, figsize=(0.55 * heads + 6, 2 * (0.45 * layers + 1.5)), gridspec_kw={"width_ratios": [heads, 2]}
    )
    panels = [
        (result.head_deltas, result.layer_deltas, "Δ metric", f"metric (base {result.base:.3f})", "RdBu"),
        # the loss change in thousandths, so that the cells can be read
        (
            1e3 * result.head_loss_deltas,
            1e3 * result.layer_loss_deltas,
            "Δ loss × 1000",
            f"dev loss (base {result.base_loss:.3f})",
            "RdBu_r",
        ),
    ]
    prefix = f"{task}: " if task else ""
    for (per_head, per_layer, label, name, cmap), (left, right) in zip(panels, axes):
        for values, ax, title in (
            (per_head, left, f"{prefix}one head disabled, {name}"),
            (per_layer, right, "layer disabled"),
        ):
            limit = max(np.nanmax(np.abs(values)), 1e-6)
            plot_layer_head_grid(
                np.reshape(values, (layers, -1)),
                ax=ax,
                cmap=cmap,
                vmin=-limit,
                vmax=limit,
                label=label,
                title=title,
                fmt=".2f" if label == "Δ metric" else ".1f",
            )
        right.set_xticklabels(["all"])
    fig.tight_layout()
    return fig


def plot_init_comparison(table: pd.DataFrame) -> Figure:
    """Dev score per task fine-tuned from the pre-trained weights and from a random init, bars side by side,
    with the majority class as a mark (``table``: indexed by task, columns "pre-trained", "random init",
    "majority class"). Returns the figure."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(1.6 * len(table) + 2, 3.2))
    x = np.arange(len(table))
    ax.bar(x - 0.2, table["pre-trained"], 0.4, label="pre-trained, fine-tuned")
    ax.bar(x + 0.2, table["random init"], 0.4, label="random init, same recipe", color="gray")
    ax.scatter(x, table["majority class"], marker="_", s=900, color="k", label="majority class", zorder=3)
    ax.set_xticks(x, table.index)
    ax.set(ylabel="dev score (GLUE metric)", title="Fine-tuning from pre-trained vs random weights")
    ax.legend(fontsize=8, loc="lower right")
    return fig
