"""Without Chromium the page tests fail, naming what to install; they skip only when
SERVESIM_NO_BROWSER=1 says so."""

from __future__ import annotations

import pytest

from tests.report import browser


def test_a_missing_browser_fails_naming_the_packages(monkeypatch, tmp_path):
    monkeypatch.setattr(browser, "CHROMIUM", str(tmp_path / "no-chromium"))
    monkeypatch.delenv(browser.OPT_OUT, raising=False)
    with pytest.raises(pytest.fail.Exception) as e:
        browser.require_browser()
    msg = str(e.value)
    # the driver may be missing too on this machine: then both are named before "not found"
    named = msg[msg.index("(") + 1:msg.index(" not found)")].split(", ")
    assert str(tmp_path / "no-chromium") in named
    assert "apt-get install chromium chromium-driver" in msg
    assert "set SERVESIM_NO_BROWSER=1" in msg


def test_the_opt_out_skips_and_says_why(monkeypatch, tmp_path):
    monkeypatch.setattr(browser, "CHROMEDRIVER", str(tmp_path / "no-driver"))
    monkeypatch.setenv(browser.OPT_OUT, "1")
    with pytest.raises(pytest.skip.Exception) as e:
        browser.require_browser()
    assert "no-driver not found" in str(e.value) and "SERVESIM_NO_BROWSER=1" in str(e.value)
