"""What a metric is: its key (a template), its kind, its unit and meaning, declared once.

A notebook records metrics under dotted keys (``syntax.amod.best_head``); each key matches one
:class:`Metric` declared in the topic's module of this package (``syntax_coref.py`` for 03's).
The kind says how far the number may move when nothing about the science changed: another CPU's
kernels, another thread count, a GPU, bf16 (see :func:`floor_tolerance`). The regression checks
(:mod:`bertology_utils.run.regression`), the atlas and the lecture read these declarations.

Templates: ``{name}`` stands for one dotted part (``SST-2``, ``amod``); ``{name*}`` for one or
more parts (a claim id such as ``table1.amod``, or ``lambda=0.03`` whose dot splits it). When
several declarations match a key, the one with the most literal characters wins; a tie is an
error the declarations' test reports.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property

from bertology_utils.core.errors import BertologyError

__all__ = ["Kind", "Metric", "MetricRegistry", "UndeclaredMetricError", "Floor", "FLOORS"]

_PLACEHOLDER = re.compile(r"\{([a-z_]+)(\*?)\}")


class Kind(str, Enum):
    """How a metric's value comes about, and so how it may move between machines that agree on the science."""

    #: counts, ids, names, parameters, booleans: equal, or something changed
    EXACT = "exact"
    #: a float computation: moves in the last bits with another CPU's kernels or summation order
    FLOAT = "float"
    #: decided by a maximum (argmax, best head, modal type, a threshold): a near-tie may flip one decision
    MAXIMUM = "maximum"
    #: downstream of training (fine-tuning, gates, probes, a random init): float noise grows through the steps
    TRAINED = "trained"
    #: a claim's verdict, compared before any number
    VERDICT = "verdict"
    #: seconds: recorded, never compared
    TIMING = "timing"
    #: text for people (what data was read, from where): recorded, never compared
    TEXT = "text"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Floor:
    """The least tolerance a kind gets, measured or not: ``max(abs, rel * |reference|)`` per number, and
    ``changes`` elements of a list (a grid of heads) that may differ beyond it; ``ignore``: not compared."""

    abs: float = 0.0
    rel: float = 0.0
    changes: int = 0
    ignore: str | None = None


class UndeclaredMetricError(BertologyError, KeyError):
    """A metric key no declaration matches: declare it in ``bertology_utils/papers/metrics/<topic>.py``."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


@dataclass(frozen=True)
class Metric:
    """One declared metric key (a template) and what it is."""

    key: str  #: dotted template, e.g. ``syntax.{relation}.best_accuracy``
    kind: Kind
    unit: str  #: e.g. "share of attention", "accuracy", "head (layer-head, from 1)", "count"
    meaning: str  #: one sentence for a reader of check.json, the atlas or the lecture
    #: for a value decided item by item (an accuracy over arcs): the key (template, same placeholders)
    #: of how many items decided it; one item flipping moves the value by 1/count
    items: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", Kind(self.kind))
        if not self.key or not self.unit or not self.meaning:
            raise ValueError(f"metric {self.key!r}: a key, a unit and a meaning are required")
        names = [m.group(1) for m in _PLACEHOLDER.finditer(self.key)]
        if len(names) != len(set(names)):
            raise ValueError(f"metric {self.key!r}: a placeholder appears twice")
        if self.items is not None:
            unknown = {m.group(1) for m in _PLACEHOLDER.finditer(self.items)} - set(names)
            if unknown:
                raise ValueError(f"metric {self.key!r}: items {self.items!r} uses unknown placeholders {unknown}")

    @cached_property
    def pattern(self) -> re.Pattern:
        parts, last = [], 0
        for m in _PLACEHOLDER.finditer(self.key):
            parts.append(re.escape(self.key[last : m.start()]))
            parts.append(f"(?P<{m.group(1)}>{'.+' if m.group(2) else '[^.]+'})")
            last = m.end()
        parts.append(re.escape(self.key[last:]))
        return re.compile("".join(parts))

    @cached_property
    def literal_length(self) -> int:
        """Characters outside placeholders: the more, the more specific the declaration."""
        return len(_PLACEHOLDER.sub("", self.key))

    def match(self, key: str) -> dict[str, str] | None:
        """The placeholders' values when ``key`` matches, else None."""
        found = self.pattern.fullmatch(key)
        return found.groupdict() if found else None

    def items_key(self, key: str) -> str | None:
        """The key of the item count behind ``key`` (a recorded key matching this template), or None."""
        parts = self.match(key)
        if self.items is None or parts is None:
            return None
        return _PLACEHOLDER.sub(lambda m: parts[m.group(1)], self.items)


@dataclass
class MetricRegistry:
    """Every declared metric, searched by key."""

    metrics: list[Metric] = field(default_factory=list)
    #: key -> its declaration, as found: a check or the atlas asks for the same keys again and again
    _found: dict[str, Metric | None] = field(default_factory=dict, repr=False, compare=False)

    def declare(self, metrics: Iterable[Metric]) -> None:
        """Add declarations; the same template twice is an error."""
        known = {m.key for m in self.metrics}
        for metric in metrics:
            if metric.key in known:
                raise ValueError(f"metric {metric.key!r} declared twice")
            known.add(metric.key)
            self.metrics.append(metric)
        self._found.clear()  # a new declaration may be the more specific match of a key seen before

    def template(self, key: str) -> Metric | None:
        """The declaration whose template is exactly ``key`` (``syntax.head.{relation}``), or None."""
        return next((m for m in self.metrics if m.key == key), None)

    def matches(self, key: str) -> list[Metric]:
        """Every declaration matching ``key``, the most specific first."""
        found = [m for m in self.metrics if m.match(key) is not None]
        return sorted(found, key=lambda m: -m.literal_length)

    def find(self, key: str) -> Metric | None:
        """The declaration of ``key`` (the most specific match), or None."""
        if key not in self._found:
            found = self.matches(key)
            self._found[key] = found[0] if found else None
        return self._found[key]

    def __getitem__(self, key: str) -> Metric:
        metric = self.find(key)
        if metric is None:
            raise UndeclaredMetricError(
                f"metric {key!r} is not declared: add a Metric for it (kind, unit, meaning) to the topic's module "
                "in bertology_utils/papers/metrics/"
            )
        return metric

    def kinds(self, keys: Iterable[str]) -> dict[str, Kind]:
        """Each key's kind; raises UndeclaredMetricError naming every key without a declaration."""
        kinds, missing = {}, []
        for key in keys:
            metric = self.find(key)
            if metric is None:
                missing.append(key)
            else:
                kinds[key] = metric.kind
        if missing:
            raise UndeclaredMetricError(
                f"{len(missing)} metric(s) not declared: {', '.join(sorted(missing)[:10])}"
                f"{' ...' if len(missing) > 10 else ''}; add a Metric for each (kind, unit, meaning) to the "
                "topic's module in bertology_utils/papers/metrics/"
            )
        return kinds

    def check(self, keys: Iterable[str]) -> None:
        """Raise UndeclaredMetricError when any of ``keys`` has no declaration."""
        self.kinds(keys)

    def items_count(self, key: str, metrics: Mapping[str, object]) -> int | None:
        """How many items decided ``key``'s value, read from ``metrics`` (the same run), when declared and recorded."""
        metric = self.find(key)
        counted = metric.items_key(key) if metric is not None else None
        count = metrics.get(counted) if counted is not None else None
        return count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else None


#: Each kind's least tolerance. FLOAT: float32 results summed in another order (another CPU's oneDNN kernels,
#: another thread count) move by ~1e-6 relative; 1e-4 is two orders above. MAXIMUM and TRAINED: the same per
#: number, plus one element of a list (a grid of heads) that may differ beyond it, since a near-tie flips one
#: decision there (a declared item count adds one item's worth, see ``Metric.items``). What a refresh measures
#: under perturbations raises these (:mod:`bertology_utils.run.regression`).
FLOORS: dict[Kind, Floor] = {
    Kind.EXACT: Floor(),
    Kind.VERDICT: Floor(),
    Kind.FLOAT: Floor(abs=1e-6, rel=1e-4),
    Kind.MAXIMUM: Floor(abs=1e-6, rel=1e-4, changes=1),
    Kind.TRAINED: Floor(abs=1e-6, rel=1e-4, changes=1),
    Kind.TIMING: Floor(ignore="timing: depends on the machine and its load"),
    Kind.TEXT: Floor(ignore="text for people: names folders and files of the machine that ran it"),
}
