"""The run report: every metric, figures embedded, paper-vs-ours tables, failures, regressions; offline."""

import base64
import html
import io
import json
import re

import nbformat
import pytest
from bs4 import BeautifulSoup
from PIL import Image

from bertology_utils.cli import main
from bertology_utils.core.errors import BertologyError, DataFormatError
from bertology_utils.papers.claims import Claim, Interval, Seeds, Verdict
from bertology_utils.present import assets
from bertology_utils.present.report import build_report, claims_html, flatten_metrics, format_value, value_for_people
from bertology_utils.present.reveal import network_references
from bertology_utils.present.slides import prepare_for_slides, run_slides, slide_figures
from bertology_utils.run.harness import run_notebooks
from bertology_utils.run.record import record_claims

PAPER_TABLE = (
    '<div><style scoped>.dataframe {}</style><table border="1" class="dataframe"><thead><tr><th></th>'
    "<th>claim</th><th>paper</th><th>ours</th><th>verdict</th></tr></thead><tbody><tr><th>0</th>"
    "<td>[SEP] gets most attention</td><td>&gt; 0.5</td><td>0.03</td><td>differs</td></tr></tbody></table></div>"
)
OTHER_TABLE = (
    '<table class="dataframe"><thead><tr><th>layer</th><th>share</th></tr></thead>'
    "<tbody><tr><td>1</td><td>unrelated-table-marker</td></tr></tbody></table>"
)
CLAIM = Claim(
    "sep_middle_layers",
    "[SEP] draws most attention in the middle",
    "Clark et al. 2019",
    "> 0.5",
    "0.03",
    Verdict.DIFFERS,
    "mean > 0.5",
    {"sep_share": 0.03},
    note="recorded-claim-note",
)
METRICS = {
    "good.model": "tiny-bert",
    "good.data": "4 sentences of the sample",
    "good.score": 0.123456789,
    "good.count": 7,
    "good.flag": True,
    "good.none": None,
    "good.nested": {"a": [0.5, 0.25], "b": "x<y"},
}
CHECK = {
    "reference": "results/reference",
    "ok": False,
    "differences": [
        {
            "notebook": "01_good",
            "metric": "good.score",
            "reference": 0.5,
            "value": 0.123456789,
            "tolerance": "abs 0.01",
            "status": "regressed",
        },
        {
            "notebook": "01_good",
            "metric": "good.gone",
            "reference": 3,
            "value": None,
            "tolerance": "exact",
            "status": "missing",
        },
        {
            "notebook": "01_good",
            "metric": "good.flag",
            "reference": None,
            "value": True,
            "tolerance": "",
            "status": "new",
        },
        {
            "notebook": "01_good",
            "metric": "good.count",
            "reference": 7,
            "value": 7,
            "tolerance": "exact",
            "status": "ok",
        },
    ],
}


def png_bytes(colour):
    buffer = io.BytesIO()
    Image.new("RGB", (5, 3), colour).save(buffer, format="PNG")
    return buffer.getvalue()


def executed_notebook(path, cells):
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


def result(html_text, count):
    return nbformat.v4.new_output(
        "execute_result", data={"text/html": html_text, "text/plain": "frame"}, execution_count=count
    )


@pytest.fixture
def run_dir(tmp_path):
    """A run folder as the harness writes it: one notebook that ran, one that failed in cell 3."""
    run = tmp_path / "lesson"
    good, broken = run / "01_good", run / "02_broken"
    code = nbformat.v4.new_code_cell
    executed_notebook(
        good / "01_good.ipynb",
        [
            nbformat.v4.new_markdown_cell("## Where attention goes"),
            code("shares", outputs=[result(OTHER_TABLE, 1)]),
            nbformat.v4.new_markdown_cell("## Paper vs ours\n\nEach claim is checked."),
            code("comparison", outputs=[result(PAPER_TABLE, 2)]),
        ],
    )
    (good / "metrics.json").write_text(json.dumps(METRICS))
    record_claims([CLAIM], "good.claims", output_dir=good, declared=None)
    (good / "figures").mkdir()
    (good / "figures" / "attention.png").write_bytes(png_bytes((255, 0, 0)))
    (good / "figures" / "entropy.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"/>')
    traceback = [
        "\x1b[0;31mZeroDivisionError\x1b[0m  Traceback (most recent call last)",
        "\x1b[0;31mZeroDivisionError\x1b[0m: division by zero",
    ]
    executed_notebook(
        broken / "02_broken.ipynb",
        [
            code("x = 1", outputs=[]),
            code(
                "ratio = 1 / 0",
                outputs=[
                    nbformat.v4.new_output(
                        "error", ename="ZeroDivisionError", evalue="division by zero", traceback=traceback
                    )
                ],
            ),
        ],
    )
    notebooks = [
        {"name": "01_good", "status": "ok", "duration_s": 1.5, "error": None, "parameters": {"layer": 3}},
        {
            "name": "02_broken",
            "status": "failed",
            "duration_s": 0.4,
            "error": {"cell_index": 3, "exec_count": 2, "ename": "ZeroDivisionError", "evalue": "division by zero"},
        },
    ]
    (run / "run.json").write_text(
        json.dumps(
            {
                "run_name": "lesson",
                "run_dir": str(run),
                "started": "2026-11-21T10:00:00+00:00",
                "finished": "2026-11-21T10:01:00+00:00",
                "parameters": {"n_sentences": 4},
                "notebooks": notebooks,
                "versions": {"python": "3.11.7", "torch": "2.13.0+cpu", "transformers": "5.23.0"},
                "environment": {"cpu": "Example CPU 9000", "cpu_flags": ["avx2", "fma"], "cores": 2, "gpu": None},
            }
        )
    )
    return run


def test_format_and_flatten():
    assert flatten_metrics({"a": {"b": 1, "c": {"d": [1, 2]}}, "e": {}}) == {"a.b": 1, "a.c.d": [1, 2], "e": {}}
    assert [format_value(v) for v in (0.123456789, 7, True, None, [0.5, 1e-7], "s")] == [
        "0.123457",
        "7",
        "true",
        "null",
        "[0.5, 1e-07]",
        "s",
    ]


def test_values_for_people():
    assert [value_for_people(v) for v in (0.123456789, 7, True, None, "s", [0.5, 1e-7])] == [
        "0.123",
        "7",
        "yes",
        "—",
        "s",
        "[0.5, 1e-07]",
    ]
    assert value_for_people(list(range(10))) == "[0, 1, 2, 3, 4, 5, … 10 values]"
    assert value_for_people([[0.1] * 12] * 6) == "6 × 12 values"
    assert value_for_people([[[True] * 12] * 6] * 3) == "3 × 6 × 12 values"
    assert value_for_people([[1, 2], [3]]) == "2 lists"
    assert value_for_people({"SST-2": 0.81234, "RTE": None}) == "{SST-2: 0.812, RTE: —}"


def test_report_holds_every_metric_figure_table_and_failure(run_dir):
    out = build_report(run_dir)
    assert out == run_dir / "report.html"
    page = out.read_text(encoding="utf-8")

    for name, _value in flatten_metrics(METRICS).items():
        assert html.escape(name) in page, name
    for shown in (
        "tiny-bert",
        "4 sentences of the sample",
        '<td><span class="value">0.123</span>',  # to three significant digits (the regression table: 0.123457)
        '<td><span class="value">7</span>',
        "[0.5, 0.25]",
        "x&lt;y",
        '<span class="value">yes</span>',
        '<span class="value">—</span>',
    ):
        assert shown in page, shown
    recorded = flatten_metrics(json.loads((run_dir / "01_good" / "metrics.json").read_text()))
    assert f'<details id="metrics-01_good"><summary>01_good: {len(recorded)} metrics</summary>' in page  # folded
    assert ">null<" not in page and ">true<" not in page

    figures = run_dir / "01_good" / "figures"
    assert f'src="data:image/png;base64,{base64.b64encode((figures / "attention.png").read_bytes()).decode()}"' in page
    assert (
        f'src="data:image/svg+xml;base64,{base64.b64encode((figures / "entropy.svg").read_bytes()).decode()}"' in page
    )

    assert "[SEP] draws most attention in the middle" in page and "recorded-claim-note" in page  # from claims.json
    assert '<span class="status status-differs">differs</span>' in page
    assert "[SEP] gets most attention" not in page and "unrelated-table-marker" not in page  # not from the HTML
    assert "<style scoped>" not in page

    failures = page[page.index('id="failures"') : page.index('id="summary"')]
    assert "02_broken" in failures and "cell 3 (exec count 2)" in failures
    assert "ZeroDivisionError: division by zero" in failures and "ratio = 1 / 0" in failures
    assert "\x1b" not in page
    assert "torch 2.13.0+cpu" in page and "transformers 5.23.0" in page
    assert "Example CPU 9000, 2 cores; with avx2 fma; no GPU: the notebooks ran on the CPU" in page
    assert str(run_dir) not in page  # the run's folder on this machine is no one else's
    assert "{&quot;n_sentences&quot;: 4}" in page and "{&quot;layer&quot;: 3}" in page  # run-wide, per notebook

    assert "<script" not in page.lower()
    assert network_references(page) == []
    assert re.findall(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", page) == []


def test_regressions_come_first_and_ok_rows_are_folded(run_dir):
    (run_dir / "check.json").write_text(json.dumps(CHECK))
    page = build_report(run_dir).read_text(encoding="utf-8")
    check = page[page.index('id="check"') : page.index("</section>", page.index('id="check"'))]
    assert "REGRESSIONS" in check and "results/reference" in check and "3 of 4 compared metrics are not ok" in check
    problems = check[: check.index("<details>")]
    rows = re.findall(
        r"<tr><td><span class=\"status status-(\w+)\">.*?</td><td>01_good</td><td>([\w.]+)</td>", problems
    )
    assert rows == [("regressed", "good.score"), ("missing", "good.gone"), ("new", "good.flag")]
    assert "abs 0.01" in problems and ">0.5<" in problems
    assert "good.count" in check[check.index("<details>") :]
    assert page.index('id="check"') < page.index('id="nb-01_good"')


def test_a_passing_check_says_so(run_dir):
    (run_dir / "check.json").write_text(
        json.dumps({"reference": "ref", "ok": True, "differences": CHECK["differences"][3:]})
    )
    page = build_report(run_dir).read_text(encoding="utf-8")
    assert "<strong>OK</strong>: every compared metric is within tolerance" in page
    assert "REGRESSIONS" not in page


def test_versions_that_differ_from_the_references_are_shown_with_the_check(run_dir):
    versions = {
        "differences": [
            {"name": "transformers", "reference": "5.23.0", "value": "5.24.0", "notebooks": ["01_good", "02_broken"]},
            {"name": "numpy", "reference": "2.4.5", "value": "2.4.6", "notebooks": ["02_broken"]},
        ],
        "compared": ["01_good", "02_broken"],
        "unknown": ["03_old"],
    }
    (run_dir / "check.json").write_text(json.dumps({**CHECK, "versions": versions}))
    page = build_report(run_dir).read_text(encoding="utf-8")
    check = page[page.index('id="check"') : page.index("</section>", page.index('id="check"'))]
    assert "<strong>VERSIONS DIFFER</strong>" in check and "REGRESSIONS" in check
    assert "<tr><td>transformers</td><td>5.23.0</td><td>5.24.0</td><td>all</td></tr>" in check
    assert "<tr><td>numpy</td><td>2.4.5</td><td>2.4.6</td><td>02_broken</td></tr>" in check
    assert "Versions unknown for 03_old" in check
    assert check.index("VERSIONS DIFFER") < check.index('class="check-problems"')  # above the regressions
    # Versions that agree, or a check.json from before versions were recorded: nothing is said.
    for quiet in ({**CHECK, "versions": {"differences": [], "compared": ["01_good"], "unknown": []}}, CHECK):
        (run_dir / "check.json").write_text(json.dumps(quiet))
        page = build_report(run_dir).read_text(encoding="utf-8")
        assert "VERSIONS DIFFER" not in page and "Versions unknown" not in page


def test_a_check_against_references_made_with_another_torch_warns_in_the_report(run_dir, tmp_path, capsys):
    """End to end: bertology check writes the mismatch to check.json, the report shows it."""
    metrics = json.loads((run_dir / "01_good" / "metrics.json").read_text())
    reference = {
        "versions": {"python": "3.11.7", "torch": "2.12.0+cpu", "transformers": "5.23.0"},
        "metrics": {name: {"value": value} for name, value in metrics.items()},
    }
    (tmp_path / "refs").mkdir()
    (tmp_path / "refs" / "01_good.json").write_text(json.dumps(reference))
    assert main(["check", str(run_dir), str(tmp_path / "refs")]) == 0  # a warning, not a failure
    assert capsys.readouterr().out.startswith("WARNING: versions differ")
    assert json.loads((run_dir / "check.json").read_text())["versions"]["differences"] == [
        {"name": "torch", "reference": "2.12.0+cpu", "value": "2.13.0+cpu", "notebooks": ["01_good"]}
    ]
    page = build_report(run_dir).read_text(encoding="utf-8")
    assert (
        "VERSIONS DIFFER" in page
        and "<tr><td>torch</td><td>2.12.0+cpu</td><td>2.13.0+cpu</td><td>all</td></tr>" in page
    )


def test_claims_come_from_claims_json(run_dir):
    good = run_dir / "01_good"
    assert "<td>0.03</td>" in claims_html(good)
    assert claims_html(run_dir / "02_broken") == ""  # no claims recorded
    (good / "claims.json").write_text(json.dumps({"claims": [{"key": "x", "id": "a b"}]}))
    with pytest.raises(DataFormatError, match="claims.json"):
        claims_html(good)


def test_the_claims_table_shows_each_claims_interval_and_seeds(tmp_path):
    uncertain = Claim(
        "heads_prunable",
        "Many heads can be pruned",
        "Michel et al. 2019",
        "40%",
        "25%",
        Verdict.INCONCLUSIVE,
        "interval of the share above 0.3",
        interval=Interval(0.12, 0.4, method="bootstrap over 72 heads"),
        seeds=Seeds(2, 3),
    )
    untestable = Claim(  # an interval that was not finite is recorded with null bounds (JSON has no NaN)
        "no_data",
        "Something",
        "Michel et al. 2019",
        "1",
        "n/a",
        Verdict.NOT_TESTABLE,
        "r",
        interval=Interval(float("nan"), float("nan"), method="bootstrap over 0 heads"),
    )
    record_claims([CLAIM, uncertain, untestable], "good.claims", output_dir=tmp_path, declared=None)
    table = BeautifulSoup(claims_html(tmp_path), "html.parser")
    header = [th.get_text() for th in table.select("thead th")]
    assert header[4:7] == ["verdict", "interval, seeds", "rule"]
    cells = [[td.get_text() for td in tr.select("td")] for tr in table.select("tbody tr")]
    column = header.index("interval, seeds")
    assert [row[column] for row in cells] == [
        "",  # CLAIM has neither: an empty cell, not "None"
        "95% CI [0.12, 0.4] (bootstrap over 72 heads); holds in 2 of 3 seeds",
        "no 95% interval (bootstrap over 0 heads)",
    ]
    assert "None" not in claims_html(tmp_path)
    assert table.select_one(".status-inconclusive").get_text() == "inconclusive"


def test_every_verdict_has_a_colour_of_its_own():
    from bertology_utils.present.report import _CSS

    assert all(f".status-{v.value.replace(' ', '-')} {{" in _CSS for v in Verdict)


def test_folders_without_run_json_and_bad_input(tmp_path, run_dir, monkeypatch, capsys):
    (run_dir / "run.json").unlink()
    page = build_report(run_dir, tmp_path / "elsewhere" / "r.html").read_text(encoding="utf-8")
    assert page.count("not in run.json") >= 2 and "good.score" in page

    monkeypatch.setenv("BERTOLOGY_RESULTS_DIR", str(run_dir.parent))
    assert main(["report", "lesson"]) == 0  # a run name under the results root
    assert capsys.readouterr().out.strip() == str(run_dir / "report.html")

    (tmp_path / "empty").mkdir()
    with pytest.raises(BertologyError, match="holds no run"):
        build_report(tmp_path / "empty")
    assert main(["report", str(tmp_path / "missing")]) == 2
    assert "no run folder" in capsys.readouterr().err


@pytest.fixture(scope="module")
def tour_run(tmp_path_factory):
    """The tour notebook run once through the harness (small parameters, as tests/notebooks uses)."""
    from bertology_utils.run.harness import DEFAULT_NOTEBOOKS_DIR

    root = tmp_path_factory.mktemp("results")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BERTOLOGY_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        report = run_notebooks(
            [DEFAULT_NOTEBOOKS_DIR / "00_tour.ipynb"],
            run_name="tour",
            parameters={"n_sentences": 4},
            results_root=root,
            progress=False,
        )
    assert report.ok, report.summary()
    return report.run_dir


@pytest.mark.slow
def test_report_and_deck_of_a_real_run(tour_run):
    page = build_report(tour_run).read_text(encoding="utf-8")
    metrics = json.loads((tour_run / "00_tour" / "metrics.json").read_text())
    for name, value in flatten_metrics(metrics).items():
        assert html.escape(name) in page and html.escape(value_for_people(value)) in page, name
    figures = sorted((tour_run / "00_tour" / "figures").glob("*.png"))
    assert figures and page.count('src="data:image/png;base64,') == len(figures)
    # every figure, the views' images included, also as an SVG for slides
    assert {"head_view", "model_view"} <= {p.stem for p in figures}
    assert {p.name for p in slide_figures(tour_run)} == {f"00_tour-{p.stem}.svg" for p in figures}
    assert "Paper vs ours" in page and "<th>verdict</th>" in page
    assert network_references(page) == [] and "<script" not in page

    if not assets.have_assets("reveal", "reveal_css", "reveal_theme", "jquery", "require"):
        pytest.skip("the JavaScript libraries are not installed")
    (deck,) = run_slides(tour_run)
    text = deck.read_text(encoding="utf-8")
    executed = nbformat.read(tour_run / "00_tour" / "00_tour.ipynb", as_version=4)
    authored = [c for c in executed.cells if c.metadata.get("slideshow", {}).get("slide_type") == "slide"]
    # what the deck shows: the authored slides, and the next slides that what did not fit one continues on
    slides = [
        c for c in prepare_for_slides(executed).cells if c.metadata.get("slideshow", {}).get("slide_type") == "slide"
    ]
    soup = BeautifulSoup(text, "html.parser")
    deck_slides = soup.select("div.reveal > div.slides > section")
    assert len(authored) >= 5 and len(deck_slides) == len(slides) >= len(authored)  # one per 'slide' cell
    for cell, section in zip(slides, deck_slides):
        if cell.cell_type == "markdown" and cell.source.startswith("#"):
            title = cell.source.splitlines()[0].lstrip("# ")
            assert section.find(["h1", "h2", "h3"]).get_text().strip().rstrip("¶") == title
    images = sum("image/png" in o.get("data", {}) for c in executed.cells for o in c.get("outputs", []))
    assert len(soup.select('div.slides img[src^="data:image/png;base64,"]')) == images
    assert network_references(text) == [] and "Reveal.initialize(" in text


def test_the_atlas_section_links_the_page_and_shows_the_grid_or_says_how_to_build_it(run_dir, tmp_path):
    soup = BeautifulSoup(build_report(run_dir).read_text(encoding="utf-8"), "html.parser")
    section = soup.select_one("section#atlas")
    assert "bertology atlas RUN" in section.get_text() and "09_atlas" in section.get_text()
    assert section.find("a") is None and section.find("img") is None

    (run_dir / "atlas.html").write_text("<html></html>")
    figures = run_dir / "09_atlas" / "figures"
    figures.mkdir(parents=True)
    (run_dir / "09_atlas" / "metrics.json").write_text(json.dumps({"atlas.n_heads": 6}))
    Image.new("RGB", (4, 3)).save(figures / "atlas_grid.png")
    soup = BeautifulSoup(build_report(run_dir).read_text(encoding="utf-8"), "html.parser")
    section = soup.select_one("section#atlas")
    assert section.find("a")["href"] == "atlas.html"  # relative: the run folder can move
    assert section.find("img")["src"].startswith("data:image/png;base64,")
    elsewhere = build_report(run_dir, tmp_path / "reports" / "r.html")
    link = BeautifulSoup(elsewhere.read_text(encoding="utf-8"), "html.parser").select_one("section#atlas a")["href"]
    assert (elsewhere.parent / link).resolve() == (run_dir / "atlas.html").resolve() and not link.startswith("/")
