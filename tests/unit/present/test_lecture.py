"""The findings lecture: one deck of a run's claims and figures, built from what the run recorded."""

import json
import re
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from lecture_runs import PARTIAL_SKIP, make_lecture_run, make_partial_run

from bertology_utils.cli.main import main as cli
from bertology_utils.core import settings
from bertology_utils.core.errors import BertologyError
from bertology_utils.core.figure_text import SLIDE_BOX
from bertology_utils.present.lecture import LECTURE_FILE, build_lecture
from bertology_utils.present.lecture_outline import LECTURE
from bertology_utils.present.lecture_run import read_lecture_run
from bertology_utils.present.readable import round_for_people
from bertology_utils.present.reveal import network_references

ROOT = Path(__file__).resolve().parents[3]


def _slides(path: Path) -> list:
    soup = BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")
    return soup.select(".reveal .slides > section")


def _by_name(slides, name: str):
    found = [s for s in slides if s.get("data-slide") == name]
    assert len(found) == 1, f"{len(found)} slides named {name!r}"
    return found[0]


def _visible_text(section) -> str:
    notes = section.find("aside", class_="notes")
    text = section.get_text(" ", strip=True)
    return text.replace(notes.get_text(" ", strip=True), "") if notes else text


def _claims(run: Path) -> list[dict]:
    return [c for f in sorted(run.glob("*/claims.json")) for c in json.loads(f.read_text())["claims"]]


@pytest.fixture(scope="module")
def one_run(tmp_path_factory):
    run = make_lecture_run(tmp_path_factory.mktemp("runs") / "full", extra_claim=True)
    return run, build_lecture(run)


def test_a_slide_per_topic_between_title_question_and_closing(one_run):
    run, deck = one_run
    assert deck == run / LECTURE_FILE
    slides = _slides(deck)
    names = [s.get("data-slide") for s in slides]
    assert names[:2] == ["title", "question"]
    assert names[2 : 2 + len(LECTURE)] == [t.title for t in LECTURE]
    assert names[2 + len(LECTURE)] == "more claims"
    assert set(names[3 + len(LECTURE) :]) == {"closing"}
    assert 20 <= len(slides) <= 32
    assert network_references(deck.read_text(encoding="utf-8")) == []


def test_title_slide_names_model_data_and_date(one_run):
    _, deck = one_run
    title = _visible_text(_by_name(_slides(deck), "title"))
    assert "org/tiny-bert" in title and "tiny-bert do" in title
    assert "A Treebank v1" in title
    assert "26 November 2026" in title


def test_each_topic_slide_has_its_figure_badges_and_every_claim_in_its_notes(one_run):
    run, deck = one_run
    slides = _slides(deck)
    claims = _claims(run)
    for topic in LECTURE:
        section = _by_name(slides, topic.title)
        img = section.select_one(".picture img")
        assert img is not None and img["src"].startswith("data:image/png;base64,"), topic.title
        # its figure alone on the first slide of the topic's stack, as large as the box its text was fitted for
        figure, told = section.find_all("section", recursive=False)
        assert figure.select_one(".picture img") is img and told.select_one(".picture") is None
        width, height = int(img["width"]), int(img["height"])
        assert (width == SLIDE_BOX[0] and height <= SLIDE_BOX[1]) or (height == SLIDE_BOX[1] and width <= SLIDE_BOX[0])
        assert figure.find("aside", class_="notes").get_text() == told.find("aside", class_="notes").get_text()
        # the paper's finding is said to be the paper's, whatever our badge says
        assert section.select_one(".lead").get_text(" ", strip=True) == f"{topic.paper} found: {topic.lead}"
        mine = [c for c in claims if any(re.fullmatch(p.replace("*", ".*"), c["id"]) for p in topic.claims)]
        assert len(mine) == sum(2 if "*" in p else 1 for p in topic.claims)
        notes = section.find("aside", class_="notes").get_text()
        for claim in mine:
            assert claim["claim"] in notes and f"→ {claim['verdict']}" in notes
        if mine:
            counted = section.select(".verdicts .badge")
            assert sum(int(b.get_text().split()[0]) if " of " in b.get_text() else 1 for b in counted) == len(mine)
            assert section.select(".fit-row"), topic.title
        else:
            assert not section.select(".verdicts")


def test_the_figure_is_the_first_claims_variant(one_run):
    _, deck = one_run
    section = _by_name(_slides(deck), "What fine-tuning changes")
    # The claims come SST-2 first, MRPC second; sorted by name the MRPC figure would come first.
    assert section.select_one(".picture img")["alt"] == "attention_change_SST-2"


def test_numbers_are_rounded_and_no_path_shows(tmp_path):
    cache = settings.cache_dir()
    run = make_lecture_run(tmp_path / "r", long_text=f" read from {cache}/models/x and {tmp_path}/else")
    page = build_lecture(run).read_text(encoding="utf-8")
    text = BeautifulSoup(page, "html.parser").select_one(".reveal .slides").get_text(" ")
    assert "0.3333333" not in text and "0.333" in text
    assert "0.0000123" not in text and "p < 0.001" in text
    assert str(cache) not in text and "<cache>" not in text and "read from x and" in text
    assert str(tmp_path) not in text


def test_round_for_people():
    assert (
        round_for_people("head 7-6 34.5 vs 26.3 (+1); 20085 dependents")
        == "head 7-6 34.5 vs 26.3 (+1); 20085 dependents"
    )
    assert round_for_people("0.4546676 held out, v2.16, layers 6-10") == "0.455 held out, v2.16, layers 6-10"
    assert round_for_people("Wilcoxon p = 0.0000123; p=0.0213") == "Wilcoxon p < 0.001; p= 0.0213"
    assert round_for_people("1.234e-05 and 12345.678") == "1.23e-05 and 12346"


def test_closing_lists_every_differing_claim_once(one_run):
    run, deck = one_run
    closing = [s for s in _slides(deck) if s.get("data-slide") == "closing"]
    listed = [b.get_text() for s in closing for b in s.select("ul.differs > li > b")]
    differs = [c for c in _claims(run) if c["verdict"] == "differs"]
    # each under its case (task or relation) where the claim has one, so a claim made twice reads as two
    titled = [f"{c['id'].partition('.')[2]}: {c['claim']}" if "." in c["id"] else c["claim"] for c in differs]
    assert differs and sorted(listed) == sorted(titled)
    text = " ".join(_visible_text(s) for s in closing)
    assert all(f"why {c['id']} comes out so" in text for c in differs)
    assert text.count("why: ") == len(differs)  # the rule that decided, then the note
    assert "not testable here" in text


def test_a_claim_no_topic_names_is_on_the_more_claims_slide(one_run):
    _, deck = one_run
    more = _visible_text(_by_name(_slides(deck), "more claims"))
    assert "A claim no topic of the lecture names" in more and "Someone et al. 2026" in more


def test_two_runs_badge_both_models_and_say_what_the_second_lacks(tmp_path):
    first = make_lecture_run(tmp_path / "first")
    second = make_partial_run(tmp_path / "second", "org/other-bert")
    slides = _slides(build_lecture([first, second], tmp_path / "out"))
    syntax = _by_name(slides, "Heads that follow syntax")
    assert [m.get_text() for m in syntax.select(".verdicts .model")] == ["tiny-bert", "other-bert"]
    clustering = _by_name(slides, "Heads cluster")
    assert "05_clustering did not run in second" in _visible_text(clustering)
    assert clustering.select(".verdicts .badge.not-run")
    pruning = _by_name(slides, "Are sixteen heads better than one?")
    assert PARTIAL_SKIP in _visible_text(pruning)
    assert "paper" in _visible_text(_by_name(slides, "question"))
    # The first run has the figure; only the second lacks it.
    assert _by_name(slides, "Broad or focused?").select_one(".picture img") is not None
    alone = _slides(build_lecture(second, tmp_path / "alone.html"))
    broad = _by_name(alone, "Broad or focused?")
    assert broad.select_one(".picture img") is None
    assert "entropy_by_layer is not in the run" in _visible_text(broad)


def test_a_run_with_no_results_gives_a_deck_that_says_so(tmp_path):
    run = tmp_path / "empty"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"run_name": "empty", "notebooks": []}))
    slides = _slides(build_lecture(run))
    assert 20 <= len(slides) <= 32
    for topic in LECTURE:
        section = _by_name(slides, topic.title)
        assert f"{topic.figure[0]} did not run in empty" in _visible_text(section)
    assert "no notebook recorded a claim" in _visible_text(_by_name(slides, "closing"))
    assert "No notebook recorded a claim." in _visible_text(_by_name(slides, "question"))


def test_bad_runs_are_refused_clearly(tmp_path):
    with pytest.raises(BertologyError, match="no run folder"):
        build_lecture(tmp_path / "nowhere")
    run = make_lecture_run(tmp_path / "mixed", notebooks={"01_patterns", "03_syntax_coref"})
    (run / "03_syntax_coref" / "metrics.json").write_text(json.dumps({"syntax.model": "org/another"}))
    with pytest.raises(BertologyError, match="mixes models"):
        read_lecture_run(run)


def test_cli_writes_the_lecture_and_refuses_mixed_options(tmp_path, capsys):
    run = make_lecture_run(tmp_path / "r", notebooks={"01_patterns"})
    assert cli(["slides", str(run), "--lecture", "--out", str(tmp_path / "decks")]) == 0
    assert (tmp_path / "decks" / LECTURE_FILE).is_file()
    assert capsys.readouterr().out.strip().endswith(LECTURE_FILE)
    assert cli(["slides", str(run), "--with", str(run)]) == 2
    assert cli(["slides", str(run), "00", "--lecture"]) == 2
    assert "leave out NOTEBOOK" in capsys.readouterr().err


def test_the_outline_names_every_claim_of_the_reference_findings():
    """Each claim the suite records has a topic (or the 'more claims' slide would hold the suite's own claims),
    and each topic's patterns and figure name something the notebooks make."""
    from fnmatch import fnmatchcase

    record = json.loads((ROOT / "docs" / "findings" / "all-MiniLM-L6-v2.json").read_text())
    ids = [c["key"].split(".claims.", 1)[1] for nb in record["notebooks"] for c in nb["claims"]]
    patterns = [p for topic in LECTURE for p in topic.claims]
    assert [i for i in ids if not any(fnmatchcase(i, p) for p in patterns)] == []
    assert [p for p in patterns if not any(fnmatchcase(i, p) for i in ids)] == []
    for topic in LECTURE:
        notebook, figure = topic.figure
        source = (ROOT / "notebooks" / f"{notebook}.ipynb").read_text(encoding="utf-8")
        assert figure.split("*", 1)[0] in source, (notebook, figure)


def test_a_section_the_notebook_skipped_is_named_on_its_slides(tmp_path):
    run = make_lecture_run(tmp_path / "r", notebooks={"06_pruning"})
    (run / "06_pruning" / "skipped.json").write_text(
        json.dumps({"everything": False, "sections": [{"section": "RTE", "reason": "no RTE data in /x"}]})
    )
    slides = _slides(build_lecture(run))
    for title in ("What fine-tuning changes", "Importance scores"):
        section = _by_name(slides, title)
        assert "Not computed in this run: RTE (no RTE data in /x)" in _visible_text(section)
        assert "Not computed in this run: RTE" in section.find("aside", class_="notes").get_text()
        assert section.select(".fit-row")
    assert "Not computed" not in _visible_text(_by_name(slides, "Heads that follow syntax"))


def test_a_claim_two_notebooks_check_counts_once_from_its_topics_notebook(tmp_path):
    run = make_lecture_run(tmp_path / "r", notebooks={"01_patterns"})
    patterns = json.loads((run / "01_patterns" / "claims.json").read_text())["claims"]
    original = next(c for c in patterns if c["id"] == "sep_middle_layers")
    tour = run / "00_tour"
    tour.mkdir()
    copy = dict(original, key="tour.claims.sep_middle_layers", ours="from the tour", verdict="partly")
    (tour / "claims.json").write_text(json.dumps({"claims": [copy]}))
    (tour / "metrics.json").write_text(json.dumps({"tour.model": "org/tiny-bert"}))
    slides = _slides(build_lecture(run))
    section = _by_name(slides, "[CLS], [SEP] and punctuation draw attention")
    notes = section.find("aside", class_="notes").get_text()
    assert "from the tour" not in notes and notes.count(original["claim"]) == 1
    counted = _visible_text(_by_name(slides, "question"))
    total = sum(int(n) for n in re.findall(r"(\d+) (?:holds|partly|differs|not testable)", counted))
    assert total == len(patterns)


def test_a_failed_notebook_is_named_on_its_slides(tmp_path):
    run = make_lecture_run(tmp_path / "r", notebooks={"05_clustering", "01_patterns"})
    (run / "05_clustering" / "claims.json").write_text(json.dumps({"claims": []}))
    record = json.loads((run / "run.json").read_text())
    for entry in record["notebooks"]:
        if entry["name"] == "05_clustering":
            entry.update(status="failed", error={"ename": "ValueError", "evalue": "bad"})
    (run / "run.json").write_text(json.dumps(record))
    slides = _slides(build_lecture(run))
    clustering = _by_name(slides, "Heads cluster")
    assert "05_clustering failed in r" in _visible_text(clustering)
    assert clustering.select_one(".verdicts .badge.not-run").get_text() == "failed"


def test_a_figure_the_notebook_did_not_save_is_said_so(tmp_path):
    run = make_lecture_run(tmp_path / "r", notebooks={"03_syntax_coref"}, without_figures={"coreference_head"})
    section = _by_name(_slides(build_lecture(run)), "A coreference head")
    assert section.select_one(".picture img") is None
    missing = section.select_one(".picture .missing").get_text()
    assert "03_syntax_coref saved no figure coreference_head in r" in missing
    assert section.select(".fit-row")  # its claims are still there


def test_a_long_skip_reason_is_cut_on_the_slide_and_whole_in_the_notes(tmp_path):
    reason = "no data for this task; " * 60
    run = make_lecture_run(
        tmp_path / "r", notebooks={"06_pruning"}, skipped={"06_pruning": reason}, without_figures={"importance_*"}
    )
    section = _by_name(_slides(build_lecture(run)), "Importance scores")
    assert len(section.select_one(".picture .missing").get_text()) <= 360
    assert all(len(p.get_text()) <= 240 for p in section.select(".why"))
    assert reason.strip() in section.find("aside", class_="notes").get_text()


def test_a_claims_interval_and_seeds_show_short_on_the_slide_and_whole_in_the_notes(tmp_path):
    run = make_lecture_run(tmp_path / "r", notebooks={"01_patterns"})
    path = run / "01_patterns" / "claims.json"
    claims = json.loads(path.read_text())["claims"]
    interval = {"low": 0.12, "high": 0.4, "level": 0.95, "method": "bootstrap over 72 heads"}
    for claim in claims:
        if claim["id"] == "current_token":
            claim.update(verdict="inconclusive", interval=interval, seeds={"holding": 2, "n": 3})
        elif claim["id"] == "next_token_heads":
            claim.update(verdict="differs", interval=dict(interval, low=-0.3, high=-0.1), seeds=None)
        elif claim["id"] == "previous_token_heads":
            claim.update(verdict="holds")  # recorded before intervals: no such keys
    path.write_text(json.dumps({"claims": claims}))
    slides = _slides(build_lecture(run))
    section = _by_name(slides, "Where do heads look?")
    shown = [ci.get_text() for ci in section.select(".pvo .ci")]
    assert sorted(shown) == ["95% CI [-0.3, -0.1]", "95% CI [0.12, 0.4]; holds in 2 of 3 seeds"]
    visible = _visible_text(section)
    assert "bootstrap over 72 heads" not in visible and "None" not in visible
    assert section.select_one(".verdicts .badge.v-inconclusive").get_text() == "1 of 3 inconclusive"
    notes = section.find("aside", class_="notes").get_text()
    assert "(95% CI [0.12, 0.4] (bootstrap over 72 heads); holds in 2 of 3 seeds) → inconclusive" in notes
    assert "None" not in notes
    closing = _by_name(slides, "closing")
    entry = next(li for li in closing.select("ul.differs > li") if "next_token_heads" in li.get_text())
    assert "(95% CI [-0.3, -0.1])" in entry.get_text()
    assert "1 recorded claim(s) were inconclusive" in _visible_text(closing)
    counted = _visible_text(_by_name(slides, "question"))
    assert "1 inconclusive" in counted


def test_every_verdict_has_a_colour_of_its_own():
    from bertology_utils.papers.claims import Verdict
    from bertology_utils.present.lecture import _LECTURE_CSS

    assert all(f".v-{v.value.replace(' ', '-')}" in _LECTURE_CSS for v in Verdict)


def test_a_value_is_shortened_by_its_asides_and_clauses_never_inside_a_number():
    from bertology_utils.present.lecture_slides import _shorten_value

    text = (
        "median relevance 0.074 for 8 specialised heads vs 0.060 for 64 others, difference 95% CI "
        "[-0.0132, 0.0221] (bootstrap within 8 specialised and 64 other heads) (one-sided Mann-Whitney p = 0.45)"
    )
    assert _shorten_value(text, 200) == text
    assert _shorten_value(text, 120) == text.split(" (bootstrap")[0]  # the asides go first
    assert _shorten_value(text, 75) == "median relevance 0.074 for 8 specialised heads vs 0.060 for 64 others …"
    assert (
        _shorten_value("83% of 72 heads pruned at >= 90% of 0.812", 45) == "83% of 72 heads pruned at >= 90% of 0.812"
    )


def test_a_text_is_never_cut_just_after_a_number():
    from bertology_utils.present.lecture_slides import _shorten

    text = "det: head 3-9 80.8, held out 80.8 (+1); 1817 of 2001 dependents"
    assert _shorten(text, 46) == "det: head 3-9 80.8, held out 80.8 (+1);…"  # not "...; 1817…"
    assert _shorten(text, 50) == "det: head 3-9 80.8, held out 80.8 (+1); 1817 of…"
    assert _shorten(text, 100) == text


def test_a_claim_made_on_two_tasks_reads_as_two():
    from bertology_utils.present.lecture_slides import _titled

    claim = {"key": "pruning.claims.heads_prunable.SST-2", "claim": "Most heads can be pruned"}
    assert _titled(claim) == "SST-2: Most heads can be pruned"
    assert _titled({**claim, "key": "vig.claims.positional"}) == "Most heads can be pruned"
    # a text that already names its case is not named twice
    table1 = {"key": "syntax.claims.table1.All", "claim": "All: the best head beats the best fixed offset"}
    assert _titled(table1) == "All: the best head beats the best fixed offset"
