"""Third-party JavaScript for offline views: bertviz, widget state, reveal.js slides, MathJax.

The libraries come from the npm registry at install time (``package.json`` pins them;
``make setup`` runs ``npm ci``) and are inlined into notebooks and HTML files, so the
views draw with no network. Nothing third-party is committed. Where they are not
installed, a page may point at the CDN instead (with a warning) unless the user is
offline, in which case :class:`~bertology_utils.core.errors.AssetMissingError` says how to
install them.

Lookup order for the ``node_modules`` folder: ``$BERTOLOGY_JS_DIR``, the checkout's own
``node_modules/`` (editable installs), then ``<cache>/js/node_modules``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import warnings
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from bertology_utils.core import settings
from bertology_utils.core.errors import AssetMissingError

__all__ = [
    "JS_DIR_ENV",
    "Asset",
    "ASSETS",
    "INSTALL_HINT",
    "node_modules_candidates",
    "asset_path",
    "asset_text",
    "have_assets",
    "source_or_cdn",
    "script_tag",
    "inline_script",
    "style_tag",
    "install",
]

#: Environment variable naming a ``node_modules`` folder that holds the libraries.
JS_DIR_ENV = "BERTOLOGY_JS_DIR"


@dataclass(frozen=True)
class Asset:
    package: str  #: npm package
    version: str  #: pinned version (package.json says the same)
    file: str  #: path inside the package
    cdn: str  #: the same file on a CDN, for online users without npm


ASSETS = {
    "require": Asset(
        "requirejs", "2.3.8", "require.js", "https://cdnjs.cloudflare.com/ajax/libs/require.js/2.3.6/require.min.js"
    ),
    "d3": Asset("d3", "5.16.0", "dist/d3.min.js", "https://cdnjs.cloudflare.com/ajax/libs/d3/5.16.0/d3.min.js"),
    "jquery": Asset(
        "jquery", "2.2.4", "dist/jquery.min.js", "https://cdnjs.cloudflare.com/ajax/libs/jquery/2.2.4/jquery.min.js"
    ),
    "reveal": Asset("reveal.js", "4.6.0", "dist/reveal.js", "https://unpkg.com/reveal.js@4.6.0/dist/reveal.js"),
    "reveal_css": Asset("reveal.js", "4.6.0", "dist/reveal.css", "https://unpkg.com/reveal.js@4.6.0/dist/reveal.css"),
    "reveal_theme": Asset(
        "reveal.js", "4.6.0", "dist/theme/simple.css", "https://unpkg.com/reveal.js@4.6.0/dist/theme/simple.css"
    ),
    "widgets": Asset(
        "@jupyter-widgets/html-manager",
        "1.0.6",
        "dist/embed-amd.js",
        "https://cdn.jsdelivr.net/npm/@jupyter-widgets/html-manager@1.0.6/dist/embed-amd.js",
    ),
    # SVG output: no web fonts to fetch, so LaTeX renders offline from this one file.
    "mathjax": Asset("mathjax", "3.2.2", "es5/tex-svg.js", "https://cdn.jsdelivr.net/npm/mathjax@3.2.2/es5/tex-svg.js"),
    # The documentation site's search from disk: a browser runs no web worker for a file:// page, this shim does.
    "search_shim": Asset(
        "iframe-worker", "1.0.4", "shim/index.js", "https://unpkg.com/iframe-worker@1.0.4/shim/index.js"
    ),
    # The decks' presenting tools: speaker notes (``s``), the chalkboard (``b``, ``c``) and the slide menu (``m``).
    "reveal_notes": Asset(
        "reveal.js", "4.6.0", "plugin/notes/notes.js", "https://unpkg.com/reveal.js@4.6.0/plugin/notes/notes.js"
    ),
    "chalkboard": Asset(
        "reveal.js-plugins",
        "4.6.0",
        "chalkboard/plugin.js",
        "https://unpkg.com/reveal.js-plugins@4.6.0/chalkboard/plugin.js",
    ),
    "chalkboard_css": Asset(
        "reveal.js-plugins",
        "4.6.0",
        "chalkboard/style.css",
        "https://unpkg.com/reveal.js-plugins@4.6.0/chalkboard/style.css",
    ),
    "menu": Asset("reveal.js-menu", "2.1.0", "menu.js", "https://unpkg.com/reveal.js-menu@2.1.0/menu.js"),
    "menu_css": Asset("reveal.js-menu", "2.1.0", "menu.css", "https://unpkg.com/reveal.js-menu@2.1.0/menu.css"),
    # The icons of the menu and the chalkboard's buttons (its web fonts are inlined beside it, see slides.py).
    "fontawesome_css": Asset(
        "reveal.js-menu",
        "2.1.0",
        "font-awesome/css/all.css",
        "https://unpkg.com/reveal.js-menu@2.1.0/font-awesome/css/all.css",
    ),
}

INSTALL_HINT = (
    "install them with `make setup` or `npm ci` in the repository (needs npm), "
    f"or `bertology assets --install`; or point ${JS_DIR_ENV} at a node_modules folder that has them"
)


def node_modules_candidates() -> list[Path]:
    """Where the libraries are looked for, in order."""
    found = [Path(os.environ[JS_DIR_ENV]).expanduser()] if os.environ.get(JS_DIR_ENV) else []
    return found + [settings.PROJECT_ROOT / "node_modules", settings.cache_dir() / "js" / "node_modules"]


def asset_path(name: str) -> Path | None:
    """The installed file of asset ``name``, or None when it is not installed."""
    asset = ASSETS[name]
    for root in node_modules_candidates():
        path = root / asset.package / asset.file
        if path.is_file():
            return path
    return None


@cache
def _read(path: Path, mtime: float) -> str:  # keyed on mtime: a reinstall is picked up
    return path.read_text(encoding="utf-8")


def asset_text(name: str) -> str:
    """The installed file's text; raises :class:`AssetMissingError` when it is not installed."""
    path = asset_path(name)
    if path is None:
        where = ", ".join(str(p) for p in node_modules_candidates())
        raise AssetMissingError(
            f"{ASSETS[name].package}@{ASSETS[name].version} is not installed (looked in {where}); " + INSTALL_HINT
        )
    return _read(path, path.stat().st_mtime)


def have_assets(*names: str) -> bool:
    """True when every named asset (all when none named) is installed."""
    return all(asset_path(n) is not None for n in (names or ASSETS))


def source_or_cdn(name: str) -> tuple[str | None, str | None]:
    """``(inline text, None)`` when installed, else ``(None, CDN url)`` with a warning.

    Offline (see :func:`bertology_utils.core.settings.is_offline`) a missing asset raises instead:
    a page that needs the network would silently draw nothing.
    """
    if asset_path(name) is not None:
        return asset_text(name), None
    if settings.is_offline():
        asset_text(name)  # raises with the install hint
    warnings.warn(
        f"{ASSETS[name].package} is not installed; the page will load it from {ASSETS[name].cdn} "
        f"and will not draw offline ({INSTALL_HINT})",
        stacklevel=2,
    )
    return None, ASSETS[name].cdn


def script_tag(name: str) -> str:
    """A ``<script>`` element with the library inlined, or pointing at its CDN (see :func:`source_or_cdn`)."""
    text, url = source_or_cdn(name)
    if text is None:
        return f'<script src="{url}"></script>'
    return inline_script(text)


def inline_script(text: str) -> str:
    """A ``<script>`` element holding ``text`` (a library's or a patched copy of one)."""
    # "</script" inside a library would end the element early; "<\/script" is the same string to JS.
    return "<script>\n" + text.replace("</script", "<\\/script") + "\n</script>"


def style_tag(name: str) -> str:
    """A ``<style>`` element with the stylesheet inlined, or a ``<link>`` to its CDN."""
    text, url = source_or_cdn(name)
    return f'<link rel="stylesheet" href="{url}">' if text is None else f"<style>\n{text}\n</style>"


def install(target: Path | None = None) -> Path:
    """Install the pinned libraries with npm into ``target`` (default ``<cache>/js``); returns node_modules."""
    npm = shutil.which("npm")
    if npm is None:
        raise AssetMissingError(
            "npm is not on PATH; install Node.js (e.g. `apt-get install npm`) or copy a "
            f"node_modules folder with the libraries and set ${JS_DIR_ENV}"
        )
    target = Path(target) if target is not None else settings.cache_dir() / "js"
    target.mkdir(parents=True, exist_ok=True)
    specs = sorted({f"{a.package}@{a.version}" for a in ASSETS.values()})
    subprocess.run(
        [npm, "install", "--prefix", str(target), "--no-audit", "--no-fund", "--no-save", *specs], check=True
    )
    return target / "node_modules"
