"""`servesim fidelity` on the CPU (tiny-2l): profile, fit, fitted run, two live runs, report."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from sim.cli import main
from sim.live.compare import ape_block, latency_rows, rel_error, repeat_noise, step_errors
from sim.live.overhead import fit_residual
from tests.live.helpers import write_scenario

# one worker builds the module's run (its fixture) and runs every test that reads it
pytestmark = pytest.mark.xdist_group("live-fidelity")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    d = tmp_path_factory.mktemp("fidelity")
    path, out = write_scenario(d, n=40), d / "report"
    assert main(["fidelity", str(path), "--out", str(out), "--repeats", "2", "-q"]) == 0
    return out


def test_report_files(report):
    names = {p.name for p in report.iterdir()}
    assert names == {"report.json", "report.md", "step_times.png", "step_errors.parquet",
                     "profile.parquet", "model.yaml", "sim", "live-1", "live-2"}
    assert (report / "step_times.png").stat().st_size > 10_000
    for run in ("sim", "live-1", "live-2"):
        assert json.loads((report / run / "summary.json").read_text())["requests"][
            "finished"] == 40
    assert (report / "live-1" / "live_steps.parquet").exists()


def test_report_numbers(report):
    rep = json.loads((report / "report.json").read_text())
    assert rep["device"] == "cpu" and set(rep["runs"]) == {"sim", "live-1", "live-2"}
    steps = pd.read_parquet(report / "step_errors.parquet")
    for run in ("live-1", "live-2"):
        errs = rep["step_error"][run]
        mine = steps[steps["run"] == run]
        assert errs["all"]["steps"] == len(mine) == rep["runs"][run]["steps"]
        assert sum(errs[k]["steps"] for k in ("prefill", "mixed", "decode")) == len(mine)
        ape = 100 * np.abs(mine["predicted_s"] / mine["duration_s"] - 1)
        assert errs["all"]["median_ape"] == pytest.approx(float(np.median(ape)))
    rows = rep["latency"]["live-1"]
    assert [(r["metric"], r["stat"]) for r in rows[:4]] == [
        ("ttft", "mean"), ("ttft", "p50"), ("ttft", "p90"), ("ttft", "p99")]
    assert len(rows) == 16 and all(r["sim_err"] == pytest.approx(r["sim"] / r["live-1"] - 1)
                                   for r in rows)
    over = rep["overhead_measurement"]
    assert len(over["shapes"]) == 8  # decode batches 1..16 (max_num_seqs), chunks 16..256
    assert rep["fitted_step_overhead_ms"] == pytest.approx(over["overhead_ms"], abs=1e-6)
    assert over["overhead_ms"] == pytest.approx(max(0.0, over["fixed_ms"]))
    assert over == {**fit_residual(over["shapes"]), "shapes": over["shapes"]}
    noise = rep["noise"]["step_repeat"]
    assert noise["steps"] > 0 and noise["matched_of"] >= noise["steps"]
    md = (report / "report.md").read_text()
    for needle in ("## Per-step time error", "| live-1 |", "## Latency (ms)",
                   "sim vs live-2", "live-2 vs live-1", "Repeat noise"):
        assert needle in md, needle


def test_a_given_model_file_skips_profiling(report, tmp_path):
    path, out = write_scenario(tmp_path, n=10), tmp_path / "again"
    assert main(["fidelity", str(path), "--profile", str(report / "model.yaml"),
                 "--repeats", "1", "--out", str(out), "-q"]) == 0
    names = {p.name for p in out.iterdir()}
    assert "profile.parquet" not in names and "live-1" in names and "live-2" not in names
    rep = json.loads((out / "report.json").read_text())
    assert rep["fitted_model"] == str(report / "model.yaml")
    assert rep["noise"]["step_repeat"] is None


def test_a_missing_profile_is_refused(tmp_path, capsys):
    path = write_scenario(tmp_path, n=5)
    assert main(["fidelity", str(path), "--profile", str(tmp_path / "nope.yaml"), "-q",
                 "--out", str(tmp_path / "o")]) == 2
    assert "nope.yaml: file not found" in capsys.readouterr().err


def test_overhead_is_the_fixed_part_of_the_residual():
    """residual = 0.5 + 0.1 * requests + 0.02 * tokens (ms), exactly: the fit finds it."""
    shapes = [(1, 1), (2, 1), (8, 1), (1, 16), (1, 64), (4, 16)]
    rows = [{"requests": b, "tokens": q, "priced_ms": 10.0,
             "measured_ms": 10.0 + 0.5 + 0.1 * b + 0.02 * b * q} for b, q in shapes]
    fit = fit_residual(rows)
    assert fit["overhead_ms"] == pytest.approx(0.5)
    assert fit["per_request_ms"] == pytest.approx(0.1)
    assert fit["per_token_ms"] == pytest.approx(0.02)
    rows = [{**row, "measured_ms": row["priced_ms"] - 1.0} for row in rows]
    assert fit_residual(rows)["overhead_ms"] == 0.0  # never a negative overhead
    # a negative per-token slope is dropped and the rest refitted: 1.0 + 0.2/request
    rows = [{"requests": b, "tokens": q, "priced_ms": 10.0,
             "measured_ms": 11.0 + 0.2 * b - 0.001 * b * q} for b, q in shapes]
    fit = fit_residual(rows)
    assert fit["per_token_ms"] == 0.0 and fit["fixed_ms"] >= 0 and fit["per_request_ms"] > 0


def test_error_helpers():
    assert rel_error(110.0, 100.0) == pytest.approx(0.1) and np.isnan(rel_error(1.0, 0.0))
    block = ape_block(np.array([1.1, 0.8, 1.0, 2.0]), np.ones(4))
    assert block["steps"] == 4 and block["median_ape"] == pytest.approx(15.0)
    assert block["median_bias"] == pytest.approx(5.0)
    assert block["p90_ape"] == pytest.approx(76.0)  # APEs 0, 10, 20, 100: p90 = 20 + 0.7 * 80
    table = pd.DataFrame({"kind": ["decode", "decode", "prefill"],
                          "predicted_s": [1.0, 1.5, 3.0], "duration_s": [1.0, 1.0, 2.0]})
    errs = step_errors(table)
    assert errs["decode"]["median_ape"] == pytest.approx(25.0)
    assert errs["prefill"]["median_ape"] == pytest.approx(50.0) and errs["mixed"]["steps"] == 0
    a = pd.DataFrame({"signature": [1, 2, 3], "duration_s": [1.0, 2.0, 3.0]})
    b = pd.DataFrame({"signature": [2, 3, 4], "duration_s": [2.2, 2.7, 9.0]})
    noise = repeat_noise(a, b)
    assert noise["steps"] == 2 and noise["median_ape"] == pytest.approx(10.0)
    runs = {"sim": {"latency_ms": {m: {"mean": 2.0, "median": 2.0, "p90": 2.0, "p99": 2.0}
                                   for m in ("ttft", "tpot", "itl", "e2el")}},
            "live-1": {"latency_ms": {m: {"mean": 4.0, "median": 1.0, "p90": 2.0, "p99": 2.0}
                                      for m in ("ttft", "tpot", "itl", "e2el")}}}
    rows = latency_rows(runs, "live-1")
    assert rows[0] == {"metric": "ttft", "stat": "mean", "sim": 2.0, "live-1": 4.0,
                       "sim_err": -0.5}
    assert rows[1]["sim_err"] == pytest.approx(1.0)
