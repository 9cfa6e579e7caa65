"""`servesim capacity`: the answer agrees with a brute-force sweep within the tolerance, and
the frontier, chosen.yaml and vLLM flags say what was found."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from sim.config.load import load_scenario
from sim.plan.capacity import Tolerance, judge
from sim.plan.executors import make_executor
from sim.plan.frontier import best, ties
from sim.plan.grid import make_plan
from sim.plan.slo import scenario_slo
from sim.plan.sweep import run_sweep

from .helpers import TINY, cli

CHAT = Path("scenarios/chat-trace.yaml").resolve()


@pytest.fixture(scope="module")
def capacity_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("cap") / "c"
    assert cli("capacity", TINY, "--grid", "engine.max_num_seqs=8,64", "--seeds", "1",
               "--tol", "1", "--gpu-hour-price", "2.5", "--emit", "vllm", "--out", out,
               "--no-plots") == 0
    return out


def test_capacity_matches_a_brute_force_sweep_within_the_tolerance(capacity_dir, tmp_path):
    loaded = load_scenario(TINY, ("engine.max_num_seqs=64",))
    budgets = scenario_slo(loaded.scenario)
    with make_executor("local", 2) as ex:
        bf = run_sweep(loaded, make_plan(loaded.scenario, None, "4:24:1", None, 1),
                       tmp_path / "bf", ex, quiet=True).table
    ok = [judge(r, budgets) is None for r in bf.to_dict("records")]
    first_fail = ok.index(False)
    assert first_fail > 0, "the brute-force grid must start below the capacity"
    boundary, failed = bf["load"][first_fail - 1], bf.iloc[first_fail]
    row = pd.read_csv(capacity_dir / "frontier.csv").set_index("config").loc["max_num_seqs=64"]
    assert abs(row["max_load"] - boundary) <= 1.0  # --tol 1 (req/s)
    assert row["max_load"] < failed["load"] <= row["next_load_failed"] + 1.0
    assert row["binding"] == judge(failed.to_dict(), budgets)


def test_a_max_num_seqs_cap_is_named_as_the_cause(tmp_path, capsys):
    """32 seats, TPOT allowed 80 ms (a 32-request step takes ~42 ms): arrivals queue for a
    seat and TTFT p95 breaks first; the binding names the cap, not only the budget."""
    out = tmp_path / "c"
    assert cli("capacity", TINY, "--set", "engine.max_num_seqs=32", "--slo",
               "ttft_p95=300ms,tpot_p95=80ms", "--seeds", "1", "--tol", "1", "--out", out,
               "--no-plots") == 0
    # the step records' share beside the cause: the batch sat at 32 for 26% of busy time
    binding = "max_num_seqs (32 running at the cap in 26% of busy time; TTFT p95 over)"
    assert pd.read_csv(out / "frontier.csv")["binding"].tolist() == [binding]
    assert f"limited by {binding} at " in capsys.readouterr().out


def test_ties_are_the_configs_within_the_tolerance_of_the_best():
    """2 %: the best's bracket is [15.38, 15.6), so up to 15.6 x 2 % = 0.312 req/s per GPU
    below it ties; d runs on 2 GPUs (30.4 req/s, 15.2 per GPU): per GPU is what counts."""
    t = pd.DataFrame({"config": list("abcde"), "status": ["found"] * 4 + ["none"],
                      "max_load": [15.38, 15.10, 14.69, 30.4, 0.0],
                      "next_load_failed": [15.6, 15.4, 14.9, 31.0, 0.001],
                      "req_s_per_gpu": [15.38, 15.10, 14.69, 15.2, 0.0],
                      "ttft_p95_ms": [480.0] * 5})
    assert best(t) == 0
    assert ties(t, 0, Tolerance.parse("2%")) == [1, 3]  # c is 0.69 below
    assert ties(t, 0, Tolerance.parse("0.5")) == [1, 3]
    assert ties(t, 0, Tolerance.parse("1")) == [1, 2, 3]  # never e, which sustains nothing
    assert ties(t, 0, Tolerance.parse("0.1%")) == []


def test_capacity_reports_ties_within_the_tolerance(tmp_path, capsys):
    """max_num_seqs 64 and 128 both exceed the ~35 requests TPOT allows: the same capacity."""
    out = tmp_path / "c"
    assert cli("capacity", TINY, "--grid", "engine.max_num_seqs=8,64,128", "--seeds", "1",
               "--tol", "1", "--out", out, "--no-plots") == 0
    front = pd.read_csv(out / "frontier.csv")
    assert front["tie_with_best"].tolist() == [False, False, True]
    assert front["max_load"][1] == front["max_load"][2] > front["max_load"][0] + 1
    printed = capsys.readouterr().out
    assert "best: max_num_seqs=64 (tie within tolerance): " in printed
    assert ("; within the search tolerance (1) of it, no better or worse at that precision: "
            f"max_num_seqs=128 ({front['req_s_per_gpu'][2]:.2f} req/s per GPU)") in printed
    assert ("note: for ties, --spread 4 searches the best again on 4 seeds to show how far "
            "its capacity moves") in printed


def test_frontier_best_config_per_gpu_and_cost(capacity_dir):
    front = pd.read_csv(capacity_dir / "frontier.csv")
    assert list(front["config"]) == ["max_num_seqs=8", "max_num_seqs=64"]
    assert (front["status"] == "found").all()
    a, b = front["max_load"]
    assert b > a  # 8 running requests cap throughput well below 64
    assert (front["req_s_per_gpu"] == front["max_load"]).all()  # one GPU, generated arrivals
    expect = 2.5 / (front["output_tok_s_per_gpu"] * 3600) * 1e6
    assert front["cost_per_million_output_tokens"].tolist() == pytest.approx(expect.tolist())
    # 200-token prompts + 40 output tokens: a million tokens processed cost a sixth as much;
    # a thousand requests cost 40,000 output tokens' worth
    assert front["cost_per_million_total_tokens"].tolist() == pytest.approx(
        (expect / 6).tolist())
    assert front["cost_per_thousand_requests"].tolist() == pytest.approx(
        (expect * 40e3 / 1e6).tolist())
    doc = yaml.safe_load((capacity_dir / "chosen.yaml").read_text())["locked"]
    assert doc["config"] == {"engine.max_num_seqs": 64}
    assert doc["capacity"]["max_load"] == b
    assert doc["slo"] == {"ttft_p95_ms": 300.0, "tpot_p95_ms": 40.0}
    mix = doc["length_mix"]
    assert mix["prompt_tokens"]["p50"] == 200 and mix["output_tokens"]["p99"] == 40
    assert doc["vllm_serve"].startswith(
        "vllm serve meta-llama/Meta-Llama-3-8B --dtype auto --kv-cache-dtype auto "
        "--tensor-parallel-size 1 --max-model-len 8192 --max-num-seqs 64 "
        "--max-num-batched-tokens 8192 ")
    assert (capacity_dir / "chosen" / "summary.json").exists()


def same_summary(a: Path, b: Path) -> None:
    """Two runs' summary.json agree on everything but the wall times."""
    sa, sb = (json.loads((d / "summary.json").read_text()) for d in (a, b))
    for s in (sa, sb):
        s["sim"].pop("wall_s")
    assert sa == sb


def test_chosen_yaml_and_config_json_run_again_to_the_same_summary(capacity_dir, tmp_path):
    chosen = yaml.safe_load((capacity_dir / "chosen.yaml").read_text())
    assert chosen["workload"]["arrival"]["rate"] == chosen["locked"]["capacity"]["max_load"]
    assert chosen["engine"]["max_num_seqs"] == 64 and chosen["model"]["num_layers"] == 32
    assert cli("run", capacity_dir / "chosen.yaml", "--out", tmp_path / "a", "--no-plots",
               "-q") == 0
    same_summary(capacity_dir / "chosen", tmp_path / "a")
    assert cli("run", capacity_dir / "chosen" / "config.json", "--out", tmp_path / "b",
               "--no-plots", "-q") == 0
    same_summary(capacity_dir / "chosen", tmp_path / "b")


def test_another_points_timeline_leaves_the_answer_in_chosen(capacity_dir, tmp_path, capsys):
    """`plot --point ID` on a capacity folder ran the point into chosen/, replacing the
    search's answer (what chosen.yaml runs to again and the report shows)."""
    import shutil

    out = tmp_path / "c"
    shutil.copytree(capacity_dir, out)
    answer = json.loads((out / "chosen" / "point.json").read_text())["id"]
    other = pd.read_parquet(out / "points.parquet")["point_id"]
    other = next(p for p in other if p != answer)
    assert cli("plot", out, "--point", other) == 0
    assert json.loads((out / "chosen" / "point.json").read_text())["id"] == answer
    assert json.loads((out / f"point-{other}" / "point.json").read_text())["id"] == other
    same_summary(capacity_dir / "chosen", out / "chosen")
    assert cli("capacity", TINY, "--grid", "engine.max_num_seqs=8,64", "--seeds", "1", "--tol",
               "1", "--gpu-hour-price", "2.5", "--out", out, "--no-plots", "-q",
               "--resume") == 0  # the folder beside chosen/ is servesim's own
    probes = len(pd.read_parquet(out / "points.parquet"))
    assert f"(0 simulated, {probes} reused, " in capsys.readouterr().out


def test_a_trace_chosen_yaml_runs_from_anywhere(tmp_path, monkeypatch):
    out = tmp_path / "t"
    assert cli("capacity", CHAT, "--set", "workload.window_s=[0,120]", "--set",
               "cost={name: linear, base_ms: 10, prefill_token_ms: 0.05, decode_seq_ms: 1}",
               "--tol", "25%", "--out", out, "--no-plots", "-q") == 0
    chosen = yaml.safe_load((out / "chosen.yaml").read_text())
    assert chosen["workload"]["rate_scale"] == chosen["locked"]["capacity"]["max_load"] != 1
    assert chosen["workload"]["window_s"] == [0, 120]
    monkeypatch.chdir(tmp_path)  # the trace path resolves from chosen.yaml's folder
    assert cli("run", out / "chosen.yaml", "--out", tmp_path / "a", "--no-plots", "-q") == 0
    same_summary(out / "chosen", tmp_path / "a")


def test_emit_vllm_prints_the_command(tmp_path, capsys):
    out = tmp_path / "c"
    assert cli("capacity", TINY, "--seeds", "1", "--tol", "20%", "--emit", "vllm", "--out", out,
               "--no-plots", "-q") == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(ln.startswith("vllm serve meta-llama/Meta-Llama-3-8B ") for ln in lines)
    assert any(ln.startswith("best: base: ") for ln in lines)
    # the answer comes with the cost model's validated error (or why there is none)
    assert any(ln.startswith("cost model error") for ln in lines)
    doc = yaml.safe_load((out / "chosen.yaml").read_text())
    band = doc["locked"]["cost_error"]
    assert band["gpu"] == "h100-sxm" and "validated" in band


def test_a_trace_answers_in_mean_and_peak_minute_rates(tmp_path, capsys):
    out = tmp_path / "t"
    assert cli("capacity", CHAT, "--set", "workload.window_s=[0,180]", "--set",
               "cost={name: linear, base_ms: 10, prefill_token_ms: 0.05, decode_seq_ms: 1}",
               "--tol", "10%", "--out", out, "--no-plots", "-q") == 0
    assert "seeds change nothing: using one seed" in capsys.readouterr().err
    row = pd.read_csv(out / "frontier.csv").iloc[0]
    probes = pd.read_parquet(out / "points.parquet")
    assert (probes["seed"] == 0).all()
    at_max = probes[probes["load"] == row["max_load"]].iloc[0]
    base_rate = probes["offered_rate_mean"].iloc[0] / probes["load"].iloc[0]
    assert row["rate_mean_req_s"] == pytest.approx(row["max_load"] * base_rate)
    assert row["rate_peak_minute_req_s"] == at_max["offered_rate_peak_minute"]
    assert row["rate_peak_minute_req_s"] > row["rate_mean_req_s"]


@pytest.mark.parametrize("cmd", [("capacity", "--seeds", "1"), ("sweep", "--rate-scale", "1,2")])
def test_a_burst_trace_has_no_rate_to_scale(tmp_path, capsys, cmd):
    """Every request at one instant: capacity wrote NaN rates (then `check` refused its own
    chosen.yaml); now refused up front, nothing written."""
    trace = tmp_path / "burst.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n" + "0,100,10\n" * 3)
    out = tmp_path / "o"
    assert cli(*cmd, "--trace", trace, "--out", out, "--no-plots", "-q") == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("burst.csv: all 3 request(s) arrive at 0 s: no rate for "
                        "workload.rate_scale to scale (give them arrival times, or set "
                        "workload.arrival={process: poisson, rate: R} and search --rate)"), err
    assert "\n" not in err
    assert not out.exists()


def test_seeds_are_bounded_as_a_sweeps_points_are(tmp_path, capsys):
    out = tmp_path / "c"
    assert cli("capacity", TINY, "--seeds", "10001", "--out", out, "-q") == 2
    assert capsys.readouterr().err.strip().endswith(
        "1 configuration(s) x 10,001 seed(s) make 10,001 searches of ~10 loads each; at most "
        "10,000 (fewer --seeds or --grid values)")
    assert not out.exists()


def test_rejected_requests_bind_at_every_load(tmp_path, capsys):
    """14.7% of the requests have prompts >= max_model_len: no load holds p95 budgets."""
    out = tmp_path / "r"
    assert cli("capacity", TINY, "--set", "workload.lengths={dist: lognormal, prompt_p50: 200, "
               "prompt_p90: 600, output_p50: 40, output_p90: 60}", "--set",
               "engine.max_model_len=512", "--seeds", "1", "--tol", "20%", "--out", out,
               "--no-plots", "-q") == 0
    assert ("limited by rejected (14.7% of the requests rejected, counted as failures at any "
            "load") in capsys.readouterr().out
    assert pd.read_csv(out / "frontier.csv")["binding"].tolist() == ["rejected"]
    assert not (out / "chosen.yaml").exists()


def test_bad_capacity_input(tmp_path, capsys):
    assert cli("capacity", TINY, "--slo", "ttft_p95=fast", "--out", tmp_path / "c") == 2
    assert cli("capacity", TINY, "--emit", "sglang", "--out", tmp_path / "c") == 2
    err = capsys.readouterr().err.splitlines()
    assert "--slo" in err[0] and "--emit" in err[1]
    assert not (tmp_path / "c").exists()
