"""bertology_utils: see what the attention heads of BERT-style encoders do.

The package follows the pipeline, one module per stage:

- ``data``            text, treebanks (CoNLL-U), GLUE tasks, GAP -> items of words
- ``models``          load any Hugging Face encoder with attentions switched on
- ``alignment``       tokenize pre-split words and map tokens back to words
- ``extraction``      batched model forward -> token attention
- ``word_attention``  token-level -> word-level attention (Clark et al.'s rule)
- ``store``           on-disk, resumable, shardable store of attention maps
- analyses:           ``patterns`` and ``pattern_types`` (surface statistics, Kovaleva's
                      types), ``syntax`` and ``coreference`` (heads that track them),
                      ``clustering`` (heads by Jensen-Shannon distance), ``gradients``
                      (gradients w.r.t. attention), ``probes`` and ``word_vectors``
- interventions:      ``interventions`` (edit attention, gate heads), ``finetuning`` (GLUE),
                      ``pruning`` (ablation, importance, real pruning)
- ``harness``         run notebooks with papermill, record metrics
- ``regression``      compare a run's metrics with committed references, per-metric tolerances
- ``figures``         shared plotting helpers
- presentation:       ``views`` (bertviz head/model views, explorer widget, neuron view),
                      ``slides`` (reveal.js decks), ``report`` (one HTML page per run),
                      ``assets`` (the npm-installed JavaScript they inline, so they work offline)
- ``cli``             the ``bertology`` command
"""
from bertology_utils.core._version import __version__

__all__ = ["__version__"]
