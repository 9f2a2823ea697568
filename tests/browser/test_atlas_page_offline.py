"""The head atlas page in a real browser from file://, offline: the column menu recolours the grids, a click
opens a head's card, filters mark exactly the heads the documented semantics pick, and the URL hash
brings the whole view back."""

import pytest
from atlas_checks import rgb
from atlas_payloads import reference_query, synthetic_payload

from bertology_utils.present import render_atlas_page

pytestmark = pytest.mark.browser

CELLS = """() => Array.from(document.querySelectorAll('.cell')).map(c => ({
    run: c.dataset.run, layer: +c.dataset.layer, head: +c.dataset.head, value: c.dataset.value,
    color: getComputedStyle(c).backgroundColor, match: c.classList.contains('match')}))"""


def expected_value(v) -> str:
    if v is None:
        return ""
    return str(v).lower() if isinstance(v, bool) else str(v)


def test_the_atlas_page_offline(tmp_path, offline_page):
    payload = synthetic_payload(((2, 3), (3, 2)))
    rows = payload["rows"]
    row_of = {(r, la, h): i for i, (r, la, h) in enumerate(zip(rows["run"], rows["layer"], rows["head"], strict=True))}
    path = tmp_path / "atlas.html"
    path.write_text(render_atlas_page(payload), encoding="utf-8")
    page = offline_page.page
    page.goto(path.as_uri())
    page.wait_for_selector(".cell")

    # Both runs' grids, their shapes, and the first run's missing sections said out loud.
    cells = page.evaluate(CELLS)
    assert {(c["run"], c["layer"], c["head"]) for c in cells} == set(row_of)
    assert "Not in this run: coref because GAP data missing." in page.locator('.run[data-run="r0"]').inner_text()
    assert page.locator("#atlas-column optgroup").count() == 3

    # Choosing a column recolours the grids; every cell carries its head's value; the ends of the scale
    # get the colormap's ends and a missing value no colour of the map.
    before = {(c["run"], c["layer"], c["head"]): c["color"] for c in cells}
    page.select_option("#atlas-column", "syntax.other")
    cells = page.evaluate(CELLS)
    values = rows["values"]["syntax.other"]
    present = [v for v in values if v is not None]
    for c in cells:
        v = values[row_of[(c["run"], c["layer"], c["head"])]]
        assert c["value"] == expected_value(v)
        if v == min(present):
            assert c["color"] == rgb(payload["colormap"][0])
        elif v == max(present):
            assert c["color"] == rgb(payload["colormap"][-1])
        elif v is None:
            assert c["color"] not in {rgb(h) for h in payload["colormap"]}
    assert any(before[(c["run"], c["layer"], c["head"])] != c["color"] for c in cells)
    assert "accuracy of the head's best dependency relation" in page.locator("#atlas-column-info").inner_text()
    page.select_option("#atlas-column", "syntax.flag")
    assert [c["value"] for c in page.evaluate(CELLS)] == [
        expected_value(rows["values"]["syntax.flag"][row_of[(c["run"], c["layer"], c["head"])]]) for c in cells
    ]

    # A click opens the head's card with its values, its nearest heads and its match in the other run.
    page.click('.cell[data-run="r1"][data-layer="3"][data-head="2"]')
    card = page.locator("#atlas-card")
    assert card.is_visible() and card.locator("h2").inner_text() == "Layer 3, head 2"
    assert "shuffled" in card.inner_text()
    i = row_of[("r1", 3, 2)]
    assert "Nothing singles this head out" in card.locator(".stands-out").inner_text()  # 6 heads: too few to rank
    assert card.locator("details.values table").is_hidden()  # the values are one click away
    card.locator("details.values summary").click()
    assert card.locator("details.values table").is_visible()
    assert card.locator("table.values th").all_inner_texts()[:3] == ["column", "value", "unit"]  # no paper column
    score = rows["values"]["importance.score"][i]
    assert card.locator('tr[data-column="importance.score"] td.ours').inner_text() == f"{score:.3g}"
    assert card.locator('tr[data-column="syntax.flag"] td.ours').inner_text() == (
        "yes" if rows["values"]["syntax.flag"][i] else "no"
    )
    assert "no attention maps were saved" in card.inner_text()
    card.locator('.matches .head-link[data-run="r0"]').click()
    assert card.locator("h2").inner_text() == "Layer 2, head 2"
    assert card.locator("canvas.map").count() == 3  # mean map and two examples
    assert "holds" in card.locator(".claims").inner_text()

    # Filters: the top half of each run by score (ties at the threshold in) AND flag true, exactly as the
    # reference picks them.
    filters = [("importance.score", "top", "50"), ("syntax.flag", "eq", "true")]
    for column, op, text in filters:
        page.select_option("#atlas-filter-column", column)
        page.select_option("#atlas-filter-op", op)
        page.fill("#atlas-filter-value", text)
        page.click("#atlas-filter-add")
    expected = reference_query(payload, filters)
    top = reference_query(payload, filters[:1])
    assert len(top) > len(row_of) / 2 and top > expected != set()  # ties count; the second condition narrows
    marked = {(c["run"], c["layer"], c["head"]) for c in page.evaluate(CELLS) if c["match"]}
    assert marked == expected
    assert page.locator("#atlas-count").inner_text() == f"{len(expected)} of {len(row_of)} heads match"
    offline_page.screenshot("atlas")

    # The hash holds the view: a reload brings back the column, the filters and the card.
    url = page.url
    assert "color=syntax.flag" in url and "filter=importance.score~top~50" in url and "card=r0:2-2" in url
    page.reload()
    page.wait_for_selector(".cell")
    assert page.locator("#atlas-column").input_value() == "syntax.flag"
    assert page.locator("#atlas-filter-list li").count() == 2
    assert {(c["run"], c["layer"], c["head"]) for c in page.evaluate(CELLS) if c["match"]} == expected
    assert page.locator("#atlas-card h2").inner_text() == "Layer 2, head 2"
    assert page.url == url

    assert offline_page.blocked == [], f"the atlas tried the network: {offline_page.blocked}"
    assert offline_page.errors == []


def test_a_partial_atlas_says_what_is_missing(tmp_path, offline_page):
    payload = synthetic_payload(((2, 3), (3, 2)))
    rows = payload["rows"]
    keep = [i for i, run in enumerate(rows["run"]) if run == "r0"]  # the second run has no results
    for name in ("run", "layer", "head"):
        rows[name] = [rows[name][i] for i in keep]
    rows["values"] = {column: [values[i] for i in keep] for column, values in rows["values"].items()}
    page = offline_page.page
    path = tmp_path / "partial.html"
    path.write_text(render_atlas_page(payload), encoding="utf-8")
    page.goto(path.as_uri() + "#color=syntax.other")
    page.wait_for_selector(".cell")
    assert "This run has no per-head results" in page.locator('.run[data-run="r1"]').inner_text()
    missing = page.locator('.run[data-run="r0"] .cell.missing')
    assert missing.count() == sum(v is None for v in rows["values"]["syntax.other"]) > 0
    assert missing.first.inner_text() == "–"

    # Nothing at all still opens, and says so rather than throwing.
    path.write_text(render_atlas_page({"version": 1, "title": "Empty"}), encoding="utf-8")
    page.goto(path.as_uri())
    assert page.locator("h1").inner_text() == "Empty"
    assert "no runs to show" in page.locator("#atlas-runs").inner_text()
    assert offline_page.blocked == [] and offline_page.errors == []


def test_the_page_of_a_built_atlas_shows_its_table(tmp_path, offline_page):
    """From two synthetic runs through build_atlas and Atlas.write: the cells carry the table's values,
    the filters mark the heads Atlas.query returns, a click opens the head's card."""
    from atlas_checks import make_run

    from bertology_utils.present.atlas import build_atlas

    atlas = build_atlas(make_run(tmp_path, "a"), make_run(tmp_path, "b", layers=3, heads=4, seed=2))
    page_path = atlas.write(tmp_path / "out")["page"]
    ids = {run.name: run.id for run in atlas.runs}
    filters = ["importance.SST-2~top~50", "specialised~eq~true"]
    page = offline_page.page
    page.goto(page_path.as_uri() + "#filter=" + "&filter=".join(filters))
    page.wait_for_selector(".cell")
    page.select_option("#atlas-column", "confidence")
    by_head = {(ids[r], la, h): v for r, la, h, v in atlas.table[["run", "layer", "head", "confidence"]].values}
    cells = page.evaluate(CELLS)
    assert len(cells) == len(atlas.table)
    for c in cells:
        value = by_head[(c["run"], c["layer"], c["head"])]
        assert (c["value"] == "") if value != value else float(c["value"]) == value
    picked = atlas.table[atlas.query(filters)]
    assert {(c["run"], c["layer"], c["head"]) for c in cells if c["match"]} == {
        (ids[r], la, h) for r, la, h in zip(picked["run"], picked["layer"], picked["head"])
    }
    page.click('.cell[data-run="r1"][data-layer="3"][data-head="4"]')
    assert page.locator("#atlas-card h2").inner_text() == "Layer 3, head 4"
    assert page.locator("#atlas-card canvas.map").count() == 3  # the mean map and two example sentences
    assert offline_page.blocked == [] and offline_page.errors == []


def stands_out(payload: dict, run: str, layer: int, head: int) -> str:
    """The card's line, by its documented rule: the numeric columns on which the head is among the highest 5% of
    its run's heads (at least the first; heads tied with it count), highest first, three at most."""
    rows = payload["rows"]
    members = [k for k, r in enumerate(rows["run"]) if r == run]
    i = next(k for k in members if (rows["layer"][k], rows["head"][k]) == (layer, head))
    found = []
    for spec in payload["columns"]:
        v = rows["values"][spec["name"]][i]
        others = [rows["values"][spec["name"]][k] for k in members]
        others = [x for x in others if isinstance(x, (int, float)) and not isinstance(x, bool)]
        if spec["kind"] != "number" or v is None or len(others) < 8:
            continue
        rank = sum(x >= v for x in others)
        if rank <= max(1, int(0.05 * len(others))):
            shown = f"{v:.3g}" if v != int(v) else str(int(v))
            found.append(
                (
                    rank / len(others),
                    f"{spec['label']} {shown} ({f'top {rank}' if rank > 1 else 'highest'} of {len(others)})",
                )
            )
    found.sort(key=lambda f: f[0])
    return "Stands out for " + "; ".join(text for _, text in found[:3]) + "." if found else ""


def test_the_card_says_what_singles_a_head_out(tmp_path, offline_page):
    payload = synthetic_payload(((5, 8),), seed=3)
    rows = payload["rows"]
    path = tmp_path / "atlas.html"
    path.write_text(render_atlas_page(payload), encoding="utf-8")
    page = offline_page.page
    page.goto(path.as_uri())
    page.wait_for_selector(".cell")
    scores = rows["values"]["importance.score"]
    # a head alone at the top of the scores stands out for them (the rounded scores tie often: pick an untied top)
    top = max(range(len(scores)), key=lambda k: (scores.count(scores[k]) == 1, scores[k]))
    heads = [(rows["layer"][top], rows["head"][top]), (1, 1), (5, 8)]
    for layer, head in heads:
        page.click(f'.cell[data-run="r0"][data-layer="{layer}"][data-head="{head}"]')
        line = page.locator("#atlas-card .stands-out").inner_text()
        expected = stands_out(payload, "r0", layer, head)
        assert line == expected if expected else line.startswith("Nothing singles"), (line, expected)
    page.click(f'.cell[data-run="r0"][data-layer="{heads[0][0]}"][data-head="{heads[0][1]}"]')
    assert "importance (score)" in page.locator("#atlas-card .stands-out").inner_text()
    assert offline_page.errors == []


def test_the_atlas_page_is_presentable(tmp_path, offline_page):
    """A built atlas's page, with a head's card open: no NaN, repr, path or cut number shown, no overlaps."""
    from atlas_checks import make_run
    from deck_checks import assert_presentable

    from bertology_utils.present.atlas import build_atlas

    atlas = build_atlas(make_run(tmp_path, "a"), make_run(tmp_path, "b", layers=3, heads=4, seed=2))
    page = offline_page.page
    page.goto(atlas.write(tmp_path / "out")["page"].as_uri())
    page.wait_for_selector(".cell")
    page.click('.cell[data-run="r1"][data-layer="3"][data-head="4"]')
    assert_presentable(page, slides=False)
