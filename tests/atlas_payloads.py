"""Synthetic head-atlas payloads (schema version 1, as present/atlas.py builds them) for the page's tests, and a
reference implementation of the page's filters to check the page (and atlas.py's query) against."""

from __future__ import annotations

import base64
import math
import operator

import numpy as np

VIRIDIS_ENDS = ("#440154", "#fde725")


def colormap(n: int = 256) -> list[str]:
    """n hex colours from dark purple to yellow (a linear blend: the page only needs a lookup table)."""
    a = np.array([int(VIRIDIS_ENDS[0][k : k + 2], 16) for k in (1, 3, 5)], dtype=float)
    b = np.array([int(VIRIDIS_ENDS[1][k : k + 2], 16) for k in (1, 3, 5)], dtype=float)
    out = []
    for t in np.linspace(0, 1, n):
        r, g, bl = np.rint(a + t * (b - a)).astype(int)
        out.append(f"#{r:02x}{g:02x}{bl:02x}")
    return out


def _maps(rng, layers: int, heads: int, n: int) -> str:
    raw = rng.random((layers, heads, n, n))
    maps = raw / raw.sum(-1, keepdims=True)
    return base64.b64encode(np.rint(255 * maps).astype(np.uint8).tobytes()).decode()


def synthetic_payload(shapes=((2, 3), (3, 2)), *, seed: int = 0, map_size: int = 5, meaning: str = "") -> dict:
    """Runs of the given (layers, heads) shapes; the first has maps and a missing section, the second none.

    Columns: ``score`` (number, with ties), ``other`` (number, some missing), ``flag`` (bool),
    ``pattern`` (category, one missing).
    """
    rng = np.random.default_rng(seed)
    runs, run_col, layer_col, head_col = [], [], [], []
    nearest: dict = {}
    for r, (layers, heads) in enumerate(shapes):
        run = {
            "id": f"r{r}",
            "name": ["default", "shuffled"][r % 2] + ("" if r < 2 else str(r)),
            "model": f"test/tiny-{layers}x{heads}",
            "layers": layers,
            "heads": heads,
            "missing": {"03_syntax_coref": "not run", "coref": "GAP data missing"} if r == 0 else {},
            "maps": None,
            "maps_note": "no attention maps were saved in this run",
        }
        if r == 0:
            words = ["[CLS]", "the", "cat", "sat", "[SEP]"]
            run["maps"] = {
                "note": f"mean of 4 sentences, each resampled onto {map_size} relative word positions",
                "mean": {
                    "size": map_size,
                    "labels": ["[CLS]", *[f"w{k}" for k in range(1, map_size - 1)], "[SEP]"],
                    "data": _maps(rng, layers, heads, map_size),
                },
                "examples": [
                    {"words": words, "data": _maps(rng, layers, heads, len(words))},
                    {"words": words[:4], "data": _maps(rng, layers, heads, 4)},
                ],
            }
            del run["maps_note"]
        runs.append(run)
        keys = [f"{layer}-{head}" for layer in range(1, layers + 1) for head in range(1, heads + 1)]
        nearest[run["id"]] = {
            key: [[keys[(k + 1) % len(keys)], 0.125], [keys[(k + 2) % len(keys)], 0.25]] for k, key in enumerate(keys)
        }
        for layer in range(1, layers + 1):
            for head in range(1, heads + 1):
                run_col.append(run["id"])
                layer_col.append(layer)
                head_col.append(head)
    n = len(run_col)
    # Rounded, so that values tie and JavaScript's String() and Python's repr() spell them alike.
    score = [round(float(v), 1) for v in rng.random(n)]
    other = [None if k % 4 == 1 else round(float(v), 3) for k, v in enumerate(rng.random(n))]
    flag = [bool(v) for v in rng.random(n) < 0.5]
    pattern = [None if k == 2 else ["diagonal", "previous", "broad", "[SEP]"][k % 4] for k in range(n)]
    claim = {
        "key": "michel.few_heads",
        "claim": "A few heads carry most of the importance",
        "verdict": "holds",
        "paper_value": "a few heads",
        "ours": "top 10% carry 60%",
        "run": "r0",
    }
    columns = [
        {
            "name": "importance.score",
            "label": "importance (score)",
            "meaning": meaning or "how much the loss rises when the head is masked",
            "unit": "share of total",
            "notebook": "06_pruning",
            "paper": "Michel et al. 2019",
            "paper_value": "a few heads carry most of the importance",
            "kind": "number",
            "claims": [claim],
        },
        {
            "name": "syntax.other",
            "label": "best relation accuracy",
            "meaning": "accuracy of the head's best dependency relation",
            "unit": "accuracy",
            "notebook": "03_syntax_coref",
            "paper": "Clark et al. 2019",
            "paper_value": None,
            "kind": "number",
            "claims": [],
        },
        {
            "name": "syntax.flag",
            "label": "specialised",
            "meaning": "whether the head beats the positional baseline",
            "unit": "",
            "notebook": "03_syntax_coref",
            "paper": "Clark et al. 2019",
            "paper_value": None,
            "kind": "bool",
            "claims": [],
        },
        {
            "name": "pattern",
            "label": "pattern type",
            "meaning": "the head's attention pattern type",
            "unit": "",
            "notebook": "02_patterns",
            "paper": "Kovaleva et al. 2019",
            "paper_value": None,
            "kind": "category",
            "claims": [],
        },
    ]
    # Each head's match in the other run: the head at the same place, clipped to that run's shape.
    match: dict = {}
    for a, b in zip(runs, runs[::-1], strict=True) if len(runs) == 2 else ():
        match[a["id"]] = {
            b["id"]: {
                f"{layer}-{head}": [f"{min(layer, b['layers'])}-{min(head, b['heads'])}", 0.08]
                for layer in range(1, a["layers"] + 1)
                for head in range(1, a["heads"] + 1)
            }
        }
    return {
        "version": 1,
        "title": "Head atlas: test/tiny",
        "runs": runs,
        "columns": columns,
        "rows": {
            "run": run_col,
            "layer": layer_col,
            "head": head_col,
            "values": {"importance.score": score, "syntax.other": other, "syntax.flag": flag, "pattern": pattern},
        },
        "nearest": nearest,
        "match": match,
        "colormap": colormap(),
    }


def reference_query(payload: dict, filters: list[tuple[str, str, str]]) -> set[tuple[str, int, int]]:
    """The heads matching every (column, op, value): the semantics in atlas_page's docstring, written out."""
    rows = payload["rows"]
    n = len(rows["run"])
    keep = [True] * n
    for column, op, text in filters:
        values = rows["values"][column]
        hit = [False] * n
        if op in ("top", "bottom"):
            p = float(text)
            for run in set(rows["run"]):
                members = [i for i in range(n) if rows["run"][i] == run and isinstance(values[i], int | float)]
                if not members:
                    continue
                ordered = sorted((values[i] for i in members), reverse=op == "top")
                t = ordered[math.ceil(p / 100 * len(members)) - 1]
                for i in members:
                    hit[i] = values[i] >= t if op == "top" else values[i] <= t
        else:
            for i, v in enumerate(values):
                if v is None:
                    continue
                if op in ("eq", "ne"):
                    if isinstance(v, bool):
                        same = str(v).lower() == text
                    elif isinstance(v, int | float):
                        same = v == float(text)
                    else:
                        same = v == text
                    hit[i] = same if op == "eq" else not same
                elif not isinstance(v, bool):
                    hit[i] = getattr(operator, op)(v, float(text))
        keep = [a and b for a, b in zip(keep, hit, strict=True)]
    return {(rows["run"][i], rows["layer"][i], rows["head"][i]) for i in range(n) if keep[i]}
