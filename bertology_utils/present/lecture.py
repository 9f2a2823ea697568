"""The lecture: one reveal.js deck of a run's findings, figures first, for a teacher to present.

Every number on it comes from what the run recorded (each notebook's ``claims.json``, ``metrics.json``,
``skipped.json`` and ``figures/``); nothing is typed in. The slides follow :data:`LECTURE`, an outline
of topics in the order of a talk: each :class:`Topic` names the claims it shows (patterns over claim ids)
and the figure that shows them. A topic's slide has that figure large, the paper's finding in one line,
the verdict per model as badges, and the paper's numbers beside ours; the speaker notes (``s``) hold
every claim with its rule of thumb's note. Around them: a title slide (model, data, date), the question
with the verdicts counted per paper, claims no topic names (so a new claim is never dropped), and a
closing slide of what differs and why.

Given several runs (one per model), badges and tables show each model; the figures are the first run's
(another run's where the first has none, captioned with its model). Where a run lacks what a slide
needs (the notebook did not run, failed, skipped the section, or saved no figure), the slide says so
and why, from the run's own records.

The deck is 16:9 (:data:`~bertology_utils.present.slides.SLIDE_SIZE`), numbers are rounded for people
(three significant digits; p-values below 0.001 read ``p < 0.001``), no path of this machine appears,
and it carries the presenting tools of every deck (speaker view, chalkboard, menu), all inlined.
"""

from __future__ import annotations

import html
import os
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from fnmatch import fnmatchcase
from functools import cached_property
from pathlib import Path

from bertology_utils.core.errors import BertologyError
from bertology_utils.core.files import atomic_write_text
from bertology_utils.papers.claims import Verdict, claim_case
from bertology_utils.present.findings import claim_uncertainty, model_of, notebook_record
from bertology_utils.present.report import data_uri
from bertology_utils.present.slides import (
    SLIDE_SIZE,
    format_number,
    machine_places,
    network_references,
    presenting_tools,
    reveal_config,
    reveal_start,
    reveal_styles,
    scrub_paths,
)
from bertology_utils.run import harness

__all__ = [
    "LECTURE_FILE",
    "Topic",
    "LECTURE",
    "LectureRun",
    "read_lecture_run",
    "lecture_html",
    "build_lecture",
    "round_for_people",
]

#: The lecture's file name, in the (first) run's folder or in ``out_dir``.
LECTURE_FILE = "lecture.slides.html"


@dataclass(frozen=True)
class Topic:
    """One slide of the lecture: a question, the paper's answer, the claims that test it and the figure that shows it.

    ``claims`` are shell-style patterns over claim ids (a claim's key after ``<prefix>.claims.``, e.g.
    ``table1.det`` or ``ablation.sst2.cls.zero``). ``figure`` is ``(notebook stem, figure name pattern)``;
    when several figures match (one per task), the one named by the first claim's task or objective is shown.
    """

    title: str
    paper: str
    lead: str
    claims: tuple[str, ...]
    figure: tuple[str, str]


#: The talk, in order. The words are the papers' findings as prose; every number comes from the run.
LECTURE: tuple[Topic, ...] = (
    Topic(
        "Where do heads look?",
        "Clark et al. 2019",
        "Most heads look at other tokens; a few look at the previous or the next one.",
        ("current_token", "previous_token_heads", "next_token_heads"),
        ("01_patterns", "relative_position_by_layer"),
    ),
    Topic(
        "[CLS], [SEP] and punctuation draw attention",
        "Clark et al. 2019",
        "Much attention goes to [CLS] early, to [SEP] in the middle layers, to punctuation late.",
        ("sep_middle_layers", "cls_early_layers", "punctuation_last_layers", "sep_to_sep"),
        ("01_patterns", "special_tokens_by_layer"),
    ),
    Topic(
        "Broad or focused?",
        "Clark et al. 2019",
        "Early layers spread their attention widely; the last layer's [CLS] is broad too.",
        ("early_layers_broad", "cls_entropy_last_layer"),
        ("01_patterns", "entropy_by_layer"),
    ),
    Topic(
        "Is attention to [SEP] a no-op? Gradients",
        "Clark et al. 2019",
        "Where heads attend most to [SEP], moving that attention hardly changes the loss.",
        ("sep_gradient_small.*", "cls_gradient_small.*", "gradients_shrink.*"),
        ("02_sep_noop", "attention_and_gradient"),
    ),
    Topic(
        "Is attention to [SEP] a no-op? Removing it",
        "Clark et al. 2019",
        "Taking the attention off [CLS] or [SEP] changes the output less than taking it off a word.",
        ("ablation.*",),
        ("02_sep_noop", "ablation_*"),
    ),
    Topic(
        "Heads that follow syntax",
        "Clark et al. 2019",
        "For many dependency relations one head finds the head word better than a fixed offset does.",
        ("table1.*",),
        ("03_syntax_coref", "best_head_vs_baseline"),
    ),
    Topic(
        "A coreference head",
        "Clark et al. 2019",
        "One head links a mention to its antecedent well above a nearest-mention baseline.",
        ("coref_*",),
        ("03_syntax_coref", "coreference_head"),
    ),
    Topic(
        "Whole trees from attention",
        "Clark et al. 2019",
        "A probe reading only attention recovers much of the parse; word vectors add more.",
        ("table3.*",),
        ("04_probes", "uas_by_relation"),
    ),
    Topic(
        "Heads cluster",
        "Clark et al. 2019",
        "Heads in one layer behave alike, and heads group by what they do.",
        ("same_layer_close", "behaviour_clusters"),
        ("05_clustering", "mds_behaviours"),
    ),
    Topic(
        "Five pattern types",
        "Kovaleva et al. 2019",
        "Attention maps fall into five types; the mixed (heterogeneous) type is a minority.",
        ("heterogeneous_share", "pattern_types_recognisable"),
        ("01_patterns", "pattern_types_by_layer"),
    ),
    Topic(
        "[CLS] early, [SEP] late, on every task",
        "Kovaleva et al. 2019",
        "Fine-tuned models attend to [CLS] in early layers and to [SEP] in later ones.",
        ("cls_early_sep_late", "sst2_largest_sep"),
        ("07_head_roles", "special_token_shares_by_task"),
    ),
    Topic(
        "What fine-tuning changes",
        "Kovaleva et al. 2019",
        "Fine-tuning changes the last layers' attention most.",
        ("last_layers_change_most.*",),
        ("06_pruning", "attention_change_*"),
    ),
    Topic(
        "Disabling heads and layers",
        "Kovaleva et al. 2019",
        "Turning off one head, or a whole layer, often costs nothing and sometimes helps.",
        ("single_heads_dispensable.*", "layer_ablation_improves.*"),
        ("06_pruning", "head_ablation_*"),
    ),
    Topic(
        "Does pre-training matter?",
        "Kovaleva et al. 2019",
        "The pre-trained model fine-tunes better than the same architecture from random weights.",
        ("pretrained_beats_random_init",),
        ("06_pruning", "pretrained_vs_random_init"),
    ),
    Topic(
        "Are sixteen heads better than one?",
        "Michel et al. 2019",
        "Most heads can be pruned with little loss, and importance scores choose them better than chance.",
        ("heads_prunable.*",),
        ("06_pruning", "pruning_curve_*"),
    ),
    Topic(
        "Importance scores",
        "Michel et al. 2019",
        "A head's importance (a first-order estimate) ranks heads as removing each one does.",
        ("importance_matches_ablation.*",),
        ("06_pruning", "importance_*"),
    ),
    Topic(
        "Heads have roles",
        "Voita et al. 2019",
        "Some heads are positional, some syntactic, some point at rare words.",
        ("roles_found",),
        ("07_head_roles", "head_roles"),
    ),
    Topic(
        "The heads that matter",
        "Voita et al. 2019",
        "The most relevant heads are confident ones, and the specialised heads are among them.",
        ("relevance_tracks_confidence.*", "specialised_heads_relevant.*"),
        ("07_head_roles", "relevance_*"),
    ),
    Topic(
        "Pruning with L0 gates",
        "Voita et al. 2019",
        "Gates trained with an L0 penalty close most heads; the specialised ones are the last to go.",
        ("l0_prunes_most_heads.*", "specialised_heads_survive.*"),
        ("07_head_roles", "l0_pruning_*"),
    ),
    Topic(
        "How many dimensions does a head need?",
        "Vig 2019",
        "Broad and [SEP] heads decide with few query-key dimensions; next-word heads need many.",
        ("qk_dimensions_by_pattern",),
        ("07_head_roles", "query_key_dimensions"),
    ),
    Topic(
        "Attention is not the whole story: norms",
        "Kobayashi et al. 2020",
        "Weighting attention by the norm of what is moved discounts [CLS], [SEP] and punctuation.",
        ("norm_discounts_special_tokens",),
        ("08_context_mixing", "special_token_shares"),
    ),
    Topic(
        "Which map explains the prediction?",
        "Abnar & Zuidema 2020; Mohebbi et al. 2023",
        "Rollout, flow and value zeroing agree with attribution methods better than raw attention.",
        ("rollout_flow_beat_raw.*", "value_zeroing_best.*"),
        ("08_context_mixing", "faithfulness_by_layer"),
    ),
    Topic(
        "Every head on one page",
        "this project's atlas",
        "Each head's numbers from every notebook side by side: open atlas.html beside the run.",
        (),
        ("09_atlas", "atlas_grid"),
    ),
)

_VERDICTS = [v.value for v in Verdict]
#: Claims a topic slide lists at most (the page then shows those that fit); all are in the speaker notes.
_MAX_ROWS = 6
#: Rows of a "more claims" slide.
_OTHER_ROWS = 5
#: A figure at least this much wider than tall goes above the text instead of beside it.
_WIDE = 1.9
#: Claims per "what differs" slide.
_PER_CLOSING_SLIDE = 6
_CLAIM_CHARS = 90
#: Characters of a claim's interval and seed count on a slide (the interval without its method is about 40).
_UNCERTAINTY_CHARS = 50


@dataclass
class LectureRun:
    """What the lecture reads from one run: its folder, model, notebooks' records and data."""

    folder: Path
    name: str
    model: str
    notebooks: dict[str, dict] = field(default_factory=dict)
    data: list[str] = field(default_factory=list)
    finished: str | None = None

    @property
    def short_model(self) -> str:
        return self.model.rstrip("/").rsplit("/", 1)[-1]

    @cached_property
    def claims(self) -> list[tuple[str, dict]]:
        """Every recorded claim once, as (notebook, claim), in notebook order. A claim several notebooks check
        (the tour repeats two of 01's) is the copy of the notebook whose topic shows it."""
        copies: dict[str, list[tuple[str, dict]]] = {}
        for name, nb in self.notebooks.items():
            for claim in nb["claims"]:
                copies.setdefault(_claim_id(claim["key"]), []).append((name, claim))
        return [next((c for c in found if c[0] == _home(claim_id)), found[0]) for claim_id, found in copies.items()]


def read_lecture_run(run_dir: str | os.PathLike) -> LectureRun:
    """A run folder (or a run name under ``results/``) as the lecture reads it. A run with no results is
    still a run: its slides say what is missing."""
    folder = harness.find_run(run_dir)
    run_file = folder / harness.RUN_FILE
    run = harness.read_json(run_file) if run_file.is_file() else {}
    notebooks, models, corpora, tasks = {}, set(), [], set()
    for entry in harness.run_entries(folder):
        metrics_file = folder / entry["name"] / harness.METRICS_FILE
        metrics = harness.read_json(metrics_file) if metrics_file.is_file() else {}
        if model := model_of(metrics):
            models.add(model)
        corpora += _corpora(metrics)
        tasks |= _tasks(metrics)
        notebooks[entry["name"]] = notebook_record(folder, entry) | {"error": entry.get("error")}
    if len(models) > 1:
        raise BertologyError(f"run {folder} mixes models {sorted(models)}: a lecture shows one model per run")
    return LectureRun(
        folder=folder,
        name=str(run.get("run_name", folder.name)),
        model=models.pop() if models else "unknown model",
        notebooks=notebooks,
        data=list(dict.fromkeys(corpora)) + (["GLUE " + ", ".join(sorted(tasks))] if tasks else []),
        finished=run.get("finished"),
    )


_DATA_NAME = re.compile(r"\bof (.+?) — ")


def _corpora(metrics: dict) -> list[str]:
    """The corpus a notebook names in its ``<topic>.data`` line, for the title slide."""
    return [m.group(1) for k, v in metrics.items() if k.endswith(".data") and (m := _DATA_NAME.search(str(v)))]


def _tasks(metrics: dict) -> set[str]:
    """The fine-tuning tasks a notebook's metrics are keyed by."""
    from bertology_utils.interventions.scoring import TASKS

    return {part for key in metrics for part in key.split(".") if part in TASKS}


# ---------------------------------------------------------------------------------------------------------------
# Text for people

_DECIMAL = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d+|\.\d+)(?:[eE][-+]?\d+)?(?![\w.])|(?<![\w.])\d+[eE][-+]?\d+(?![\w.])")
_P_VALUE = re.compile(r"\b(p\s*)(=|<=?)\s*(" + _DECIMAL.pattern + ")")


def round_for_people(text: str, places: Sequence[tuple[str, str]] = ()) -> str:
    """``text`` with this machine's paths shortened and each decimal to three significant digits;
    ``p = 0.00002`` reads ``p < 0.001``. Integers (counts, years, head numbers) are left alone."""

    def p_value(m: re.Match) -> str:
        shown = format_number(float(m.group(3)), p_value=True)  # "< 0.001" below the floor
        return m.group(1) + (shown if shown.startswith("<") else f"{m.group(2)} {shown}")

    text = _P_VALUE.sub(p_value, scrub_paths(str(text), places))
    return _DECIMAL.sub(lambda m: format_number(float(m.group(0))), text)


def _esc(text) -> str:
    return html.escape(str(text))


def _shorten(text: str, limit: int = _CLAIM_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1].rsplit(" ", 1)[0] + "…"


_LAST_BRACKETS = re.compile(r"\s*\([^()]*\)(?=[^()]*$)")


def _shorten_value(text: str, limit: int) -> str:
    """A value's text within ``limit`` without cutting a number: its bracketed asides go first (the last first),
    then whole clauses from the end; only a first clause still too long is cut at a word."""
    while len(text) > limit and _LAST_BRACKETS.search(text):
        text = _LAST_BRACKETS.sub("", text, count=1).rstrip()
    while len(text) > limit:
        depth, cuts = 0, []
        for i, char in enumerate(text):
            depth += char in "[(" and 1 or char in "])" and -1 or 0
            if depth == 0 and char in ",;" and text[i + 1 : i + 2] == " ":
                cuts.append(i)  # a clause ends here, not a number inside an interval
        if not cuts:
            break
        text = text[: cuts[-1]] + " …"
    return _shorten(text, limit)


def _titled(claim: dict) -> str:
    """A claim's text after its case (task or relation), so a claim made on two tasks reads as two, and a
    shortened text keeps the case."""
    case = claim_case(_claim_id(claim["key"]))
    return f"{case}: {claim['claim']}" if case else claim["claim"]


# ---------------------------------------------------------------------------------------------------------------
# Claims of a topic


def _claim_id(key: str) -> str:
    return key.split(".claims.", 1)[1] if ".claims." in key else key


def _home(claim_id: str) -> str | None:
    """The notebook of the topic that names ``claim_id`` (None: no topic does)."""
    return next((t.figure[0] for t in LECTURE if any(fnmatchcase(claim_id, p) for p in t.claims)), None)


def _topic_claims(topic: Topic, run: LectureRun) -> list[tuple[str, dict]]:
    """The run's claims the topic names."""
    return [(nb, c) for nb, c in run.claims if any(fnmatchcase(_claim_id(c["key"]), p) for p in topic.claims)]


def _counts(claims: Iterable[dict]) -> list[tuple[str, int]]:
    counts = Counter(c["verdict"] for c in claims)
    return [(v, counts[v]) for v in _VERDICTS if counts[v]] + [(v, n) for v, n in counts.items() if v not in _VERDICTS]


def _badges(run: LectureRun, claims: list[dict], missing: str) -> str:
    """The model's name and one pill per verdict it reached (counted when several)."""
    if not claims:
        pills = f'<span class="badge not-run">{_esc(missing)}</span>'
    else:
        total = len(claims)
        pills = "".join(
            f'<span class="badge {_css(v)}">{_esc(v if total == 1 else f"{n} of {total} {v}")}</span>'
            for v, n in _counts(claims)
        )
    return f'<div class="verdicts"><span class="model">{_esc(run.short_model)}</span>{pills}</div>'


def _uncertainty(claim: dict, places, *, short: bool = True) -> str:
    """A claim's interval and seed count for people ("" when it has neither); ``short``: without the interval's
    method, for a slide (the speaker notes have it whole)."""
    return round_for_people(claim_uncertainty(claim, short=short), places)


def _uncertainty_span(claim: dict, places) -> str:
    """The claim's interval and seeds as a small line after its value on a slide; "" when it has neither."""
    text = _uncertainty(claim, places)
    return f'<br><span class="ci">{_esc(_shorten(text, _UNCERTAINTY_CHARS))}</span>' if text else ""


def _uncertainty_note(claim: dict, places) -> str:
    """The claim's interval and seeds whole, in brackets after its value in the speaker notes."""
    text = _uncertainty(claim, places, short=False)
    return f" ({text})" if text else ""


def _css(verdict: str) -> str:
    return "v-" + re.sub(r"[^a-z]+", "-", verdict.lower()).strip("-")


def _why_missing(run: LectureRun, notebook: str, places) -> tuple[str, str]:
    """A badge's word and the sentence saying why the run has nothing for a topic of ``notebook``."""
    nb = run.notebooks.get(notebook)
    if nb is None:
        return "not run", f"{notebook} did not run in {run.name} (bertology run {run.name} {notebook[:2]})"
    if nb.get("error") or nb["status"] == "failed":
        return "failed", f"{notebook} failed in {run.name}: its report says where (bertology report {run.name})"
    if nb["skipped"]:
        return "skipped", round_for_people(f"{notebook} skipped {_sections(nb['skipped'])}", places)
    return "not recorded", f"{notebook} recorded no claim of this kind in {run.name} (an older run?)"


def _skipped_here(run: LectureRun, notebook: str, places) -> str:
    """The sections ``notebook`` skipped in ``run`` (a task without data, say), or ''."""
    nb = run.notebooks.get(notebook)
    if not nb or not nb["skipped"]:
        return ""
    return round_for_people(f"Not computed in this run: {_sections(nb['skipped'])}", places)


def _sections(skipped: list[dict]) -> str:
    """Skipped sections as a notebook recorded them, in one line: ``section (reason); ...``."""
    return "; ".join(f"{s['section']} ({s['reason']})" for s in skipped)


# ---------------------------------------------------------------------------------------------------------------
# Figures


def _figure(topic: Topic, runs: Sequence[LectureRun], claims: list[tuple[str, dict]]) -> tuple[Path, LectureRun] | None:
    """The figure a topic shows: the first run's that has one, chosen by the first claim's variant."""
    notebook, pattern = topic.figure
    prefix = pattern.split("*", 1)[0]
    parts = [part for _, c in claims for part in c["key"].split(".")]
    for run in runs:
        candidates = sorted((run.folder / notebook / "figures").glob(pattern + ".png"))
        if candidates:
            by_variant = {p.stem[len(prefix) :]: p for p in candidates}
            chosen = next((by_variant[part] for part in parts if part in by_variant), candidates[0])
            return chosen, run
    return None


def _png_size(path: Path) -> tuple[int, int]:
    """Width and height from a PNG's header (no image library needed)."""
    head = path.read_bytes()[:24]
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        raise BertologyError(f"{path} is not a PNG")
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


# ---------------------------------------------------------------------------------------------------------------
# Slides


def _slide(body: str, notes: str, cls: str = "", attrs: str = "") -> str:
    return f'<section class="{cls}"{attrs}>{body}<aside class="notes">{notes}</aside></section>'


def _title_slide(runs: Sequence[LectureRun], places) -> str:
    models = " vs ".join(run.short_model for run in runs)
    papers = sorted({c["paper"] for run in runs for _, c in run.claims})
    data = list(dict.fromkeys(d for run in runs for d in run.data)) or ["no data recorded"]
    dates = [_date(run.finished) for run in runs]
    rows = [
        ("Model" if len(runs) == 1 else "Models", ", ".join(run.model for run in runs)),
        ("Data", "; ".join(data)),
        ("Run", ", ".join(f"{run.name} ({date})" for run, date in zip(runs, dates, strict=True))),
    ]
    facts = "".join(f"<tr><th>{_esc(k)}</th><td>{_esc(round_for_people(v, places))}</td></tr>" for k, v in rows)
    body = (
        f"<h1>What the attention heads of {_esc(models)} do</h1>"
        f'<p class="subtitle">{len(papers)} papers\' claims, re-checked on our own run</p>'
        f'<table class="facts">{facts}</table>'
        '<p class="keys">b chalkboard · c draw on the slide · m menu · s speaker notes</p>'
    )
    notes = "Every number in this deck comes from the run's recorded results. Papers: " + _esc("; ".join(papers))
    return _slide(body, notes, "title-slide", ' data-slide="title"')


def _date(finished: str | None) -> str:
    if not finished:
        return "date not recorded"
    try:
        return datetime.fromisoformat(finished).strftime("%d %B %Y").lstrip("0")
    except ValueError:
        return finished


def _question_slide(runs: Sequence[LectureRun]) -> str:
    papers: dict[str, list[list[dict]]] = {}
    for i, run in enumerate(runs):
        for _, claim in run.claims:
            papers.setdefault(claim["paper"], [[] for _ in runs])[i].append(claim)
    header = "<tr><th>paper</th>" + "".join(f"<th>{_esc(run.short_model)}</th>" for run in runs) + "</tr>"
    rows = "".join(
        f"<tr><td>{_esc(paper)}</td>" + "".join(f"<td>{_pills(found)}</td>" for found in per_run) + "</tr>"
        for paper, per_run in papers.items()
    )
    table = (
        f'<table class="overview">{header}{rows}</table>' if papers else _missing_box("No notebook recorded a claim.")
    )
    body = (
        "<h2>The question</h2>"
        '<p class="lead">What do attention heads do, and do the papers\' answers hold on this model and data?</p>'
        + table
    )
    notes = (
        "Each paper's claims were checked by the notebooks with the rule written beside each claim; a verdict is "
        "holds, partly, differs, inconclusive (its interval straddles the rule's threshold, or its seeds disagree), "
        "or not testable (the data here cannot show it)."
    )
    return _slide(body, notes, "question-slide", ' data-slide="question"')


def _pills(claims: list[dict]) -> str:
    if not claims:
        return '<span class="badge not-run">none</span>'
    return "".join(f'<span class="badge {_css(v)}">{n} {_esc(v)}</span>' for v, n in _counts(claims))


def _missing_box(text: str) -> str:
    return f'<div class="missing">{_esc(text)}</div>'


def _topic_slide(topic: Topic, runs: Sequence[LectureRun], places) -> str:
    per_run = [_topic_claims(topic, run) for run in runs]
    figure = _figure(topic, runs, [item for claims in per_run for item in claims])
    layout = "side"
    if figure is not None:
        path, owner = figure
        width, height = _png_size(path)
        layout = "wide" if width >= _WIDE * height else "side"
        caption = f"{topic.figure[0]} · {path.stem}" + (f" · {owner.short_model}" if len(runs) > 1 else "")
        picture = (
            f'<figure><img src="{data_uri(path)}" width="{width}" height="{height}" alt="{_esc(path.stem)}">'
            f"<figcaption>{_esc(caption)}</figcaption></figure>"
        )
    else:
        notebook, name = topic.figure
        reasons = [
            f"{notebook} saved no figure {name} in {run.name}"
            if any(nb == notebook for nb, _ in claims)  # it ran and checked these claims, but drew nothing
            else _why_missing(run, notebook, places)[1]
            for run, claims in zip(runs, per_run, strict=True)
        ]
        # Bounded, so that many skipped sections still fit the slide; the notes have them all.
        picture = _missing_box(_shorten(f"Figure {name} is not in the run: " + "; ".join(reasons), 360))
    badges, missing_notes = [], []
    for run, claims in zip(runs, per_run, strict=True):
        word, why = _why_missing(run, topic.figure[0], places)
        badges.append(_badges(run, [c for _, c in claims], word))
        # Why a run has nothing here, or what its notebook skipped that might have filled more of the slide.
        if note := (_skipped_here(run, topic.figure[0], places) if claims else why):
            missing_notes.append((f"{run.short_model}: " if len(runs) > 1 else "") + note)
    side = (
        # the paper's finding, said to be the paper's: beside a "differs" badge it must not read as fact
        f'<div class="summary"><p class="lead"><span class="found">{_esc(topic.paper)} found:</span> '
        f"{_esc(topic.lead)}</p>"
        + ("".join(badges) if topic.claims else "")
        + "".join(f'<p class="why">{_esc(_shorten(text, 220))}</p>' for text in missing_notes if topic.claims)
        + f"</div>{_paper_vs_ours(runs, per_run, layout, places)}"
    )
    body = (
        f'<p class="paper">{_esc(topic.paper)}</p><h2>{_esc(topic.title)}</h2>'
        f'<div class="topic {layout}"><div class="picture">{picture}</div><div class="side">{side}</div></div>'
    )
    return _slide(
        body, _topic_notes(topic, runs, per_run, places), f"topic {layout}", f' data-slide="{_esc(topic.title)}"'
    )


def _paper_vs_ours(runs, per_run, layout: str, places) -> str:
    """The paper's value beside each model's, one row per claim id: a table under a wide figure, a list beside
    a tall one. The page shows the rows that fit (:data:`_FIT_JS`) and counts the others into the notes."""
    ids: dict[str, dict] = {}
    for claims in per_run:
        for _, claim in claims:
            ids.setdefault(_claim_id(claim["key"]), claim)
    if not ids:
        return ""
    by_run = [{_claim_id(c["key"]): c for _, c in claims} for claims in per_run]

    def ours(found: dict, claim_id: str, limit: int) -> str:
        mine = found.get(claim_id)
        if mine is None:
            return "—"
        text = _esc(_shorten_value(round_for_people(mine["ours"], places), limit)) + _uncertainty_span(mine, places)
        return f'<span class="dot {_css(mine["verdict"])}" title="{_esc(mine["verdict"])}"></span>{text}'

    # Claims the data here could test first: a teacher shows what was found before what could not be.
    untested = Verdict.NOT_TESTABLE.value
    order = sorted(
        ids.items(), key=lambda item: all(f.get(item[0], {}).get("verdict", untested) == untested for f in by_run)
    )
    listed = order[:_MAX_ROWS]
    if layout == "wide":
        header = "<tr><th>claim</th><th>paper</th>" + "".join(f"<th>{_esc(r.short_model)}</th>" for r in runs)
        rows = "".join(
            f'<tr class="fit-row"><td>{_esc(_shorten(_titled(claim), 70))}</td>'
            f"<td>{_esc(_shorten_value(round_for_people(claim['paper_value'], places), 45))}</td>"
            + "".join(f"<td>{ours(found, claim_id, 60)}</td>" for found in by_run)
            + "</tr>"
            for claim_id, claim in listed
        )
        table = f'<table class="pvo">{header}</tr>{rows}</table>'
    else:
        entries = "".join(
            f'<li class="fit-row"><span class="claim">{_esc(_shorten(_titled(claim), 75))}</span><br>'
            f"paper: {_esc(_shorten_value(round_for_people(claim['paper_value'], places), 50))}"
            + "".join(
                f"<br>{_esc(run.short_model) + ': ' if len(runs) > 1 else 'ours: '}{ours(found, claim_id, 70)}"
                for run, found in zip(runs, by_run, strict=True)
            )
            + "</li>"
            for claim_id, claim in listed
        )
        table = f'<ul class="pvo">{entries}</ul>'
    return f'{table}<p class="more" data-unlisted="{len(ids) - len(listed)}"></p>'


def _topic_notes(topic: Topic, runs, per_run, places) -> str:
    parts = [f"<p><b>{_esc(topic.paper)}</b>: {_esc(topic.lead)}</p>"]
    for run, claims in zip(runs, per_run, strict=True):
        if not topic.claims:
            continue
        if not claims:
            parts.append(f"<p>{_esc(run.short_model)}: {_esc(_why_missing(run, topic.figure[0], places)[1])}</p>")
            continue
        items = "".join(
            f"<li>{_esc(c['claim'])} — paper: {_esc(round_for_people(c['paper_value'], places))}; "
            f"ours: {_esc(round_for_people(c['ours'], places))}{_esc(_uncertainty_note(c, places))}"
            f" → <b>{_esc(c['verdict'])}</b>"
            + (f". {_esc(round_for_people(c['note'], places))}" if c.get("note") else "")
            + f" ({_esc(nb)})</li>"
            for nb, c in claims
        )
        parts.append(f"<p>{_esc(run.short_model)}:</p><ul>{items}</ul>")
        if skipped := _skipped_here(run, topic.figure[0], places):
            parts.append(f"<p>{_esc(skipped)}</p>")
    return "".join(parts)


def _other_slides(runs: Sequence[LectureRun], places) -> list[str]:
    """Claims no topic names (a notebook's new claim), so that none is left out of the talk."""
    others: dict[str, list[dict | None]] = {}
    for i, run in enumerate(runs):
        for _, claim in run.claims:
            if _home(_claim_id(claim["key"])) is None:
                others.setdefault(claim["claim"], [None] * len(runs))[i] = claim
    items = list(others.items())
    slides = []
    for start in range(0, len(items), _OTHER_ROWS):
        chunk = items[start : start + _OTHER_ROWS]
        header = "<tr><th>claim</th><th>paper</th>" + "".join(f"<th>{_esc(r.short_model)}</th>" for r in runs) + "</tr>"
        rows = "".join(
            f"<tr><td>{_esc(_shorten(text))}</td><td>{_esc(next(c for c in found if c)['paper'])}</td>"
            + "".join(
                f'<td><span class="badge {_css(c["verdict"])}">{_esc(c["verdict"])}</span></td>' if c else "<td>—</td>"
                for c in found
            )
            + "</tr>"
            for text, found in chunk
        )
        notes = "".join(
            f"<li>{_esc(c['claim'])} — paper: {_esc(round_for_people(c['paper_value'], places))}; "
            f"ours: {_esc(round_for_people(c['ours'], places))}{_esc(_uncertainty_note(c, places))}"
            f" → {_esc(c['verdict'])}</li>"
            for _, found in chunk
            for c in found
            if c
        )
        body = f'<h2>More claims</h2><table class="pvo">{header}{rows}</table>'
        slides.append(_slide(body, f"<ul>{notes}</ul>", "more-claims", ' data-slide="more claims"'))
    return slides


def _closing_slides(runs: Sequence[LectureRun], places) -> list[str]:
    """What differs, and why: each claim that differs on some model, the paper's number, each such model's and
    the claim's note, a few per slide."""
    differs: dict[str, list[tuple[LectureRun, dict]]] = {}
    for run in runs:
        for _, claim in run.claims:
            if claim["verdict"] == Verdict.DIFFERS.value:
                differs.setdefault(_claim_id(claim["key"]), []).append((run, claim))
    untestable = sum(c["verdict"] == Verdict.NOT_TESTABLE.value for run in runs for _, c in run.claims)
    inconclusive = sum(c["verdict"] == Verdict.INCONCLUSIVE.value for run in runs for _, c in run.claims)
    counted = "; ".join(
        f"{n} recorded claim(s) were {what}"
        for n, what in ((untestable, "not testable here"), (inconclusive, "inconclusive"))
        if n
    )
    tail = f'<p class="more">{counted}; the speaker notes of their slides say why.</p>' if counted else ""
    if not differs:
        recorded = any(run.claims for run in runs)
        lead = (
            "No claim differs: each one recorded here holds, partly holds, is inconclusive or is not testable."
            if recorded
            else "Nothing to compare yet: no notebook recorded a claim. Run them first: "
            + " ; ".join(f"bertology run {run.name}" for run in runs)
        )
        body = f'<h2>What differs, and why</h2><p class="lead">{_esc(lead)}</p>' + tail
        return [_slide(body, "", "closing", ' data-slide="closing"')]
    items = list(differs.values())
    pages = range(0, len(items), _PER_CLOSING_SLIDE)
    slides = []
    for page, start in enumerate(pages, 1):
        chunk = items[start : start + _PER_CLOSING_SLIDE]
        entries = []
        for found in chunk:
            claim = found[0][1]
            ours = " · ".join(
                (f"{run.short_model}: " if len(runs) > 1 else "ours: ")
                + _shorten_value(round_for_people(c["ours"], places), 60)
                + (f" ({_shorten(short, _UNCERTAINTY_CHARS)})" if (short := _uncertainty(c, places)) else "")
                for run, c in found
            )
            # why: the rule that read our numbers as "differs" (the note, when there is one, after it)
            why = "; ".join(
                round_for_people(text, places) for text in (claim.get("rule") or "", claim.get("note") or "") if text
            )
            entries.append(
                f"<li><b>{_esc(_shorten(_titled(claim)))}</b><br>"
                f"paper: {_esc(_shorten_value(round_for_people(claim['paper_value'], places), 50))} · {_esc(ours)}"
                + (f'<br><span class="note">why: {_esc(_shorten(why, 110))}</span>' if why else "")
                + "</li>"
            )
        heading = "What differs, and why" + (f" ({page} of {len(pages)})" if len(pages) > 1 else "")
        notes = "".join(
            f"<li>{_esc(run.short_model)}: {_esc(c['claim'])}{_esc(_uncertainty_note(c, places))}: "
            f"{_esc(round_for_people(c.get('note') or 'no note', places))}</li>"
            for found in chunk
            for run, c in found
        )
        body = f'<h2>{_esc(heading)}</h2><ul class="differs">{"".join(entries)}</ul>' + (
            tail if page == len(pages) else ""
        )
        slides.append(_slide(body, f"<ul>{notes}</ul>", "closing", ' data-slide="closing"'))
    return slides


# Each topic slide shows the rows of its paper-vs-ours table that fit under or beside its figure, measured from
# the layout (row lengths vary by model and run); the rest are counted, and all are in the speaker notes.
_FIT_JS = """
<script>
function bertologyFit(section) {
  section.querySelectorAll(".side").forEach(function (side) {
    var rows = side.querySelectorAll(".fit-row");
    var more = side.querySelector(".more");
    var shown = rows.length;
    var note = function (n) { return n + " more in the speaker notes (s)"; };
    if (more) { more.textContent = note(rows.length); }  // the line the count will take, measured with the rows
    rows.forEach(function (row) { row.style.display = ""; });  // fitted afresh each time the slide shows
    while (shown > 0 && side.scrollHeight > side.clientHeight + 1) { rows[--shown].style.display = "none"; }
    var hidden = rows.length - shown + Number(more ? more.dataset.unlisted : 0);
    if (more) { more.textContent = hidden ? note(hidden) : ""; }
  });
}
Reveal.on("ready", function () { document.querySelectorAll(".reveal .slides section").forEach(bertologyFit); });
Reveal.on("slidechanged", function (event) { bertologyFit(event.currentSlide); });
</script>
"""

_LECTURE_CSS = """
.reveal { font-size: 26px; }
.reveal .slides section { text-align: left; height: 100%; }
.reveal h1 { font-size: 1.9em; line-height: 1.15; margin: 0 0 0.4em 0; text-transform: none; }
.reveal h2 { font-size: 1.45em; margin: 0 0 0.3em 0; text-transform: none; }
.reveal .title-slide h1 { margin-top: 110px; }
.reveal .paper { font-size: 0.75em; color: #666; margin: 0; }
.reveal .subtitle { font-size: 1.05em; color: #444; }
.reveal .keys { font-size: 0.7em; color: #777; margin-top: 1.5em; }
.reveal table { border-collapse: collapse; margin: 0.4em 0; }
.reveal table th, .reveal table td { border-bottom: 1px solid #ddd; padding: 0.2em 0.45em; vertical-align: top; text-align: left; }
.reveal table.facts { font-size: 0.8em; }
.reveal table.overview { font-size: 0.78em; }
.reveal table.pvo { font-size: 0.7em; line-height: 1.25; width: 100%; }
.reveal ul.pvo { font-size: 0.7em; line-height: 1.3; margin: 0.3em 0 0 1em; }
.reveal ul.pvo li { margin-bottom: 0.45em; }
.reveal ul.pvo .claim { font-weight: bold; }
.reveal .lead { font-size: 0.92em; line-height: 1.3; margin: 0 0 0.4em 0; }
.reveal .lead .found { color: #666; font-style: italic; }
.reveal .topic { display: flex; gap: 24px; height: 570px; }
.reveal .topic.side .picture { flex: 0 0 60%; min-width: 0; }
.reveal .topic.side .side { flex: 1 1 0; min-width: 0; overflow: hidden; }
.reveal .topic.wide { flex-direction: column; gap: 8px; }
.reveal .topic.wide .picture { flex: 0 0 auto; }
.reveal .topic.wide .side { flex: 1 1 0; min-height: 0; overflow: hidden; }
.reveal figure { margin: 0; }
.reveal figure img { display: block; max-width: 100%; max-height: 520px; width: auto; height: auto; margin: 0 auto; }
.reveal .topic.wide figure img { max-height: 280px; }
.reveal figcaption { font-size: 0.6em; color: #777; text-align: center; }
.reveal .verdicts { margin: 0.15em 0; font-size: 0.8em; }
.reveal .verdicts .model { font-weight: bold; margin-right: 0.4em; }
.reveal .badge { display: inline-block; border-radius: 0.8em; padding: 0.05em 0.6em; margin: 0.1em 0.25em 0.1em 0; color: #fff; font-size: 0.9em; }
.reveal .dot { display: inline-block; width: 0.7em; height: 0.7em; border-radius: 50%; margin-right: 0.35em; }
.reveal .v-holds { background: #1a7f37; }
.reveal .v-partly { background: #b58100; }
.reveal .v-differs { background: #c62828; }
.reveal .v-inconclusive { background: #6f42c1; }
.reveal .v-not-testable, .reveal .not-run { background: #6e7781; }
.reveal .pvo .ci { font-size: 0.85em; color: #666; }
.reveal .missing { border: 2px dashed #aaa; color: #555; padding: 1em; font-size: 0.8em; }
.reveal .more, .reveal .why { font-size: 0.65em; color: #666; margin: 0.3em 0; }
.reveal ul.differs { font-size: 0.74em; line-height: 1.3; margin-left: 1em; }
.reveal ul.differs li { margin-bottom: 0.45em; }
.reveal ul.differs .note { color: #666; font-size: 0.9em; }
"""


def lecture_html(runs: Sequence[LectureRun]) -> str:
    """The lecture deck of ``runs`` (one per model) as one self-contained HTML page."""
    if not runs:
        raise BertologyError("a lecture needs at least one run")
    # Each run's parent folder is <results> too (a run given by path, outside results/).
    parents = {
        (str(folder), "<results>") for run in runs for folder in (run.folder.parent, run.folder.parent.resolve())
    }
    places = sorted(set(machine_places()) | parents, key=lambda place: -len(place[0]))
    slides = [_title_slide(runs, places), _question_slide(runs)]
    slides += [_topic_slide(topic, runs, places) for topic in LECTURE]
    slides += _other_slides(runs, places) + _closing_slides(runs, places)
    title = "Lecture: " + " vs ".join(run.short_model for run in runs)
    page = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{_esc(title)}</title>'
        f"{reveal_styles()}\n{presenting_tools()}\n<style>{_LECTURE_CSS}</style></head>"
        f'<body><div class="reveal"><div class="slides">{"".join(slides)}</div></div>'
        f"{reveal_start(reveal_config(SLIDE_SIZE))}{_FIT_JS}</body></html>\n"
    )
    return page


def build_lecture(
    run_dirs: str | os.PathLike | Sequence[str | os.PathLike], out: str | os.PathLike | None = None
) -> Path:
    """Write the lecture of one run, or of several runs side by side, to ``out`` (default: the first run's
    folder, :data:`LECTURE_FILE`); returns its path."""
    given = [run_dirs] if isinstance(run_dirs, str | os.PathLike) else list(run_dirs)
    runs = [read_lecture_run(run) for run in given]
    target = Path(out) if out is not None else runs[0].folder / LECTURE_FILE
    if target.is_dir() or target.suffix != ".html":
        target = target / LECTURE_FILE
    page = lecture_html(runs)
    remote = network_references(page)
    if remote:
        raise BertologyError(f"the lecture would load {len(remote)} resource(s) from the network, e.g. {remote[0]!r}")
    atomic_write_text(target, page)
    return target
