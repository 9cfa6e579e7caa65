"""`servesim fidelity` on the CPU (tiny-2l): profile, fit, fitted run, two live runs, report."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from sim.cli import main
from sim.live.compare import (
    ape_block,
    decode_by_batch,
    latency_rows,
    rel_error,
    repeat_noise,
    step_errors,
)
from sim.live.overhead import decode_batches, fit_by_requests, fit_residual
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
                     "profile.parquet", "model.yaml", "sim", "live-1", "live-2",
                     ".servesim-result"}  # a result like run's: replaced whole, atomically
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
    # decode batches 1..8, 12, 16 (max_num_seqs); chunks 16, 64, 256
    assert [(s["requests"], s["tokens"]) for s in over["shapes"]] == [
        *[(b, 1) for b in (1, 2, 3, 4, 5, 6, 7, 8, 12, 16)], (1, 16), (1, 64), (1, 256)]
    assert over == {**fit_by_requests(over["shapes"]), "linear": fit_residual(over["shapes"]),
                    "shapes": over["shapes"]}
    fitted = rep["fitted_step_overhead"]
    assert fitted["by_requests"] == over["by_requests"]
    assert fitted["per_token_ms"] == pytest.approx(over["per_token_ms"], abs=1e-6)
    assert rep["fitted_step_overhead_ms"] == pytest.approx(over["by_requests"]["ms"][0],
                                                           abs=1e-6)
    noise = rep["noise"]["step_repeat"]
    assert noise["steps"] > 0 and noise["matched_of"] >= noise["steps"]
    md = (report / "report.md").read_text()
    for needle in ("## Per-step time error", "| live-1 |", "## Latency (ms)",
                   "sim vs live-2", "live-2 vs live-1", "Repeat noise",
                   "Decode steps by batch size"):
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


def test_overhead_by_requests_follows_each_batch():
    """Residual 2.0 ms at one request, 3.0 at two, 3.2 at four (decode steps), and one-request
    chunks adding 0.01 ms per extra token: per_token 0.01, the table those less 0.01/request."""
    dec = {1: 2.0, 2: 3.0, 4: 3.2}
    rows = [{"requests": b, "tokens": 1, "priced_ms": 5.0, "measured_ms": 5.0 + v}
            for b, v in dec.items()]
    rows += [{"requests": 1, "tokens": q, "priced_ms": 9.0, "measured_ms": 11.0 + 0.01 * (q - 1)}
             for q in (16, 64)]
    fit = fit_by_requests(rows)
    assert fit["per_token_ms"] == pytest.approx(0.01)
    assert fit["by_requests"]["requests"] == [1, 2, 4]
    assert fit["by_requests"]["ms"] == pytest.approx([1.99, 2.98, 3.16])
    # chunks cheaper than a decode: no negative per-token cost; a negative residual: 0
    rows[-1]["measured_ms"] = rows[-2]["measured_ms"] = 9.0
    rows[1]["measured_ms"] = 4.0
    fit = fit_by_requests(rows)
    assert fit["per_token_ms"] == 0.0 and fit["by_requests"]["ms"] == pytest.approx([2, 0, 3.2])


def test_decode_batches_are_dense_then_geometric():
    assert decode_batches(4) == [1, 2, 3, 4]
    assert decode_batches(32) == [1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 32]
    assert decode_batches(100) == [1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 32, 48, 64, 96, 100]


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
    assert block["time_bias"] == pytest.approx(22.5)  # 4.9 / 4 - 1
    steps = pd.DataFrame({"kind": ["decode"] * 4 + ["mixed"], "requests": [1, 1, 3, 40, 2],
                          "predicted_s": [1.1, 1.3, 2.0, 5.0, 9.0],
                          "duration_s": [1.0, 1.0, 2.5, 4.0, 1.0]})
    groups = decode_by_batch(steps)
    assert [g["requests"] for g in groups] == ["1", "3-4", "33+"]
    assert [g["steps"] for g in groups] == [2, 1, 1]
    assert groups[0]["median_bias"] == pytest.approx(20.0)
    assert groups[1]["time_bias"] == pytest.approx(-20.0)
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


def test_profile_in_passes_keeps_each_rows_median_pass(tmp_path, monkeypatch):
    """Three passes timing a GEMM at 3, 1, 2 ms and an attention shape at 5, 6, 4 ms: the
    profile keeps 2 and 5 ms (each row's median pass), with the passes' repeats summed."""
    import calibrate.profile as prof
    from calibrate.shapes import Shape
    from calibrate.timing import Timing
    from sim.live.fidelity import profile_in_passes

    shapes = [Shape("gemm", "qkv", m=1, n=8, k=8, dtype="float32"),
              Shape("decode_attn", "decode", batch=1, ctx_len=16, num_heads=2, num_kv_heads=1,
                    head_dim=8, dtype="float32", kv_dtype="float32")]
    times = iter([3.0, 5.0, 1.0, 6.0, 2.0, 4.0])  # pass by pass, shape by shape
    real = prof.run_profile

    def fake(shapes, path, device, **kw):
        return real(shapes, path, device, builder=lambda s, d: (None, False),
                    timer=lambda fn, d, **_: Timing(next(times), 0.5, 9.0, kw["repeats"]),
                    **kw)

    monkeypatch.setattr(prof, "run_profile", fake)
    profile_in_passes(shapes, tmp_path / "p.parquet", "cpu")
    df = prof.read_profile(tmp_path / "p.parquet").set_index("op")
    assert df.loc["gemm", "median_ms"] == 2.0 and df.loc["decode_attn", "median_ms"] == 5.0
    assert (df["repeats"] == 9).all() and len(df) == 2
    assert [p.name for p in tmp_path.iterdir()] == ["p.parquet"]  # the passes are removed


def test_a_core_the_process_may_not_use_is_one_line(tmp_path, capsys):
    path = write_scenario(tmp_path, n=3)
    code = main(["run", str(path), "-o", str(tmp_path / "r"), "-q", "--no-plots",
                 "--set", "cost.cpu_core=99999"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    assert err.strip().startswith("servesim: error: cost.params.cpu_core 99999: not a core")
    assert not (tmp_path / "r").exists()
