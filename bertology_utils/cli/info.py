"""``bertology info``: show the model, the data sets found, versions and settings (and a store's summary)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bertology_utils.cli._command import EXIT_FAILED, EXIT_OK, SHOW_SKIPPED, Command, plural
from bertology_utils.core import library_versions

__all__ = ["COMMAND"]

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


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    model = parser.add_mutually_exclusive_group()
    model.add_argument(
        "--model",
        metavar="NAME_OR_PATH",
        help="the model to describe: a Hub id or a local folder (default: the default model)",
    )
    model.add_argument("--no-model", action="store_true", help="do not load a model (fast)")
    parser.add_argument("--store", type=Path, metavar="PATH", help="also describe this attention store")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")


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
    from bertology_utils.core.errors import ModelNotAvailableError, StoreError
    from bertology_utils.data import available_datasets

    ok = True
    info: dict = {"model": None}
    if not args.no_model:
        from bertology_utils.core.models import describe_model, load_model

        try:
            info["model"] = describe_model(load_model(args.model))
        except ModelNotAvailableError as exc:
            info["model"], ok = {"name": args.model, "error": str(exc)}, False
    info["datasets"] = available_datasets()
    info["versions"] = library_versions()
    info["settings"] = _settings()
    if args.store is not None:
        from bertology_utils.attention.store import AttentionStore

        try:
            store = AttentionStore.open(args.store)
            info["store"] = {
                **store.summary(),
                "complete": store.is_complete,
                "skipped_items": store.skipped(),
                "metadata": store.metadata,
            }
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
        where = (
            f"found in {d['where']}: {d['path']}"
            if d["path"]
            else f"not found; download: {d['url']}"
            if d["url"]
            else "not found (no download URL)"
        )
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
            lines += [
                f"store: {store['path']}",
                f"  items {store['items']}: extracted {store['extracted']}, skipped {store['skipped']}, "
                f"missing {store['missing']} ({plural(store['shards'], 'shard')}; "
                f"{'complete' if store['complete'] else 'not complete'})",
            ]
            skipped = sorted(map(int, store["skipped_items"]))
            if skipped:
                shown = ", ".join(map(str, skipped[:SHOW_SKIPPED]))
                lines.append(f"  skipped: indices {shown}" + (" ..." if len(skipped) > SHOW_SKIPPED else ""))
            lines.append("  metadata:")
            lines += ["    " + line for line in json.dumps(store["metadata"], indent=2).splitlines()]
    return lines


def _handle(args: argparse.Namespace) -> int:
    info, ok = _info(args)
    print(json.dumps(info, indent=2) if args.json else "\n".join(_info_text(info)))
    return EXIT_OK if ok else EXIT_FAILED


COMMAND = Command(
    "info",
    "show the model, the data sets found, versions and settings (and a store's summary)",
    _add_arguments,
    _handle,
    INFO_EPILOG,
    INFO_DESCRIPTION,
)
