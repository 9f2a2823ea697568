"""Notebook 09 (atlas): what the atlas joined from the other notebooks of a run (``atlas.skipped``: common.py)."""

from bertology_utils.papers.metrics.base import Kind, Metric

METRICS = (
    Metric(
        "atlas.runs",
        Kind.TEXT,
        "run names",
        "the runs joined in the atlas, named by their folders (a run name defaults to the time it started)",
    ),
    Metric("atlas.n_heads", Kind.EXACT, "count", "rows of the atlas: every head of every run joined"),
    Metric("atlas.n_columns", Kind.EXACT, "count", "value columns of the atlas (per-head metrics of the notebooks)"),
    Metric("atlas.columns", Kind.EXACT, "column names", "the atlas's value columns, in the registry's order"),
    Metric(
        "atlas.absent",
        Kind.EXACT,
        "column names",
        "the described columns that no notebook of the run recorded",
    ),
    Metric(
        "atlas.column",
        Kind.EXACT,
        "column name",
        "the column the static grid figure shows (None when the atlas has no number column)",
    ),
)
