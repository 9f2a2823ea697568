"""metrics: every metric key a notebook records, declared once with its kind, unit and meaning.

One module per notebook topic (``syntax_coref`` for 03's ``syntax.*`` and ``coref.*``), each a
``METRICS`` tuple of :class:`Metric`; :data:`REGISTRY` holds them all. ``record_metrics`` refuses a
key no declaration matches, and the regression checks take each metric's tolerance from its kind.
"""

from bertology_utils.papers.metrics import (
    atlas,
    clustering,
    common,
    context_mixing,
    head_roles,
    patterns,
    probes,
    pruning,
    sep_noop,
    sinks,
    syntax_coref,
    tour,
)
from bertology_utils.papers.metrics.base import FLOORS, Floor, Kind, Metric, MetricRegistry, UndeclaredMetricError

__all__ = ["Kind", "Metric", "MetricRegistry", "UndeclaredMetricError", "Floor", "FLOORS", "REGISTRY"]

#: Every declared metric of the notebooks in ``notebooks/``.
REGISTRY = MetricRegistry()
for _topic in (
    common,
    tour,
    patterns,
    sep_noop,
    syntax_coref,
    probes,
    clustering,
    pruning,
    head_roles,
    context_mixing,
    sinks,
    atlas,
):
    REGISTRY.declare(_topic.METRICS)
