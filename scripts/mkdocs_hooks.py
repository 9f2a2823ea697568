"""MkDocs hooks (mkdocs.yml ``hooks:``): the pages the site builds from the code instead of from docs/.

- ``notebooks/<stem>.md`` for each notebook: its narrative, code and, when an executed run is
  found, its outputs and figures (``$BERTOLOGY_DOCS_RUN``, a run folder or name; default
  ``results/default`` when it exists), after the "paper vs ours" tables of every committed
  findings record (``docs/findings/*.json``).
- ``api/<layer>.md`` for each layer of the package: one mkdocstrings section per public module.
- ``assets/javascripts/iframe-worker-shim.js``, the polyfill mkdocs.yml names for search from disk, from
  node_modules (npm ci); without it the site builds and its search needs a server.

A notebook missing from mkdocs.yml's nav fails the build, as a broken link does.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

import nbformat
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

from bertology_utils.core.errors import AssetMissingError
from bertology_utils.present import assets
from bertology_utils.present.findings import claims_tables, load_findings
from bertology_utils.present.readable import for_people, machine_places
from bertology_utils.present.slides import is_progress_output

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "bertology_utils"
LAYERS = ("core", "data", "attention", "analyses", "interventions", "papers", "run", "present", "cli")
#: Where the executed run comes from; unset: results/default when there is one; set but empty: no run.
RUN_VARIABLE = "BERTOLOGY_DOCS_RUN"
SEARCH_SHIM = "assets/javascripts/iframe-worker-shim.js"
log = logging.getLogger("mkdocs.hooks")


def _run_dir() -> Path | None:
    chosen = os.environ.get(RUN_VARIABLE)
    if chosen == "":
        return None
    if chosen:
        folder = Path(chosen) if Path(chosen).is_dir() else ROOT / "results" / chosen
        if not folder.is_dir():
            raise PluginError(f"{RUN_VARIABLE}={chosen}: no such run folder")
        return folder
    default = ROOT / "results" / "default"
    return default if default.is_dir() else None


def _widget_sentence(plain: str) -> str:
    """What a page says in place of a widget: its kind, from its repr's class name, never the repr itself."""
    name = re.match(r"[A-Za-z_]\w*", plain)
    kind = f" ({name.group(0)})" if name and "(" in plain else ""
    return f"An interactive widget{kind}: open the notebook in JupyterLab to use it."


def _plain_outputs(notebook) -> None:
    """Drop what a static page cannot show: progress and warnings, widgets, and HTML that needs its scripts."""
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        kept = []
        for output in cell.get("outputs", []):
            if is_progress_output(output):
                continue
            data = output.get("data", {})
            if data.pop("application/vnd.jupyter.widget-view+json", None) is not None:
                data["text/plain"] = _widget_sentence(str(data.get("text/plain", "")))
            if "<script" in str(data.get("text/html", "")):
                data.pop("text/html")
                data.pop("application/javascript", None)
                data["text/plain"] = "(an interactive view: open the notebook in JupyterLab to use it)"
            kept.append(output)
        cell["outputs"] = kept


def _notebook_page(source: Path, run: Path | None, records: list[dict]) -> tuple[str, dict[str, bytes]]:
    from nbconvert import MarkdownExporter

    stem = source.stem
    executed = run / stem / f"{stem}.ipynb" if run is not None else None
    ran = executed is not None and executed.is_file()
    notebook = nbformat.read(executed if ran else source, as_version=4)
    _plain_outputs(notebook)
    for_people(notebook, machine_places(executed if ran else None))  # no machine's paths, tables' numbers rounded
    body, resources = MarkdownExporter().from_notebook_node(notebook, resources={"output_files_dir": f"{stem}_files"})
    title_match = re.search(r"^# (.+)$", body, flags=re.M)
    title = title_match.group(1) if title_match else stem
    # every notebook's page titled alike in the nav, by its number ("04 · Probing classifiers"): 09's own title
    # would otherwise repeat the atlas page's
    number = re.match(r"\d+", stem)
    if number:
        own = re.sub(rf"^{number.group(0)}\s*[—–:·-]\s*", "", title)
        title = f"{number.group(0)} · {own}"
    if title_match:  # the page's title comes first, above the findings
        body = body[: title_match.start()] + body[title_match.end() :]
    parts = [f"# {title}", f"`notebooks/{source.name}`"]
    for record in records:
        tables = claims_tables(record, notebooks=[stem], heading="###")
        if tables:
            parts.append(
                f"## Paper vs ours: {record['model']}\n\nThe claims of the committed reference run "
                f"(`{record['run']}`, finished {record['finished']}); see [Findings](../findings.md).\n\n"
                + tables.split("\n", 1)[1].lstrip()
            )
    parts.append(
        f"## The notebook, executed in run `{run.name}`"
        if ran
        else '## The notebook\n\n!!! note "Not executed here"\n    No executed run was found when this site was built: '
        "`make run`, then `make docs`, puts every output and figure on this page."
    )
    parts.append(body.strip())
    return "\n\n".join(parts) + "\n", resources.get("outputs", {})


def _api_page(layer: str) -> str:
    modules = sorted(
        p
        for p in (PACKAGE / layer).rglob("*.py")
        if not any(part.startswith("_") for part in p.relative_to(PACKAGE).with_suffix("").parts)
    )
    dotted = [".".join(p.relative_to(ROOT).with_suffix("").parts) for p in modules]
    sections = "\n\n".join(f"::: {name}" for name in dotted)
    return f"# `bertology_utils.{layer}`\n\n::: bertology_utils.{layer}\n    options:\n      members: false\n\n{sections}\n"


def _nav_pages(nav) -> set[str]:
    found: set[str] = set()
    for entry in nav or []:
        values = entry.values() if isinstance(entry, dict) else [entry]
        for value in values:
            found |= _nav_pages(value) if isinstance(value, list) else {value}
    return found


def on_files(files: Files, config) -> Files:
    records = [load_findings(path) for path in sorted((ROOT / "docs" / "findings").glob("*.json"))]
    run = _run_dir()
    in_nav = _nav_pages(config["nav"])
    for source in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        uri = f"notebooks/{source.stem}.md"
        if uri not in in_nav:
            raise PluginError(f"{uri} is not in mkdocs.yml's nav: add it under Notebooks")
        page, images = _notebook_page(source, run, records)
        files.append(File.generated(config, uri, content=page))
        for name, data in images.items():
            files.append(File.generated(config, f"notebooks/{name}", content=data))
    for layer in LAYERS:
        files.append(File.generated(config, f"api/{layer}.md", content=_api_page(layer)))
    try:
        files.append(File.generated(config, SEARCH_SHIM, content=assets.asset_text("search_shim")))
    except AssetMissingError as exc:
        log.info(f"search works from a server only: {exc}")
    return files
