"""Capacity's uncertainty (--spread K): the best configuration searched again on K
disjoint windows of a replayed trace or on K seeds one at a time, min / median / max said
and written into chosen.yaml; other configurations inside that range are named."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

from sim.cli.capacity import _within
from sim.config.load import load_scenario
from sim.plan.spread import Spread, windows

from .helpers import TINY, cli

CHAT = "scenarios/chat-trace.yaml"
LINEAR = "cost={name: linear, base_ms: 5, prefill_token_ms: 0.05, decode_seq_ms: 0.2}"
SYNC = "engine.async_scheduling=false"  # the synchronous scheduler (the pinned figures)


def test_windows_split_the_replay_into_equal_disjoint_parts():
    loaded = load_scenario(CHAT, ("workload.window_s=[0,360]",))
    assert windows(loaded, 3) == [[0.0, 120.0], [120.0, 240.0], [240.0, 360.0]]
    whole = windows(load_scenario(CHAT), 4)  # no window: the trace as recorded
    t = pd.read_csv("scenarios/traces/chat-15min.csv")["arrival_s"]
    assert whole[0][0] == t.iloc[0] and whole[-1][1] > t.iloc[-1]
    assert all(a[1] == b[0] for a, b in zip(whole, whole[1:]))


def test_a_replay_spreads_over_windows_of_the_trace(tmp_path, capsys):
    out = tmp_path / "c"
    assert cli("capacity", CHAT, "--spread", "3", "--no-plots", "--out", out, "-q",
               "--set", "workload.window_s=[0,360]", "--set", LINEAR, "--set", SYNC) == 0
    printed = capsys.readouterr().out
    # the whole 6 minutes hold at rate_scale 1.259 (7.56 req/s); each window alone at its
    # own rate_scale, said as the whole trace's mean rate at that scale (the same unit)
    assert "best: base: 7.56 req/s (rate_scale 1.25926)" in printed
    assert ("uncertainty: capacity over 3 disjoint windows of the trace ([0, 120) s, ...; "
            "each as the whole trace's mean rate at the rate_scale it holds), one search "
            "each: 6.74 / 8.04 / 8.75 req/s (min / median / max; the range is 25% of the "
            "median)") in printed
    u = yaml.safe_load((out / "chosen.yaml").read_text())["locked"]["capacity"]["uncertainty"]
    assert u["over"] == "windows" and [p["part"] for p in u["parts"]] == [
        "[0, 120) s", "[120, 240) s", "[240, 360) s"]
    assert [p["max_load"] for p in u["parts"]] == [1.33797, 1.45602, 1.12153]
    per_scale = 7.56 / 1.25926
    assert u["min_req_s"] == pytest.approx(1.12153 * per_scale, rel=1e-3)
    assert (out / "spread" / "points.parquet").exists()
    assert f"spread probes: {out / 'spread' / 'points.parquet'}" in printed


def test_generated_arrivals_spread_over_seeds(tmp_path, capsys):
    out = tmp_path / "c"
    assert cli("capacity", TINY, "--seeds", "1", "--spread", "3", "--no-plots", "--out", out,
               "-q", "--set", "workload.num_requests=1000") == 0
    printed = capsys.readouterr().out
    assert "best: base: 12.10 req/s" in printed
    assert ("uncertainty: capacity over 3 seeds, one search each: 11.91 / 12.10 / 12.85 "
            "req/s") in printed
    u = yaml.safe_load((out / "chosen.yaml").read_text())["locked"]["capacity"]["uncertainty"]
    assert [p["part"] for p in u["parts"]] == ["seed 0", "seed 1", "seed 2"]
    assert u["parts"][0]["rate_mean_req_s"] == pytest.approx(12.10, abs=0.005)  # the headline


def test_one_part_is_refused(tmp_path, capsys):
    assert cli("capacity", TINY, "--spread", "1", "--out", tmp_path / "c") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["servesim: error: --spread 1: give 2 to 16 parts (or 0 for none)"]


def test_configurations_inside_the_range_are_named():
    front = pd.DataFrame({"config": ["a", "b", "c"], "status": ["found"] * 3,
                          "gpus": [1, 1, 1], "rate_mean_req_s": [15.38, 14.69, 11.0]})
    sp = Spread("windows", ("w0", "w1", "w2"), (14.2, 15.3, 16.1))
    assert _within(front, 0, sp) == ("; within that range, so no better or worse: "
                                     "b (14.69 req/s)")
    assert _within(front, 0, Spread("seeds", ("s0", "s1"), (15.0, 15.5))) == ""
