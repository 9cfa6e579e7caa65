"""Results folders of each kind (the tiny linear-cost scenario: seconds), written with
--report, and one headless Chromium shared by the page tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.capacity.helpers import TINY, cli
from tests.report.browser import Browser, require_browser


@pytest.fixture(scope="session")
def folders(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("report")
    runs = {"run": ("run", TINY, "-q"),
            "sweep": ("sweep", TINY, "--rate", "5,10", "-j", "1", "-q"),
            "capacity": ("capacity", TINY, "--seeds", "1", "--tol", "20%", "-j", "1", "-q")}
    for kind, args in runs.items():
        assert cli(*args, "--out", d / kind, "--report") == 0, kind
    return {kind: d / kind for kind in runs}


@pytest.fixture(scope="session")
def browser(tmp_path_factory):
    require_browser()
    b = Browser(tmp_path_factory.mktemp("chromium-profile"))
    yield b
    b.close()
