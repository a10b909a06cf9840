"""The scorecard page as a newcomer sees it: a headless Chromium screenshot
(scripts/screenshot.py). Skips, saying why, where no Chromium is installed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import script
from tests.unit.test_scorecard import PNG, card, results
from vllm_plugin_release.conform.scorecard import to_html

shot = script("screenshot")
pytestmark = [
    pytest.mark.screenshot,  # where .ci/run installed Chromium, a skip fails (tests/required.py)
    pytest.mark.skipif(
        shot.find_browser() is None, reason="no Chromium (apt-get install -y chromium)"
    ),
]

BANNER = {"pilot": (0xFF, 0xF2, 0xB3), "lab": (0xF5, 0xC2, 0xC2)}


def banner_rows(png: Path, colour: tuple[int, int, int]) -> list[int]:
    """Pixel rows (of the top third) where the verdict banner's colour fills a wide run."""
    import matplotlib.image

    image = (matplotlib.image.imread(str(png))[..., :3] * 255).round().astype(int)
    top = image[: image.shape[0] // 3]
    hit = (abs(top - colour) <= 2).all(axis=2).sum(axis=1)
    return [i for i, n in enumerate(hit) if n > image.shape[1] // 2]


@pytest.mark.parametrize("verdict", ["pilot", "lab"])
def test_screenshot_shows_the_verdict_banner_at_the_top(tmp_path: Path, verdict: str) -> None:
    c = card(results(cadence="fail" if verdict == "lab" else "warn"))
    assert c["verdict"] == verdict
    page = tmp_path / "scorecard.html"
    page.write_text(to_html(c, {"replay-itl.png": PNG}))
    out = shot.screenshot(page, tmp_path / "shot.png", width=1000, height=1200)
    rows = banner_rows(out, BANNER[verdict])
    assert rows, f"no {verdict} banner in the top third of {out}"
    other = "lab" if verdict == "pilot" else "pilot"
    assert not banner_rows(out, BANNER[other])


def test_a_page_without_the_banner_is_caught(tmp_path: Path) -> None:
    """The known-bad mutation: the same page with its banner removed fails the check."""
    html = to_html(card(), {})
    start = html.index('<div class="banner')
    end = html.index("</div>", start) + len("</div>")
    page = tmp_path / "scorecard.html"
    page.write_text(html[:start] + html[end:])
    out = shot.screenshot(page, tmp_path / "shot.png", width=1000, height=1200)
    assert banner_rows(out, BANNER["pilot"]) == []


def test_script_exit_codes(tmp_path: Path) -> None:
    assert shot.main([str(tmp_path / "missing.html")]) == 2
    page = tmp_path / "p.html"
    page.write_text(to_html(card(), {}))
    assert shot.main([str(page), "-o", str(tmp_path / "p.png"), "--height", "600"]) == 0
    assert (tmp_path / "p.png").stat().st_size > 1000
