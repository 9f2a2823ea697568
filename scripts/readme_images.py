"""Take the README's pictures from a finished run, in Chromium, offline.

Usage, from the repository root: python scripts/readme_images.py RUN [--out docs/images]

- ``atlas.png``: the run's head atlas page (built afresh from the run), coloured by the first
  importance column, its top 10% filtered, and the card of the most important head open.
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def atlas_image(run: str, out: Path) -> Path:
    from playwright.sync_api import sync_playwright

    from bertology_utils.present.atlas import build_atlas

    atlas = build_atlas(run)
    page_path = atlas.write()["page"]
    numbers = set(atlas.dictionary.loc[atlas.dictionary["kind"] == "number", "column"])
    column = next((c for c in atlas.columns if c.startswith("importance.")), None) or sorted(numbers)[0]
    first = atlas.table[atlas.table["run"] == atlas.runs[0].name]
    best = first.loc[first[column].astype(float).idxmax()]
    view = f"#color={column}&filter={column}~top~10&card={atlas.runs[0].id}:{best['layer']}-{best['head']}"
    path = out / "atlas.png"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium")
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.route("http*://**", lambda route: route.abort())  # the page is offline; nothing may load
        page.goto(page_path.as_uri() + view)
        page.wait_for_selector(".cell")
        page.screenshot(path=str(path))
        browser.close()
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", help="a run folder or a run name under results/")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    print(atlas_image(args.run, args.out))


if __name__ == "__main__":
    main()
