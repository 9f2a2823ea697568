"""Rewrite the capability table (family x capability) of the docs from tiny random models of every family.

Usage, from the repository root: python scripts/capability_table.py
"""

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from capabilities import BLOCK, PAGES, capability_table  # noqa: E402
from tiny_models import ALL_FAMILIES, build_tiny_model  # noqa: E402

from bertology_utils.present.generated import write_block  # noqa: E402


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        table = capability_table({arch: build_tiny_model(arch, Path(tmp) / arch) for arch in ALL_FAMILIES})
    for page in PAGES:
        write_block(page, BLOCK, table)
    print(table)


if __name__ == "__main__":
    main()
