"""Keep a small-parameter suite run made on another machine as evidence, in tests/references/devices/<name>/.

The run must have been made with the test suite's small parameters and checked against tests/references/small
(``bertology run --params-file <small> --check tests/references/small``, docs/regression.md). Each notebook's
metrics are copied beside a ``device.json``: the machine and versions from the run's run.json, whether the
check passed, and the digest of each notebook's reference values it was checked against.
tests/unit/run/test_metric_kinds.py checks the run again for every notebook whose reference values are unchanged.

    python scripts/device_record.py results/<run> <name> --device "what it ran on"
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bertology_utils.run import regression  # noqa: E402

SMALL = ROOT / "tests" / "references" / "small"
DEVICES = ROOT / "tests" / "references" / "devices"
COMMENT = [
    "The small-parameter suite run on this device against tests/references/small (bertology run --params-file <small>",
    "--check): each notebook's metrics here; tests/unit/run/test_metric_kinds.py checks they still pass while the",
    "references' values are the ones they were checked against (references_sha256_by_notebook, each notebook's,",
    "so a refresh of one leaves the others checked). Written by scripts/device_record.py.",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="the run folder (it holds run.json and check.json)")
    parser.add_argument("name", help="the evidence's folder name under tests/references/devices/")
    parser.add_argument("--device", required=True, help="what the run ran on, in words")
    args = parser.parse_args(argv)

    record = json.loads((args.run / "run.json").read_text())
    check = json.loads((args.run / regression.CHECK_FILE).read_text())
    references = regression.read_references(SMALL)
    stems = [nb["name"] for nb in record["notebooks"]]
    if sorted(stems) != sorted(references):
        raise SystemExit(f"{args.run} ran {sorted(stems)}, not every notebook with a small reference")
    folder = DEVICES / args.name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for stem in stems:
        shutil.copyfile(args.run / stem / "metrics.json", folder / f"{stem}.json")
    device = {
        "_comment": COMMENT,
        "device": args.device,
        "environment": record.get("environment", {}),
        "versions": record.get("versions", {}),
        "finished": record["finished"],
        "check_ok": bool(check["ok"]),
        "references_sha256_by_notebook": {stem: references[stem].values_sha256() for stem in sorted(stems)},
    }
    (folder / "device.json").write_text(json.dumps(device, indent=2) + "\n")
    print(folder)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
