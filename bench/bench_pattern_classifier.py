"""Speed of the trained pattern-type classifiers against the template rules, over a whole store.

Every map of every item (layers x heads per item) is classified by ``classify_items`` with each
method; the items are read into memory first, so the times are the classifiers' own. Ratios are to
the template rules in the same run.
Target: the maps of 1,000 sentences (72 a sentence for the default MiniLM, 144 for a 12 x 12 model)
in under 5 seconds on 2 cores.

    python bench/bench_pattern_classifier.py [--sentences 1000] [--model NAME] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_extraction import corpus_of  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--model", default=None)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()

    from bertology_utils.analyses.pattern_models import best_method, classify_items, load_classifier
    from bertology_utils.analyses.pattern_types import METHODS
    from bertology_utils.attention.extraction import extract_cached
    from bertology_utils.core.models import load_model

    model = load_model(args.model)
    corpus, name = corpus_of(args.sentences)
    items = list(extract_cached(corpus, model, progress=False))
    for method in METHODS[1:]:
        load_classifier(method)  # reading the weights is not part of the timing
    best = {}
    for method in METHODS:
        runs = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            table = classify_items(items, method=method)
            runs.append(time.perf_counter() - start)
        best[method] = min(runs)
    out = {
        "model": model.name,
        "data": name,
        "items": len(items),
        "maps": len(table),
        "best_method": best_method(),
        **{f"{m}_s": round(s, 2) for m, s in best.items()},
        **{f"{m}_vs_template": round(best[m] / best["template"], 2) for m in METHODS[1:]},
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
