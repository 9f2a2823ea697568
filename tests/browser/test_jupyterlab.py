"""JupyterLab in a real browser: the tour notebook runs and its interactive views draw, offline."""
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.browser]


def test_jupyterlab_opens_offline(jupyterlab, offline_page):
    page = offline_page.page
    page.goto(f"{jupyterlab['url']}/lab?token={jupyterlab['token']}")
    page.wait_for_function("() => window.jupyterapp !== undefined && window.jupyterapp.started !== undefined",
                           timeout=60_000)
    page.wait_for_selector("#jp-main-dock-panel", timeout=60_000)
    assert offline_page.blocked == [], f"JupyterLab tried the network: {offline_page.blocked}"
