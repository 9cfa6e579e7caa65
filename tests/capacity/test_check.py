"""`servesim check CHOSEN --trace NEW`: the locked config re-simulated on new traffic."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from sim.cli import main
from sim.plan.emit import arrival_shape
from tests.capacity.helpers import cli

ROOT = Path(__file__).resolve().parents[2]
CHAT = ROOT / "scenarios" / "traces" / "chat-15min.csv"
WINDOW = "workload.window_s=[0,120]"  # the first two minutes (765 requests): quick


@pytest.fixture(scope="module")
def chosen(tmp_path_factory) -> Path:
    """chosen.yaml of a quick capacity search on the shipped chat trace (linear cost)."""
    d = tmp_path_factory.mktemp("check")
    scenario = d / "chat-linear.yaml"
    scenario.write_text(yaml.safe_dump({
        "name": "chat-linear", "seed": 0, "model": "llama-3-8b", "gpu": "h100-sxm",
        "cost": {"name": "linear", "base_ms": 5, "prefill_token_ms": 0.05,
                 "decode_seq_ms": 0.2},
        "engine": {"async_scheduling": False},  # the synchronous scheduler (pinned figures)
        "workload": {"trace": str(CHAT), "window_s": [0, 120]},
        "slo": {"ttft_ms": 500, "tpot_ms": 50, "percentile": 95}}))
    assert cli("capacity", scenario, "--seeds", "1", "--tol", "10%", "-j", "1", "-q",
               "--no-plots", "--out", d / "cap") == 0
    return d / "cap" / "chosen.yaml"


def check(capsys, *args) -> tuple[int, str, str]:
    code = main(["check", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_locked_mix_records_the_arrival_shape(chosen):
    locked = yaml.safe_load(chosen.read_text())["locked"]
    arrivals = locked["length_mix"]["arrivals"]
    assert arrivals["rate_mean_req_s"] == pytest.approx(locked["capacity"]["rate_mean_req_s"],
                                                        rel=1e-3)
    assert 0.9 < arrivals["interarrival_cv"] < 1.2  # the chat trace is about Poisson
    assert arrival_shape([0.0, 1.0, 2.0, 3.0]) == {"rate_mean_req_s": 1.0,
                                                   "interarrival_cv": 0.0}
    assert arrival_shape([5.0]) == {"rate_mean_req_s": None, "interarrival_cv": None}


def test_same_traffic_holds(chosen, capsys):
    locked = yaml.safe_load(chosen.read_text())["locked"]
    scale = yaml.safe_load(chosen.read_text())["workload"]["rate_scale"]
    assert scale > 1  # the config was locked above the trace's own rate
    code, out, err = check(capsys, chosen, "--trace", CHAT, "--set", WINDOW)
    assert code == 0, err
    line = out.splitlines()[0]
    rate = locked["capacity"]["rate_mean_req_s"]
    assert line.startswith(f"holds: rate {1 / scale:.2f}x ({rate:.3g} -> ")
    assert "TTFT p95" in line and "ms <= 500 ms budget" in line
    assert "prompts p50 (tokens) │ 1027   │ 1027" in out  # the length mix did not move
    # at the rate it was locked at, the same traffic holds too
    code, out, _ = check(capsys, chosen, "--trace", CHAT, "--set", WINDOW, "--set",
                         f"workload.rate_scale={scale}", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["holds"] is True and doc["binding"] is None
    assert doc["line"].startswith("holds: traffic within 10% of the locked mix; ")
    assert {m["measure"]: m["ratio"] for m in doc["traffic"]}["rate"] == pytest.approx(1.0,
                                                                                      abs=1e-3)


def test_prompts_4x_longer_do_not_hold(chosen, capsys):
    code, out, err = check(capsys, chosen, "--trace", CHAT, "--set", WINDOW,
                           "--set", "workload.prompt_scale=4", "--json")
    assert code == 0, err
    doc = json.loads(out)  # strict JSON: json.loads rejects NaN and Infinity by default
    assert doc["holds"] is False  # the cause first, with its share of the engine's busy time
    assert doc["binding"] == "KV cache (full in 42% of busy time; TTFT p95 over)"
    assert doc["line"].startswith("does not hold: prompts p50 4.00x (1027 -> 4108 tokens), "
                                  "rate 0.80x")
    assert "TTFT p95 over its 500 ms budget" in doc["line"]
    assert "105 rejected (prompt >= max_model_len)" in doc["line"]
    ratios = {m["measure"]: m["ratio"] for m in doc["traffic"]}
    assert ratios["prompts p50"] == 4.0 and ratios["outputs p90"] == 1.0
    ttft = {b["budget"]: b for b in doc["budgets"]}["ttft_p95"]
    assert ttft["holds"] is False and ttft["judged_ms"] is None and ttft["value_ms"] > 500
    assert doc["requests"] == 765 and doc["rejected_fraction"] == pytest.approx(105 / 765)


@pytest.mark.parametrize(("args", "needle"), [
    (["nope.yaml", "--trace", CHAT], "nope.yaml: no such file"),
    (["{scenario}", "--trace", CHAT], "no locked section with a length_mix"),
    (["{folder}", "--trace", CHAT], "check: not a regular file"),
    (["{chosen}", "--trace", "missing.csv"], "missing.csv: no such file"),
    (["{chosen}", "--trace", "{folder}"], "check: not a regular file"),
    (["{nan_slo}", "--trace", CHAT], "locked.slo ttft_p95_ms: nan is not a budget"),
    (["{bad_rate}", "--trace", CHAT],
     "locked.capacity.rate_mean_req_s: -40 is not a finite number >= 0"),
    (["{chosen}", "--trace", CHAT, "--format", "mooncake"], "line 1: malformed JSON"),
    (["{chosen}", "--trace", CHAT, "--format", "bogus"], "--format 'bogus': one of auto, "),
    (["{chosen}", "--trace", CHAT, "--set", "workload.prompt_scale=0"],
     "workload.prompt_scale: must be >= 1e-06 times"),
])
def test_bad_input_is_one_line_exit_2(chosen, capsys, args, needle, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    doc = yaml.safe_load(chosen.read_text())
    doc["locked"]["slo"] = {"ttft_p95_ms": float("nan")}
    (tmp_path / "nan.yaml").write_text(yaml.safe_dump(doc))
    doc = yaml.safe_load(chosen.read_text())
    doc["locked"]["capacity"]["rate_mean_req_s"] = -40
    (tmp_path / "rate.yaml").write_text(yaml.safe_dump(doc))
    (tmp_path / "check").mkdir()
    args = [str(a).format(chosen=chosen, scenario=chosen.parent.parent / "chat-linear.yaml",
                          folder=tmp_path / "check", nan_slo=tmp_path / "nan.yaml",
                          bad_rate=tmp_path / "rate.yaml")
            for a in args]
    code, out, err = check(capsys, *args)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("servesim: error: "), err
    assert needle in lines[0] and "Traceback" not in err and out == ""


def test_capacity_on_the_new_traffic_says_how_far_it_moved(chosen, capsys):
    code, out, err = check(capsys, chosen, "--trace", CHAT, "--set", WINDOW, "--set",
                           "workload.prompt_scale=1.5", "--capacity", "-j", "1", "--json")
    assert code == 0, err
    doc = json.loads(out)
    cap, locked = doc["capacity"], yaml.safe_load(chosen.read_text())["locked"]["capacity"]
    assert doc["holds"] is False and cap["status"] == "found" and cap["seeds"] == [0]
    assert cap["locked_rate_mean_req_s"] == locked["rate_mean_req_s"]
    # 1.5x longer prompts: the config no longer carries the trace's own rate (0.8x of the
    # locked one), so its capacity fell below that
    traffic = {m["measure"]: m for m in doc["traffic"]}
    assert cap["ratio"] < traffic["rate"]["ratio"] < 1
    assert cap["rate_mean_req_s"] == pytest.approx(cap["ratio"] * locked["rate_mean_req_s"])
    assert doc["line"].endswith(
        f"; capacity {cap['ratio']:.2f}x ({locked['rate_mean_req_s']:.3g} -> "
        f"{cap['rate_mean_req_s']:.3g} req/s), limited by {cap['binding']}")


def test_a_fleets_chosen_yaml_is_checked_as_a_fleet(tmp_path, capsys):
    from tests.capacity.helpers import TINY

    fleet = "cluster={replicas: 2, router: {name: least_outstanding}}"
    assert cli("capacity", TINY, "--set", fleet, "--seeds", "1", "--tol", "20%", "-j", "1",
               "-q", "--no-plots", "--out", tmp_path / "c") == 0
    capsys.readouterr()
    chosen = tmp_path / "c" / "chosen.yaml"
    assert yaml.safe_load(chosen.read_text())["locked"]["gpus"] == 2
    code, out, err = check(capsys, chosen, "--trace", CHAT, "--set",
                           "workload.window_s=[0,60]", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["requests"] == 402, err
    # TINY's fixed 200-token prompts against the chat trace's: p99 moved most
    assert doc["line"].startswith("does not hold: prompts p99 20.68x (200 -> 4136 tokens)")
