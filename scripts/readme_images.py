"""Take the README's pictures from a finished run, in Chromium, offline.

Usage, from the repository root: python scripts/readme_images.py RUN [--out docs/images]

- ``atlas.png``: the run's head atlas page (built afresh from the run), coloured by the first
  importance column of a classifier that learned its task, its top 10% filtered, and the card of the most important head open.
- ``lecture-question.png`` and ``lecture-claim.png``: two slides of the run's lecture (built afresh into a
  temporary folder), the question and the claims slide of the finding "Heads that follow syntax" (the second
  of its two, below its figure), at the decks' 1280 x 720.
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _offline_page(playwright, size: tuple[int, int]):
    browser = playwright.chromium.launch(executable_path="/usr/bin/chromium")
    page = browser.new_page(viewport={"width": size[0], "height": size[1]})
    page.route("http*://**", lambda route: route.abort())  # the pages are offline; nothing may load
    return browser, page


def _testable(run: str, column: str) -> bool:
    """Whether ``column`` (``importance.<task>``) comes from a classifier that learned its task: the run's claim
    on that task's importance is not "not testable" (a picture should not feature a model below its baseline)."""
    import json

    claims = Path(run) / "06_pruning" / "claims.json"
    if not claims.is_file():
        return True
    task = column.split(".", 1)[1]
    verdicts = {c["id"]: c["verdict"] for c in json.loads(claims.read_text())["claims"]}
    return verdicts.get(f"importance_matches_ablation.{task}") != "not testable"


def atlas_image(run: str, out: Path) -> Path:
    from playwright.sync_api import sync_playwright

    from bertology_utils.present.atlas import build_atlas

    atlas = build_atlas(run)
    page_path = atlas.write()["page"]
    numbers = set(atlas.dictionary.loc[atlas.dictionary["kind"] == "number", "column"])
    column = next((c for c in atlas.columns if c.startswith("importance.") and _testable(run, c)), None)
    column = column or sorted(numbers)[0]
    first = atlas.table[atlas.table["run"] == atlas.runs[0].name]
    best = first.loc[first[column].astype(float).idxmax()]
    view = f"#color={column}&filter={column}~top~10&card={atlas.runs[0].id}:{best['layer']}-{best['head']}"
    path = out / "atlas.png"
    with sync_playwright() as playwright:
        browser, page = _offline_page(playwright, (1280, 800))
        page.goto(page_path.as_uri() + view)
        page.wait_for_selector(".cell")
        page.screenshot(path=str(path))
        browser.close()
    return path


#: The lecture's slides the README shows, by their data-slide name and which of the slides so named (a topic's
#: figure, then its claims), and the file each goes to.
LECTURE_SLIDES = {("question", 0): "lecture-question.png", ("Heads that follow syntax", 1): "lecture-claim.png"}


def lecture_images(run: str, out: Path) -> list[Path]:
    import tempfile

    from playwright.sync_api import sync_playwright

    from bertology_utils.present.lecture import build_lecture
    from bertology_utils.present.reveal import SLIDE_SIZE

    written = []
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as playwright:
        deck = build_lecture(run, Path(tmp))
        browser, page = _offline_page(playwright, SLIDE_SIZE)
        page.goto(deck.as_uri())
        page.wait_for_function("() => window.Reveal !== undefined && Reveal.isReady()")
        for (name, part), file in LECTURE_SLIDES.items():
            named = "name => Reveal.getSlides().filter(s => s.dataset.slide === name).map(s => Reveal.getIndices(s))"
            at = page.evaluate(named, name)
            if len(at) <= part:
                raise SystemExit(f"the lecture of {run} has no slide {name!r} ({part + 1})")
            page.evaluate("at => Reveal.slide(at.h, at.v)", at[part])
            page.wait_for_timeout(1000)  # the slide transition
            written.append(out / file)
            page.screenshot(path=str(written[-1]))
        browser.close()
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", help="a run folder or a run name under results/")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    print(atlas_image(args.run, args.out))
    for path in lecture_images(args.run, args.out):
        print(path)


if __name__ == "__main__":
    main()
