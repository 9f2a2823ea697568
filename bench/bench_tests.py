"""The test tiers' wall time: `make test` (the fast tier, the README's command) against its target, and
`make test-slow` (notebooks, browser, kills), from the JUnit records each target writes.

Each tier writes ``<TEST_TIMES_DIR>/<target>.xml`` (Makefile, default results/test-artifacts/times). This
reads them and prints per tier the tests run, skipped and failed, and the seconds pytest took (the
session, not the sum of the tests: they run side by side); the fast tier's target is 12 minutes on 2
cores. Run both targets first (``.ci/run`` does, on a clean clone), then:

    python bench/bench_tests.py [--times results/test-artifacts/times] [--record]

``--record`` writes bench/results/tests.json and the tiers' table in docs/tests.md from it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import machine  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "bench" / "results" / "tests.json"
PAGE = ROOT / "docs" / "tests.md"
BLOCK = "test-tiers"
#: make target -> what the tier holds.
TIERS = {
    "test": "lint, then every test not marked slow: unit tests, integration, the notebooks' static checks",
    "test-slow": "every notebook under papermill, the browser, kill -9 and resume, the docs site builds",
}
#: The fast tier's budget on a clean clone with 2 cores (issue 56), in seconds.
TARGET_S = 12 * 60


def read_tier(path: Path) -> dict:
    """One JUnit record's counts and the session's seconds."""
    root = ET.parse(path).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    if suite is None:
        raise SystemExit(f"{path}: no <testsuite> in it (not a pytest --junitxml record)")
    count = {key: int(suite.get(key, 0)) for key in ("tests", "skipped", "failures", "errors")}
    return {**count, "seconds": round(float(suite.get("time", 0.0)), 1)}


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def doc_block(record: dict) -> str:
    rows = ["| tier | what it runs | tests | skipped | failed | time |", "|---|---|---|---|---|---|"]
    for target, tier in record["tiers"].items():
        rows.append(
            f"| `make {target}` | {TIERS[target]} | {tier['tests'] - tier['skipped']} | {tier['skipped']} | "
            f"{tier['failures'] + tier['errors']} | {minutes(tier['seconds'])} |"
        )
    fast = record["tiers"]["test"]["seconds"]
    verdict = "within" if fast <= TARGET_S else "over"
    return (
        f"{record['date']}, {record['machine']}, {record['jobs']} test processes; pytest's own time, after "
        f"`make setup`. The fast tier is {verdict} its target of {minutes(TARGET_S)} "
        f"({fast / TARGET_S:.2f} of it).\n\n" + "\n".join(rows)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--times", type=Path, default=ROOT / "results" / "test-artifacts" / "times")
    parser.add_argument("--jobs", type=int, default=2, help="TEST_JOBS the tiers ran with (the Makefile's default)")
    parser.add_argument("--record", action="store_true", help="record the tiers and the documentation's table")
    args = parser.parse_args()

    missing = [target for target in TIERS if not (args.times / f"{target}.xml").is_file()]
    if missing and not args.record:  # `make bench` runs every script: a tier not run yet is a skip, not a failure
        print(
            f"skipped: no JUnit record of {', '.join(missing)} in {args.times} (run make {' and make '.join(missing)})"
        )
        return
    if missing:
        raise SystemExit(
            f"no JUnit record of {', '.join(missing)} in {args.times}: run make {' and make '.join(missing)}"
        )
    record = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": machine(),
        "jobs": args.jobs,
        "tiers": {target: read_tier(args.times / f"{target}.xml") for target in TIERS},
    }
    print(doc_block(record))
    if args.record:
        RECORD.write_text(json.dumps(record, indent=1) + "\n")
        from bertology_utils.present.generated import write_block

        write_block(PAGE, BLOCK, doc_block(record))


if __name__ == "__main__":
    main()
