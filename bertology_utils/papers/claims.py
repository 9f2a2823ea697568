"""A paper's claim checked against our numbers: one verdict vocabulary, one record, one table.

Each function of :mod:`~bertology_utils.papers.clark`, :mod:`~bertology_utils.papers.kovaleva` and
:mod:`~bertology_utils.papers.michel` takes analysis results and returns a :class:`Claim` whose
verdict a written ``rule`` computed from the numbers in ``values``. A claim that aggregates over items carries an
:class:`Interval` (:func:`bootstrap_interval`), and its verdict is :meth:`Verdict.by_interval`'s: inconclusive
when the interval straddles the rule's threshold. A claim downstream of training is made once per seed and the
claims joined by :func:`over_seeds` ("holds in k of n seeds"; :func:`claims_over_seeds` for a notebook's lists). Notebooks show
:func:`claims_table` and record the claims with :func:`bertology_utils.run.record.record_claims`
(``claims.json`` and one metric per claim and value), which the report reads back. A claim computed
on a fine-tuned classifier goes through :func:`on_classifier`: not testable when the classifier does
not beat its baseline (:func:`below_floor`, the one rule for models that learned nothing).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from enum import Enum
from typing import TYPE_CHECKING, TypeVar

import numpy as np
import numpy.typing as npt

from bertology_utils.core.uncertainty import (
    Draws,
    Interval,
    bootstrap_interval,
    bootstrap_weights,
    permutation_interval,
    spearman_rho,
)

if TYPE_CHECKING:
    import pandas as pd

    from bertology_utils.core.models import LoadedModel

__all__ = [
    "Verdict",
    "BY_INTERVAL",
    "Interval",
    "Seeds",
    "Claim",
    "bootstrap_interval",
    "bootstrap_weights",
    "Draws",
    "permutation_interval",
    "spearman_rho",
    "SEEDS_RULE",
    "seeds_verdict",
    "over_seeds",
    "claims_over_seeds",
    "claims_by_task",
    "uncertainty",
    "claims_table",
    "CLAIMS_DETAIL_COLUMNS",
    "claim_case",
    "depth_scaled_layers",
    "layer_mean",
    "below_floor",
    "on_classifier",
    "greater",
    "tagged",
    "head_grid",
]

#: How a rule that states a threshold reads when its statistic's interval decides (:meth:`Verdict.of`).
BY_INTERVAL = "; by its bootstrap interval, inconclusive where it straddles"

_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:+-]*")


class Verdict(str, Enum):
    """How a claim fares on our numbers. NOT_TESTABLE: the data here cannot show it (missing, degenerate).
    INCONCLUSIVE: the numbers' interval straddles the rule's threshold, or seeds disagree."""

    HOLDS = "holds"
    PARTLY = "partly"
    DIFFERS = "differs"
    INCONCLUSIVE = "inconclusive"
    NOT_TESTABLE = "not testable"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def of(
        cls,
        holds: bool,
        testable: bool = True,
        interval: Interval | None = None,
        threshold: float = 0.0,
        *,
        below: bool = False,
    ) -> Verdict:
        """HOLDS or DIFFERS by ``holds``; NOT_TESTABLE when not ``testable`` (checked first). With an ``interval`` of
        the rule's statistic, :meth:`by_interval` decides instead (against ``threshold``, ``below`` for a rule that
        holds under it), so an interval that straddles the threshold reads INCONCLUSIVE."""
        if not testable:
            return cls.NOT_TESTABLE
        if interval is not None:
            return cls.by_interval(interval, threshold, below=below)
        return cls.HOLDS if holds else cls.DIFFERS

    @classmethod
    def graded(cls, holds: bool, partly: bool, testable: bool = True) -> Verdict:
        """NOT_TESTABLE when not ``testable``; else HOLDS, PARTLY or DIFFERS, whichever comes first true."""
        if not testable:
            return cls.NOT_TESTABLE
        return cls.HOLDS if holds else cls.PARTLY if partly else cls.DIFFERS

    @classmethod
    def all_of(cls, verdicts: Iterable[Verdict]) -> Verdict:
        """Whether every part of a rule holds, each part decided on its own (e.g. by its interval): NOT_TESTABLE if
        a part is, HOLDS if all hold, DIFFERS if one differs, else INCONCLUSIVE."""
        parts = set(verdicts)
        if cls.NOT_TESTABLE in parts:
            return cls.NOT_TESTABLE
        if parts <= {cls.HOLDS}:
            return cls.HOLDS
        return cls.DIFFERS if cls.DIFFERS in parts else cls.INCONCLUSIVE

    @classmethod
    def any_of(cls, verdicts: Iterable[Verdict]) -> Verdict:
        """Whether some part of a rule holds: HOLDS if one holds, DIFFERS if all differ, else INCONCLUSIVE."""
        parts = set(verdicts)
        if cls.HOLDS in parts:
            return cls.HOLDS
        return cls.DIFFERS if parts == {cls.DIFFERS} else cls.INCONCLUSIVE

    @classmethod
    def stepwise(cls, full: Verdict, part: Verdict) -> Verdict:
        """A graded rule decided by two intervals: ``full``, the interval's verdict on the rule's "holds" threshold,
        and ``part``, on its "partly" one (asked only when ``full`` differs): HOLDS, INCONCLUSIVE or NOT_TESTABLE as
        ``full`` says, else PARTLY where ``part`` holds, and ``part``'s verdict otherwise."""
        if full is not cls.DIFFERS:
            return full
        return cls.PARTLY if part is cls.HOLDS else part

    @classmethod
    def by_interval(cls, interval: Interval, threshold: float = 0.0, *, below: bool = False) -> Verdict:
        """HOLDS when all of ``interval`` lies above ``threshold``, DIFFERS when all of it lies at or below,
        INCONCLUSIVE when it straddles; NOT_TESTABLE when it is not finite. ``below``: the rule holds under the
        threshold (HOLDS when all of it lies below, DIFFERS when all of it lies at or above)."""
        if not interval.finite:
            return cls.NOT_TESTABLE
        if below:
            return (
                cls.HOLDS
                if interval.high < threshold
                else cls.DIFFERS
                if interval.low >= threshold
                else cls.INCONCLUSIVE
            )
        if interval.low > threshold:
            return cls.HOLDS
        return cls.DIFFERS if interval.high <= threshold else cls.INCONCLUSIVE


@dataclass(frozen=True)
class Seeds:
    """How many of the seeds a claim was made on gave HOLDS."""

    holding: int
    n: int
    not_testable: int = 0  #: seeds whose model learned nothing (:func:`below_floor`), left out of the verdict

    def __str__(self) -> str:
        text = "one seed" if self.n == 1 else f"holds in {self.holding} of {self.n} seeds"
        return text + (f" ({self.not_testable} not testable)" if self.not_testable and self.n > 1 else "")


@dataclass(frozen=True)
class Claim:
    """One claim of a paper, the paper's value, ours, and the verdict the stated rule gives."""

    id: str  #: unique within a notebook; a metric name part (letters, digits, ``_ . : + -``)
    claim: str  #: what the paper says
    paper: str  #: e.g. "Clark et al. 2019"
    paper_value: str  #: what the paper reports, as text
    ours: str  #: our value(s), as text
    verdict: Verdict
    rule: str  #: how ``values`` decided the verdict
    values: Mapping[str, float | int | str | None] = field(default_factory=dict)  #: the numbers the rule read
    note: str = ""
    interval: Interval | None = None  #: of the statistic the rule read, where it aggregates over items
    seeds: Seeds | None = None  #: for a claim downstream of training: the seeds it was made on

    def __post_init__(self) -> None:
        if not _ID.fullmatch(self.id):
            raise ValueError(f"claim id {self.id!r}: use letters, digits and _ . : + - only")
        object.__setattr__(self, "verdict", Verdict(self.verdict))
        object.__setattr__(self, "values", {str(k): _plain(v) for k, v in self.values.items()})
        if isinstance(self.interval, Mapping):
            object.__setattr__(self, "interval", Interval(**self.interval))
        if isinstance(self.seeds, Mapping):
            object.__setattr__(self, "seeds", Seeds(**self.seeds))

    def to_metrics(self, prefix: str) -> dict:
        """``{prefix}.{id}.verdict`` and ``{prefix}.{id}.{name}`` for each of ``values``; ``ci_low`` and ``ci_high``
        with an interval, ``seeds`` and ``seeds_holding`` with seeds."""
        key = f"{prefix}.{self.id}" if prefix else self.id
        metrics = {f"{key}.verdict": self.verdict.value, **{f"{key}.{name}": v for name, v in self.values.items()}}
        if self.interval is not None:
            metrics.update({f"{key}.ci_low": self.interval.low, f"{key}.ci_high": self.interval.high})
        if self.seeds is not None:
            metrics.update({f"{key}.seeds": self.seeds.n, f"{key}.seeds_holding": self.seeds.holding})
        return metrics

    def to_dict(self) -> dict:
        return {**asdict(self), "verdict": self.verdict.value}

    @classmethod
    def from_dict(cls, data: Mapping) -> Claim:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})

    @property
    def uncertainty(self) -> str:
        """The interval and the seed count as text for tables ("" when the claim has neither)."""
        return uncertainty(self.interval, self.seeds)


def uncertainty(interval: Interval | Mapping | None, seeds: Seeds | Mapping | None, *, short: bool = False) -> str:
    """A claim's interval and seed count as text, "95% CI [0.12, 0.4] (bootstrap over 72 heads); holds in 2 of
    3 seeds"; "" with neither (claims recorded before them). Either may be as recorded in ``claims.json``;
    ``short`` leaves out how the interval was had, for slides."""
    if isinstance(interval, Mapping):
        interval = Interval(**interval)
    if isinstance(seeds, Mapping):
        seeds = Seeds(**seeds)
    parts = [interval.describe(short)] if interval is not None else []
    return "; ".join(parts + ([str(seeds)] if seeds is not None else []))


def tagged(claim_id: str, task: str) -> str:
    """A claim id for one task (``heads_prunable.SST-2``), or the bare id when there is no task."""
    return f"{claim_id}.{task}" if task else claim_id


def head_grid(
    values: npt.ArrayLike, name: str, shape: tuple | None = None, dtype: npt.DTypeLike | None = None
) -> np.ndarray:
    """``values`` as a (layers, heads) array (of ``shape`` when given); ValueError naming ``name`` otherwise."""
    array = np.asarray(values, dtype=dtype)
    if array.ndim != 2 or (shape is not None and array.shape != tuple(shape)):
        wanted = f" of shape {tuple(shape)}" if shape is not None else ""
        raise ValueError(f"{name} must be a (layers, heads) array{wanted}, not shape {array.shape}")
    return array


def _plain(value: object) -> object:
    """numpy scalars as Python numbers, so that values compare, print and serialise plainly."""
    return value.item() if isinstance(value, np.generic) else value


def claim_case(claim_id: str) -> str:
    """What tells one case of a claim from another made by the same rule, as a reader names it: the parts of its
    id after the claim's name (``heads_prunable.SST-2`` -> ``SST-2``, ``table1.auxpass`` -> ``auxpass``), an
    objective or a kind of token by its name (``ablation.sst2.cls.zero`` -> ``SST-2 classifier · [CLS] · zero``);
    "" for a claim made once. An attribution reference reads as its title (``blank_out``: "blank-out")."""
    from bertology_utils.interventions.objectives import readable_name
    from bertology_utils.interventions.references import REFERENCE_REGISTRY, reference_title

    parts = [p for p in claim_id.split(".")[1:] if p]
    return " · ".join(reference_title(p) if p in REFERENCE_REGISTRY else readable_name(p) for p in parts)


#: The columns of :func:`claims_table` that explain a verdict rather than give it: a slide leaves them out (the
#: notebook, the report and the speaker's copy keep them).
CLAIMS_DETAIL_COLUMNS = ("rule", "note")


def claims_table(claims: Iterable[Claim], model: LoadedModel | None = None) -> pd.DataFrame:
    """The "paper vs ours" DataFrame: one row per claim (index ``id``).

    ``model`` (a :class:`~bertology_utils.core.models.LoadedModel`): the "ours" column is headed with its
    name and architecture (``ours: all-MiniLM-L6-v2 (bert, 6 layers x 12 heads)``), since the papers'
    numbers are BERT-base's and ours may come from another family or shape.
    """
    import pandas as pd

    ours = "ours" if model is None else f"ours: {model.label}"

    rows = [
        {
            "id": c.id,
            "paper": c.paper,
            "claim": c.claim,
            "paper value": c.paper_value,
            ours: c.ours,
            "verdict": c.verdict.value,
            "interval, seeds": c.uncertainty,
            "rule": c.rule,
            "note": c.note,
        }
        for c in claims
    ]
    columns = ["id", "paper", "claim", "paper value", ours, "verdict", "interval, seeds", "rule", "note"]
    return pd.DataFrame(rows, columns=columns).set_index("id")


# --------------------------------------------------------------------------- layers of another depth


def depth_scaled_layers(first: int, last: int, model_layers: int, paper_layers: int = 12) -> tuple[int, int]:
    """Layers ``first..last`` (from 1) of a ``paper_layers`` model as the same fraction of depth in ours.

    Layer ``l`` covers depth ``((l-1)/P, l/P]``; the result is every layer of ours overlapping
    ``((first-1)/P, last/P]``, so with ``model_layers == paper_layers`` it is ``(first, last)``.
    """
    lo = (first - 1) / paper_layers * model_layers
    hi = last / paper_layers * model_layers
    a = int(np.floor(lo + 1e-9)) + 1
    b = max(a, int(np.ceil(hi - 1e-9)))
    return a, min(b, model_layers)


def layer_mean(values: npt.ArrayLike, first: int, last: int, paper_layers: int = 12, *, draws: bool = False) -> tuple:
    """Mean of a ``(layers, heads)`` (or ``(layers,)``) array over the paper's layers ``first..last`` scaled to
    its depth, and those layers written ``"a-b"`` (from 1). NaN entries are left out; all NaN gives NaN.

    ``draws``: ``values`` has a leading axis of bootstrap draws (:class:`Draws`), and the mean is one per draw."""
    values = np.asarray(values, dtype=np.float64)
    lead = int(draws)
    a, b = depth_scaled_layers(first, last, values.shape[lead], paper_layers)
    part = values[:, a - 1 : b] if draws else values[a - 1 : b]
    flat = part.reshape(len(part), -1) if draws else part.reshape(1, -1)
    finite = np.isfinite(flat)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(finite, flat, 0.0).sum(-1) / finite.sum(-1)
    return (means if draws else float(means[0])), f"{a}-{b}" if a != b else str(a)


def below_floor(score: float | None, floor: float | None, baseline: str = "the majority class") -> str:
    """The one rule for a claim computed on a fine-tuned classifier: why it is not testable, else "".

    A classifier whose dev ``score`` does not beat its baseline's score ``floor`` (``baseline``: always
    predicting the majority class, or its own random-init control) learned nothing under its budget
    (or the dev set has one class): no head matters to its decisions, and its heads, gradients and
    attention say nothing about a paper's model. A NaN score beats nothing (a regression model
    predicting a constant has no correlation). No score (None) is no reason; nor is no floor (None,
    NaN: a regression task has no majority class) under a number. Applied to one claim by
    :func:`on_classifier`, and per task by the claims that pool tasks.
    """
    if score is None:
        return ""
    score = float(score)
    known = float(floor) if floor is not None and math.isfinite(floor) else None
    if not math.isnan(score) and (known is None or score > known):
        return ""
    against = f" vs {known:.3f}" if known is not None else ""
    return f"the classifier does not beat its baseline, {baseline} ({score:.3f}{against})"


def on_classifier(
    claim: Claim, score: float | None, floor: float | None, baseline: str = "the majority class"
) -> Claim:
    """``claim``, computed on a fine-tuned classifier (its attention, gradients, heads), through :func:`below_floor`.

    NOT_TESTABLE, the reason (with the classifier's dev ``score`` and ``floor``) added to ``ours``, when
    the classifier does not beat ``baseline``; otherwise the same verdict and values. Either way the rule
    says so, and the claim counts the one seed it was made on (:class:`Seeds`, unless it counts some already,
    from :func:`over_seeds`): a single-seed verdict shows as one. ``score`` None: not a classifier's claim
    (e.g. a pre-trained model's objective), returned as is.
    """
    if score is None:
        return claim
    why = below_floor(score, floor, baseline)
    rule = f"{claim.rule}; not testable: the classifier does not beat its baseline ({baseline})"
    if why:
        claim = replace(claim, verdict=Verdict.NOT_TESTABLE, ours=f"{claim.ours}; {why}")
    seeds = claim.seeds or Seeds(int(claim.verdict is Verdict.HOLDS), 1)
    return replace(claim, rule=rule, seeds=seeds)


def greater(a: npt.ArrayLike, b: npt.ArrayLike) -> tuple[float, float, float, float]:
    """Does ``a`` tend to exceed ``b``? One-sided Mann-Whitney U and p, and both medians (NaN left out).

    U and p are NaN with fewer than 2 values on a side; a median is NaN for an empty side.
    """
    from scipy.stats import mannwhitneyu

    a, b = (np.asarray(x, dtype=np.float64).ravel() for x in (a, b))
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    u = p = math.nan
    if len(a) >= 2 and len(b) >= 2:
        result = mannwhitneyu(a, b, alternative="greater")
        u, p = float(result.statistic), float(result.pvalue)
    median = [float(np.median(x)) if len(x) else math.nan for x in (a, b)]
    return u, p, median[0], median[1]


# --------------------------------------------------------------------------- seeds


#: How :func:`seeds_verdict` joins the seeds' verdicts, as a claim's rule says it.
SEEDS_RULE = "the verdict most seeds give, where no seed gives another; else inconclusive"


def seeds_verdict(verdicts: Iterable[Verdict]) -> Verdict:
    """One verdict from the same claim's verdicts on several seeds: the verdict more than half of the testable
    seeds give, where every other testable seed is INCONCLUSIVE; INCONCLUSIVE otherwise (seeds that decide
    differently, or no majority). NOT_TESTABLE seeds are left out; NOT_TESTABLE when all are.

    A seed whose interval straddles the threshold does not speak against the others, so it does not veto them:
    with a veto, the chance that some seed straddles grows with the number of seeds, and more seeds, more evidence,
    would read inconclusive more often. Seeds that decide against each other do: the finding then depends on the
    seed.
    """
    testable = [Verdict(v) for v in verdicts if Verdict(v) is not Verdict.NOT_TESTABLE]
    if not testable:
        return Verdict.NOT_TESTABLE
    decided = {v for v in testable if v is not Verdict.INCONCLUSIVE}
    if len(decided) != 1:
        return Verdict.INCONCLUSIVE
    verdict = decided.pop()
    return verdict if 2 * testable.count(verdict) > len(testable) else Verdict.INCONCLUSIVE


def over_seeds(claims: Iterable[Claim]) -> Claim:
    """One claim from the same claim made once per seed (in seed order).

    The verdict is :func:`seeds_verdict`'s: the one most testable seeds give when no seed gives another, else
    INCONCLUSIVE. NOT_TESTABLE seeds (a model that learned nothing) are left out of the verdict, the values and the
    interval, unless all are, and counted in :class:`Seeds`. Numeric values are averaged over the seeds that gave
    them (``{name}_sd`` beside each, with two or more). The interval is the median seed's: the median of the
    seeds' lower ends and of their upper ends, so a rule decided by one interval against a threshold reads the
    same off it as off the seeds' majority. The first seed's text stands for "ours", with the seed count after it.
    """
    claims = list(claims)
    if not claims:
        raise ValueError("over_seeds needs at least one claim")
    if len({c.id for c in claims}) != 1:
        raise ValueError(f"over_seeds joins one claim's seeds, not {sorted({c.id for c in claims})}")
    first = claims[0]
    testable = [c for c in claims if c.verdict != Verdict.NOT_TESTABLE]
    verdict = seeds_verdict([c.verdict for c in claims])
    seeds = Seeds(sum(c.verdict == Verdict.HOLDS for c in claims), len(claims), len(claims) - len(testable))
    read = testable or claims  # the seeds whose numbers count
    values: dict = {}
    for name, value in first.values.items():
        given = [c.values.get(name) for c in read]
        numbers = [float(v) for v in given if isinstance(v, (int, float)) and math.isfinite(v)]
        if isinstance(value, (int, float)) and not isinstance(value, bool) and numbers:
            values[name] = float(np.mean(numbers))
            if len(claims) > 1:
                values[f"{name}_sd"] = float(np.std(numbers, ddof=1)) if len(numbers) > 1 else math.nan
        else:
            values[name] = value
    intervals = [c.interval for c in read if c.interval is not None]
    interval = first.interval
    if len(claims) > 1 and intervals:
        interval = Interval(
            float(np.median([i.low for i in intervals])),
            float(np.median([i.high for i in intervals])),
            intervals[0].level,
            f"median of {len(intervals)} seeds' {intervals[0].method}",
        )
    ours = first.ours if len(claims) == 1 else f"first seed: {first.ours}; {seeds}"
    rule = first.rule if len(claims) == 1 else f"{first.rule}; over seeds: {SEEDS_RULE}"
    return replace(first, verdict=verdict, ours=ours, rule=rule, values=values, interval=interval, seeds=seeds)


def claims_over_seeds(per_seed: Iterable[Iterable[Claim]]) -> list[Claim]:
    """A notebook's claims made once per seed (one list per seed, the first seed's first), joined claim by claim
    with :func:`over_seeds`, in the order they first appear.

    A claim some seed did not make is joined over the seeds that made it, and its seed count says how many those
    were. A claim made once is kept as it is: one seed gives what a notebook without seeds gave, and a claim on no
    trained model (a pre-trained model's objective) gets no seed count.
    """
    by_id: dict[str, list[Claim]] = {}
    for claims in per_seed:
        for claim in claims:
            by_id.setdefault(claim.id, []).append(claim)
    return [over_seeds(made) if len(made) > 1 else made[0] for made in by_id.values()]


Inputs = TypeVar("Inputs")


def claims_by_task(
    first: Mapping[str, Inputs],
    seeded: Mapping[tuple[str, int], Inputs],
    make: Callable[[str, Inputs], Iterable[Claim]],
) -> list[Claim]:
    """Each task's claims, made on its first seed's inputs and on each other seed's and joined over the seeds
    (:func:`claims_over_seeds`), task by task in ``first``'s order.

    :param first: the first seed's inputs, by task.
    :param seeded: the other seeds' inputs, by ``(task, seed)``.
    :param make: the claims on one task's inputs of one seed.
    :returns: the claims, task by task.
    """
    claims: list[Claim] = []
    for task, inputs in first.items():
        others = [value for (of_task, _), value in seeded.items() if of_task == task]
        claims += claims_over_seeds(make(task, made_on) for made_on in [inputs, *others])
    return claims
