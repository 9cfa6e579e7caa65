"""The lanes scheduler with an interactive lane no request carries says so."""

from __future__ import annotations

from pathlib import Path

from sim.cli import main

LANES = Path(__file__).resolve().parents[2] / "scenarios" / "lanes.yaml"


def test_an_interactive_lane_no_request_carries_warns(tmp_path, capsys):
    # its reserved share of max_num_seqs and KV would go unused: said once
    assert main(["run", str(LANES), "-q", "--no-plots", "-o", str(tmp_path / "r"), "--set",
                 "scheduler.interactive_lane=vip"]) == 0
    err = capsys.readouterr().err
    assert err.count("no request is in the interactive lane 'vip'") == 1
    assert main(["run", str(LANES), "-q", "--no-plots", "-o", str(tmp_path / "s")]) == 0
    assert "interactive lane" not in capsys.readouterr().err
