"""The head atlas page's HTML: one self-contained document, the payload embedded and recoverable, nothing
fetched from the network, and text from the payload unable to break out of its script element."""

import json
import re
from html.parser import HTMLParser

import pytest
from atlas_payloads import synthetic_payload

from bertology_utils.present import render_atlas_page
from bertology_utils.present.atlas_page import PAYLOAD_VERSION

HOSTILE = 'ends here </script><script>window.pwned = 1</script> & <!-- "quoted" \u2028'


class _Elements(HTMLParser):
    """Every start tag with its attributes, and the text of each <script>."""

    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.scripts: list[tuple[dict, str]] = []
        self._script: dict | None = None

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._script = dict(attrs)
            self.scripts.append((self._script, ""))

    def handle_data(self, data):
        if self._script is not None:
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)

    def handle_endtag(self, tag):
        if tag == "script":
            self._script = None


@pytest.fixture(scope="module")
def payload():
    return synthetic_payload(meaning=HOSTILE)


@pytest.fixture(scope="module")
def page(payload):
    return render_atlas_page(payload)


def _parse(text: str) -> _Elements:
    parser = _Elements()
    parser.feed(text)
    parser.close()
    return parser


def test_one_document_with_the_payload_embedded_and_recoverable(page, payload):
    assert page.startswith("<!DOCTYPE html>") and page.count("<html") == 1 and page.rstrip().endswith("</html>")
    parsed = _parse(page)
    embedded = [text for attrs, text in parsed.scripts if attrs.get("id") == "atlas-data"]
    assert len(embedded) == 1
    assert json.loads(embedded[0]) == payload
    assert ("title", {}) in parsed.tags and "<title>Head atlas: test/tiny</title>" in page


def test_hostile_text_stays_inside_the_json(page):
    # Two scripts only (data, code): the meaning's "</script><script>" opened none.
    scripts = _parse(page).scripts
    assert [attrs.get("type") for attrs, _ in scripts] == ["application/json", None]
    assert page.count("</script>") == 2 and "window.pwned" in scripts[0][1]
    assert "<!--" not in page


def test_nothing_points_at_the_network(page):
    for tag, attrs in _parse(page).tags:
        for name in ("src", "href", "action", "poster", "data"):
            assert not re.match(r"\s*(https?:)?//", attrs.get(name) or "", re.I), (tag, attrs)
    # Our script and style name no address at all (no @import, url() or fetch of one).
    assert not re.search(r"https?://|@import|url\(", page, re.I)


def test_other_payload_versions_and_nan_are_refused():
    with pytest.raises(ValueError, match="version"):
        render_atlas_page({**synthetic_payload(), "version": PAYLOAD_VERSION + 1})
    broken = synthetic_payload()
    broken["rows"]["values"]["importance.score"][0] = float("nan")
    with pytest.raises(ValueError):
        render_atlas_page(broken)


def test_a_two_run_atlas_of_a_small_model_stays_small():
    text = render_atlas_page(synthetic_payload(((6, 12), (6, 12)), map_size=12))
    assert len(text.encode()) < 1_000_000
