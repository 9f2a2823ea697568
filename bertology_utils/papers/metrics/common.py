"""Metrics every notebook records the same way: claims' verdicts and skipped sections."""

from bertology_utils.papers.metrics.base import Kind, Metric

METRICS = (
    Metric(
        "{topic}.claims.{claim*}.verdict",
        Kind.VERDICT,
        "verdict",
        "what the claim's rule decided from the numbers: holds, partly, differs, inconclusive or not testable",
    ),
    Metric(
        "{topic}.skipped",
        Kind.EXACT,
        "section names",
        "the sections of the notebook not computed (their data is missing); skipped.json says why",
    ),
)
