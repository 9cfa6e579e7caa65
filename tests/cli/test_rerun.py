"""--trace swaps the trace file and keeps the rest of the workload (rate_scale, window_s,
tags); a mix it replaces says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sim.cli import main
from sim.config.load import load_scenario
from sim.pipeline import prepare, resolved_config

CHAT = "scenarios/traces/chat-15min.csv"


def scenario(tmp_path, workload: str):
    path = tmp_path / "s.yaml"
    path.write_text(f"name: s\nmodel: llama-3-8b\ngpu: h100-sxm\nworkload: {workload}\n")
    return path


def test_trace_keeps_the_replays_rate_scale_window_and_tags(tmp_path):
    (tmp_path / "old.csv").write_text("")  # never read: --trace replaces it
    path = scenario(tmp_path, "{trace: old.csv, format: azure, rate_scale: 4, "
                              "window_s: [0, 60], lane: rag, max_requests: 50}")
    w = load_scenario(path, trace=CHAT).scenario.workload
    assert (w.rate_scale, w.window_s, w.lane, w.max_requests) == (4, (0, 60), "rag", 50)
    assert w.trace.endswith("chat-15min.csv") and w.format == "auto"


def test_trace_replaces_generated_arrivals_and_lengths_but_keeps_tags(tmp_path):
    path = scenario(tmp_path, "{arrival: {process: poisson, rate: 8, concurrency: 4}, "
                              "lengths: {dist: azure_conv_like}, num_requests: 100, "
                              "lane: chat, priority: 1}")
    w = load_scenario(path, trace=CHAT).scenario.workload
    assert w.arrival.process == "replay" and w.arrival.concurrency == 4
    assert w.lengths.dist == "trace" and w.num_requests is None
    assert (w.lane, w.priority) == ("chat", 1)


def test_trace_over_a_mix_warns_in_one_line(tmp_path, capsys):
    path = scenario(tmp_path, "{mix: [{arrival: {process: poisson, rate: 1}, num_requests: 5, "
                              "lengths: {dist: fixed, prompt: 10, output: 2}}, "
                              "{arrival: {process: poisson, rate: 1}, num_requests: 5, "
                              "lengths: {dist: fixed, prompt: 10, output: 2}}]}")
    with pytest.warns(UserWarning, match="replaces the scenario's mix of 2 workloads with one "
                      "replay of chat-15min.csv"):
        w = load_scenario(path, trace=CHAT).scenario.workload
    assert w.mix is None and w.trace.endswith("chat-15min.csv")


def test_run_trace_at_the_scenarios_rate_scale(tmp_path):
    """The 'RAG 4x' re-check: a scenario at rate_scale 4 re-run on a new trace stays at 4x."""
    path = scenario(tmp_path, "{trace: old.csv, rate_scale: 4, window_s: [0, 60]}")
    args = ["run", str(path), "--trace", CHAT, "--set",
            "cost={name: linear, base_ms: 10, prefill_token_ms: 0.05, decode_seq_ms: 1}",
            "--no-plots", "-q"]
    assert main([*args, "--out", str(tmp_path / "x4")]) == 0
    assert main([*args, "--set", "workload.rate_scale=1", "--out", str(tmp_path / "x1")]) == 0
    x4, x1 = (json.loads((tmp_path / d / "summary.json").read_text()) for d in ("x4", "x1"))
    assert x4["requests"]["total"] == x1["requests"]["total"]  # the trace's first minute ...
    span4, span1 = (x["stability"]["window_s"] for x in (x4, x1))  # a tenth of the arrivals'
    assert span4 == pytest.approx(span1 / 4)  # ... sent four times as fast


@pytest.mark.parametrize("path", sorted(Path("scenarios").glob("*.yaml")), ids=lambda p: p.stem)
def test_every_shipped_scenarios_config_json_loads_back_to_the_same_run(path, tmp_path):
    """config.json (defaults filled, model spelled out, trace paths from its folder) is a
    scenario that resolves to the same limits, memory, cost model and requests."""
    loaded = load_scenario(path)
    r, specs, _ = prepare(loaded)
    (tmp_path / "config.json").write_text(json.dumps(
        resolved_config(r, "x", loaded.base_dir, tmp_path)))
    r2, specs2, _ = prepare(load_scenario(tmp_path / "config.json"))
    assert (r2.limits, r2.memory, r2.scenario.cost) == (r.limits, r.memory, r.scenario.cost)
    assert r2.scenario.cluster == r.scenario.cluster
    for col in ("arrival_s", "prompt_tokens", "output_tokens"):
        assert (getattr(specs2, col) == getattr(specs, col)).all(), col
