"""papers: each reproduced paper's claims, checked against the numbers of analyses and interventions.

``claims`` holds the one verdict vocabulary (:class:`Verdict`), the :class:`Claim` record and the
"paper vs ours" table; ``clark``, ``kovaleva``, ``michel``, ``voita``, ``vig``, ``hewitt`` (the structural
probes) and ``context_mixing`` (Kobayashi, Abnar & Zuidema, Mohebbi) hold one function per claim.
"""

from bertology_utils.core.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "claims": ["Verdict", "Claim", "claims_table", "depth_scaled_layers", "layer_mean"],
        "pruning_claims": ["PruningInputs", "pruning_claims_by_task"],
    },
)
