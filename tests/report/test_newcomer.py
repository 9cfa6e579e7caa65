"""Issue 23's acceptance: the planner's loop on the shipped chat trace, as a new user runs
it from the README, each step through the command line.

    capacity scenarios/chat-trace.yaml --report   the highest rate_scale holding the SLOs
    run chosen.yaml                               the locked config simulated again: the
                                                  same summary as capacity's chosen/
    check chosen.yaml --trace <prompts 4x>        the config no longer holds
    report DIR                                    the page renders in headless Chromium

Quick enough for CI: a linear step cost instead of the roofline and the trace's first two
minutes (765 requests), one seed, a 10 % bisection tolerance (tests/capacity/test_check.py
searches the same traffic).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from sim.cli import main
from tests.report.browser import drawn_fraction

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "scenarios" / "chat-trace.yaml"
CHAT = ROOT / "scenarios" / "traces" / "chat-15min.csv"
CHEAP = ("--set", "cost={name: linear, base_ms: 5, prefill_token_ms: 0.05, decode_seq_ms: 0.2}",
         "--set", "workload.window_s=[0,120]")


def servesim(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def without_wall_time(path: Path) -> dict:
    summary = json.loads(path.read_text())
    summary["sim"].pop("wall_s")  # how long this machine took, not what was simulated
    return summary


@pytest.fixture(scope="module")
def longer_prompts(tmp_path_factory) -> Path:
    """The same trace with every prompt 4x longer: "product adds long RAG"."""
    df = pd.read_csv(CHAT)
    df["prompt_tokens"] *= 4
    path = tmp_path_factory.mktemp("traffic") / "chat-rag-4x.csv"
    df.to_csv(path, index=False)
    return path


def test_the_planners_loop_on_the_chat_trace(tmp_path, capsys, browser, longer_prompts):
    cap = tmp_path / "chat-capacity"
    code, out, err = servesim(capsys, "capacity", SCENARIO, *CHEAP, "--seeds", "1", "--tol",
                              "10%", "-j", "1", "-q", "--out", cap, "--report")
    assert code == 0, err
    best = next(line for line in out.splitlines() if line.startswith("best: "))
    chosen = cap / "chosen.yaml"
    doc = yaml.safe_load(chosen.read_text())
    scale = doc["workload"]["rate_scale"]
    assert scale > 1 and f"(rate_scale {scale:g})" in best  # the trace's own rate holds
    assert doc["locked"]["vllm_serve"].startswith("vllm serve meta-llama/Meta-Llama-3-8B ")

    # the locked config runs again as it is and simulates the same
    rerun = tmp_path / "rerun"
    code, out, err = servesim(capsys, "run", chosen, "-q", "--out", rerun)
    assert code == 0, err
    assert without_wall_time(rerun / "summary.json") == without_wall_time(
        cap / "chosen" / "summary.json")

    # prompts 4x longer: the check says it no longer holds, and why
    code, out, err = servesim(capsys, "check", chosen, "--trace", longer_prompts, "--set",
                              "workload.window_s=[0,120]", "--json")
    assert code == 0, err
    verdict = json.loads(out)
    assert verdict["holds"] is False
    assert verdict["line"].startswith("does not hold: prompts p50 4.00x (1027 -> 4108 tokens)")
    assert {m["measure"]: m["ratio"] for m in verdict["traffic"]}["prompts p50"] == 4.0

    # the page to share: written by --report, redrawn by `servesim report`, and it renders
    page = (cap / "report.html").read_bytes()
    code, out, err = servesim(capsys, "report", cap)
    assert (code, out) == (0, f"report: {cap / 'report.html'}\n"), err
    assert (cap / "report.html").read_bytes() == page
    seen = browser.open(cap / "report.html")
    assert seen.errors == [] and seen.title == "chat-trace: servesim capacity report"
    assert [i["alt"] for i in seen.images] == ["rate_curves.png", "frontier.png",
                                               "ttft_cdf.png", "tpot_cdf.png", "kv_timeline.png"]
    assert all(i["natural_width"] > 300 for i in seen.images)
    assert all(drawn_fraction(shot) > 0.02 for shot in seen.shots)
