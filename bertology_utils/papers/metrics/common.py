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
        "{topic}.claims.{claim*}.ci_low",
        Kind.TRAINED,
        "as the claim's statistic",
        "the lower end of the claim's interval (claims.Interval: its level and method are in claims.json)",
    ),
    Metric(
        "{topic}.claims.{claim*}.ci_high",
        Kind.TRAINED,
        "as the claim's statistic",
        "the upper end of the claim's interval",
    ),
    Metric("{topic}.claims.{claim*}.seeds", Kind.EXACT, "seeds", "how many seeds the claim was made on"),
    Metric("{topic}.claims.{claim*}.seeds_holding", Kind.TRAINED, "seeds", "how many of them gave holds"),
    Metric(
        "{topic}.claims.{claim*}.{value}_sd",
        Kind.TRAINED,
        "as the value",
        "the standard deviation over seeds of the claim's value of that name (claims.over_seeds)",
    ),
    Metric(
        "{topic}.skipped",
        Kind.EXACT,
        "section names",
        "the sections of the notebook not computed (their data is missing); skipped.json says why",
    ),
)
