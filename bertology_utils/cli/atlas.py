"""``bertology atlas``: every head of a run in one table and one offline page."""

from __future__ import annotations

import argparse
from pathlib import Path

from bertology_utils.cli._command import EXIT_OK, Command
from bertology_utils.core.errors import BertologyError

__all__ = ["COMMAND", "COLUMNS_BLOCK"]

#: The generated block of the documentation listing the columns.
COLUMNS_BLOCK = "atlas-columns"

ATLAS_DESCRIPTION = """\
Join what a run's notebooks recorded per head (surface statistics, pattern type, best relation,
importance, role, L0 survival, norm-weighted shares...) into one row per (model, layer, head).
Writes atlas.parquet, atlas.csv, atlas_dictionary.csv (what each column means, and why an absent
one is absent) and atlas.html (an offline page: a layers x heads grid coloured by any column, a card
per head, filters kept in the URL) into the first run's folder, or --out. Several runs are shown
side by side, each head matched with the most similar head of the other runs where both stores hold
the same sentences. Nothing is recomputed but the cards' small pattern images.
"""

ATLAS_EPILOG = """\
examples:
  bertology atlas default                                 results/default/atlas.html and the tables
  bertology atlas default mpnet --out results/compare     two models side by side
  bertology atlas default --filter "importance.SST-2~top~10" --filter "specialised~eq~true"
                                                          also print the heads that pass every filter
  bertology atlas --columns docs/atlas.md                 rewrite the page's list of columns

A filter is COLUMN~OP~VALUE with OP one of ge, le, gt, lt, eq, ne, top, bottom (top/bottom: percent
of each run's heads). Exit status: 0, or 2 when a run is missing or a filter names no column.
"""


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="*", metavar="RUN", help="run folders or run names under results/")
    parser.add_argument("--out", type=Path, metavar="DIR", help="write here instead of the first run's folder")
    parser.add_argument("--no-maps", action="store_true", help="leave out the cards' pattern images")
    parser.add_argument("--filter", action="append", default=[], metavar="F", help="print the heads passing F")
    parser.add_argument(
        "--columns",
        type=Path,
        action="append",
        default=[],
        metavar="PAGE",
        help="rewrite PAGE's generated list of the atlas's columns (no RUN needed)",
    )


def _handle(args: argparse.Namespace) -> int:
    from bertology_utils.present.atlas import ID_COLUMNS, build_atlas, columns_markdown, parse_filter
    from bertology_utils.present.generated import write_block

    for page in args.columns:
        print(
            f"{page}: {COLUMNS_BLOCK} {'rewritten' if write_block(page, COLUMNS_BLOCK, columns_markdown()) else 'unchanged'}"
        )
    if not args.runs:
        if args.columns:
            return EXIT_OK
        raise BertologyError("name at least one RUN (a run folder or a run name under results/)")
    atlas = build_atlas(*args.runs, maps=not args.no_maps)
    filters = [parse_filter(text) for text in args.filter]
    matching = atlas.table[atlas.query(filters)] if filters else None  # before writing: a bad filter writes nothing
    print(atlas.summary())
    for kind, path in atlas.write(args.out).items():
        print(f"{kind}: {path}")
    if matching is not None:
        shown = list(ID_COLUMNS[:1]) + ["head_name"] + list(dict.fromkeys(f.column for f in filters))
        print(f"{len(matching)} of {len(atlas.table)} heads pass {' and '.join(map(str, filters))}")
        if len(matching):
            print(matching[shown].to_string(index=False))
    return EXIT_OK


COMMAND = Command(
    "atlas",
    "every head of a run in one table (Parquet, CSV) and one offline HTML page",
    _add_arguments,
    _handle,
    ATLAS_EPILOG,
    ATLAS_DESCRIPTION,
)
