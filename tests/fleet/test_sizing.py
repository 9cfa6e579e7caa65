"""`capacity --target-rate`: the fewest replicas that hold the SLOs at the rate."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from sim.cli.app import app


def test_target_rate_finds_the_fewest_replicas(tmp_path):
    out = tmp_path / "size"
    res = CliRunner().invoke(app, [
        "capacity", "--target-rate", "60", "--seeds", "1", "--no-plots", "-o", str(out),
        "--set", "workload.num_requests=300", "--gpu-hour-price", "2.5",
        "--set", "cluster={router: {name: least_outstanding}}"])
    assert res.exit_code == 0, res.output
    doc = yaml.safe_load((out / "sizing.yaml").read_text())
    probes = {p["replicas"]: p["holds"] for p in doc["probes"]}
    n = doc["replicas"]
    assert probes[n] and not probes[n - 1]  # the smallest count that holds
    assert doc["gpus"] == n and doc["cost_per_hour"] == 2.5 * n
    assert f"{n} x 1 GPU = {n} GPUs behind least_outstanding" in res.output


def test_target_rate_refuses_pools(tmp_path):
    res = CliRunner().invoke(app, [
        "capacity", "scenarios/fleet-pools.yaml", "--target-rate", "10", "-o",
        str(tmp_path / "x")])
    assert res.exit_code != 0 and "sizes cluster.replicas of one pool" in str(res.exception)


def test_target_rate_on_a_trace_replays_it_at_the_rate_scale_giving_that_mean(tmp_path):
    """The shipped chat trace's first minute (a mean of 6.1 req/s) sized for 15 req/s: every
    probe replays it at rate_scale 15 / its mean, bursts kept (before: refused)."""
    out = tmp_path / "size"
    res = CliRunner().invoke(app, [
        "capacity", "scenarios/chat-trace.yaml", "--target-rate", "15", "--no-plots", "-o",
        str(out), "--set", "workload.window_s=[0,60]", "--set",
        "cost={name: linear, base_ms: 10, prefill_token_ms: 0.05, decode_seq_ms: 1}",
        "--set", "cluster={router: least_outstanding}"])
    assert res.exit_code == 0, res.output
    doc = yaml.safe_load((out / "sizing.yaml").read_text())
    probes = pd.read_parquet(out / "points.parquet")
    assert (probes["load"] == doc["rate_scale"]).all() and doc["rate_scale"] > 2
    assert probes["offered_rate_mean"].iloc[0] == pytest.approx(15, rel=1e-4)
    n = doc["replicas"]
    assert n and {p["replicas"]: p["holds"] for p in doc["probes"]}[n]
    assert (f"at 15 req/s (the trace's mean, at rate_scale {doc['rate_scale']:g}): {n} x 1 GPU"
            in res.output)
