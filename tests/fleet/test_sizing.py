"""`capacity --target-rate`: the fewest replicas that hold the SLOs at the rate."""

from __future__ import annotations

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
