"""Findings: every claim a run's notebooks checked, as a record to keep and as Markdown tables.

A *findings record* is the part of a run that says what it found: the model, the versions and,
per notebook, its recorded claims (``claims.json``: paper value, ours, verdict) and the sections
it skipped. :func:`record_findings` reads it from a run folder; :func:`save_findings` writes it
as JSON, small enough to commit (the project keeps its reference run's in ``docs/findings/``).
Tables are made from records, never typed: :func:`summary_table` gives one short line per claim
with the verdicts of each record (a claim checked on several tasks, relations or objectives is
one line with its verdicts counted); :func:`claims_tables` gives every claim with its numbers,
notebook by notebook, and, where the record has them, its interval and seed count (:func:`claim_uncertainty`, the
text every view of claims shows for them); :func:`runs_table` sets runs of one model with another base seed or precision
side by side, claim by claim. ``bertology findings`` prints either, and ``--update`` rewrites the
generated blocks of a Markdown page (:mod:`bertology_utils.present.generated`).
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from bertology_utils.core.errors import BertologyError, DataFormatError
from bertology_utils.core.files import atomic_write_text
from bertology_utils.papers.claims import Claim, Verdict, uncertainty
from bertology_utils.run import results
from bertology_utils.run.perturb import capped_flags, caps_said

__all__ = [
    "FINDINGS_VERSION",
    "model_of",
    "notebook_record",
    "record_findings",
    "save_findings",
    "load_findings",
    "summary_table",
    "claims_tables",
    "runs_table",
    "runs_tables",
    "claim_uncertainty",
]

#: Bumped when the record's layout changes; :func:`load_findings` refuses other versions.
FINDINGS_VERSION = 1
#: The fields of a recorded claim a findings record keeps (the rule and values stay in the run), with the value
#: a field takes where the claim lacks it (``interval`` and ``seeds``: None, as claims recorded before them).
_CLAIM_FIELDS: dict[str, str | None] = {
    "key": "",
    "paper": "",
    "claim": "",
    "paper_value": "",
    "ours": "",
    "verdict": "",
    "note": "",
    "interval": None,
    "seeds": None,
}
_MODEL_METRIC = re.compile(r"^[A-Za-z0-9_]+\.model$")


def model_of(metrics: Mapping) -> str | None:
    """The model a notebook recorded as ``<topic>.model`` (every notebook names the one it loaded)."""
    names = {str(v) for k, v in metrics.items() if _MODEL_METRIC.match(k) and v}
    return names.pop() if len(names) == 1 else None


def notebook_record(run_dir: Path, entry: Mapping) -> dict:
    """One notebook of a run as a findings record holds it: name, status, skipped sections, claims.

    ``entry`` is the notebook's :func:`~bertology_utils.run.results.run_entries` entry.
    """
    sub = run_dir / entry["name"]
    # load_claims checks each entry is a claim; the record keeps the entry's key (prefix.id) too
    entries = results.read_json(sub / results.CLAIMS_FILE)["claims"] if results.load_claims(sub) else []
    return {
        "name": entry["name"],
        "status": entry.get("status", results.UNLISTED),
        "skipped": results.load_skipped(sub)["sections"],
        "claims": [{k: e.get(k, missing) for k, missing in _CLAIM_FIELDS.items()} for e in entries],
    }


def record_findings(run_dir: str | os.PathLike) -> dict:
    """The findings record of a run folder (or a run name under ``results/``).

    BertologyError when no notebook of the run recorded a claim: an empty record would make an
    empty table that looks like a result.
    """
    folder = results.find_run(run_dir)
    run_path = folder / results.RUN_FILE
    run = results.read_json(run_path) if run_path.is_file() else {}
    notebooks, models = [], set()
    for entry in results.run_entries(folder):
        metrics_path = folder / entry["name"] / results.METRICS_FILE
        model = model_of(results.read_json(metrics_path)) if metrics_path.is_file() else None
        if model:
            models.add(model)
        notebooks.append(notebook_record(folder, entry))
    if not any(nb["claims"] for nb in notebooks):
        raise BertologyError(f"run {folder} recorded no claims: run its notebooks first (bertology run)")
    if len(models) > 1:
        raise BertologyError(f"run {folder} mixes models {sorted(models)}: a findings record is one model's")
    return {
        "version": FINDINGS_VERSION,
        "run": run.get("run_name", folder.name),
        "model": models.pop() if models else "unknown model",
        "finished": run.get("finished"),
        "parameters": run.get("parameters", {}),
        "versions": run.get("versions", {}),
        # the instruction-set caps the run held the CPU to (another CPU's kernels, and fp32 under "auto"); none: {}
        "kernels": capped_flags(run.get("environment", {}))[1],
        "notebooks": notebooks,
    }


def save_findings(record: Mapping, path: str | os.PathLike) -> Path:
    """Write ``record`` as JSON (sorted keys, one claim per few lines: reviewable as a diff)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(record, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    return path


def load_findings(source: str | os.PathLike | Mapping) -> dict:
    """A findings record: a mapping as is, a ``.json`` record file, or a run folder/name (read afresh)."""
    if isinstance(source, Mapping):
        record = dict(source)
    elif str(source).endswith(".json"):
        path = Path(source)
        if not path.is_file():
            raise BertologyError(f"no findings record {path}")
        record = results.read_json(path)
        if record.get("version") != FINDINGS_VERSION:
            raise DataFormatError(
                f"findings record version {record.get('version')!r}, this code reads {FINDINGS_VERSION}: "
                "record it again with `bertology findings RUN --record FILE`",
                path,
            )
    else:
        return record_findings(source)
    if not isinstance(record.get("notebooks"), list):
        raise DataFormatError("a findings record needs a 'notebooks' list", str(source))
    return record


def claim_uncertainty(claim: Claim | Mapping, *, short: bool = False) -> str:
    """A claim's interval and seed count as text (:func:`~bertology_utils.papers.claims.uncertainty`); ``claim``: a
    :class:`Claim` or a recorded claim (``claims.json``, a findings record)."""
    if isinstance(claim, Claim):
        return uncertainty(claim.interval, claim.seeds, short=short)
    return uncertainty(claim.get("interval"), claim.get("seeds"), short=short)


def _cell(text: object) -> str:
    """Text for one Markdown table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _short_model(record: Mapping) -> str:
    return str(record["model"]).rstrip("/").rsplit("/", 1)[-1]


def _claim_line(claim: Mapping) -> str:
    """The claim without the label that tells its variants apart (``det: the best head...`` -> ``the best head...``).

    Only a label equal to the key's last part is dropped, so two different claims never merge.
    """
    text, label = str(claim["claim"]), str(claim["key"]).rsplit(".", 1)[-1]
    if text.startswith(f"{label}: "):
        text = text[len(label) + 2 :]
        text = text[:1].upper() + text[1:]
    return text


_ORDER = [v.value for v in Verdict]


def _verdicts(found: list[str]) -> str:
    """One cell of verdicts: ``holds``; ``holds (3 of 3)``; ``9 holds, 3 differs, 2 inconclusive``; ``—``.

    Counted in :class:`Verdict`'s order (holds, partly, differs, inconclusive, not testable); a verdict it does not
    know comes last rather than vanishing."""
    if not found:
        return "—"
    counts = Counter(found)
    if len(counts) == 1:
        return found[0] if len(found) == 1 else f"{found[0]} ({len(found)} of {len(found)})"
    known = [v for v in _ORDER if counts[v]] + [v for v in counts if v not in _ORDER]
    return ", ".join(f"{counts[v]} {v}" for v in known)


def summary_table(records: Sequence[Mapping]) -> str:
    """One line per claim (its variants folded together), the paper, and each record's verdicts."""
    if not records:
        raise BertologyError("no findings records to tabulate")
    lines: dict[tuple[str, str], dict[int, list[str]]] = {}
    for i, record in enumerate(records):
        for nb in record["notebooks"]:
            for claim in nb["claims"]:
                lines.setdefault((claim["paper"], _claim_line(claim)), {}).setdefault(i, []).append(claim["verdict"])
    header = ["claim", "paper", *(_short_model(r) for r in records)]
    rows = [
        [_cell(text), _cell(paper), *(_verdicts(found.get(i, [])) for i in range(len(records)))]
        for (paper, text), found in lines.items()
    ]
    return _markdown(header, rows)


def claims_tables(record: Mapping, notebooks: Iterable[str] | None = None, heading: str = "###") -> str:
    """Every claim of one record with the paper's value and ours, a table per notebook (``heading`` its level).

    Where a claim of the record has an interval or a seed count, every table has an "interval, seeds" column
    (:func:`claim_uncertainty`); a record with neither (one made before them) gets the tables it always had."""
    wanted = None if notebooks is None else set(notebooks)
    uncertain = any(claim_uncertainty(c) for nb in record["notebooks"] for c in nb["claims"])
    header = ["claim", "paper", "paper's value", "ours", "verdict"] + (["interval, seeds"] if uncertain else [])
    parts = []
    for nb in record["notebooks"]:
        if wanted is not None and nb["name"] not in wanted:
            continue
        rows = [
            [_cell(c["claim"]), _cell(c["paper"]), _cell(c["paper_value"]), _cell(c["ours"]), c["verdict"]]
            + ([_cell(claim_uncertainty(c))] if uncertain else [])
            for c in nb["claims"]
        ]
        skipped = "".join(f"\n- skipped {_cell(s['section'])}: {_cell(s['reason'])}" for s in nb["skipped"])
        body = _markdown(header, rows) if rows else "No claims."
        parts.append(f"{heading} {nb['name']}\n\n{body}\n{skipped}".rstrip())
    return "\n\n".join(parts)


#: How the records of :func:`runs_table` compare on one claim.
SAME, ONE_INCONCLUSIVE, FLIPPED = "same", "inconclusive on one side", "flipped"
_OUTCOMES = (SAME, ONE_INCONCLUSIVE, FLIPPED)


def _run_labels(records: Sequence[Mapping]) -> list[str]:
    """Each record's column in :func:`runs_table`: the run parameters whose values differ between the records
    ("seed 3", "precision auto"; a parameter a run did not set reads "default"), else the kernels, where the runs
    held the CPU to other instruction sets ("kernels held to AVX2", "the CPU's own kernels"; with the variables where
    the levels alone would name two runs alike), else its run name."""
    given = [r.get("parameters") or {} for r in records]
    differ = sorted(k for k in set().union(*given) if len({repr(p.get(k)) for p in given}) > 1)
    if differ:
        return [", ".join(f"{k} {p[k]}" if k in p else f"{k} default" for k in differ) for p in given]
    kernels = [r.get("kernels") or {} for r in records]
    if len({repr(sorted(k.items())) for k in kernels}) > 1:
        for said in (_held_to, _held_by):  # the levels alone, unless two runs would read the same
            labels = [said(k) if k else "the CPU's own kernels" for k in kernels]
            if len(set(labels)) == len(labels):
                return labels
    return [str(r.get("run", "run")) for r in records]


def _held_to(caps: Mapping[str, str]) -> str:
    return "kernels held to " + ", ".join(dict.fromkeys(level.upper() for level in caps.values()))


def _held_by(caps: Mapping[str, str]) -> str:
    return "kernels held by " + caps_said(caps)


def runs_table(records: Sequence[Mapping], *, breakable_keys: bool = False) -> str:
    """Runs of one model that differ in one setting (a base seed, a precision), claim by claim, each column named
    by the parameters that differ (:func:`_run_labels`): each record's verdict with its interval
    and seed count ("one seed", "holds in k of n seeds"), and whether the verdicts are the same, one side
    inconclusive (no regression, as ``bertology check`` reads it), or flipped. A line above counts them, and those
    on trained models (with a seed count) apart. Only the claims every record made are compared. ``breakable_keys``
    (for a web page): a claim's key may break after its dots (``<wbr>``), else the longest keys make the table wider
    than the page."""
    if len(records) < 2:
        raise BertologyError("a table of runs compares at least two findings records (runs with another setting)")
    models = sorted({str(r["model"]) for r in records})
    if len(models) != 1:
        raise BertologyError(f"a table of runs compares runs of one model, not {models}")
    found = [{(nb["name"], c["key"]): c for nb in record["notebooks"] for c in nb["claims"]} for record in records]
    keys = [key for key in found[0] if all(key in claims for claims in found[1:])]
    if not keys:
        raise BertologyError("the records share no claim: run the same notebooks with each setting")
    rows: list[list[str]] = []
    outcomes: Counter[tuple[str, bool]] = Counter()
    for key in keys:
        claims = [claims[key] for claims in found]
        verdicts = {c["verdict"] for c in claims}
        outcome = (
            SAME if len(verdicts) == 1 else ONE_INCONCLUSIVE if Verdict.INCONCLUSIVE.value in verdicts else FLIPPED
        )
        outcomes[outcome, any(c.get("seeds") for c in claims)] += 1
        cells = [c["verdict"] + (f" ({text})" if (text := claim_uncertainty(c, short=True)) else "") for c in claims]
        shown = _cell(key[1]).replace(".", ".<wbr>") if breakable_keys else _cell(key[1])
        rows.append([key[0], shown, *map(_cell, cells), outcome])

    def counted(trained: bool | None) -> str:
        totals = {
            o: sum(n for (kind, t), n in outcomes.items() if kind == o and trained in (None, t)) for o in _OUTCOMES
        }
        return ", ".join(f"{n} {o}" for o, n in totals.items() if n)

    trained = sum(n for (_, t), n in outcomes.items() if t)
    line = f"{len(keys)} claims: {counted(None)}" + (
        f"; of them {trained} on trained models: {counted(True)}" if trained else ""
    )
    header = ["notebook", "claim", *_run_labels(records), "verdicts"]
    return f"{line}.\n\n" + _markdown(header, rows)


def runs_tables(records: Sequence[Mapping], *, breakable_keys: bool = False) -> str:
    """:func:`runs_table` of each set of records that ran the same notebooks, one after the other, in the order
    their first record comes: some notebooks run with each setting, and others with each setting apart (a
    record holds one run). A set of one record is refused, as :func:`runs_table` refuses it; ``breakable_keys``: as
    :func:`runs_table`'s."""
    groups: dict[tuple[str, ...], list[Mapping]] = {}
    for record in records:
        groups.setdefault(tuple(sorted(nb["name"] for nb in record["notebooks"])), []).append(record)
    return "\n\n".join(runs_table(group, breakable_keys=breakable_keys) for group in groups.values())


def _markdown(header: list[str], rows: list[list[str]]) -> str:
    return "\n".join(
        ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(r) + " |" for r in rows]
    )
