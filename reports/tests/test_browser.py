"""The pages in a real browser: headless Chromium (Debian's chromium) loads each page from
file:// with no console error, index.html in under 2 s with the triage table on the first
screen at 1400x900, and the screenshot has something on it."""

import random

import pytest

from reports import browser
from reports.build import build
from reports.tests import fixtures
from reports.tests.pages import non_blank

# The limit for index.html, and the share of the first screen the triage table's first
# rows need (its header and at least two items).
LOAD_LIMIT_S = 2.0
TRIAGE_VISIBLE_PX = 150

pytestmark = pytest.mark.skipif(
    browser.find_chromium() is None,
    reason="no Chromium (ci/install-deps.sh installs Debian's chromium)")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("browser")
    seed = random.SystemRandom().randrange(2**32)
    print(f"random seed {seed}")  # shown when a test of this module fails
    fixtures.mixed_database(tmp / "mixed.sqlite", random.Random(seed))
    build(tmp / "mixed.sqlite", tmp / "report")
    return tmp / "report"


def test_index_loads_cleanly_and_fast(report, record_property):
    load = browser.load_page(report / "index.html")
    record_property("load_seconds", load.load_seconds)
    assert load.console_errors == []
    assert 0 < load.load_seconds < LOAD_LIMIT_S
    assert load.triage_top is not None
    assert load.triage_top + TRIAGE_VISIBLE_PX < browser.VIEWPORT[1], \
        f"the triage table starts at {load.triage_top:.0f} px of a {browser.VIEWPORT[1]} px screen"
    assert non_blank(load.screenshot)


@pytest.mark.parametrize("page", ["history.html", "compare.html", "studies.html"])
def test_other_pages_load_cleanly(report, page):
    load = browser.load_page(report / page)
    assert load.console_errors == []
    assert non_blank(load.screenshot)


def test_a_missing_image_is_reported(report, tmp_path):
    """The negative control: the console check does see a broken page."""
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "assets").mkdir()
    for asset in (report / "assets").iterdir():
        (broken / "assets" / asset.name).write_bytes(asset.read_bytes())
    page = (report / "index.html").read_text()
    # Eager, so the first screen asks for it; no img/ folder at all, so it cannot load.
    page = page.replace("<main>", '<main><img src="img/absent.png" alt="absent">', 1)
    page = page.replace('<script src="assets/report.js" defer></script>',
                        "<script>console.error('deliberate');</script>")
    (broken / "index.html").write_text(page)
    load = browser.load_page(broken / "index.html")
    assert any("deliberate" in error for error in load.console_errors)
    assert any("absent.png" in error or "ERR_FILE_NOT_FOUND" in error
               for error in load.console_errors), load.console_errors
