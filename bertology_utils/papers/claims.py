"""A paper's claim checked against our numbers: one verdict vocabulary, one record, one table.

Each function of :mod:`~bertology_utils.papers.clark`, :mod:`~bertology_utils.papers.kovaleva` and
:mod:`~bertology_utils.papers.michel` takes analysis results and returns a :class:`Claim` whose
verdict a written ``rule`` computed from the numbers in ``values``. Notebooks show
:func:`claims_table` and record the claims with :func:`bertology_utils.run.harness.record_claims`
(``claims.json`` and one metric per claim and value), which the report reads back. A claim computed
on a fine-tuned classifier goes through :func:`on_classifier`: not testable when the classifier does
not beat its baseline (:func:`below_floor`, the one rule for models that learned nothing).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from enum import Enum

import numpy as np

__all__ = [
    "Verdict",
    "Claim",
    "claims_table",
    "depth_scaled_layers",
    "layer_mean",
    "below_floor",
    "on_classifier",
    "greater",
    "tagged",
    "head_grid",
]

_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:+-]*")


class Verdict(str, Enum):
    """How a claim fares on our numbers. NOT_TESTABLE: the data here cannot show it (missing, degenerate)."""

    HOLDS = "holds"
    PARTLY = "partly"
    DIFFERS = "differs"
    NOT_TESTABLE = "not testable"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def of(cls, holds: bool, testable: bool = True) -> Verdict:
        """HOLDS or DIFFERS by ``holds``; NOT_TESTABLE when not ``testable`` (checked first)."""
        if not testable:
            return cls.NOT_TESTABLE
        return cls.HOLDS if holds else cls.DIFFERS

    @classmethod
    def graded(cls, holds: bool, partly: bool, testable: bool = True) -> Verdict:
        """NOT_TESTABLE when not ``testable``; else HOLDS, PARTLY or DIFFERS, whichever comes first true."""
        if not testable:
            return cls.NOT_TESTABLE
        return cls.HOLDS if holds else cls.PARTLY if partly else cls.DIFFERS


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

    def __post_init__(self):
        if not _ID.fullmatch(self.id):
            raise ValueError(f"claim id {self.id!r}: use letters, digits and _ . : + - only")
        object.__setattr__(self, "verdict", Verdict(self.verdict))
        object.__setattr__(self, "values", {str(k): _plain(v) for k, v in self.values.items()})

    def to_metrics(self, prefix: str) -> dict:
        """``{prefix}.{id}.verdict`` and ``{prefix}.{id}.{name}`` for each of ``values``."""
        key = f"{prefix}.{self.id}" if prefix else self.id
        return {f"{key}.verdict": self.verdict.value, **{f"{key}.{name}": v for name, v in self.values.items()}}

    def to_dict(self) -> dict:
        return {**asdict(self), "verdict": self.verdict.value}

    @classmethod
    def from_dict(cls, data: Mapping) -> Claim:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def tagged(claim_id: str, task: str) -> str:
    """A claim id for one task (``heads_prunable.SST-2``), or the bare id when there is no task."""
    return f"{claim_id}.{task}" if task else claim_id


def head_grid(values, name: str, shape: tuple | None = None, dtype=None) -> np.ndarray:
    """``values`` as a (layers, heads) array (of ``shape`` when given); ValueError naming ``name`` otherwise."""
    array = np.asarray(values, dtype=dtype)
    if array.ndim != 2 or (shape is not None and array.shape != tuple(shape)):
        wanted = f" of shape {tuple(shape)}" if shape is not None else ""
        raise ValueError(f"{name} must be a (layers, heads) array{wanted}, not shape {array.shape}")
    return array


def _plain(value):
    """numpy scalars as Python numbers, so that values compare, print and serialise plainly."""
    return value.item() if isinstance(value, np.generic) else value


def claims_table(claims: Iterable[Claim], model=None):
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
            "rule": c.rule,
            "note": c.note,
        }
        for c in claims
    ]
    columns = ["id", "paper", "claim", "paper value", ours, "verdict", "rule", "note"]
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


def layer_mean(values, first: int, last: int, paper_layers: int = 12) -> tuple[float, str]:
    """Mean of a ``(layers, heads)`` (or ``(layers,)``) array over the paper's layers ``first..last`` scaled to
    its depth, and those layers written ``"a-b"`` (from 1). NaN entries are left out; all NaN gives NaN."""
    values = np.asarray(values, dtype=np.float64)
    a, b = depth_scaled_layers(first, last, values.shape[0], paper_layers)
    part = values[a - 1 : b]
    mean = float(np.nanmean(part)) if np.isfinite(part).any() else float("nan")
    return mean, f"{a}-{b}" if a != b else str(a)


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
    says so. ``score`` None: not a classifier's claim (e.g. a pre-trained model's objective), returned as is.
    """
    if score is None:
        return claim
    why = below_floor(score, floor, baseline)
    rule = f"{claim.rule}; not testable: the classifier does not beat its baseline ({baseline})"
    if not why:
        return replace(claim, rule=rule)
    return replace(claim, verdict=Verdict.NOT_TESTABLE, ours=f"{claim.ours}; {why}", rule=rule)


def greater(a, b) -> tuple[float, float, float, float]:
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
