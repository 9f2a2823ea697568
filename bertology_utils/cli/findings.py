"""``bertology findings``: what runs found, claim by claim, as Markdown tables or a record to keep."""

from __future__ import annotations

import argparse
from pathlib import Path

from bertology_utils.cli._command import EXIT_OK, Command
from bertology_utils.core.errors import BertologyError

__all__ = ["COMMAND"]

FINDINGS_DESCRIPTION = """\
Print what one or more runs found: one line per claim of the papers with each run's verdicts
(holds / partly / differs / inconclusive / not testable), or with --full every claim with the paper's
value and ours (and its interval and seed count, where the claims have them), notebook by notebook, or
with --seeds the claims of runs that differ only in one setting (a base seed, `-p seed N`, or a
precision, `-p precision auto`), each run's verdict, interval and seed count, and whether they agree.
A SOURCE is a run folder, a run name under results/, or a findings record (.json) written by --record.
--update rewrites the generated blocks of Markdown pages (`findings` the summary, `findings-full` the
full tables of the first SOURCE and of every other SOURCE of its model, `seeds` and `precision` the runs side
by side).
"""

FINDINGS_EPILOG = """\
examples:
  bertology findings default                          one line per claim, verdicts of results/default
  bertology findings default mpnet --full             every claim with its numbers
  bertology findings default --record docs/findings/minilm.json
  bertology findings docs/findings/*.json --update README.md --update docs/findings.md
  bertology findings seed0 seed3 --seeds              do two base seeds give the same verdicts?
  bertology findings fp32 auto --seeds                 ... two precisions?

Exit status: 0, or 2 when a run or record is missing, holds no claims, or a page has no block to update.
"""


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("sources", nargs="+", metavar="SOURCE", help="run folders, run names or findings records")
    parser.add_argument("--full", action="store_true", help="every claim with its numbers (of the first SOURCE)")
    parser.add_argument(
        "--seeds",
        action="store_true",
        help="runs of one model with another base seed or precision side by side: each claim's verdicts, the same or "
        "flipped",
    )
    parser.add_argument("--record", type=Path, metavar="FILE", help="write the findings record of the one SOURCE")
    parser.add_argument(
        "--update", type=Path, action="append", default=[], metavar="PAGE", help="rewrite PAGE's generated blocks"
    )


def _handle(args: argparse.Namespace) -> int:
    from bertology_utils.present.findings import (
        claims_tables,
        load_findings,
        runs_tables,
        save_findings,
        summary_table,
    )
    from bertology_utils.present.generated import has_block, write_block

    records = [load_findings(source) for source in args.sources]
    if args.record:
        if len(records) != 1:
            raise BertologyError("--record takes one SOURCE")
        print(save_findings(records[0], args.record))
        return EXIT_OK
    blocks = {  # made only where asked: a table of runs needs records of one model
        "findings": lambda: summary_table(records),
        # every record of the first SOURCE's model in turn (one model's runs of different notebooks, one page)
        "findings-full": lambda: "\n\n".join(claims_tables(r) for r in records if r["model"] == records[0]["model"]),
        # records of runs of other notebooks are compared apart (runs_tables); on a page, long keys may break
        "seeds": lambda: runs_tables(records, breakable_keys=bool(args.update)),
        "precision": lambda: runs_tables(records, breakable_keys=bool(args.update)),
    }
    for page in args.update:
        found = [name for name in blocks if has_block(page, name)]
        if not found:
            raise BertologyError(f"{page} has no generated block named {' or '.join(blocks)}")
        for name in found:
            print(f"{page}: {name} {'rewritten' if write_block(page, name, blocks[name]()) else 'unchanged'}")
    if not args.update:
        print(blocks["seeds" if args.seeds else "findings-full" if args.full else "findings"]())
    return EXIT_OK


COMMAND = Command(
    "findings",
    "what runs found, claim by claim: Markdown tables or a findings record",
    _add_arguments,
    _handle,
    FINDINGS_EPILOG,
    FINDINGS_DESCRIPTION,
)
