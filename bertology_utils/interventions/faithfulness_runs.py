"""How faithful each context-mixing method is, on the classifier of every fine-tuning seed.

Mohebbi et al. (2023), *Quantifying Context Mixing in Transformers* (https://arxiv.org/abs/2301.12971),
ranked the methods by how well each one's input attribution for the [CLS] row matches gradient- and
blank-out-based references (Spearman's rho per example). :func:`faithfulness_by_seed` computes that table
for each seed's classifier (every method from one traced pass per batch,
:func:`~bertology_utils.interventions.mixing.mixing_for`; the references from
:func:`~bertology_utils.interventions.references.word_references`) and keeps one seed's maps and
references for the figures.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
from tqdm.auto import tqdm

import bertology_utils.interventions.lrp  # noqa: F401  registers attnlrp and cp_lrp, which 08 computes beside IG
from bertology_utils.attention.word_attention import ItemAttention
from bertology_utils.core.models import LoadedModel
from bertology_utils.data import Corpus
from bertology_utils.interventions import mixing
from bertology_utils.interventions.finetuning import FineTuned
from bertology_utils.interventions.references import REFERENCE_REGISTRY, WordReferences, word_references
from bertology_utils.interventions.results_cache import cached_tables

__all__ = ["SeedFaithfulness", "faithfulness_by_seed"]


@dataclass
class SeedFaithfulness:
    """Each seed's faithfulness table (one row per method, reference, layer and example), and the maps
    (method -> one word-level record per kept example) and references of the seed the figures show."""

    tables: dict[int, pd.DataFrame]
    maps: dict[str, list[ItemAttention]]
    references: WordReferences
    #: The references the classifiers' architecture refuses, each with the reason (:meth:`Reference.unsupported`).
    refused: dict[str, str]


def faithfulness_by_seed(
    runs: Mapping[int, FineTuned],
    items: Sequence[Any],
    methods: Sequence[str],
    *,
    first: int,
    max_tokens: int | None,
    batch_size: int,
    ig_steps: int,
    ig_tolerance: float | None,
    references: Sequence[str] | None = None,
    cache: bool = True,
    progress: bool = True,
) -> SeedFaithfulness:
    """The faithfulness of each method on each seed's classifier, over the same examples.

    :param runs: the fine-tuned classifiers by seed.
    :param items: the examples (a task's dev split, or its first examples).
    :param methods: the context-mixing methods (:data:`~bertology_utils.interventions.mixing.METHODS`).
    :param first: the seed whose maps and references are kept.
    :param max_tokens: examples longer than this are skipped.
    :param batch_size: examples per batch.
    :param ig_steps: Gauss-Legendre nodes per panel of the integrated-gradients reference.
    :param ig_tolerance: the panels' error tolerance (None: one fixed rule).
    :param references: the attribution references to judge the maps by (None: every registered one, the
        relevance propagations that :func:`~bertology_utils.interventions.references.word_references` leaves
        out by default included).
    :param cache: reuse stored references, and the tables of the seeds other than ``first`` (stored whole: a warm
        run computes only ``first``'s maps).
    :param progress: progress bars.
    :returns: the tables by seed, ``first``'s maps and references, and the references the architecture refuses
        (computed for none of the seeds).
    """
    names = tuple(REFERENCE_REGISTRY) if references is None else tuple(references)
    some = next(iter(runs.values())).loaded if runs else None
    refused = {n: why for n in names if some is not None and (why := REFERENCE_REGISTRY[n].unsupported(some))}
    names = tuple(n for n in names if n not in refused)
    if first not in runs:
        raise KeyError(f"no classifier of seed {first} among seeds {list(runs)}")
    corpus = Corpus.of(items)
    fields = {"items": len(corpus), "methods": list(methods), "references": list(names), "max_tokens": max_tokens}
    fields |= {"batch_size": batch_size, "steps": ig_steps, "tolerance": ig_tolerance}

    def computed(loaded: LoadedModel) -> tuple[dict[str, list[ItemAttention]], WordReferences]:
        """One classifier's maps (every method from one pass per batch) and references."""
        maps = mixing.mixing_for(
            corpus,
            loaded,
            methods,
            flow_rows=(0,),
            too_long="skip",
            max_tokens=max_tokens,
            batch_size=batch_size,
            progress=progress,
        )
        scores = word_references(
            loaded,
            corpus,
            references=names,
            batch_size=batch_size,
            max_tokens=max_tokens,
            steps=ig_steps,
            tolerance=ig_tolerance,
            cache=cache,
            progress=progress,
        )
        return maps, scores

    def table(maps: dict[str, list[ItemAttention]], scores: WordReferences) -> pd.DataFrame:
        # faithfulness annotates invariant dicts of Sequence; it only reads these lists
        return mixing.faithfulness(maps, scores.scores)  # type: ignore[arg-type]

    def stored(loaded: LoadedModel) -> dict[str, pd.DataFrame]:
        return {"table": table(*computed(loaded))}

    tables, kept = {}, None
    for run_seed, run in tqdm(runs.items(), desc="seeds", unit="classifier", disable=not progress):
        if run_seed == first:  # the figures' seed: its maps and references are kept, so they are computed
            kept = computed(run.loaded)
            tables[run_seed] = table(*kept)
        else:  # only the table is kept: stored whole, so a warm run does not compute these maps again
            tables[run_seed] = cached_tables(
                "mixing-faithfulness",
                run.loaded,
                corpus.sha256,
                fields,
                functools.partial(stored, run.loaded),
                cache,
            )["table"]
    assert kept is not None
    return SeedFaithfulness(tables, *kept, refused)
