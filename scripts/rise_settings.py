"""Write the RISE settings (live slides in JupyterLab, ``jupyterlab-rise``) into every notebook's metadata.

Each notebook gets a header with its number and title (its first heading), a footer naming the project
and the default model, scrolling for tall slides, and reveal's chalkboard (RISE's ``enable_chalkboard``).
Only the metadata changes; run it again after adding a notebook or renaming one::

    python scripts/rise_settings.py [--check]

With ``--check`` nothing is written: the exit status is 1 when a notebook's settings are not these.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bertology_utils.core.settings import DEFAULT_MODEL  # noqa: E402

NOTEBOOKS = ROOT / "notebooks"


def rise_settings(notebook: dict, stem: str) -> dict:
    """The ``rise`` metadata of a notebook named ``stem``."""
    first = next((c for c in notebook["cells"] if c["cell_type"] == "markdown"), None)
    source = "".join(first["source"]) if first else ""
    heading = re.search(r"^#+\s*(.+?)\s*$", source, re.MULTILINE)
    title = heading.group(1) if heading else stem.partition("_")[2].replace("_", " ")
    number = stem.partition("_")[0]
    title = re.sub(r"^\d+\s*[—:.-]\s*", "", title).replace("*", "")  # "03 — Heads ..." -> "Heads ..."
    return {
        "header": f"<h3>{html.escape(number, quote=False)} {html.escape(title, quote=False)}</h3>",
        "footer": f"<p>bertology · {html.escape(DEFAULT_MODEL.rsplit('/', 1)[-1], quote=False)}</p>",
        "scroll": True,
        "enable_chalkboard": True,
        "theme": "simple",
        "transition": "slide",
        "slideNumber": "c/t",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check; exit 1 when a notebook differs")
    args = parser.parse_args(argv)
    stale = []
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        notebook = json.loads(path.read_text(encoding="utf-8"))
        wanted = rise_settings(notebook, path.stem)
        if notebook["metadata"].get("rise") == wanted:
            continue
        stale.append(path.name)
        if not args.check:
            notebook["metadata"]["rise"] = wanted
            path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    if stale:
        print(("differ: " if args.check else "updated: ") + ", ".join(stale))
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
