"""A headless Chromium (Debian's chromium + chromium-driver) for the report page tests.

``Browser.open(path)`` loads a file and returns what a reader would see: the console's
errors (a script error, a resource that failed to load, a blocked URL), every image's
natural size, and a screenshot of each image as it is drawn on the page.

No browser is not a reason to pass: the tests fail, naming the packages, unless
``SERVESIM_NO_BROWSER=1`` says this machine runs without one (then they skip, saying so).
.ci/run installs the packages when /usr/bin/chromium is missing.
"""

from __future__ import annotations

import io
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

CHROMIUM = os.environ.get("SERVESIM_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("SERVESIM_CHROMEDRIVER", "/usr/bin/chromedriver")
OPT_OUT = "SERVESIM_NO_BROWSER"
# a closed network and no display: no sandbox (root in CI), no GPU, nothing fetched at start
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1280,1024", "--hide-scrollbars")
LOAD_TIMEOUT_S = 60


def require_browser() -> None:
    """Fail (or skip, with SERVESIM_NO_BROWSER=1) when Chromium or its driver is missing."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if shutil.which(p) is None]
    if not missing:
        return
    why = (f"headless Chromium is needed to render report.html ({', '.join(missing)} not "
           "found): apt-get install chromium chromium-driver")
    if os.environ.get(OPT_OUT) == "1":
        pytest.skip(f"{why}; skipped because {OPT_OUT}=1")
    pytest.fail(f"{why}, or set {OPT_OUT}=1 to run without the browser tests")


@dataclass(frozen=True)
class Seen:
    errors: list[str]  # console messages at SEVERE level (errors, failed loads, CSP blocks)
    images: list[dict]  # {"alt", "complete", "natural_width", "natural_height"} per <img>
    shots: list[np.ndarray]  # each <img> as drawn, RGB(A) floats in [0, 1]
    title: str


class Browser:
    def __init__(self, profile: Path):
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        opts = webdriver.ChromeOptions()
        opts.binary_location = CHROMIUM
        for flag in (*FLAGS, f"--user-data-dir={profile}"):
            opts.add_argument(flag)
        opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        self.driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
        self.driver.set_page_load_timeout(LOAD_TIMEOUT_S)

    def open(self, path: Path) -> Seen:
        from matplotlib.image import imread
        from selenium.webdriver.common.by import By

        d = self.driver
        d.get_log("browser")  # drop what an earlier page logged
        d.get(Path(path).resolve().as_uri())
        images = d.execute_script(
            "return Array.from(document.images, i => ({alt: i.alt, complete: i.complete,"
            " natural_width: i.naturalWidth, natural_height: i.naturalHeight}))")
        shots = []
        for el in d.find_elements(By.TAG_NAME, "img"):
            d.execute_script("arguments[0].scrollIntoView()", el)
            shots.append(imread(io.BytesIO(el.screenshot_as_png), format="png"))
        errors = [e["message"] for e in d.get_log("browser") if e["level"] == "SEVERE"]
        return Seen(errors, images, shots, d.title)

    def close(self) -> None:
        self.driver.quit()


def drawn_fraction(shot: np.ndarray) -> float:
    """The share of pixels that are not the page's white background (a plot's lines, text
    and axes; an empty or broken image is all background)."""
    rgb = shot[..., :3]
    return float((rgb.min(axis=-1) < 0.9).mean())
