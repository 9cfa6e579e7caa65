"""report.html rendered in headless Chromium: it loads without a console error or a failed
resource, and every plot is drawn (a decoded image with visible content, not a broken
icon). The first test checks the check itself: a page with a missing image and a script
error is caught."""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest
from matplotlib.image import imsave

from tests.report.browser import drawn_fraction

DRAWN_MIN = 0.02  # a plot's lines, labels and axes cover well over 2 % of its pixels


def _blank_png() -> str:
    buf = io.BytesIO()
    imsave(buf, np.ones((240, 400, 3)), format="png")
    return base64.b64encode(buf.getvalue()).decode()


def test_the_browser_catches_a_broken_page(browser, tmp_path):
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><head><title>bad</title></head><body>'
                   '<img src="missing.png" alt="gone"><script>undefinedCall()</script>'
                   f'<img src="data:image/png;base64,{_blank_png()}" alt="blank">'
                   "</body></html>")
    seen = browser.open(bad)
    assert seen.images == [
        {"alt": "gone", "complete": True, "natural_width": 0, "natural_height": 0},
        {"alt": "blank", "complete": True, "natural_width": 400, "natural_height": 240}]
    assert any("missing.png" in e for e in seen.errors)
    assert any("undefinedCall" in e for e in seen.errors)
    assert drawn_fraction(seen.shots[1]) < DRAWN_MIN  # an empty image is not a plot


@pytest.mark.parametrize("kind", ["run", "sweep", "capacity"])
def test_the_report_loads_clean_and_shows_every_plot(browser, folders, kind):
    seen = browser.open(folders[kind] / "report.html")
    assert seen.errors == []
    assert seen.title == f"tiny: servesim {kind} report"
    names = [i["alt"] for i in seen.images]
    assert len(names) == (2 if kind == "run" else 5) and len(seen.shots) == len(names)
    for img, shot in zip(seen.images, seen.shots):
        assert img["complete"] and img["natural_width"] > 300 and img["natural_height"] > 200
        assert shot.shape[0] > 100 and shot.shape[1] > 300, img["alt"]  # drawn, not hidden
        assert drawn_fraction(shot) > DRAWN_MIN, (img["alt"], drawn_fraction(shot))
