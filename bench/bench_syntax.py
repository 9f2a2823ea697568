"""Dependency-head scoring speed: every relation, every head, both directions, over UD EWT dev.

  store      bertology's score_syntax reading the attention store (the issue's target: < 30 s)
  vectorised score_syntax on the same maps already in memory
  loop       the loop a user writes first (Clark et al.'s notebook): for every head and direction,
             for every sentence, a tie-aware maximum (tie_credit) and a Python loop over the words. It runs on every
             k-th sentence (--loop-sentences of them) and its time is scaled to the whole corpus
             by the number of sentences; its counts are checked against score_syntax on the same
             subset, so both compute the same thing.

The extraction (extract_cached) runs first and is not timed.

    python bench/bench_syntax.py [--repeats 3] [--loop-sentences 200]
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import time

import numpy as np
from _timing import fastest_call


def loop_counts(corpus, items, num_layers: int, num_heads: int) -> dict:
    """(direction, layer, head, relation) -> hits (credit), the slow way, with score_syntax's definitions."""
    from bertology_utils.analyses.syntax import ALL, EXCLUDED_RELATIONS, POSSESSIVE_CLITICS, POSSESSOR_RELATIONS
    from bertology_utils.core.maxima import tie_credit

    hits: collections.Counter = collections.Counter()
    for direction in range(2):
        for layer in range(num_layers):
            for head in range(num_heads):
                for item in items:
                    sentence = corpus[item.index]
                    real = [k for k, kind in enumerate(item.word_kinds) if kind == 0]
                    att = np.array(item.attention[layer, head])[np.ix_(real, real)]
                    if direction == 1:
                        att = att.T
                    np.fill_diagonal(att, -np.inf)
                    credit = tie_credit(att)
                    words = sentence.words
                    for i, (gov, rel) in enumerate(zip(sentence.heads, sentence.relations)):
                        if gov == 0 or rel in EXCLUDED_RELATIONS:
                            continue
                        source = i
                        if rel in POSSESSOR_RELATIONS and i + 1 < len(words) and words[i + 1] in POSSESSIVE_CLITICS:
                            source = i + 1
                        if credit[source, gov - 1]:
                            hits[direction, layer, head, rel] += credit[source, gov - 1]
                            hits[direction, layer, head, ALL] += credit[source, gov - 1]
    return hits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--loop-sentences", type=int, default=200)
    args = parser.parse_args()

    from bertology_utils.analyses.syntax import score_syntax
    from bertology_utils.attention.extraction import extract_cached
    from bertology_utils.core.models import load_model
    from bertology_utils.data import Corpus, default_treebank

    loaded = load_model()
    corpus = default_treebank("dev")
    store = extract_cached(corpus, loaded, progress=False)
    print(f"model {loaded.name} ({loaded.num_layers}x{loaded.num_heads}); {corpus.description}")

    store_s, result = fastest_call(args.repeats, lambda: score_syntax(corpus, store))
    items = list(store.iter_items())
    vector_s, _ = fastest_call(args.repeats, lambda: score_syntax(corpus, items))

    step = max(1, len(items) // args.loop_sentences)
    chosen = items[::step][: args.loop_sentences]
    subset = Corpus.from_items([corpus[it.index] for it in chosen], f"{corpus.name} every {step}th")
    renumbered = [dataclasses.replace(it, index=k) for k, it in enumerate(chosen)]
    start = time.perf_counter()
    hits = loop_counts(subset, renumbered, loaded.num_layers, loaded.num_heads)
    loop_subset_s = time.perf_counter() - start
    loop_s = loop_subset_s * len(items) / len(chosen)

    check = score_syntax(subset, renumbered)
    expected = {
        (d, l, h, rel): float(check.correct[d, r, l, h])
        for d, r, l, h in zip(*np.nonzero(check.correct))
        for rel in [check.relations[r]]
    }
    agree = hits.keys() == expected.keys() and all(np.isclose(hits[k], expected[k]) for k in expected)
    assert agree, "the loop and score_syntax disagree"

    relations = len(result.relations) - 1
    print(
        f"{result.n_sentences} sentences, {int(result.counts[0])} dependents, {relations} relations, "
        f"{2 * loaded.num_layers * loaded.num_heads} head-directions (best of {args.repeats})"
    )
    print(f"  store       {store_s:8.2f} s   score_syntax reading the store (target < 30 s)")
    print(f"  vectorised  {vector_s:8.2f} s   score_syntax on maps in memory")
    print(
        f"  loop        {loop_s:8.2f} s   per-sentence, per-head Python loop: {loop_subset_s:.2f} s on "
        f"{len(chosen)} sentences (every {step}th), scaled to {len(items)}; same counts as score_syntax"
    )
    print(f"loop / vectorised = {loop_s / vector_s:.0f}x")
    print(
        json.dumps(
            {
                "sentences": result.n_sentences,
                "store_s": round(store_s, 3),
                "vectorised_s": round(vector_s, 3),
                "loop_s_scaled": round(loop_s, 2),
                "loop_sentences": len(chosen),
                "loop_over_vectorised": round(loop_s / vector_s, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
