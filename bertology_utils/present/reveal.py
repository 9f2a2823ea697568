"""reveal.js pages that work offline: the library with its presenting tools (speaker view, chalkboard, menu) and
its styles inlined, the script that starts it, and the check that nothing in a page loads from the network.

Decks of notebooks (:mod:`bertology_utils.present.slides`) and the lecture
(:mod:`bertology_utils.present.lecture`) are both built from these parts.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

from bertology_utils.core.errors import BertologyError

__all__ = [
    "SLIDE_SIZE",
    "REVEAL",
    "REVEAL_STYLESHEETS",
    "network_references",
    "reveal_config",
    "reveal_start",
    "presenting_tools",
    "reveal_styles",
    "without_remote_imports",
]

#: Width and height of a slide in CSS pixels (16:9, a projector's shape), before reveal.js scales it to the window.
SLIDE_SIZE = (1280, 720)
#: reveal.js settings.
REVEAL = {"width": SLIDE_SIZE[0], "height": SLIDE_SIZE[1], "margin": 0.04, "transition": "slide", "theme": "simple"}
#: reveal.js's stylesheet and the decks' theme: their assets and their paths in the reveal.js package.
REVEAL_STYLESHEETS = {"reveal_css": "/dist/reveal.css", "reveal_theme": f"/dist/theme/{REVEAL['theme']}.css"}

# Printed (?print-pdf), the presenting tools are not drawn and the last page is not followed by a blank one.
_PRINT_CSS = """
html.print-pdf .slide-menu-wrapper, html.print-pdf .slide-menu-button, html.print-pdf #chalkboard,
html.print-pdf #notescanvas, html.print-pdf .pause-overlay { display: none !important; }
html.print-pdf .reveal .slides .pdf-page:last-of-type { page-break-after: avoid !important; break-after: avoid !important; }
"""

# Reveal is a global (its UMD build runs before require.js is defined). A slide taller than
# the deck scrolls instead of being cut off (nbconvert's reveal_scroll, without jQuery).
_FOOTER_JS = """
<script>
// nbconvert's heading anchors ("¶") would end every title in the slide menu.
document.querySelectorAll(".reveal a.anchor-link").forEach(function (a) { a.remove(); });
var bertologyConfig = %(config)s;
// Speaker view (s), chalkboard (b, c) and slide menu (m), where their scripts are in the page.
bertologyConfig.plugins = [window.RevealNotes, window.RevealChalkboard, window.RevealMenu].filter(Boolean);
Reveal.initialize(bertologyConfig);
// A slide a little taller than the deck is shrunk to fit (text stays readable down to 3/4 of its size); one
// taller than that scrolls.
function bertologyScrollTallSlides() {
  var limit = Reveal.getConfig().height;
  document.querySelectorAll(".reveal .slides section").forEach(function (section) {
    if (section.querySelector("section") !== null || section.dataset.bertologyFitted) return;
    // a table a little wider than the slide is shrunk to its width (to 0.7); a wider one scrolls across
    section.querySelectorAll(".jp-OutputArea-output").forEach(function (area) {
      var over = area.scrollWidth, room = area.clientWidth;
      if (room > 0 && over > room + 2) area.firstElementChild.style.zoom = String(Math.max(0.7, room / over));
    });
    var height = section.scrollHeight;
    if (height <= limit) return;
    section.dataset.bertologyFitted = "1";
    if (height * 0.75 <= limit) {
      section.style.zoom = String(limit / height);
    } else {
      section.style.maxHeight = limit + "px";
      section.style.overflowY = "auto";
    }
  });
}
Reveal.on("ready", bertologyScrollTallSlides);
Reveal.on("slidechanged", bertologyScrollTallSlides);
</script>
"""

#: <script src=...> and <link href=...> that reach the network; CSS @import inside <style> elements.
_NETWORK_TAG = re.compile(
    r"""<(?:script\b[^>]*\bsrc|link\b[^>]*\bhref)\s*=\s*["']?(?:https?:)?//[^"'\s>]+""", re.IGNORECASE
)
_SCRIPT_BODY = re.compile(r"(<script\b[^>]*>).*?(</script\s*>)", re.IGNORECASE | re.DOTALL)
_STYLE_ELEMENT = re.compile(r"<style\b[^>]*>(.*?)</style>", re.IGNORECASE | re.DOTALL)
_CSS_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)
_REMOTE_IMPORT = re.compile(r"""@import\s+(?:url\()?\s*["']?(?:https?:)?//[^"')\s;]+""", re.IGNORECASE)


def network_references(html: str) -> list[str]:
    """What in ``html`` would load from the network: ``<script src>``, ``<link href>``, ``@import`` in a ``<style>``.

    The text of inline scripts is left out: a library's strings and comments mention URLs it does not load.
    """
    html = _SCRIPT_BODY.sub(r"\1\2", html)
    found = [m.group(0) for m in _NETWORK_TAG.finditer(html)]
    for style in _STYLE_ELEMENT.finditer(html):
        found += [m.group(0) for m in _REMOTE_IMPORT.finditer(_CSS_COMMENT.sub("", style.group(1)))]
    return found


def reveal_config(size: tuple[int, int] = SLIDE_SIZE) -> dict:
    """The settings every deck starts reveal.js with: the slide size, print layout, chalkboard and menu."""
    return {
        "controls": True,
        "progress": True,
        "history": True,
        "slideNumber": "c/t",
        "transition": REVEAL["transition"],
        "width": size[0],
        "height": size[1],
        "margin": REVEAL["margin"],
        # Printing (?print-pdf): one page per slide, a slide taller than the page is cut, not continued.
        "pdfMaxPagesPerSlide": 1,
        "pdfSeparateFragments": False,
        "chalkboard": {"theme": "whiteboard", "boardmarkerWidth": 4},
        # The menu fetches its stylesheet from ``path``: inlined here, so it is given an empty data: URL.
        "menu": {"path": _menu_path(), "loadIcons": False, "themes": False, "transitions": False, "numbers": True},
    }


def reveal_start(config: dict) -> str:
    """The script that starts reveal.js with ``config`` and the presenting tools that are in the page."""
    return _FOOTER_JS % {"config": json.dumps(config)}


def presenting_tools() -> str:
    """reveal.js with the speaker view (s), chalkboard (b, c) and slide menu (m), inlined as HTML tags, and the
    style that leaves them out of a printed deck.

    The plugins are UMD builds, so they become globals: RevealNotes, RevealChalkboard, RevealMenu.
    """
    from bertology_utils.present.assets import script_tag, style_tag

    return "\n".join(
        [script_tag("reveal"), script_tag("reveal_notes"), _chalkboard_script(), script_tag("menu")]
        + [without_remote_imports(style_tag(name)) for name in ("chalkboard_css", "menu_css")]
        + [_fontawesome_style(), f"<style>{_PRINT_CSS}</style>"]
    )


def reveal_styles() -> str:
    """reveal.js's stylesheet and the decks' theme as inline ``<style>`` elements (no web fonts)."""
    from bertology_utils.present.assets import style_tag

    return "\n".join(without_remote_imports(style_tag(asset)) for asset in REVEAL_STYLESHEETS)


def without_remote_imports(css: str) -> str:
    """Drop ``@import url(https://...);`` (reveal's themes fetch web fonts; the fallback fonts serve)."""
    return re.sub(_REMOTE_IMPORT.pattern + r"""["']?\)?\s*;?""", "", css, flags=re.IGNORECASE)


def _menu_path() -> str:
    """Where reveal.js-menu fetches ``menu.css`` from: nothing to fetch when the stylesheet is inlined."""
    from bertology_utils.present.assets import ASSETS, asset_path

    if asset_path("menu_css") is not None:
        return "data:text/css,"  # the menu waits for this (empty) stylesheet to load before it builds
    return ASSETS["menu_css"].cdn.rsplit("/", 1)[0] + "/"


def _data_uri(path: Path, mime: str) -> str:
    return f"data:{mime};base64," + base64.b64encode(path.read_bytes()).decode("ascii")


#: The chalkboard's pictures (pen cursors, sponge, board backgrounds), which it loads from beside its script.
#: ``path + 'img/sponge.png'`` and ``'url(' + path + 'img/chalk-red.png), auto'``: the string goes on after the name.
_CHALKBOARD_IMAGE = re.compile(r"""path\s*\+\s*(["'])(img/[\w.-]+\.png)""")


def _chalkboard_script() -> str:
    """The chalkboard plugin with its pictures inlined as ``data:`` URLs (an inline script has no folder)."""
    from bertology_utils.present.assets import asset_path, inline_script, script_tag

    path = asset_path("chalkboard")
    if path is None:
        return script_tag("chalkboard")  # from the CDN (with a warning), or AssetMissingError offline
    folder = path.parent
    text, count = _CHALKBOARD_IMAGE.subn(
        lambda m: m.group(1) + _data_uri(folder / m.group(2), "image/png"), path.read_text(encoding="utf-8")
    )
    if count == 0:  # the plugin changed how it finds its pictures: fail loudly rather than draw without them
        raise BertologyError(f"{path} no longer loads its pictures as path + 'img/...'")
    return inline_script(text)


_FONT_FACE = re.compile(r"@font-face\s*\{[^}]*\}")


#: The family name the inlined Font Awesome faces go by.
_ICON_FONT = "Bertology Icons"


def _fontawesome_style() -> str:
    """Font Awesome (the menu's and the chalkboard's icons) with its two free web fonts inlined."""
    from bertology_utils.present.assets import asset_path, style_tag

    path = asset_path("fontawesome_css")
    if path is None:
        return style_tag("fontawesome_css")
    fonts = path.parent.parent / "webfonts"
    faces = "".join(
        f'@font-face{{font-family:"{_ICON_FONT}";font-style:normal;font-weight:{weight};font-display:block;'
        f'src:url({_data_uri(fonts / name, "font/woff2")}) format("woff2")}}'
        for weight, name in ((400, "fa-regular-400.woff2"), (900, "fa-solid-900.woff2"))
    )
    css = _FONT_FACE.sub("", path.read_text(encoding="utf-8"))
    # The widget renderer adds Font Awesome's own faces later, pointing at files that are not there: the icons
    # are drawn with the inlined faces under a name of their own.
    icons = f'.fa,.fas,.far{{font-family:"{_ICON_FONT}" !important}}'
    return f"<style>\n{faces}\n{css}\n{icons}\n</style>"
