"""JupyterLab in a real browser: the tour notebook runs and its interactive views draw, offline."""

import json

import papermill
import pytest
from atlas_checks import rgb

from bertology_utils.core import settings
from bertology_utils.present.atlas_view import BOOL_COLOURS
from bertology_utils.run import regression
from bertology_utils.run.harness import DEFAULT_NOTEBOOKS_DIR

pytestmark = [pytest.mark.slow, pytest.mark.browser]

#: True once the open notebook's kernel is idle and every code cell ran; throws on an error output.
ALL_CELLS_RAN = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  if (!panel || !panel.content || !panel.sessionContext.session) return false;
  const cells = panel.content.widgets.filter(c => c.model.type === 'code');
  for (const [i, c] of cells.entries()) {
    const error = c.model.outputs.toJSON().find(o => o.output_type === 'error');
    if (error) throw new Error(`code cell ${i} failed: ${error.ename}: ${error.evalue}`);
  }
  const kernel = panel.sessionContext.session.kernel;
  return kernel && kernel.status === 'idle' && cells.every(c => c.model.executionCount !== null);
}"""


def _open_lab(offline_page, jupyterlab, path="", workspace=None):
    page = offline_page.page
    where = f"workspaces/{workspace}/tree" if workspace else "tree"
    page.goto(f"{jupyterlab['url']}/lab/{where}/{path}?token={jupyterlab['token']}")
    page.wait_for_function("() => window.jupyterapp !== undefined", timeout=60_000)
    page.wait_for_selector("#jp-main-dock-panel", timeout=60_000)
    return page


def test_jupyterlab_opens_offline(jupyterlab, offline_page):
    _open_lab(offline_page, jupyterlab)
    assert offline_page.blocked == [], f"JupyterLab tried the network: {offline_page.blocked}"


@pytest.fixture(scope="module")
def tour_notebook(jupyterlab):
    """The tour with the test suite's small parameters injected (papermill, not executed)."""
    small = regression.read_reference(settings.PROJECT_ROOT / "tests" / "references" / "small" / "00_tour.json")
    path = jupyterlab["root"] / "tour.ipynb"
    params = dict(small.parameters, output_dir=str(jupyterlab["root"] / "tour-results"))
    papermill.execute_notebook(
        DEFAULT_NOTEBOOKS_DIR / "00_tour.ipynb",
        path,
        parameters=params,
        prepare_only=True,
        kernel_name="python3",
        progress_bar=False,
    )
    return path


def test_tour_runs_in_jupyterlab_and_its_views_draw(jupyterlab, offline_page, tour_notebook):
    page = _open_lab(offline_page, jupyterlab, tour_notebook.name)
    page.wait_for_function(
        "() => { const p = window.jupyterapp.shell.currentWidget;"
        " return p && p.sessionContext && p.sessionContext.isReady; }",
        timeout=60_000,
    )
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    page.wait_for_function(ALL_CELLS_RAN, timeout=300_000, polling=1000)
    # Outputs are attached lazily as they scroll into view: render them all before looking.
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:render-all-markdown')")
    page.keyboard.press("End")

    head = page.locator(".bertology-head-view").first
    head.scroll_into_view_if_needed()
    page.wait_for_function(
        "() => document.querySelectorAll('.bertology-head-view svg #attention line').length > 0", timeout=30_000
    )
    layers = page.locator(".bertology-head-view select#layer option").count()
    model = page.locator(".bertology-model-view").first
    model.scroll_into_view_if_needed()
    page.wait_for_function(
        "() => document.querySelectorAll('.bertology-model-view svg rect.attn_background').length > 0", timeout=30_000
    )
    thumbnails = page.locator(".bertology-model-view svg rect.attn_background").count()
    # One layer option per layer and one thumbnail per head of every layer: shapes from the model itself.
    metrics = json.loads((jupyterlab["root"] / "tour-results" / "metrics.json").read_text())
    n_layers, n_heads = metrics["tour.num_layers"], metrics["tour.num_heads"]
    assert layers == n_layers
    assert thumbnails == n_layers * n_heads

    explorer = page.locator(".bertology-explorer").first
    explorer.scroll_into_view_if_needed()
    image = explorer.locator("img").first
    image.wait_for(timeout=30_000)
    before = image.get_attribute("src")
    slider = explorer.locator(".slider-container .noUi-handle, .widget-slider input[type=range]").first
    slider.focus()
    page.keyboard.press("ArrowRight")  # the next layer (or head): the kernel redraws the map
    page.wait_for_function(
        "(before) => { const i = document.querySelector('.bertology-explorer img');"
        " return i && i.getAttribute('src') !== before; }",
        arg=before,
        timeout=30_000,
    )
    offline_page.screenshot("jupyterlab-tour")
    assert offline_page.blocked == [], f"the tour tried the network: {offline_page.blocked}"
    assert not [e for e in offline_page.errors if "require" in e], offline_page.errors


def test_the_atlas_widget_renders_and_opens_a_heads_card(jupyterlab, offline_page):
    """A small run's atlas (2 layers x 3 heads): the grid draws, a column recolours it, a click opens the card."""
    import nbformat

    run = jupyterlab["root"] / "atlas-run"
    shape = {"layers": 2, "heads": 3, "model": "tiny-model"}
    grids = {
        "06_pruning": {"pruning.SST-2.importance": [[0.1, 0.9, 0.2], [0.5, 0.3, 0.7]]},
        "07_head_roles": {"head_roles.specialised": [[True, False, False], [False, True, True]]},
    }
    for stem, values in grids.items():
        topic = next(iter(values)).split(".")[0]
        (run / stem).mkdir(parents=True, exist_ok=True)
        metrics = {**{f"{topic}.{k}": v for k, v in shape.items()}, **values}
        (run / stem / "metrics.json").write_text(json.dumps(metrics))
    source = f"from bertology_utils.present.atlas import build_atlas\nbuild_atlas({str(run)!r}).show()"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, jupyterlab["root"] / "atlas.ipynb")

    # a workspace of its own: the default one reopens the tour notebook of the test before, which could
    # then be the current widget that "run all" and ALL_CELLS_RAN act on
    page = _open_lab(offline_page, jupyterlab, "atlas.ipynb", workspace="atlas")
    page.wait_for_function(
        "() => { const p = window.jupyterapp.shell.currentWidget;"
        " return p && p.context && p.context.path === 'atlas.ipynb' && p.sessionContext"
        " && p.sessionContext.isReady; }",
        timeout=60_000,
    )
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    page.wait_for_function(ALL_CELLS_RAN, timeout=120_000, polling=500)
    heads = page.locator(".bertology-atlas .bertology-atlas-head")
    heads.first.wait_for(timeout=30_000)
    assert heads.count() == 6

    def colours():
        return [heads.nth(i).evaluate("b => getComputedStyle(b).backgroundColor") for i in range(6)]

    before = colours()
    assert len(set(before)) == 6  # importance: six values, six shades
    page.locator(".bertology-atlas select").first.select_option(index=1)  # specialised: yes / no
    # each button is a widget of its own and its new colour arrives in a message of its own: wait for the last,
    # not the first (the grid is briefly part importance, part yes / no)
    yes, no = (rgb(BOOL_COLOURS[v]) for v in (True, False))
    expected = [yes, no, no, no, yes, yes]
    page.wait_for_function(
        "(expected) => { const b = [...document.querySelectorAll('.bertology-atlas .bertology-atlas-head')];"
        " return b.map(x => getComputedStyle(x).backgroundColor).join() === expected.join(); }",
        arg=expected,
        timeout=30_000,
    )
    assert colours() == expected
    heads.nth(4).click()  # layer 2, head 2
    page.locator(".bertology-atlas", has_text="Layer 2, head 2").first.wait_for(timeout=30_000)
    assert page.locator(".bertology-atlas table").first.is_visible()
    offline_page.screenshot("jupyterlab-atlas")
    assert offline_page.blocked == [], f"the atlas tried the network: {offline_page.blocked}"
