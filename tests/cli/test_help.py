"""--help at 80 columns shows every example whole (no option's help cut with an ellipsis)."""

from __future__ import annotations

import pytest

from sim.cli import main
from sim.cli.app import LAZY

COMMANDS = [[name] for name in LAZY if name not in ("scenario", "trace", "calibrate")] + [
    ["scenario", "show"], ["scenario", "validate"], ["trace", "stats"], ["trace", "export"]]


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_help_fits_80_columns_without_cutting(args, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert main([*args, "--help"]) == 0
    text = capsys.readouterr().out
    assert "…" not in text and "Usage: servesim " + " ".join(args) in text


def test_capacity_help_keeps_its_examples_whole(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["capacity", "--help"]) == 0
    text = capsys.readouterr().out
    assert "ttft_p95=500ms,tpot_p95=50ms" in text and "engine.max_num_seqs=64,256" in text
