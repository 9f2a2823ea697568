"""The ``bertology`` command (also ``python -m bertology_utils``).

Each subcommand is a ``Command``: a name, a one-line help, a function that adds its arguments
to an argparse parser, a handler that returns the exit status, examples, and optionally a
paragraph describing it. Adding one means
writing those two functions and listing the Command in ``COMMANDS``.

Exit status: 0 success, 1 the work ran but something failed (a notebook), 2 usage error.
Expected errors (``BertologyError``) print ``bertology: error: ...`` without a traceback.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bertology_utils.core._version import __version__
from bertology_utils.run import harness
from bertology_utils.core.errors import BertologyError

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


@dataclass(frozen=True)
class Command:
    name: str
    help: str                                               # one line, for `bertology --help`
    add_arguments: Callable[[argparse.ArgumentParser], None]
    handler: Callable[[argparse.Namespace], int]            # returns the exit status
    epilog: str = ""                                        # examples, for `bertology NAME --help`
    description: str = ""                                   # a paragraph for `bertology NAME --help` (default: help)


# --------------------------------------------------------------------------- run

RUN_EPILOG = """\
examples:
  bertology run                        run every notebook into results/<date-time>/
  bertology run --run-name default     ... into results/default/ (replacing what it held)
  bertology run 00 02_heads            run notebooks by number or name
  bertology run 00 -p n_sentences 8 -p model_name bert-base-uncased
  bertology run --list                 list the notebooks

regression checks (a reference folder holds <notebook>.json; see bertology_utils.run.regression):
  bertology run --check my-refs/       compare each notebook's metrics with my-refs/<notebook>.json
                                       under the tolerances stated there; print the diff and
                                       write <results>/<run-name>/check.json
  bertology run --update-reference my-refs/
                                       (re)write my-refs/ from this run, on purpose: values and
                                       parameters change, stated tolerances are kept
  bertology check RUN REFERENCE_DIR    check a finished run
  make refresh-references              the test suite's references (tests/references/small)

-p values are read like papermill's: 8 is an int, 0.5 a float, True/False/None,
JSON such as '[1, 2]' or '{"a": 1}'; anything else is a string. A --params-file is a JSON
object, notebook stem -> {parameter: value} ('-' reads it from stdin); -p values win.
Exit status: 0 every notebook ran (and --check passed), 1 a notebook failed (see the summary
and <results>/<run-name>/run.json) or --check found a metric off or missing, 2 usage error
or a malformed reference or parameters file.
"""


def parse_parameter_value(text: str):
    """Read a ``-p`` value: True/False/None, int or float as papermill's CLI does, then JSON, else the string.

    (papermill keeps its own version, ``papermill.cli._resolve_type``, private and without JSON.)
    """
    keywords = {"True": True, "False": False, "None": None}
    if text in keywords:
        return keywords[text]
    for convert in (int, float, json.loads):
        try:
            return convert(text)
        except ValueError:
            pass
    return text


def _add_run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("notebooks", nargs="*", metavar="NOTEBOOK",
                        help="a notebook path, file name, stem (00_tour) or number (00); default: every notebook")
    parser.add_argument("-p", "--parameter", nargs=2, action="append", default=[], dest="parameters",
                        metavar=("KEY", "VALUE"), help="set a notebook parameter; repeatable")
    parser.add_argument("--run-name", metavar="NAME",
                        help="results go to RESULTS_DIR/NAME/ (default: the local date-time, e.g. 20261121-235959)")
    parser.add_argument("--results-dir", type=Path, metavar="DIR",
                        help=f"results root (default: ${harness.RESULTS_DIR_ENV}, else results/ in the project)")
    parser.add_argument("--kernel", default="python3", metavar="NAME", help="Jupyter kernel (default: %(default)s)")
    parser.add_argument("--cell-timeout", type=int, metavar="SECONDS",
                        help="fail a cell that runs longer than this (default: no limit)")
    parser.add_argument("--list", action="store_true", help="list the notebooks and exit")
    parser.add_argument("--params-file", type=Path, metavar="FILE",
                        help="parameters per notebook: a JSON object, notebook stem -> {parameter: value}")
    reference = parser.add_mutually_exclusive_group()
    reference.add_argument("--check", type=Path, metavar="REFERENCE_DIR",
                           help="compare the metrics with REFERENCE_DIR/<notebook>.json; exit 1 on a regression")
    reference.add_argument("--update-reference", type=Path, metavar="REFERENCE_DIR",
                           help="write the metrics to REFERENCE_DIR/<notebook>.json, keeping stated tolerances")


def _read_params_file(path: Path, notebooks: list[Path]) -> dict[str, dict]:
    """Read a --params-file: notebook stem -> parameters, for stems of notebooks/ or of ``notebooks``."""
    from bertology_utils.core.errors import DataFormatError

    try:
        text = sys.stdin.read() if str(path) == "-" else path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BertologyError(f"--params-file: cannot read {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataFormatError(f"not valid JSON ({exc})", path) from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise DataFormatError("expected a JSON object: notebook stem -> {parameter: value}", path)
    known = {nb.stem for nb in [*harness.list_notebooks(), *notebooks]}
    unknown = sorted(set(data) - known)
    if unknown:
        raise DataFormatError(f"no notebook named {', '.join(unknown)}; notebooks: {', '.join(sorted(known))}", path)
    bad = sorted(f"{stem}: {key}" for stem, params in data.items() for key in params if not key.isidentifier())
    if bad:
        raise DataFormatError(f"parameter names must be Python identifiers: {', '.join(bad)}", path)
    return data


def _check(run_dir: Path, reference_dir: Path, references=None) -> int:
    """Compare a run with references, print the diff, write check.json; the exit status."""
    from bertology_utils.run import regression

    result = regression.check_run(run_dir, reference_dir, references)
    print(result.report())
    print(f"check: {regression.write_check(result, run_dir)}")
    return EXIT_OK if result.ok else EXIT_FAILED


def _update_reference(run_dir: Path, reference_dir: Path) -> None:
    from bertology_utils.run import regression

    refresh = regression.update_references(run_dir, reference_dir)
    print(refresh.changes.report(heading="the old references in"))
    for stem in refresh.not_written:
        print(f"not updated: {stem} failed; its reference is left as it was")
    print(f"wrote {len(refresh.written)} reference{'s' * (len(refresh.written) != 1)} in {reference_dir}"
          + ("; review them with git diff" if refresh.written else ""))


def _cmd_run(args: argparse.Namespace) -> int:
    if args.list:
        notebooks = harness.list_notebooks()
        if not notebooks:
            print(f"no notebooks in {harness.DEFAULT_NOTEBOOKS_DIR}", file=sys.stderr)
        for nb in notebooks:
            print(nb.stem)
        return EXIT_OK

    parameters = {}
    for key, value in args.parameters:
        if not key.isidentifier():
            raise BertologyError(f"-p {key}: a parameter name must be a Python identifier")
        parameters[key] = parse_parameter_value(value)
    notebooks = harness.resolve_notebooks(args.notebooks) if args.notebooks else harness.list_notebooks()
    if not notebooks:
        raise BertologyError(f"no notebooks in {harness.DEFAULT_NOTEBOOKS_DIR}")
    per_notebook = _read_params_file(args.params_file, notebooks) if args.params_file else None
    # A malformed reference stops the run before it starts, not after an hour of notebooks.
    from bertology_utils.run import regression
    references = regression.read_references(args.check) if args.check else None
    if args.update_reference:
        regression.read_references(args.update_reference, allow_empty=True)
    report = harness.run_notebooks(notebooks, run_name=args.run_name, parameters=parameters,
                                   notebook_parameters=per_notebook,
                                   results_root=args.results_dir, kernel_name=args.kernel,
                                   cell_timeout=args.cell_timeout)
    print(report.summary())
    print(f"results: {report.run_dir}")
    status = EXIT_OK if report.ok else EXIT_FAILED
    if args.check:
        status = max(status, _check(report.run_dir, args.check, references))
    if args.update_reference:
        _update_reference(report.run_dir, args.update_reference)
    return status


CHECK_DESCRIPTION = """\
Compare the metrics of a finished run with reference metrics (REFERENCE_DIR/<notebook>.json),
each under the tolerance its reference states; print what regressed, went missing or is new
and write RUN_DIR/check.json. The same as `bertology run --check`, without running anything.
"""

CHECK_EPILOG = """\
examples:
  bertology check nightly my-refs/       results/nightly/ (a run name) against my-refs/<notebook>.json
  bertology check /data/runs/x tests/references/small

Exit status: 0 every metric within its tolerance, 1 a metric off or missing, 2 usage error
or a malformed reference file.
"""


def _add_check_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR",
                        help=f"a run's folder, or a run name under the results root (${harness.RESULTS_DIR_ENV})")
    parser.add_argument("reference_dir", type=Path, metavar="REFERENCE_DIR",
                        help="a folder of <notebook>.json references")


def _cmd_check(args: argparse.Namespace) -> int:
    return _check(harness.find_run(args.run_dir), args.reference_dir)


# --------------------------------------------------------------------------- shared helpers
#
# The package modules import torch, transformers and zarr (seconds); they are imported inside
# the handlers so that `bertology --help` and `bertology run` stay fast.

#: Mirrors bertology_utils.attention.word_attention.FROM_RULES and extraction.TOO_LONG_POLICIES (kept
#: literal for the import time above; tests/unit/test_cli.py checks they agree).
FROM_RULES = ("mean", "first", "max")
TOO_LONG_POLICIES = ("skip", "error")
_SHOW_SKIPPED = 10  # skipped indices listed in a summary


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive integer")
    return value


def parse_shard(text: str) -> tuple[int, int]:
    """``"I/N"`` -> ``(I, N)`` with ``0 <= I < N`` (an argparse type)."""
    i, sep, n = text.partition("/")
    try:
        if not sep:
            raise ValueError
        shard = int(i), int(n)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not I/N, e.g. 0/4") from None
    if not 0 <= shard[0] < shard[1]:
        raise argparse.ArgumentTypeError(f"{text!r}: I/N needs 0 <= I < N (shards count from 0)")
    return shard


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _store_lines(store) -> list[str]:
    """A store's summary as indented lines (items, extracted, skipped with indices, missing, path)."""
    s = store.summary()
    lines = [f"store: {s['path']}",
             f"  {s['corpus']} under {s['model']}, from_rule {s['from_rule']}",
             f"  items {s['items']}: extracted {s['extracted']}, skipped {s['skipped']}, missing {s['missing']}"
             f" ({_plural(s['shards'], 'shard')})"]
    skipped = sorted(store.skipped())
    if skipped:
        limit = store.metadata["conversion"]["max_tokens"]
        shown = ", ".join(map(str, skipped[:_SHOW_SKIPPED]))
        more = f" ... ({len(skipped) - _SHOW_SKIPPED} more)" if len(skipped) > _SHOW_SKIPPED else ""
        lines.append(f"  {_plural(len(skipped), 'item')} longer than {limit} tokens "
                     f"{'was' if len(skipped) == 1 else 'were'} skipped: indices {shown}{more}")
    if s["missing"]:
        gaps = ", ".join(f"[{a}, {b})" for a, b in store.missing_ranges()[:_SHOW_SKIPPED])
        lines.append(f"  missing items {gaps} are not extracted yet (other shards? join them with bertology merge)")
    return lines


# --------------------------------------------------------------------------- extract

EXTRACT_DESCRIPTION = """\
Run a model over a data set and write the word-level attention of every item into an
attention store (a Zarr folder that notebooks read with AttentionStore.open). The input is
one of a registered data set, a CoNLL-U file, a text file (one sentence per line) or
sentences given on the command line. Extraction is resumable: re-running the same command
continues where an interrupted run stopped; a store written with other settings is refused
unless --overwrite. Items with more tokens than the model takes are skipped and reported
(or stop the run with --too-long error). --shard I/N extracts one of N slices, so N
processes or machines can work in parallel; `bertology merge` joins their stores.
"""

EXTRACT_EPILOG = """\
examples:
  bertology extract --dataset ud-english-ewt --split dev --store results/ewt-dev.zarr
  bertology extract --conllu my.conllu --model bert-base-uncased --from-rule first --store my.zarr
  bertology extract --sentence "The cat sat on the mat." --token-level --store cat.zarr

  in parallel, one shard per process (0/4 ... 3/4), then join the stores:
  bertology extract --dataset ud-english-ewt --split train --shard 0/4 --store part0.zarr
  bertology merge ewt-train.zarr part0.zarr part1.zarr part2.zarr part3.zarr

Data sets: see `bertology info`. Exit status: 0 done, 2 usage error or an item too long
with --too-long error (the store keeps what was done; re-run to resume).
"""


def _add_extract_arguments(parser: argparse.ArgumentParser) -> None:
    data = parser.add_argument_group("input (exactly one)")
    source = data.add_mutually_exclusive_group(required=True)
    source.add_argument("--dataset", metavar="NAME",
                        help="a registered data set: ud-english-ewt, sample, sample-pairs, glue/SST-2, ... "
                             "(list: bertology info)")
    source.add_argument("--conllu", type=Path, metavar="FILE", help="a CoNLL-U file")
    source.add_argument("--text", type=Path, metavar="FILE",
                        help="a UTF-8 text file, one sentence per line (blank lines skipped)")
    source.add_argument("--sentence", action="append", dest="sentences", metavar="TEXT",
                        help="a sentence; repeatable")
    data.add_argument("--split", metavar="SPLIT", help="the split of --dataset (default: its usual one, e.g. dev)")
    data.add_argument("--limit", type=_positive_int, metavar="N", help="only the first N items")

    parser.add_argument("--store", type=Path, required=True, metavar="PATH",
                        help="the attention store to write (a folder, e.g. results/ewt-dev.zarr)")
    parser.add_argument("--model", metavar="NAME_OR_PATH",
                        help="a Hugging Face Hub id or a local model folder (default: all-MiniLM-L6-v2)")

    conv = parser.add_argument_group("conversion")
    conv.add_argument("--from-rule", choices=FROM_RULES, default="mean",
                      help="how the attention FROM a word's tokens is combined (default: %(default)s; "
                           "attention TO a word is always summed)")
    conv.add_argument("--token-level", action="store_true", help="also keep the token-level attention (large)")
    conv.add_argument("--too-long", choices=TOO_LONG_POLICIES, default="skip",
                      help="items with more tokens than the model takes: skip them or stop (default: %(default)s)")
    conv.add_argument("--max-tokens", type=_positive_int, metavar="N",
                      help="treat items with more than N tokens as too long (default: the model's limit)")

    run = parser.add_argument_group("running")
    run.add_argument("--batch-size", type=_positive_int, default=32, metavar="N",
                     help="items per forward pass (default: %(default)s)")
    run.add_argument("--block-size", type=_positive_int, default=512, metavar="N",
                     help="items per write to the store (default: %(default)s)")
    run.add_argument("--shard", type=parse_shard, metavar="I/N",
                     help="extract only slice I of N (0 <= I < N) of the items, for parallel workers")
    run.add_argument("--overwrite", action="store_true",
                     help="delete a store at --store first instead of resuming it")
    run.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")


def _load_corpus(args: argparse.Namespace):
    from bertology_utils import data

    if args.split is not None and args.dataset is None:
        raise BertologyError("--split goes with --dataset")
    if args.dataset is not None:
        corpus = data.load_dataset(args.dataset, args.split)
    elif args.conllu is not None:
        corpus = data.read_conllu(args.conllu)
    elif args.text is not None:
        corpus = data.read_text_lines(args.text)
    else:
        corpus = data.Corpus.from_texts(args.sentences, name="sentences")
    if args.limit is not None and args.limit < len(corpus):
        corpus = corpus[:args.limit]
    return corpus


def _cmd_extract(args: argparse.Namespace) -> int:
    from bertology_utils.attention.extraction import extract_attention, shard_range
    from bertology_utils.core.models import load_model

    corpus = _load_corpus(args)
    print(f"data: {corpus.description}")
    loaded = load_model(args.model, progress=args.progress)
    print(f"model: {loaded.name} ({loaded.architecture}, {loaded.num_layers} layers x {loaded.num_heads} heads, "
          f"up to {loaded.max_tokens} tokens, on {loaded.device})")
    if args.overwrite:
        print(f"overwriting any store at {args.store}")
    if args.shard is not None:
        lo, hi = shard_range(len(corpus), args.shard)
        print(f"shard {args.shard[0]}/{args.shard[1]}: items {lo} to {hi - 1} of {len(corpus)}")
    try:
        store = extract_attention(
            corpus, args.store, loaded, batch_size=args.batch_size, block_size=args.block_size,
            from_rule=args.from_rule, keep_tokens=args.token_level, too_long=args.too_long,
            max_tokens=args.max_tokens, shard=args.shard, overwrite=args.overwrite, progress=args.progress)
    except KeyboardInterrupt:
        print(f"\ninterrupted; run the same command again to resume into {args.store}", file=sys.stderr)
        return 130
    print("\n".join(_store_lines(store)))
    return EXIT_OK


# --------------------------------------------------------------------------- info

INFO_DESCRIPTION = """\
Show what this installation works with: the model (its type, layers x heads, token limit,
device; loading it is the slow part, --no-model skips it), every registered data set and
split with where it was found (or its download URL), the versions of Python and the main
libraries, and the settings read from the environment (data directory, cache, offline).
With --store, also the summary and metadata of an attention store.
"""

INFO_EPILOG = """\
examples:
  bertology info                         everything, with the default model
  bertology info --no-model --json       quick, as one JSON object
  bertology info --model roberta-base --store results/ewt-dev.zarr

Exit status: 0, or 1 when the model or the store could not be opened (the rest is still shown).
"""

_VERSIONS = {"torch": "torch", "transformers": "transformers", "zarr": "zarr", "papermill": "papermill"}


def _add_info_arguments(parser: argparse.ArgumentParser) -> None:
    model = parser.add_mutually_exclusive_group()
    model.add_argument("--model", metavar="NAME_OR_PATH",
                       help="the model to describe: a Hub id or a local folder (default: the default model)")
    model.add_argument("--no-model", action="store_true", help="do not load a model (fast)")
    parser.add_argument("--store", type=Path, metavar="PATH", help="also describe this attention store")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def _versions() -> dict[str, str | None]:
    import importlib.metadata
    import platform

    out: dict[str, str | None] = {"python": platform.python_version(), "bertology_utils": __version__}
    for key, dist in _VERSIONS.items():
        try:
            out[key] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[key] = None
    return out


def _settings() -> dict:
    from bertology_utils.core import settings  # not .models: `info --no-model` should not pay for importing torch

    return {
        settings.DATA_DIR_ENV: settings.data_dir(),
        "project_data_dir": settings.project_data_dir(),
        "cache_dir": settings.cache_dir(),
        "offline": settings.is_offline(),
        "default_model": settings.DEFAULT_MODEL,
        "default_model_path": settings.default_model_path(),
    }


def _info(args: argparse.Namespace) -> tuple[dict, bool]:
    """The info as a JSON-able dict, and whether everything asked for could be opened."""
    from bertology_utils.data import available_datasets
    from bertology_utils.core.errors import ModelNotAvailableError, StoreError

    ok = True
    info: dict = {"model": None}
    if not args.no_model:
        from bertology_utils.core.models import describe_model, load_model
        try:
            info["model"] = describe_model(load_model(args.model))
        except ModelNotAvailableError as exc:
            info["model"], ok = {"name": args.model, "error": str(exc)}, False
    info["datasets"] = available_datasets()
    info["versions"] = _versions()
    info["settings"] = _settings()
    if args.store is not None:
        from bertology_utils.attention.store import AttentionStore
        try:
            store = AttentionStore.open(args.store)
            info["store"] = {**store.summary(), "complete": store.is_complete, "skipped_items": store.skipped(),
                             "metadata": store.metadata}
        except StoreError as exc:
            info["store"], ok = {"path": args.store, "error": str(exc)}, False
    return json.loads(json.dumps(info, default=str)), ok  # paths -> strings, int keys -> strings


def _info_text(info: dict) -> list[str]:
    lines = ["model"]
    model = info["model"]
    if model is None:
        lines.append("  (not loaded: --no-model)")
    elif "error" in model:
        lines.append(f"  error: {model['error']}")
    else:
        lines += [f"  {key}: {value}" for key, value in model.items()]
    lines.append("data sets")
    width = max(len(f"{d['name']} {d['split']}") for d in info["datasets"])
    for d in info["datasets"]:
        where = (f"found in {d['where']}: {d['path']}" if d["path"] else
                 f"not found; download: {d['url']}" if d["url"] else "not found (no download URL)")
        lines.append(f"  {d['name'] + ' ' + d['split']:<{width}}  {where}")
    lines.append("versions")
    lines.append("  " + ", ".join(f"{key} {value or 'not installed'}" for key, value in info["versions"].items()))
    lines.append("settings")
    lines += [f"  {key}: {'(not set)' if value is None else value}" for key, value in info["settings"].items()]
    if "store" in info:
        store = info["store"]
        if "error" in store:
            lines += ["store", f"  error: {store['error']}"]
        else:
            lines += [f"store: {store['path']}",
                      f"  items {store['items']}: extracted {store['extracted']}, skipped {store['skipped']}, "
                      f"missing {store['missing']} ({_plural(store['shards'], 'shard')}; "
                      f"{'complete' if store['complete'] else 'not complete'})"]
            skipped = sorted(map(int, store["skipped_items"]))
            if skipped:
                shown = ", ".join(map(str, skipped[:_SHOW_SKIPPED]))
                lines.append(f"  skipped: indices {shown}" + (" ..." if len(skipped) > _SHOW_SKIPPED else ""))
            lines.append("  metadata:")
            lines += ["    " + line for line in json.dumps(store["metadata"], indent=2).splitlines()]
    return lines


def _cmd_info(args: argparse.Namespace) -> int:
    info, ok = _info(args)
    print(json.dumps(info, indent=2) if args.json else "\n".join(_info_text(info)))
    return EXIT_OK if ok else EXIT_FAILED


# --------------------------------------------------------------------------- merge

MERGE_DESCRIPTION = """\
Join attention stores written in parallel (`bertology extract --shard I/N`, same data,
model and settings) into one store at TARGET: each source's shards are copied, shards
already in TARGET are left as they are, and stores written with different settings are
refused. TARGET may already exist (merge shards as they finish); prints the merged summary
and whether every item is now in it.
"""

MERGE_EPILOG = """\
examples:
  bertology merge ewt-train.zarr part0.zarr part1.zarr part2.zarr part3.zarr
  bertology merge ewt-train.zarr part3.zarr         add a late shard to the merged store
  bertology merge --overwrite all.zarr part*.zarr   start TARGET afresh

Exit status: 0 merged (complete or not; the output says), 2 usage error or stores that do not fit.
"""


def _add_merge_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", type=Path, metavar="TARGET", help="the store to write (created if missing)")
    parser.add_argument("sources", type=Path, nargs="+", metavar="SOURCE", help="stores to copy shards from")
    parser.add_argument("--overwrite", action="store_true", help="delete TARGET first")


def _cmd_merge(args: argparse.Namespace) -> int:
    from bertology_utils.attention.store import merge_stores

    store = merge_stores(args.target, args.sources, overwrite=args.overwrite)
    print("\n".join(_store_lines(store)))
    print("complete: every item is extracted or skipped" if store.is_complete
          else f"not complete: {store.n_items - store.done} items missing")
    return EXIT_OK


# --------------------------------------------------------------------------- slides

SLIDES_DESCRIPTION = """\
Turn the executed notebooks of a run into reveal.js slide decks: one HTML file per notebook
that opens offline (reveal.js, its theme, jQuery and require.js are inlined; figures are
embedded). The cells' slideshow metadata makes the slides, as RISE does live in JupyterLab.
Code is hidden unless --show-code.
"""

SLIDES_EPILOG = """\
examples:
  bertology slides results/default             every notebook of the run
  bertology slides default 00 03 --show-code   a run by name; two notebooks, with their code
  bertology slides results/default --out decks

Decks go to RUN_DIR/<stem>/<stem>.slides.html, or DIR/<stem>.slides.html with --out.
Exit status: 0, or 2 when the run folder, a notebook or the JavaScript libraries are missing.
"""


def _add_slides_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a run folder (results/NAME) or a run name")
    parser.add_argument("notebooks", nargs="*", metavar="NOTEBOOK",
                        help="only these notebooks, by stem (00_tour) or number (00); default: every one")
    parser.add_argument("--out", type=Path, metavar="DIR", help="write the decks into DIR instead")
    parser.add_argument("--show-code", action="store_true", help="show the code cells' input (hidden by default)")


def _cmd_slides(args: argparse.Namespace) -> int:
    from bertology_utils.present.slides import run_slides

    for path in run_slides(args.run_dir, args.notebooks, out_dir=args.out, show_code=args.show_code):
        print(path)
    return EXIT_OK


# --------------------------------------------------------------------------- report

REPORT_DESCRIPTION = """\
Write one self-contained HTML page for a run: model, data, versions and parameters, each
notebook's status, "paper vs ours" tables and figures, every metric, the failing cells, and
the differences found by `bertology check` when the run folder has a check.json.
"""

REPORT_EPILOG = """\
examples:
  bertology report results/default             writes results/default/report.html
  bertology report default --out report.html

Exit status: 0, or 2 when the run folder is missing or holds no run.
"""


def _add_report_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a run folder (results/NAME) or a run name")
    parser.add_argument("--out", type=Path, metavar="FILE", help="where to write the page (default: RUN_DIR/report.html)")


def _cmd_report(args: argparse.Namespace) -> int:
    from bertology_utils.present.report import build_report

    print(build_report(args.run_dir, args.out))
    return EXIT_OK


# --------------------------------------------------------------------------- assets

ASSETS_DESCRIPTION = """\
The offline views (bertviz, widgets) and slide decks inline third-party JavaScript installed
from npm: `make setup` runs `npm ci` in the checkout; --install puts the same pinned versions
in the cache folder (for installs without a checkout). Without them, pages load the libraries
from CDNs (with a warning) and draw nothing offline.
"""
ASSETS_EPILOG = """\
examples:
  bertology assets               where each library was found, or that it is missing
  bertology assets --install     npm install the pinned versions into <cache>/js
Exit status: 0 every library found, 1 some missing.
"""


def _add_assets_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--install", action="store_true", help="install the missing libraries with npm into the cache")


def _cmd_assets(args: argparse.Namespace) -> int:
    from bertology_utils.present import assets

    if args.install and not assets.have_assets():
        print(f"installed into {assets.install()}")
    for name, asset in assets.ASSETS.items():
        path = assets.asset_path(name)
        print(f"  {name:13s} {asset.package + '@' + asset.version:40s} {path if path else 'MISSING'}")
    if not assets.have_assets():
        print(f"missing libraries: {assets.INSTALL_HINT}")
        return EXIT_FAILED
    return EXIT_OK


# --------------------------------------------------------------------------- registry

COMMANDS: list[Command] = [
    Command("run", "execute notebooks with papermill and record their metrics and figures",
            _add_run_arguments, _cmd_run, RUN_EPILOG),
    Command("extract", "extract word-level attention of a data set into a resumable, shardable store",
            _add_extract_arguments, _cmd_extract, EXTRACT_EPILOG, EXTRACT_DESCRIPTION),
    Command("info", "show the model, the data sets found, versions and settings (and a store's summary)",
            _add_info_arguments, _cmd_info, INFO_EPILOG, INFO_DESCRIPTION),
    Command("merge", "join attention stores extracted in parallel shards into one",
            _add_merge_arguments, _cmd_merge, MERGE_EPILOG, MERGE_DESCRIPTION),
    Command("check", "compare a run's metrics with reference metrics under their stated tolerances",
            _add_check_arguments, _cmd_check, CHECK_EPILOG, CHECK_DESCRIPTION),
    Command("slides", "turn a run's executed notebooks into offline reveal.js slide decks",
            _add_slides_arguments, _cmd_slides, SLIDES_EPILOG, SLIDES_DESCRIPTION),
    Command("report", "write one self-contained HTML page summarising a run",
            _add_report_arguments, _cmd_report, REPORT_EPILOG, REPORT_DESCRIPTION),
    Command("assets", "show (or install) the JavaScript the offline views and slide decks inline",
            _add_assets_arguments, _cmd_assets, ASSETS_EPILOG, ASSETS_DESCRIPTION),
]

DESCRIPTION = "See what the attention heads of BERT-style encoders do: run the notebooks, record results."
EPILOG = """\
examples:
  bertology run                  run every notebook
  bertology run 00 -p n_sentences 8
  bertology extract --dataset ud-english-ewt --split dev --store results/ewt-dev.zarr
  bertology info --no-model      data sets found, versions, settings
  bertology COMMAND --help       the options of one command
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bertology", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(title="commands", dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        sub = subparsers.add_parser(command.name, help=command.help, description=command.description or command.help,
                                    epilog=command.epilog, formatter_class=argparse.RawDescriptionHelpFormatter)
        command.add_arguments(sub)
        sub.set_defaults(handler=command.handler)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (default: sys.argv[1:]) and return the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version (0) or a usage error (2); argparse has printed why
        return int(exc.code or 0)
    try:
        return args.handler(args)
    except BertologyError as exc:
        print(f"bertology: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
