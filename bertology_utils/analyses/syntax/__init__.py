"""Heads that track dependency syntax: Clark et al. (2019), Section 4.2 and Table 1.

`What Does BERT Look At? <https://arxiv.org/abs/1906.04341>`_: how often is the word a head attends to
most the gold syntactic head? Modules, lowest first: ``result`` (:class:`SyntaxResult`, what was
found, and the paper's Table 1 beside it), ``scoring`` (:func:`score_syntax` over a treebank, and
the definition in its docstring), ``figures`` (pictures).
"""

from bertology_utils.core.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "result": [
            "ALL",
            "DIRECTIONS",
            "FOLDS",
            "PAPER_TABLE1",
            "STANFORD_TO_UD",
            "PAPER_NOTES",
            "SyntaxResult",
            "held_out_picks",
            "paper_comparison",
        ],
        "scoring": [
            "OFFSETS",
            "EXCLUDED_RELATIONS",
            "POSSESSOR_RELATIONS",
            "POSSESSIVE_CLITICS",
            "ON_MISMATCH",
            "real_word_positions",
            "word_attention_without_specials",
            "prediction_credit",
            "word_mismatch",
            "score_syntax",
        ],
        "figures": ["example_sentence", "plot_head_on_sentence", "plot_best_vs_baseline"],
    },
)
