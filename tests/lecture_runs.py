"""Synthetic run folders for the lecture's tests: claims for every topic of the outline, figures of both shapes.

A run made here looks like one ``bertology run`` writes (``run.json``; per notebook ``claims.json``,
``metrics.json``, ``skipped.json`` and ``figures/*.png``), with values chosen to stress a slide: long
"ours" strings, unrounded floats, a p-value, a machine path, every verdict.
"""

from __future__ import annotations

import json
from itertools import cycle
from pathlib import Path

VERDICTS = ("holds", "partly", "differs", "not testable")
#: Variants that fill a pattern's ``*`` (a task, a relation, an objective).
VARIANTS = ("SST-2", "MRPC")


def _png(path: Path, width_in: float, height_in: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(width_in, height_in))
    ax.plot(range(12), [i % 5 for i in range(12)])
    ax.set_title(path.stem)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=60)
    plt.close(fig)


def make_lecture_run(
    folder: Path,
    model: str = "org/tiny-bert",
    *,
    notebooks: set[str] | None = None,
    without_figures: set[str] = frozenset(),
    skipped: dict[str, str] | None = None,
    extra_claim: bool = False,
    long_text: str = "",
    verdict_shift: int = 0,
) -> Path:
    """A run folder with a claim for each pattern of each lecture topic (two variants for ``*`` patterns).

    ``notebooks`` keeps only those notebooks; ``without_figures`` names figure patterns not to draw;
    ``skipped`` maps a notebook to a skip reason (its claims are then left out); ``extra_claim`` adds a
    claim no topic names; ``long_text`` is put into every "ours" string.
    """
    from bertology_utils.present.lecture_outline import LECTURE

    skipped = skipped or {}
    verdicts = cycle(VERDICTS[verdict_shift:] + VERDICTS[:verdict_shift])
    claims: dict[str, list[dict]] = {}
    figures: dict[str, set[str]] = {}
    for number, topic in enumerate(LECTURE):
        notebook, figure = topic.figure
        if notebooks is not None and notebook not in notebooks:
            continue
        figures.setdefault(notebook, set()).add(figure)
        if notebook in skipped:
            continue
        for pattern in topic.claims:
            for variant in VARIANTS if "*" in pattern else ("",):
                claim_id = pattern.replace("*", variant)
                claims.setdefault(notebook, []).append(
                    {
                        "key": f"{notebook[3:]}.claims.{claim_id}",
                        "id": claim_id,
                        "claim": f"Claim {claim_id} of topic {number}",
                        "paper": topic.paper,
                        "paper_value": f"0.5{number}123 in layers 6-10",
                        "ours": f"0.{number + 10}4567 vs 0.3333333 (p = 0.0000123){long_text}",
                        "verdict": next(verdicts),
                        "rule": "a rule",
                        "values": {},
                        "note": f"why {claim_id} comes out so",
                    }
                )
    if extra_claim:
        claims.setdefault("01_patterns", []).append(
            {
                "key": "patterns.claims.a_new_claim",
                "id": "a_new_claim",
                "claim": "A claim no topic of the lecture names",
                "paper": "Someone et al. 2026",
                "paper_value": "1",
                "ours": "2",
                "verdict": "holds",
                "rule": "",
                "values": {},
                "note": "",
            }
        )
    entries = []
    for notebook in sorted(figures):
        sub = folder / notebook
        sub.mkdir(parents=True, exist_ok=True)
        topic_prefix = notebook[3:]
        (sub / "claims.json").write_text(json.dumps({"claims": claims.get(notebook, [])}))
        metrics = {f"{topic_prefix}.model": model}
        if notebook == "01_patterns":
            metrics[f"{topic_prefix}.data"] = (
                "16 sentences, 320 words, items 0:16 of A Treebank v1 — tb/dev: read from x"
            )
        (sub / "metrics.json").write_text(json.dumps(metrics))
        if notebook in skipped:
            (sub / "skipped.json").write_text(
                json.dumps({"everything": False, "sections": [{"section": "its section", "reason": skipped[notebook]}]})
            )
        for i, figure in enumerate(sorted(figures[notebook])):
            if figure in without_figures:
                continue
            for variant in VARIANTS if "*" in figure else ("",):
                size = (12, 3) if i % 2 else (8, 6)
                _png(sub / "figures" / (figure.replace("*", variant) + ".png"), *size)
        entries.append({"name": notebook, "status": "ok"})
    (folder / "run.json").write_text(
        json.dumps({"run_name": folder.name, "finished": "2026-11-26T19:29:47+00:00", "notebooks": entries})
    )
    return folder


#: What the partial run of :func:`make_partial_run` lacks, for tests to look for on its slides.
PARTIAL_NOTEBOOKS = {"01_patterns", "03_syntax_coref", "06_pruning"}
PARTIAL_MISSING_FIGURE = "entropy_by_layer"
PARTIAL_SKIP = "no GLUE data for SST-2 or MRPC"


def make_partial_run(folder: Path, model: str = "org/another-encoder-with-a-long-name") -> Path:
    """A second model's run with three notebooks, one figure missing and 06 skipped for want of data."""
    return make_lecture_run(
        folder,
        model,
        notebooks=PARTIAL_NOTEBOOKS,
        without_figures={PARTIAL_MISSING_FIGURE},
        skipped={"06_pruning": PARTIAL_SKIP},
        verdict_shift=1,
    )
