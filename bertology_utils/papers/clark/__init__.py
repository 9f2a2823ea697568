"""Clark et al. (2019), *What Does BERT Look At?*: each claim, checked against our numbers.

One function per claim; each takes analysis results (arrays are ``(layers, heads)`` means, one
per head) and returns a :class:`~bertology_utils.papers.claims.Claim`. The paper measured
BERT-base (12 layers); layer ranges are scaled to the model's depth with
:func:`~bertology_utils.papers.claims.depth_scaled_layers`, so "layers 6-10 of 12" is the same
share of depth in a 6-layer model. Paper values are from ../shared/reference/papers.md. A claim
computed with a fine-tuned classifier's objective (notebook 02's SST-2 loss) goes through
:func:`~bertology_utils.papers.claims.on_classifier` in the notebook, with the classifier's dev score
and its baseline's.

``patterns`` holds the claims on what heads attend to (surface patterns, Section 3; [SEP] as a no-op,
Section 3.3); ``probing`` those on what heads know (syntax and coreference, Tables 1-2; probing
classifiers, Table 3; clustering, Section 6).
"""

from bertology_utils.core.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "patterns": [
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
        ],
        "probing": [
            "head_beats_offset",
            "table1_claims",
            "coref_beats_nearest",
            "coref_below_rule_based",
            "PROBE_CLAIMS",
            "probe_margin",
            "table3_claims",
            "same_layer_close",
            "heads_cluster_by_behaviour",
        ],
    },
)
