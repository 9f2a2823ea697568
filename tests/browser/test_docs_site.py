"""The documentation site, built with an executed run (with and without the data folder), opened from disk in a real
browser with the network cut off."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from notebook_runs import NOTEBOOKS, VARIANTS, whole_run

pytestmark = [pytest.mark.slow, pytest.mark.browser]

ROOT = Path(__file__).resolve().parents[2]
MKDOCS = Path(sys.executable).with_name("mkdocs")
IMAGES_LOADED = """() => Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)"""
#: Material's script has sized the navigation: until it has, the left sidebar runs the length of its entries and
#: on a short page its last ones lie under the footer (an overlap no reader sees, measured in a race with it).
SIDEBARS_SIZED = """() => Array.from(document.querySelectorAll(".md-sidebar__scrollwrap"))
    .every(w => w.offsetParent === null || w.style.height !== "")"""


@pytest.fixture(scope="module", params=VARIANTS)
def site(request, small_runs, tmp_path_factory):
    """The site built with every notebook executed: the test suite's small runs joined into one, with the data
    folder, then as a fresh clone offline (a run with missing data)."""
    if not MKDOCS.exists():
        pytest.skip("mkdocs is not installed (pip install -e '.[dev]')")
    run = whole_run(small_runs, request.param, tmp_path_factory.mktemp("run") / "run")
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, BERTOLOGY_DOCS_RUN=str(run), NO_MKDOCS_2_WARNING="1")
    done = subprocess.run(
        [str(MKDOCS), "build", "--strict", "-d", str(out)], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_the_site_opens_offline_with_the_executed_notebook_and_its_figures(site, offline_page):
    page = offline_page.page
    page.goto((site / "index.html").as_uri())
    assert page.locator("h1").first.inner_text().startswith("bertology")
    page.goto((site / "notebooks" / "00_tour.html").as_uri())
    assert "executed in run" in page.locator("article").inner_text()
    page.wait_for_function(IMAGES_LOADED, timeout=30_000)
    assert page.locator("article img[src*='00_tour_files/']").count() >= 2
    page.goto((site / "findings.html").as_uri())
    assert page.locator("article table").count() >= 2
    page.keyboard.press("s")  # search, from disk: the index is a script, the worker a shim
    page.keyboard.type("rollout")
    page.wait_for_function("() => document.querySelectorAll('.md-search-result__item').length > 0", timeout=30_000)
    page.goto((site / "api" / "attention.html").as_uri())
    assert page.locator("article").get_by_text("extract_attention").count() >= 1
    offline_page.screenshot("docs-findings")
    assert offline_page.blocked == [], f"the site tried the network: {offline_page.blocked}"
    assert offline_page.errors == []


def test_the_notebook_pages_are_presentable(site, offline_page):
    """Every notebook's page of the site, each executed: no NaN, repr, path or cut number shown outside the
    code, no overlapping text."""
    from bertology_utils.present.page_audit import VIEWPORT, audit_page

    pages = sorted((site / "notebooks").glob("*.html"))
    assert {p.stem for p in pages} >= {n.stem for n in NOTEBOOKS}
    page = offline_page.page
    page.set_viewport_size(VIEWPORT)
    defects = {}
    for path in pages:
        page.goto(path.as_uri())
        page.wait_for_function(IMAGES_LOADED, timeout=30_000)
        page.wait_for_function(SIDEBARS_SIZED, timeout=30_000)
        if found := audit_page(page, slides=False):
            defects[path.name] = [str(d) for d in found]
    assert defects == {}, defects
