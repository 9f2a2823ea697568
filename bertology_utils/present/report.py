"""One self-contained HTML page for a run: what ran, what it found, what failed, what regressed.

Reads a run folder as :mod:`bertology_utils.run.results` lays it out (``run.json``; per notebook the executed
``<stem>.ipynb``, ``metrics.json`` and ``figures/``) and, when present, ``check.json`` (a
regression check against a reference run)::

    {"reference": "<dir>", "ok": bool, "differences": [{"notebook": stem, "metric": name,
     "reference": value, "value": value, "tolerance": "text", "status": "ok"|"regressed"|"missing"|"new"}],
     "versions": {"differences": [{"name": "torch", "reference": "2.13.0+cpu", "value": "2.14.1+cpu",
                                   "notebooks": [stem, ...]}], "compared": [stem, ...], "unknown": [stem, ...]}}

(``versions``: what the run was made with against what its references were made with; absent
from older check files.)

The page is plain HTML and CSS, no JavaScript and no network reference: figures are embedded
as ``data:`` URIs. Sections (with stable ids): ``summary``, ``check`` (only with check.json),
``failures`` (only when a notebook failed), ``atlas`` (a link to the run's head atlas, ``atlas.html``, and
notebook 09's ``atlas_grid`` figure; or how to build it), one ``nb-<stem>`` per notebook (status, "paper vs
ours" table, figures) and ``metrics`` (every metric of every notebook).

The "paper vs ours" table of a notebook is its recorded claims, ``<stem>/claims.json`` (see
:func:`bertology_utils.run.record.record_claims`): data, not the notebook's rendered output.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import json
import os
import re
from collections import Counter
from pathlib import Path

from bertology_utils.core import gpu_name
from bertology_utils.core.errors import BertologyError, DataFormatError
from bertology_utils.core.files import atomic_write_text
from bertology_utils.present.atlas import PAGE_FILE
from bertology_utils.present.findings import claim_uncertainty
from bertology_utils.present.readable import MISSING, format_number, machine_places, path_names
from bertology_utils.run import results

__all__ = [
    "REPORT_FILE",
    "CHECK_FILE",
    "FIGURE_TYPES",
    "CHECK_STATUSES",
    "executed_notebooks",
    "claims_html",
    "failed_cell",
    "figure_files",
    "data_uri",
    "flatten_metrics",
    "format_value",
    "value_for_people",
    "build_report",
]

REPORT_FILE = "report.html"
CHECK_FILE = "check.json"
FIGURE_TYPES = {".png": "image/png", ".svg": "image/svg+xml", ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}
#: check.json statuses, most serious first; all but "ok" are shown at the top of the page.
CHECK_STATUSES = ("regressed", "missing", "new", "ok")

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


# --------------------------------------------------------------------------- reading a run


def executed_notebooks(run_dir: Path) -> dict[str, Path]:
    """stem -> executed notebook (``<stem>/<stem>.ipynb``) of a run folder, sorted by stem."""
    return {p.parent.name: p for p in sorted(run_dir.glob("*/*.ipynb")) if p.stem == p.parent.name}


def _read_json_or_empty(path: Path) -> dict:
    return results.read_json(path) if path.is_file() else {}


# --------------------------------------------------------------------------- extracting from notebooks


def claims_html(notebook_dir: Path) -> str:
    """The notebook's recorded claims as an HTML table, one row per claim; empty when it recorded none.

    The "interval, seeds" cell is the claim's interval and seed count (:func:`claim_uncertainty`), empty when
    it has neither."""
    claims = results.load_claims(notebook_dir)
    if not claims:
        return ""
    rows = [
        [
            _esc(c.paper),
            _esc(c.claim),
            _esc(c.paper_value),
            _esc(c.ours),
            _status(c.verdict.value),
            _esc(claim_uncertainty(c)),
            _esc(c.rule),
            _esc(c.note),
        ]
        for c in claims
    ]
    header = ["paper", "claim", "paper value", "ours", "verdict", "interval, seeds", "rule", "note"]
    return _table(header, rows, "claims")


def failed_cell(executed: Path) -> tuple[str, str] | None:
    """(source, error text) of the cell whose output is an error in an executed notebook, if any."""
    import nbformat

    if not executed.is_file():
        return None
    for cell in nbformat.read(executed, as_version=4).cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                trace = _ANSI.sub("", "\n".join(output.get("traceback", [])))
                return cell.source, trace or f"{output.get('ename')}: {output.get('evalue')}"
    return None


def figure_files(notebook_dir: Path) -> list[Path]:
    """A notebook's saved figures (PNG, SVG, JPEG) in the order they were written, one file per figure: of a
    figure saved in several formats (``save_figure`` writes an SVG beside each PNG) the first in FIGURE_TYPES."""
    folder = notebook_dir / "figures"
    files = [p for p in folder.iterdir() if p.suffix.lower() in FIGURE_TYPES] if folder.is_dir() else []
    rank = list(FIGURE_TYPES)
    first: dict[str, Path] = {}
    for path in sorted(files, key=lambda p: rank.index(p.suffix.lower())):
        first.setdefault(path.stem, path)
    return sorted(first.values(), key=lambda p: (p.stat().st_mtime, p.name))


def data_uri(path: Path) -> str:
    """The file as a base64 ``data:`` URI."""
    return f"data:{FIGURE_TYPES[path.suffix.lower()]};base64,{base64.b64encode(path.read_bytes()).decode('ascii')}"


def flatten_metrics(metrics: dict, prefix: str = "") -> dict[str, object]:
    """Nested dicts become dotted names; lists and scalars are kept as values."""
    flat: dict[str, object] = {}
    for key, value in metrics.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict) and value:
            flat.update(flatten_metrics(value, name))
        else:
            flat[name] = value
    return flat


def format_value(value: object) -> str:
    """A metric value as the page shows it: floats to 6 significant digits, lists and dicts compact."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list):
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {format_value(v)}" for k, v in value.items()) + "}"
    return str(value)


def _grid_shape(value: object) -> tuple[int, ...]:
    """The shape of nested lists as far as it is rectangular: (3, 6, 12) for L0 masks of a 6 x 12 model."""
    if not isinstance(value, list) or not value or not all(isinstance(v, list) for v in value):
        return (len(value),) if isinstance(value, list) else ()
    inner = {_grid_shape(v) for v in value}
    return (len(value), *inner.pop()) if len(inner) == 1 else (len(value),)


def value_for_people(value: object, *, items: int = 6) -> str:
    """A metric value as the report's list of metrics shows it: numbers to three significant digits
    (:func:`~bertology_utils.present.readable.format_number`), a missing one as a dash, yes or no, a list as its
    first ``items`` values and its length, a grid (a list of lists) as its shape. :func:`format_value` keeps
    the digits a regression needs."""
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return format_number(value)
    if isinstance(value, list):
        if value and all(isinstance(v, list) for v in value):
            shape = _grid_shape(value)
            return " × ".join(map(str, shape)) + " values" if len(shape) > 1 else f"{len(value)} lists"
        shown = ", ".join(value_for_people(v, items=items) for v in value[:items])
        return f"[{shown}, … {len(value)} values]" if len(value) > items else f"[{shown}]"
    if isinstance(value, dict):
        shown = ", ".join(f"{k}: {value_for_people(v, items=items)}" for k, v in list(value.items())[:items])
        return "{" + shown + (f", … {len(value)} entries}}" if len(value) > items else "}")
    return str(value)


# --------------------------------------------------------------------------- the page

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0 auto; max-width: 72rem;
       padding: 1rem 2rem 4rem; color: #1d1d1f; line-height: 1.45; }
h1 { margin-bottom: 0.2rem; } h2 { border-bottom: 2px solid #ddd; padding-bottom: 0.2rem; margin-top: 2.5rem; }
nav { font-size: 0.9rem; margin-bottom: 1rem; } nav a { margin-right: 0.8rem; }
table { border-collapse: collapse; margin: 0.6rem 0 1rem; font-size: 0.88rem; }
th, td { border: 1px solid #d6d6d6; padding: 0.25rem 0.55rem; text-align: left; vertical-align: top; }
thead th { background: #f2f2f2; }
td.value { font-family: ui-monospace, Menlo, Consolas, monospace; word-break: break-word; max-width: 40rem; }
.status { font-weight: 600; padding: 0.05rem 0.45rem; border-radius: 0.3rem; white-space: nowrap; }
.status-ok { background: #dff3e3; color: #17612a; }
.status-failed, .status-regressed { background: #fbe0e0; color: #8c1d1d; }
.status-missing, .status-new, .status-not-in-run-json, .status-skipped { background: #fff1cc; color: #6d5200; }
.status-holds { background: #dff3e3; color: #17612a; } .status-partly { background: #fff1cc; color: #6d5200; }
.status-differs { background: #fbe0e0; color: #8c1d1d; } .status-not-testable { background: #eee; color: #555; }
.status-inconclusive { background: #e6e6fa; color: #3f3a8c; }
.alert { border-left: 6px solid #c62828; background: #fff5f5; padding: 0.6rem 1rem; margin: 1rem 0; }
.alert.ok { border-left-color: #2e7d32; background: #f3fbf4; }
.alert.warn { border-left-color: #b28704; background: #fffbea; }
.paper-table { overflow-x: auto; }
figure { margin: 1rem 0; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 0.85rem; color: #555; }
pre { background: #f7f7f7; padding: 0.6rem; overflow-x: auto; font-size: 0.82rem; white-space: pre-wrap; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 0.2rem 1rem; }
dl.facts dt { font-weight: 600; } dl.facts dd { margin: 0; }
.muted { color: #666; }
"""


def _esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def _status(status: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", status.lower()).strip("-")
    return f'<span class="status status-{slug}">{_esc(status)}</span>'


def _table(header: list[str], rows: list[list[str]], cls: str = "") -> str:
    """An HTML table; cells are given already escaped."""
    head = "".join(f"<th>{_esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _describe_error(error: dict | None) -> str:
    if not error:
        return ""
    where = (
        f"cell {error['cell_index']} (exec count {error['exec_count']})"
        if error.get("cell_index") is not None
        else "outside a cell"
    )
    evalue = (error.get("evalue") or "").strip().splitlines()
    return f"{where}: {error.get('ename')}" + (f": {evalue[0]}" if evalue else "")


def _machine(environment: dict) -> str:
    """run.json's ``environment`` in a line: the CPU, its cores and the features that pick kernels, and the GPU."""
    if not environment:
        return "<span class='muted'>not recorded</span>"
    cpu = environment.get("cpu") or "CPU not recorded"
    cores = environment.get("cores")
    flags = environment.get("cpu_flags") or []
    gpu = environment.get("gpu")
    parts = [f"{cpu}, {cores} cores" if cores else cpu]
    if flags:
        parts.append("with " + " ".join(flags))
    parts.append(f"GPU: {gpu_name(gpu)}" if gpu else "no GPU: the notebooks ran on the CPU")  # older runs kept its UUID
    return _esc("; ".join(parts))


def _summary_section(run_dir: Path, run: dict, entries: list[dict], metrics: dict[str, dict]) -> str:
    models = {str(v) for m in metrics.values() for k, v in m.items() if k.split(".")[-1] in ("model", "model_name")}
    if run.get("parameters", {}).get("model_name"):
        models.add(str(run["parameters"]["model_name"]))
    data = [(stem, v) for stem, m in metrics.items() for k, v in m.items() if k.split(".")[-1] == "data"]
    statuses = Counter(e.get("status", "?") for e in entries)
    places = machine_places()
    facts = [
        ("run", _esc(run.get("run_name", run_dir.name))),  # not its folder: a machine's path means nothing to a reader
        ("machine", _machine(run.get("environment") or {})),
        (
            "ran",
            f"{_esc(run.get('started', '?'))} to {_esc(run.get('finished', '?'))}"
            if run
            else "<span class='muted'>no run.json</span>",
        ),
        ("notebooks", f"{len(entries)}: " + ", ".join(f"{n} {_esc(status)}" for status, n in sorted(statuses.items()))),
        ("model", "<br>".join(_esc(m) for m in sorted(models)) or "<span class='muted'>not recorded</span>"),
        (
            "data",
            # a run recorded before descriptions named files only may still hold this machine's folders
            "<br>".join(f"{_esc(stem)}: {_esc(path_names(str(v), places))}" for stem, v in data)
            or "<span class='muted'>not recorded</span>",
        ),
        (
            "parameters",
            (_esc(json.dumps(run.get("parameters", {}), sort_keys=True)) if run else "")
            + " <span class='muted'>(for every notebook; per notebook below)</span>",
        ),
        ("versions", ", ".join(f"{_esc(k)} {_esc(v)}" for k, v in run.get("versions", {}).items())),
    ]
    rows = [
        [
            f'<a href="#nb-{_esc(e["name"])}">{_esc(e["name"])}</a>',
            _status(e.get("status", "?")),
            _esc(f"{e['duration_s']:.1f} s") if isinstance(e.get("duration_s"), (int, float)) else "",
            _esc(json.dumps(e["parameters"], sort_keys=True)) if e.get("parameters") else "",
            _esc(_describe_error(e.get("error"))),
        ]
        for e in entries
    ]
    return (
        '<section id="summary"><h2>Summary</h2><dl class="facts">'
        + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts)
        + "</dl>"
        + _table(["notebook", "status", "time", "parameters", "error"], rows, "notebooks")
        + "</section>"
    )


def _check_section(check: dict) -> str:
    differences = check.get("differences", [])
    order = {s: i for i, s in enumerate(CHECK_STATUSES)}
    differences = sorted(
        differences, key=lambda d: (order.get(d.get("status"), -1), d.get("notebook", ""), d.get("metric", ""))
    )
    bad = [d for d in differences if d.get("status") != "ok"]
    good = [d for d in differences if d.get("status") == "ok"]

    def rows(items: list[dict]) -> list[list[str]]:
        return [
            [
                _status(d.get("status", "?")),
                _esc(d.get("notebook", "")),
                _esc(d.get("metric", "")),
                f'<span class="value">{_esc(format_value(d.get("reference")))}</span>',
                f'<span class="value">{_esc(format_value(d.get("value")))}</span>',
                _esc(d.get("tolerance", "")),
            ]
            for d in items
        ]

    header = ["status", "notebook", "metric", "reference", "this run", "tolerance"]
    ok = bool(check.get("ok")) and not bad
    verdict = (
        "every compared metric is within tolerance"
        if ok
        else f"{len(bad)} of {len(differences)} compared metrics are not ok"
        + ("" if bad else " (check.json says the check failed)")
    )
    out = (
        f'<section id="check"><h2>Regression check</h2>'
        f'<div class="alert{" ok" if ok else ""}"><strong>{"OK" if ok else "REGRESSIONS"}</strong>: {_esc(verdict)}; '
        f"reference: <code>{_esc(check.get('reference', '?'))}</code></div>"
    )
    out += _versions_html(check.get("versions") or {})
    if bad:
        out += _table(header, rows(bad), "check-problems")
    if good:
        out += f"<details><summary>{len(good)} metric{'s' if len(good) > 1 else ''} within tolerance</summary>{_table(header, rows(good), 'check-ok')}</details>"
    return out + "</section>"


def _versions_html(versions: dict) -> str:
    """check.json's versions: a warning with a table when the run's differ from its references', a note when unknown."""
    out = ""
    differences = versions.get("differences", [])
    if differences:
        compared = versions.get("compared")
        rows = [
            [
                _esc(v.get("name", "")),
                _esc(v.get("reference") or "not installed"),
                _esc(v.get("value") or "not installed"),
                "all" if v.get("notebooks") == compared else _esc(", ".join(v.get("notebooks", []))),
            ]
            for v in differences
        ]
        out += (
            '<div class="alert warn versions"><strong>VERSIONS DIFFER</strong>: this run was not made with the '
            "versions its references were made with; a difference below may come from them (a warning, "
            "not a failure).</div>" + _table(["", "reference", "this run", "references"], rows, "versions")
        )
    if versions.get("unknown"):
        out += (
            f'<p class="muted versions-unknown">Versions unknown for {_esc(", ".join(versions["unknown"]))}: '
            "the reference or the run records none.</p>"
        )
    return out


def _failures_section(run_dir: Path, failed: list[dict]) -> str:
    parts = ['<section id="failures"><h2>Failures</h2>']
    for entry in failed:
        stem = entry["name"]
        parts.append(
            f'<div class="alert"><strong>{_esc(stem)}</strong> failed in {_esc(_describe_error(entry.get("error")))}'
            "</div>"
        )
        found = failed_cell(run_dir / stem / f"{stem}.ipynb")
        if found is not None:
            source, trace = found
            parts.append(f"<p>The failing cell:</p><pre>{_esc(source)}</pre><pre>{_esc(trace)}</pre>")
    return "".join(parts) + "</section>"


def _notebook_section(run_dir: Path, entry: dict, has_metrics: bool) -> str:
    stem = entry["name"]
    folder = run_dir / stem
    head = f'<section id="nb-{_esc(stem)}"><h2>{_esc(stem)} {_status(entry.get("status", "?"))}</h2>'
    parts = [head]
    skipped = results.load_skipped(folder) if folder.is_dir() else {"sections": []}
    if skipped["sections"]:
        items = "".join(
            f"<li><strong>{_esc(s['section'])}</strong>: {_esc(s['reason'])}</li>" for s in skipped["sections"]
        )
        parts.append(f'<div class="alert warn"><p>Not computed in this run:</p><ul>{items}</ul></div>')
    if entry.get("error"):
        parts.append(
            f'<p>Failed in {_esc(_describe_error(entry["error"]))} (see <a href="#failures">failures</a>); '
            "what it wrote before failing is shown.</p>"
        )
    table = claims_html(folder) if folder.is_dir() else ""
    if table:
        parts.append(f'<h3>Paper vs ours</h3><div class="paper-table">{table}</div>')
    else:
        parts.append('<p class="muted">No claims recorded.</p>')
    figures = figure_files(folder) if folder.is_dir() else []
    if figures:
        parts.append("<h3>Figures</h3>")
    for path in figures:
        parts.append(
            f'<figure><img src="{data_uri(path)}" alt="{_esc(path.stem)}">'
            f"<figcaption>{_esc(path.name)}</figcaption></figure>"
        )
    if has_metrics:
        parts.append(f'<p><a href="#metrics-{_esc(stem)}">its metrics</a></p>')
    return "".join(parts) + "</section>"


def _atlas_section(run_dir: Path, entries: list[dict], report: Path) -> str:
    """A link to the atlas page (relative, from where the report is written) and its grid figure, else how to build it."""
    parts = ['<section id="atlas"><h2>Head atlas</h2>']
    page = run_dir / PAGE_FILE
    if page.is_file():
        link = Path(os.path.relpath(page, report.parent)).as_posix()
        parts.append(
            f'<p><a href="{_esc(link)}">{_esc(PAGE_FILE)}</a>: every per-head result of the run, one row per head '
            "(filters, a layers x heads grid, a card per head).</p>"
        )
    else:
        parts.append(
            "<p>This run has no atlas: build it with <code>bertology atlas RUN</code> or run notebook 09_atlas.</p>"
        )
    grids = [f for e in entries for f in figure_files(run_dir / e["name"]) if f.stem == "atlas_grid"]
    if grids:
        parts.append(f'<figure><img src="{data_uri(grids[-1])}" alt="atlas_grid"></figure>')
    return "".join(parts) + "</section>"


def _metrics_section(metrics: dict[str, dict]) -> str:
    """Each notebook's metrics, folded (a run records about a thousand), each with its unit and meaning from its
    declaration (:data:`~bertology_utils.papers.metrics.REGISTRY`)."""
    from bertology_utils.papers.metrics import REGISTRY

    places = machine_places()
    parts = []
    for stem, recorded in metrics.items():
        rows = []
        for name, value in flatten_metrics(recorded).items():
            declared = REGISTRY.find(name)
            rows.append(
                [
                    _esc(name),
                    f'<span class="value">{_esc(path_names(value_for_people(value), places))}</span>',
                    _esc(declared.unit) if declared else "",
                    f"<span class='muted'>{_esc(declared.meaning)}</span>" if declared else "",
                ]
            )
        parts.append(
            f'<details id="metrics-{_esc(stem)}"><summary>{_esc(stem)}: {len(rows)} metric'
            f"{'s' if len(rows) != 1 else ''}</summary>{_table(['metric', 'value', 'unit', 'meaning'], rows, 'metrics')}"
            "</details>"
        )
    body = "".join(parts) or "<p>No metrics recorded.</p>"
    lead = (
        "<p class='muted'>Every number the notebooks recorded, to three significant digits (metrics.json in each "
        "notebook's folder has them whole). Open a notebook to see its list.</p>"
    )
    return f'<section id="metrics"><h2>All metrics</h2>{lead if parts else ""}{body}</section>'


def build_report(run_dir: str | os.PathLike, out: str | os.PathLike | None = None) -> Path:
    """Write the run's report (default ``<run dir>/report.html``) and return its path."""
    folder = results.find_run(run_dir)
    run = _read_json_or_empty(folder / results.RUN_FILE)
    entries = results.run_entries(folder)
    if not entries:
        raise BertologyError(f"{folder} holds no run: no run.json and no notebook results")
    metrics = {e["name"]: _read_json_or_empty(folder / e["name"] / results.METRICS_FILE) for e in entries}
    metrics = {stem: m for stem, m in metrics.items() if m}
    check = _read_json_or_empty(folder / CHECK_FILE)
    if check and not isinstance(check.get("differences", []), list):
        raise DataFormatError("'differences' must be a list", folder / CHECK_FILE)
    failed = [e for e in entries if e.get("status") == "failed"]

    title = f"bertology run {run.get('run_name', folder.name)}"
    nav = (
        (['<a href="#check">regression check</a>'] if check else [])
        + (['<a href="#failures">failures</a>'] if failed else [])
        + ['<a href="#summary">summary</a>', '<a href="#atlas">head atlas</a>']
        + [f'<a href="#nb-{_esc(e["name"])}">{_esc(e["name"])}</a>' for e in entries]
        + ['<a href="#metrics">metrics</a>']
    )
    path = Path(out) if out is not None else folder / REPORT_FILE
    generated = dt.datetime.now().astimezone().isoformat(timespec="seconds")
    page = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_esc(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{_esc(title)}</h1><p class='muted'>report written {_esc(generated)}</p>",
        f"<nav>{' '.join(nav)}</nav>",
        _check_section(check) if check else "",
        _failures_section(folder, failed) if failed else "",
        _summary_section(folder, run, entries, metrics),
        _atlas_section(folder, entries, path),
        *(_notebook_section(folder, e, e["name"] in metrics) for e in entries),
        _metrics_section(metrics),
        "</body></html>",
    ]
    atomic_write_text(path, "\n".join(page) + "\n")
    return path
