"""Rewrite the README's capability table (family x capability) from tiny random models of every family.

Usage, from the repository root: python scripts/capability_table.py
"""

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from capabilities import README_END, README_START, capability_table  # noqa: E402
from tiny_models import ALL_FAMILIES, build_tiny_model  # noqa: E402


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        table = capability_table({arch: build_tiny_model(arch, Path(tmp) / arch) for arch in ALL_FAMILIES})
    readme = ROOT / "README.md"
    text = readme.read_text(encoding="utf-8")
    start, end = text.index(README_START) + len(README_START), text.index(README_END)
    readme.write_text(text[:start] + "\n" + table + "\n" + text[end:], encoding="utf-8")
    print(table)


if __name__ == "__main__":
    main()
