"""The lecture's slides as HTML: the title, the question, one slide per topic of the outline, claims no topic
names, and what differs and why; each with its speaker notes.

A topic has two slides, one below the other: its figure alone, as large as its text was fitted for, then the
paper's finding in one line, the verdict per model as badges, and the paper's numbers beside ours; where a run
lacks what a slide needs, the slide says so and why.
"""

from __future__ import annotations

import html
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime
from fnmatch import fnmatchcase
from pathlib import Path

from bertology_utils.core.errors import BertologyError
from bertology_utils.core.figure_text import SLIDE_BOX, img_attribute, read_png_text
from bertology_utils.papers.claims import Verdict, claim_case
from bertology_utils.present.findings import claim_uncertainty
from bertology_utils.present.lecture_outline import Topic, claim_id, home_notebook
from bertology_utils.present.lecture_run import LectureRun
from bertology_utils.present.readable import round_for_people
from bertology_utils.present.report import data_uri

__all__ = ["title_slide", "question_slide", "topic_slide", "other_slides", "closing_slides"]

_VERDICTS = [v.value for v in Verdict]
#: Claims a topic slide lists at most (the page then shows those that fit); all are in the speaker notes.
_MAX_ROWS = 6
#: Rows of a "more claims" slide.
_OTHER_ROWS = 5
#: Claims per "what differs" slide.
_PER_CLOSING_SLIDE = 6
_CLAIM_CHARS = 90
#: Characters of a claim's interval and seed count on a slide (the interval without its method is about 40).
_UNCERTAINTY_CHARS = 50
#: The question slide's overview, one row per paper: its type size, the pixels between the question and the menu
#: button it may fill at that size, and what it takes there (as measured in Chromium): the header, each row's
#: padding and each of its lines; a paper's name wraps at about _PAPER_CHARS characters, the runs' badges together
#: at about _BADGE_CHARS (a badge: its text and 3 for its padding). A taller table's type shrinks in proportion,
#: to OVERVIEW_MIN_EM at the least: there a badge (0.9 of it) is still 16 px, the decks' smallest text.
OVERVIEW_EM, OVERVIEW_MIN_EM = 0.78, 0.7
_OVERVIEW_PX, _HEADER_PX, _ROW_PX, _LINE_PX, _PAPER_CHARS, _BADGE_CHARS = 550, 32, 8, 27, 50, 80


def _esc(text: object) -> str:
    return html.escape(str(text))


def _shorten(text: str, limit: int = _CLAIM_CHARS) -> str:
    """``text`` within ``limit``, cut at a word, never just after a digit (that number may be the one cut)."""
    if len(text) <= limit:
        return text
    words = text[: limit - 1].split(" ")[:-1] or [text[: limit - 1]]
    while len(words) > 1 and words[-1][-1:].isdigit():
        words.pop()
    return " ".join(words) + "…"


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
    case, text = claim_case(claim_id(claim["key"])), claim["claim"]
    # some claims' texts already begin with their case (Clark's Table 1: "amod: the best head ...")
    named = text.casefold().startswith(f"{case.casefold()}:")
    return f"{case}: {text}" if case and not named else text


def _topic_claims(topic: Topic, run: LectureRun) -> list[tuple[str, dict]]:
    """The run's claims the topic names."""
    return [(nb, c) for nb, c in run.claims if any(fnmatchcase(claim_id(c["key"]), p) for p in topic.claims)]


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


def _uncertainty(claim: dict, places: Sequence[tuple[str, str]], *, short: bool = True) -> str:
    """A claim's interval and seed count for people ("" when it has neither); ``short``: without the interval's
    method, for a slide (the speaker notes have it whole)."""
    return round_for_people(claim_uncertainty(claim, short=short), places)


def _uncertainty_span(claim: dict, places: Sequence[tuple[str, str]]) -> str:
    """The claim's interval and seeds as a small line after its value on a slide; "" when it has neither."""
    text = _uncertainty(claim, places)
    return f'<br><span class="ci">{_esc(_shorten(text, _UNCERTAINTY_CHARS))}</span>' if text else ""


def _uncertainty_note(claim: dict, places: Sequence[tuple[str, str]]) -> str:
    """The claim's interval and seeds whole, in brackets after its value in the speaker notes."""
    text = _uncertainty(claim, places, short=False)
    return f" ({text})" if text else ""


def _css(verdict: str) -> str:
    return "v-" + re.sub(r"[^a-z]+", "-", verdict.lower()).strip("-")


def _why_missing(run: LectureRun, notebook: str, places: Sequence[tuple[str, str]]) -> tuple[str, str]:
    """A badge's word and the sentence saying why the run has nothing for a topic of ``notebook``."""
    nb = run.notebooks.get(notebook)
    if nb is None:
        return "not run", f"{notebook} did not run in {run.name} (bertology run {run.name} {notebook[:2]})"
    if nb.get("error") or nb["status"] == "failed":
        return "failed", f"{notebook} failed in {run.name}: its report says where (bertology report {run.name})"
    if nb["skipped"]:
        return "skipped", round_for_people(f"{notebook} skipped {_sections(nb['skipped'])}", places)
    return "not recorded", f"{notebook} recorded no claim of this kind in {run.name} (an older run?)"


def _skipped_here(run: LectureRun, notebook: str, places: Sequence[tuple[str, str]]) -> str:
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


def title_slide(runs: Sequence[LectureRun], places: Sequence[tuple[str, str]]) -> str:
    """The title slide: the models, their data and runs, and the keys of the presenting tools."""
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


def question_slide(runs: Sequence[LectureRun]) -> str:
    """The question, with each paper's verdicts counted per model."""
    papers: dict[str, list[list[dict]]] = {}
    for i, run in enumerate(runs):
        for _, claim in run.claims:
            papers.setdefault(claim["paper"], [[] for _ in runs])[i].append(claim)
    header = "<tr><th>paper</th>" + "".join(f"<th>{_esc(run.short_model)}</th>" for run in runs) + "</tr>"
    rows = "".join(
        f"<tr><td>{_esc(paper)}</td>" + "".join(f"<td>{_pills(found)}</td>" for found in per_run) + "</tr>"
        for paper, per_run in papers.items()
    )
    size = max(OVERVIEW_MIN_EM, OVERVIEW_EM * min(1.0, _OVERVIEW_PX / _overview_px(papers, len(runs))))
    table = (
        f'<table class="overview" style="font-size: {size:.3f}em">{header}{rows}</table>'
        if papers
        else _missing_box("No notebook recorded a claim.")
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


def _overview_px(papers: dict[str, list[list[dict]]], runs: int) -> float:
    """The overview's estimated height at :data:`OVERVIEW_EM` (see its constants): each row as tall as its name's
    lines or its widest run's badges' lines."""

    def badge_lines(claims: list[dict]) -> int:
        chars = sum(len(f"{n} {v}") + 3 for v, n in _counts(claims)) if claims else len("none") + 3
        return math.ceil(chars * runs / _BADGE_CHARS)

    rows = (
        max(math.ceil(len(paper) / _PAPER_CHARS), *(badge_lines(found) for found in per_run))
        for paper, per_run in papers.items()
    )
    return _HEADER_PX + sum(_ROW_PX + _LINE_PX * lines for lines in rows)


def _pills(claims: list[dict]) -> str:
    if not claims:
        return '<span class="badge not-run">none</span>'
    return "".join(f'<span class="badge {_css(v)}">{n} {_esc(v)}</span>' for v, n in _counts(claims))


def _missing_box(text: str) -> str:
    return f'<div class="missing">{_esc(text)}</div>'


def topic_slide(topic: Topic, runs: Sequence[LectureRun], places: Sequence[tuple[str, str]]) -> str:
    """A topic's two slides, one below the other (reveal's vertical stack): its figure alone, shown at the size its
    text was fitted for (:data:`~bertology_utils.core.figure_text.SLIDE_BOX`), then the paper's finding, the
    verdicts as badges and the paper's numbers beside ours. Both carry the topic's speaker notes."""
    per_run = [_topic_claims(topic, run) for run in runs]
    figure = _figure(topic, runs, [item for claims in per_run for item in claims])
    if figure is not None:
        path, owner = figure
        width, height = _png_size(path)
        # Shown as large as the box, never smaller: a figure's labels are 16 px at that size and no smaller.
        scale = min(SLIDE_BOX[0] / width, SLIDE_BOX[1] / height)
        caption = f"{topic.figure[0]} · {path.stem}" + (f" · {owner.short_model}" if len(runs) > 1 else "")
        picture = (
            f'<figure><img src="{data_uri(path)}" width="{round(width * scale)}" height="{round(height * scale)}" '
            f'alt="{_esc(path.stem)}"'
            f"{img_attribute(read_png_text(path))}>"
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
        + f"</div>{_paper_vs_ours(runs, per_run, places)}"
    )
    heading = f'<p class="paper">{_esc(topic.paper)}</p><h2>{_esc(topic.title)}</h2>'
    notes, name = _topic_notes(topic, runs, per_run, places), f' data-slide="{_esc(topic.title)}"'
    shown = _slide(f'{heading}<div class="picture">{picture}</div>', notes, "topic figure", name)
    told = _slide(f'{heading}<div class="side">{side}</div>', notes, "topic claims", name)
    return f'<section class="topic"{name}>{shown}{told}</section>'


def _paper_vs_ours(
    runs: Sequence[LectureRun], per_run: list[list[tuple[str, dict]]], places: Sequence[tuple[str, str]]
) -> str:
    """The paper's value beside each model's, one row per claim id, as a table. The page shows the rows that fit
    (the lecture's script) and counts the others into the notes."""
    ids: dict[str, dict] = {}
    for claims in per_run:
        for _, claim in claims:
            ids.setdefault(claim_id(claim["key"]), claim)
    if not ids:
        return ""
    by_run = [{claim_id(c["key"]): c for _, c in claims} for claims in per_run]

    def ours(found: dict, key: str, limit: int) -> str:
        mine = found.get(key)
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
    header = "<tr><th>claim</th><th>paper</th>" + "".join(f"<th>{_esc(r.short_model)}</th>" for r in runs)
    rows = "".join(
        f'<tr class="fit-row"><td>{_esc(_shorten(_titled(claim), 70))}</td>'
        f"<td>{_esc(_shorten_value(round_for_people(claim['paper_value'], places), 45))}</td>"
        + "".join(f"<td>{ours(found, key, 60)}</td>" for found in by_run)
        + "</tr>"
        for key, claim in listed
    )
    table = f'<table class="pvo">{header}</tr>{rows}</table>'
    return f'{table}<p class="more" data-unlisted="{len(ids) - len(listed)}"></p>'


def _topic_notes(
    topic: Topic, runs: Sequence[LectureRun], per_run: list[list[tuple[str, dict]]], places: Sequence[tuple[str, str]]
) -> str:
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


def other_slides(runs: Sequence[LectureRun], places: Sequence[tuple[str, str]]) -> list[str]:
    """Claims no topic names (a notebook's new claim), so that none is left out of the talk."""
    others: dict[str, list[dict | None]] = {}
    for i, run in enumerate(runs):
        for _, claim in run.claims:
            if home_notebook(claim_id(claim["key"])) is None:
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


def closing_slides(runs: Sequence[LectureRun], places: Sequence[tuple[str, str]]) -> list[str]:
    """What differs, and why: each claim that differs on some model, the paper's number, each such model's and
    the claim's note, a few per slide."""
    differs: dict[str, list[tuple[LectureRun, dict]]] = {}
    for run in runs:
        for _, claim in run.claims:
            if claim["verdict"] == Verdict.DIFFERS.value:
                differs.setdefault(claim_id(claim["key"]), []).append((run, claim))
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
