"""Every notebook's deck, made from the notebook tests' own runs (the small parameters, with the data folder
and as a fresh clone offline), is presentable on every slide at 1280 x 720: nothing outside the slide, no
text under 16 px, no overlapping text, no missing value, repr, path or cut number, and every figure carries
its measured text, which is checked at the size it is shown (present.page_audit). So are the report, the
lecture and the atlas of those runs joined into one, as `bertology run` makes them."""

from pathlib import Path

import pytest
from deck_checks import assert_presentable
from notebook_runs import NOTEBOOKS, VARIANTS, whole_run

from bertology_utils.present.atlas import build_atlas
from bertology_utils.present.lecture import build_lecture
from bertology_utils.present.report import build_report
from bertology_utils.present.slides import notebook_to_slides

pytestmark = [pytest.mark.slow, pytest.mark.browser]

READY = "() => window.Reveal !== undefined && Reveal.isReady()"


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda path: path.stem)
def test_every_slide_of_the_deck_is_presentable(notebook, variant, small_runs, offline_page):
    result = small_runs.get(notebook.stem, variant)
    assert result.ok and result.executed_notebook, result.describe_error()
    _assert_presentable(offline_page, notebook_to_slides(Path(result.executed_notebook)), deck=True)


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_report_lecture_and_atlas_of_the_whole_run_are_presentable(variant, small_runs, offline_page, tmp_path):
    run = whole_run(small_runs, variant, tmp_path / "run")
    _assert_presentable(offline_page, build_report(run), deck=False)
    _assert_presentable(offline_page, build_lecture(run, tmp_path / "lecture.slides.html"), deck=True)
    atlas = build_atlas(run).write(tmp_path / "atlas")["page"]
    _assert_presentable(offline_page, atlas, deck=False)
    offline_page.page.click(".cell")  # a head's card open
    assert_presentable(offline_page.page, slides=False, measured=True)


def _assert_presentable(offline_page, path, *, deck: bool) -> None:
    page = offline_page.page
    page.goto(path.as_uri())
    if deck:
        page.wait_for_function(READY, timeout=30_000)
    page.wait_for_function("() => Array.from(document.images).every(i => i.complete)", timeout=30_000)
    assert_presentable(page, slides=deck, measured=True)
    assert offline_page.blocked == [], offline_page.blocked
