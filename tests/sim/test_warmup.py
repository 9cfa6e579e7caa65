"""workload.warmup_s leaves the first seconds' requests out of the request figures and
says how many; a run too short to judge says so on the console and in summary.json."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from tests.capacity.helpers import TINY, cli


def _run(tmp_path, name, *sets):
    out = tmp_path / name
    args = ["run", TINY, "--out", out, "-q", "--set", "workload.num_requests=900"]
    for s in sets:
        args += ["--set", s]
    assert cli(*args) == 0
    return json.loads((out / "summary.json").read_text()), pd.read_parquet(
        out / "requests.parquet")


def test_the_warmup_requests_are_served_but_not_measured(tmp_path):
    full, req = _run(tmp_path, "full")
    warm, _ = _run(tmp_path, "warm", "workload.warmup_s=20")
    early = req["arrival_s"] < 20.0
    assert 150 < early.sum() < 250  # ~10 req/s for 20 s
    assert "warmup_left_out" not in full["requests"]
    assert warm["requests"]["warmup_left_out"] == int(early.sum())
    assert warm["requests"]["warmup_s"] == 20.0
    assert warm["requests"]["finished"] == full["requests"]["finished"] == 900  # all served
    assert warm["slo"]["judged"] == 900 - int(early.sum()) and full["slo"]["judged"] == 900
    later = np.sort(req.loc[~early, "ttft_s"].to_numpy() * 1e3)
    assert warm["latency_ms"]["ttft"]["p99"] == pytest.approx(np.percentile(later, 99))
    assert warm["latency_ms"]["ttft"]["p99"] != full["latency_ms"]["ttft"]["p99"]
    # the engine's figures cover the whole run: the same steps, the same queue
    assert warm["steps"] == full["steps"] and warm["stability"] == full["stability"]


def test_the_console_says_what_the_warmup_left_out(tmp_path, capsys):
    out = tmp_path / "w"
    assert cli("run", TINY, "--out", out, "--set", "workload.num_requests=900",
               "--set", "workload.warmup_s=20") == 0
    left = json.loads((out / "summary.json").read_text())["requests"]["warmup_left_out"]
    printed = " ".join(capsys.readouterr().out.split())
    assert f"warm-up left out of the figures │ {left} requests arriving before 20 s" in printed


def test_a_run_too_short_to_judge_warns(tmp_path, capsys):
    out = tmp_path / "short"
    assert cli("run", TINY, "--out", out, "-q") == 0  # 300 requests at 10 req/s
    said = [ln for ln in capsys.readouterr().err.splitlines() if "too short" in ln]
    assert len(said) == 1 and said[0].startswith(
        "servesim: warning: the run is too short to judge: 29.0 s of arrivals, under 60 s "
        "(a minute and 10 median request lifetimes of 0.9 s)")
    warned = json.loads((out / "summary.json").read_text())["sim"]["warnings"]
    assert warned == [said[0].removeprefix("servesim: warning: ")]
    long = tmp_path / "long"
    assert cli("run", TINY, "--out", long, "-q", "--set", "workload.num_requests=900") == 0
    assert "too short" not in capsys.readouterr().err
    assert json.loads((long / "summary.json").read_text())["sim"]["warnings"] == []


def test_a_bad_warmup_is_one_line_and_exit_2(tmp_path, capsys):
    assert cli("run", TINY, "--out", tmp_path / "x", "--set", "workload.warmup_s=-3") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "workload.warmup_s" in err[0] and ">= 0" in err[0]
    assert not (tmp_path / "x").exists()
