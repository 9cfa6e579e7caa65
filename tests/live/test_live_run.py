"""A live run on the CPU (tiny-2l, 200 requests): results, and the plans a simulation makes.

The scheduler must see the same plans whether steps are priced or executed: a simulation
fed the live run's measured step times reproduces the live run exactly (every step row,
every request row), and with all requests arriving at once (no timing dependence) a
priced run has the same steps and tokens as the live one.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from sim.cli import main
from sim.report.tables import requests_table, steps_table
from sim.runner import simulate
from tests.live.helpers import Replay, prepared, write_scenario

# one worker builds the module's run (its fixture) and runs every test that reads it
pytestmark = pytest.mark.xdist_group("live-run")


@pytest.fixture(scope="module")
def live_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("live")
    path, out = write_scenario(d, n=200), d / "res"
    assert main(["run", str(path), "--out", str(out), "-q", "--no-plots"]) == 0
    return path, out


def test_live_run_writes_a_result_folder(live_run):
    _, out = live_run
    names = {p.name for p in out.iterdir()}
    assert names == {"summary.json", "config.json", "requests.parquet", "steps.parquet",
                     "live_steps.parquet", ".servesim-result"}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["requests"]["finished"] == 200
    live = summary["live"]
    assert (live["device"], live["attention"], live["clock"], live["dtype"]) == (
        "cpu", "torch", "thread", "float32")
    assert (live["layers_executed"], live["model_layers"], live["layer_scale"]) == (2, 2, 1.0)
    assert live["steps"] == summary["steps"]["count"]
    steps = pd.read_parquet(out / "steps.parquet")
    measured = pd.read_parquet(out / "live_steps.parquet")
    assert len(measured) == len(steps) == live["steps"]
    # the engine's clock counts integer nanoseconds: durations are rounded once
    assert np.abs(measured["duration_s"] - steps["duration_s"]).max() <= 0.5e-9 + 1e-15
    assert (measured["duration_s"] > 0).all() and (measured["layers_s"] > 0).all()
    assert (measured["layers_s"] < measured["measured_s"]).all()
    assert set(measured["kind"]) == {"prefill", "mixed", "decode"}
    assert np.array_equal(measured["decode_seqs"], steps["decode_seqs"])
    assert np.array_equal(measured["tokens"], steps["prefill_tokens"] + steps["decode_seqs"])
    req = pd.read_parquet(out / "requests.parquet")
    assert (req["generated_tokens"] == req["output_tokens"]).all()


def test_a_simulation_with_the_live_step_times_makes_the_same_plans(live_run):
    path, out = live_run
    durations = pd.read_parquet(out / "live_steps.parquet")["duration_s"].to_numpy()
    _, (r, specs, _) = prepared(path)
    replay = Replay(durations)
    res = simulate(r, specs, executor=replay, on_plan=replay.advance)
    assert replay.i == len(durations)
    pd.testing.assert_frame_equal(steps_table(res), pd.read_parquet(out / "steps.parquet"))
    pd.testing.assert_frame_equal(requests_table(res), pd.read_parquet(out / "requests.parquet"))


def test_a_burst_runs_the_same_steps_priced_and_live(tmp_path):
    """All requests at t = 0: plans do not depend on step times, so a priced run and the
    live run take the same steps with the same tokens (decode runs folded in the priced
    run, executed step by step live)."""
    path = write_scenario(tmp_path, n=40, rate=1e6)
    outs = {}
    for cost in ("linear", "live"):
        outs[cost] = tmp_path / cost
        assert main(["run", str(path), "--set", f"cost={{name: {cost}}}", "--out",
                     str(outs[cost]), "-q", "--no-plots"]) == 0
    cols = ["prefill_tokens", "decode_seqs", "batch_size", "kv_blocks_used", "num_preempted"]
    priced, live = (pd.read_parquet(outs[c] / "steps.parquet") for c in ("linear", "live"))
    assert len(priced) == len(live) > 40
    pd.testing.assert_frame_equal(priced[cols], live[cols])
    tokens = [pd.read_parquet(outs[c] / "requests.parquet")["generated_tokens"]
              for c in ("linear", "live")]
    pd.testing.assert_series_equal(*tokens)
