"""Fixtures for tests in a real browser: Debian Chromium driven by Playwright, JupyterLab on loopback.

Chromium is installed with apt-get when it is missing and this process may do so (root, apt-get on
PATH; set BERTOLOGY_NO_APT=1 to forbid it). When Chromium or Playwright cannot be had, the tests
are skipped with the reason (pytest prints skip reasons: ``-rs`` is in the project's pytest options).
Every page runs offline: any request that leaves the machine is aborted and recorded, and the tests
assert that none was attempted.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from bertology_utils.core.cache import cache_lock
from bertology_utils.run.results import results_dir

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
#: Screenshots and pages the browser tests leave for a human to look at.
ARTIFACTS_DIR = results_dir() / "test-artifacts" / "browser"


def _find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _install_chromium() -> str:
    """apt-get install chromium, or an empty string with why it could not be done."""
    if os.environ.get("BERTOLOGY_NO_APT") == "1":
        return "BERTOLOGY_NO_APT=1 forbids installing it"
    if shutil.which("apt-get") is None:
        return "apt-get is not available to install it"
    if os.geteuid() != 0:
        return "installing it needs root (apt-get install chromium)"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "chromium"]):
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            return f"`{' '.join(cmd)}` failed: {done.stderr.strip().splitlines()[-1:]}"
    return ""


@pytest.fixture(scope="session")
def chromium_path(tmp_path_factory) -> str:
    path = _find_chromium()
    if path is None:
        # Test processes side by side (pytest -n) would run apt-get together: one installs, the others wait.
        with cache_lock(tmp_path_factory.getbasetemp().parent / "chromium-install"):
            path = _find_chromium()
            why = "" if path else _install_chromium()
        path = _find_chromium()
        if path is None:
            pytest.skip(f"browser tests need Chromium, which is not installed: {why or 'apt-get gave no chromium'}")
    return path


@pytest.fixture(scope="session")
def browser(chromium_path):
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="browser tests need playwright (pip install playwright)"
    )
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


class OfflinePage:
    """A page whose requests off this machine are aborted and recorded in ``blocked``."""

    LOCAL = ("file:", "data:", "blob:", "about:", "http://127.0.0.1", "ws://127.0.0.1")

    def __init__(self, browser):
        self.context = browser.new_context(viewport={"width": 1400, "height": 1000})
        self.blocked: list[str] = []
        self.errors: list[str] = []
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))

    def _route(self, route):
        url = route.request.url
        if url.startswith(self.LOCAL):
            route.continue_()
        else:
            self.blocked.append(url)
            route.abort()

    def screenshot(self, name: str) -> Path:
        ARTIFACTS_DIR.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS_DIR / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path


@pytest.fixture
def offline_page(browser):
    page = OfflinePage(browser)
    yield page
    page.context.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def browser_env(tmp_path_factory):
    """Offline settings and a cache of their own for the kernels and runs these tests start."""
    env = dict(
        os.environ,
        BERTOLOGY_OFFLINE="1",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        BERTOLOGY_CACHE_DIR=str(tmp_path_factory.mktemp("browser-cache")),
    )
    return env


@pytest.fixture(scope="session")
def jupyterlab(tmp_path_factory, browser_env, chromium_path):
    """A JupyterLab server on loopback, a free port and a token, serving a fresh folder; stopped at the end."""
    root = tmp_path_factory.mktemp("lab")
    port, token = _free_port(), secrets.token_hex(16)
    cmd = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--allow-root",
        f"--port={port}",
        "--ServerApp.ip=127.0.0.1",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        "--LabApp.expose_app_in_browser=True",
        "--ServerApp.port_retries=0",
    ]
    log = (root / "jupyterlab.log").open("w")
    server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=browser_env, cwd=root)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"JupyterLab did not start; see {root / 'jupyterlab.log'}:\n"
                        + (root / "jupyterlab.log").read_text()[-2000:]
                    ) from None
                time.sleep(0.5)
        yield {"url": url, "token": token, "root": root}
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


@pytest.fixture(scope="session")
def tour_run(small_runs):
    """The tour's run with the test suite's small parameters (the notebook tests' own): its run folder, the cache
    it used, its deck and report."""
    from bertology_utils.present.report import build_report
    from bertology_utils.present.slides import notebook_to_slides

    result = small_runs.get("00_tour")
    assert result.ok, result.describe_error()
    run = small_runs.run_dir("00_tour")
    return {
        "run": run,
        "cache": small_runs.cache_dir(),
        "deck": notebook_to_slides(run / "00_tour" / "00_tour.ipynb"),
        "report": build_report(run),
    }
