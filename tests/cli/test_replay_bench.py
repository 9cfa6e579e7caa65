"""`servesim replay-bench`: a vllm bench serve result replayed through a scenario. A result
written from a servesim run replays to that run exactly (0 % error), under each arrival
process the benchmark can use; bad results fail in one line."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from sim.cli import main
from tests.cli.test_cli_errors import assert_one_line_error, write
from traces import TraceWarning, load_trace

SERVER = """\
name: srv
model: llama-3-8b
gpu: h100-sxm
seed: 4
engine: {max_num_seqs: 8, max_num_batched_tokens: 1024}
workload:
  arrival: %s
  lengths: {dist: lognormal, prompt_p50: 300, prompt_p90: 1200, output_p50: 40, output_p90: 160}
  num_requests: 60
"""
CLOCK0 = 5000.0  # the client's perf_counter at the first send (s)


def fake_result(run_dir, *, rate="inf", burstiness=1.0, max_concurrency=None) -> dict:
    """A vllm bench serve --save-detailed result whose requests are a servesim run's."""
    req = pd.read_parquet(run_dir / "requests.parquet")
    summary = json.loads((run_dir / "summary.json").read_text())
    gated = "client_queue_ms" in summary["sim"]  # a closed loop: every request ready at 0
    queue = req["arrival_s"].to_numpy() if gated else np.zeros(len(req))
    out = req["generated_tokens"].to_numpy()
    tpot = np.nan_to_num(req["tpot_s"].to_numpy())
    return {
        "date": "20261201-000000", "backend": "vllm", "request_rate": rate,
        "burstiness": burstiness, "max_concurrency": max_concurrency,
        "duration": summary["duration_s"], "completed": len(req), "failed": 0,
        "input_lens": req["prompt_tokens"].tolist(), "output_lens": out.tolist(),
        "ttfts": req["ttft_s"].tolist(), "latencies": req["e2el_s"].tolist(),
        "itls": [[float(t)] * (int(o) - 1) for t, o in zip(tpot, out)],
        "start_times": (CLOCK0 + req["arrival_s"]).tolist(), "queue_times": queue.tolist(),
        "errors": [""] * len(req),
    }


def simulate_and_record(tmp_path, arrival: str, **traffic):
    sc = write(tmp_path, SERVER % arrival)
    assert main(["run", str(sc), "-o", str(tmp_path / "truth"), "-q", "--no-plots"]) == 0
    res = tmp_path / "bench.json"
    res.write_text(json.dumps(fake_result(tmp_path / "truth", **traffic)))
    return sc, res


def replay(capsys, res, sc, *extra) -> dict:
    capsys.readouterr()
    assert main(["replay-bench", str(res), "--scenario", str(sc), "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def errors(report: dict) -> dict:
    return {r["metric"]: r["error"] for r in report["rows"]}


@pytest.mark.parametrize(("arrival", "traffic", "mode", "expect"), [
    ("{process: poisson, rate: 6.0}", {"rate": 6.0}, "measured", {"process": "replay"}),
    ("{process: poisson, rate: 6.0}", {"rate": 6.0}, "process",
     {"process": "poisson", "rate": 6.0}),
    ("{process: gamma, rate: 6.0, cv: 2.0}", {"rate": 6.0, "burstiness": 0.25}, "process",
     {"process": "gamma", "rate": 6.0, "cv": 2.0}),
    ("{process: closed, concurrency: 4}", {"max_concurrency": 4}, "measured",
     {"process": "replay", "concurrency": 4}),
    ("{process: closed, concurrency: 4}", {"max_concurrency": 4}, "process",
     {"process": "replay", "concurrency": 4}),  # an infinite rate: everything ready at 0
])
def test_a_servesim_made_result_replays_to_zero_error(tmp_path, capsys, arrival, traffic, mode,
                                                      expect):
    sc, res = simulate_and_record(tmp_path, arrival, **traffic)
    report = replay(capsys, res, sc, "--arrivals", mode)
    assert report["arrival"] == expect
    err = errors(report)
    for metric in ("TTFT mean (ms)", "TTFT p99 (ms)", "TPOT mean (ms)", "E2EL mean (ms)",
                   "E2EL median (ms)", "request throughput (req/s)"):
        assert abs(err[metric]) < 1e-9, (metric, err[metric])


def test_table_and_written_results(tmp_path, capsys):
    sc, res = simulate_and_record(tmp_path, "{process: poisson, rate: 6.0}", rate=6.0)
    out = tmp_path / "pred"
    capsys.readouterr()
    assert main(["replay-bench", str(res), "--scenario", str(sc), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "bench.json: arrivals replay" in printed and "TTFT mean (ms)" in printed
    assert "+0.0%" in printed and f"results: {out}" in printed
    config = json.loads((out / "config.json").read_text())
    assert config["workload"]["format"] == "vllm-result"
    assert json.loads((out / "summary.json").read_text())["requests"]["total"] == 60


def test_result_as_a_trace_and_failed_requests(tmp_path):
    result = {"request_rate": 2.0, "burstiness": 1.0, "max_concurrency": None,
              "duration": 3.0, "input_lens": [10, 20, 30], "output_lens": [5, 0, 7],
              "start_times": [100.5, 101.0, 102.25], "queue_times": [0.0, 0.0, 0.25],
              "ttfts": [0.1, 0.0, 0.2], "latencies": [0.5, 0.0, 0.9],
              "itls": [[0.1] * 4, [], [0.1] * 6], "errors": ["", "HTTP 500", ""]}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(result))
    with pytest.warns(TraceWarning, match=r"r\.json: 1 failed request\(s\) left out"):
        t = load_trace(path)
    assert t.df["request_id"].tolist() == ["0", "2"]
    assert t.arrival_s.tolist() == [0.0, 1.5]  # released at start - queue: 100.5, 102.0
    assert t.prompt_tokens.tolist() == [10, 30] and t.output_tokens.tolist() == [5, 7]


@pytest.mark.parametrize(("edit", "needle"), [
    (lambda r: r.pop("input_lens"), "no per-request 'input_lens'; record with vllm bench "
                                    "serve --save-result --save-detailed"),
    (lambda r: r.update(ttfts=[0.1]), "field 'ttfts' must be a list with one entry per request"),
    (lambda r: r.pop("itls"), "no per-request 'itls' to compare with"),
    (lambda r: r.pop("latencies"), "no per-request 'latencies' to compare with"),
])
def test_bad_results_fail_in_one_line(tmp_path, capsys, edit, needle):
    sc, res = simulate_and_record(tmp_path, "{process: poisson, rate: 6.0}", rate=6.0)
    capsys.readouterr()  # the recorded run's own warning (60 requests: too short to judge)
    data = json.loads(res.read_text())
    edit(data)
    res.write_text(json.dumps(data))
    out = tmp_path / "replayed"
    code = main(["replay-bench", str(res), "--scenario", str(sc), "-o", str(out)])
    assert_one_line_error(code, capsys.readouterr().err, "bench.json", needle)
    assert not out.exists()  # refused before anything is simulated or written


def test_appended_results_and_unknown_modes_fail_in_one_line(tmp_path, capsys):
    sc, res = simulate_and_record(tmp_path, "{process: poisson, rate: 6.0}", rate=6.0)
    capsys.readouterr()  # the recorded run's own warning (60 requests: too short to judge)
    code = main(["replay-bench", str(res), "--scenario", str(sc), "--arrivals", "poisson"])
    assert_one_line_error(code, capsys.readouterr().err, "--arrivals 'poisson'",
                          "measured, process")
    res.write_text(res.read_text() + "\n" + res.read_text())
    code = main(["replay-bench", str(res), "--scenario", str(sc)])
    assert_one_line_error(code, capsys.readouterr().err, "holds 2 results")
