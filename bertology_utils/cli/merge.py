"""``bertology merge``: join attention stores extracted in parallel shards into one."""

from __future__ import annotations

import argparse
from pathlib import Path

from bertology_utils.cli._command import EXIT_OK, Command, store_lines

__all__ = ["COMMAND"]

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


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", type=Path, metavar="TARGET", help="the store to write (created if missing)")
    parser.add_argument("sources", type=Path, nargs="+", metavar="SOURCE", help="stores to copy shards from")
    parser.add_argument("--overwrite", action="store_true", help="delete TARGET first")


def _handle(args: argparse.Namespace) -> int:
    from bertology_utils.attention.store import merge_stores

    store = merge_stores(args.target, args.sources, overwrite=args.overwrite)
    print("\n".join(store_lines(store)))
    print(
        "complete: every item is extracted or skipped"
        if store.is_complete
        else f"not complete: {store.n_items - store.done} items missing"
    )
    return EXIT_OK


COMMAND = Command(
    "merge",
    "join attention stores extracted in parallel shards into one",
    _add_arguments,
    _handle,
    MERGE_EPILOG,
    MERGE_DESCRIPTION,
)
