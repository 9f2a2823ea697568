"""bertology_utils: see what the attention heads of BERT-style encoders do.

The package is layered, lowest first (a module imports only from its own folder or below;
``analyses`` and ``interventions`` are siblings)::

    core < data < attention < analyses = interventions < papers < run < present < cli

- ``core``           settings, errors, version, models and their architectures, figures
- ``data``           text, treebanks (CoNLL-U), GLUE, GAP -> corpora of word items
- ``attention``      tokenize words, extract attention, convert it to words, store it
- ``analyses``       surface patterns, syntax, coreference, clustering, probes
- ``interventions``  edit attention, gradients, fine-tuning, pruning
- ``papers``         each paper's claims, checked against our numbers
- ``run``            run the notebooks, record metrics, regression checks
- ``present``        views, slide decks, reports, their offline JavaScript
- ``cli``            the ``bertology`` command

Each folder's ``__init__`` re-exports its public names; the handful below are the short way in.
They are imported on first use, so ``import bertology_utils`` does not import torch.
"""

from bertology_utils.core.lazy import lazy_exports
from bertology_utils.core.threads import follow_budget as _follow_budget

_follow_budget()  # only in a kernel of `bertology run --jobs N` ($BERTOLOGY_THREAD_BUDGET_FILE): take freed cores

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "bertology_utils.core": ["__version__", "BertologyError", "LoadedModel", "load_model"],
        "bertology_utils.data": ["Corpus", "load_dataset", "default_treebank", "resolve_corpus"],
        "bertology_utils.attention": [
            "extract_attention",
            "extract_cached",
            "attention_for",
            "AttentionStore",
            "ItemAttention",
        ],
    },
)
