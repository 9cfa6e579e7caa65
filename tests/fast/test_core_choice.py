"""Which simulation core runs (scenario field ``core``), the one-line error for a scenario
the fast core does not run, and the results folder written the same by both cores."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest

import sim.fast
from sim.engine.requests import RequestSpecs
from sim.report.steplog import StepLog
from sim.runner import simulate
from tests.cli.test_cli_errors import assert_one_line_error, run_cli
from tests.fast.equivalence import SCENARIOS, prepared, with_core


def _refuse(*_, **__):
    raise AssertionError("the fast core ran")


def test_core_general_never_runs_the_fast_core(monkeypatch):
    monkeypatch.setattr(sim.fast, "run", _refuse)
    r, specs = prepared(None, "workload.num_requests=30")
    res = simulate(with_core(r, "general"), specs)
    assert res.core == "general" and (res.status == 3).all()
    with pytest.raises(AssertionError, match="the fast core ran"):
        simulate(with_core(r, "auto"), specs)  # the default scenario: auto picks the fast core


@pytest.mark.parametrize("scenario,overrides,core", [
    (None, (), "fast"),
    (None, ("cost={name: linear}",), "fast"),
    ("lanes", ("workload.mix.0.duration_s=2", "workload.mix.1.duration_s=2"), "fast"),
    ("lanes", ("workload.mix.0.duration_s=2", "workload.mix.1.duration_s=2",
               "engine.enable_prefix_caching=false"), "fast"),
    (None, ("engine.enable_prefix_caching=true",), "fast"),
    (None, ("engine.enable_prefix_caching=false",), "fast"),
    (None, ("scheduler=vllm-priority",), "fast"),
    ("prefix-cache-system-prompt", (), "fast"),
    (None, ("workload.arrival.concurrency=4",), "fast"),
    (None, ("workload.arrival={process: closed, concurrency: 8}", "workload.num_requests=200"),
     "fast"),
    ("swap-preemption", (), "fast"),
    ("swap-preemption", ("scheduler=vllm-priority",), "fast"),
    ("swap-preemption", ("scheduler=prefill-first",), "fast"),
    ("swap-preemption", ("scheduler=lanes",), "general"),
    ("reserve-admission", (), "fast"),
    ("contiguous-vs-paged", (), "fast"),
    ("contiguous-vs-paged", ("scheduler=orca",), "fast"),
    ("contiguous-vs-paged", ("scheduler=lanes",), "general"),
    ("static-offline", (), "fast"),
    ("static-offline", ("engine.enable_prefix_caching=true",), "general"),
    (None, ("scheduler=prefill-first",), "fast"),
    (None, ("scheduler=prefill-first", "engine.enable_prefix_caching=true"), "general"),
    (None, ("scheduler=sarathi",), "fast"),
])
def test_auto_picks_the_fast_core_where_it_runs(scenario, overrides, core):
    r, specs = prepared(scenario, *overrides)
    specs = specs.head(min(len(specs), 40))
    assert r.scenario.core == "auto"
    assert simulate(r, specs).core == core


UNSUPPORTED = [
    ("static-offline.yaml", ("engine.enable_prefix_caching=true",),
     ["scheduler static with prefix caching"]),
    ("default.yaml", ("scheduler=sarathi", "admission=reserve"),
     ["scheduler sarathi with prefix caching, KV reserved up front or admission reserve"]),
    ("contiguous-vs-paged.yaml", ("admission=reserve",),
     ["KV policy contiguous-max with vllm and admission reserve"]),
    ("swap-preemption.yaml", ("engine.enable_prefix_caching=true",),
     ["swap preemption (engine.preemption_mode: swap) with vllm, KV policy paged and "
      "prefix caching "
      "(the fast core swaps"]),
]


@pytest.mark.parametrize("scenario,overrides,needles", UNSUPPORTED,
                         ids=[f"{s}{'+' if o else ''}{','.join(o)}" for s, o, _ in UNSUPPORTED])
def test_core_fast_refuses_what_it_does_not_run(tmp_path, capsys, scenario, overrides,
                                                needles):
    out = tmp_path / "out"
    sets = [x for o in (*overrides, "core=fast") for x in ("--set", o)]
    code, _, err = run_cli(["run", SCENARIOS / scenario, *sets, "--out", out, "-q",
                            "--no-plots"], capsys)
    assert_one_line_error(code, err, "core: fast does not run this scenario", *needles)
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]


def test_an_unknown_core_is_refused(tmp_path, capsys):
    code, _, err = run_cli(["run", "--set", "core=turbo", "--out", tmp_path / "o", "-q"],
                           capsys)
    assert_one_line_error(code, err, "core", "auto", "general", "fast")


@pytest.mark.parametrize("scenario,sets", [
    ("default.yaml", ("workload.num_requests=60",)),
    ("small-kv-pressure.yaml", ("workload.num_requests=120",)),  # preemptions in the log
])
def test_the_step_log_and_tables_are_the_same_on_both_cores(tmp_path, capsys, scenario, sets):
    outs = {}
    for core in ("general", "fast"):
        outs[core] = out = tmp_path / core
        args = [x for s in (*sets, f"core={core}") for x in ("--set", s)]
        code, _, err = run_cli(["run", SCENARIOS / scenario, *args, "--out", out,
                                "--step-log", "-q", "--no-plots"], capsys)
        assert code == 0, err
    g, f = outs["general"], outs["fast"]
    log = (g / "steps.jsonl").read_bytes()
    assert log == (f / "steps.jsonl").read_bytes()
    if scenario.startswith("small-kv"):
        assert any(json.loads(line)["preempted"] for line in log.splitlines())
    for table in ("requests.parquet", "steps.parquet"):
        pd.testing.assert_frame_equal(pd.read_parquet(g / table), pd.read_parquet(f / table))
    assert (g / "config.json").read_bytes().replace(b'"general"', b'"fast"') == \
        (f / "config.json").read_bytes()
    a, b = (json.loads((p / "summary.json").read_text()) for p in (g, f))
    # sim.wall_s: the seconds this machine took, and the core that took them
    assert (a["sim"].pop("wall_s")["core"], b["sim"].pop("wall_s")["core"]) == \
        ("general", "fast")
    assert a == b


def test_the_step_log_lists_finishes_in_batch_order():
    # request 0 (2 output tokens) decodes its last token in the step that admits request 1,
    # whose single output token finishes it at once: the general engine lists the step's
    # finishes in batch order (running requests, then the admitted): ["0", "1"]
    # (synchronous: async scheduling would admit request 1 a step later)
    r, _ = prepared(None, "engine.async_scheduling=false")
    specs = RequestSpecs.from_arrays([0.0, 0.001], [1, 1], [2, 1])
    logs = {}
    for core in ("general", "fast"):
        fh = io.StringIO()
        assert simulate(with_core(r, core), specs,
                        on_plan=StepLog(fh, specs.request_id)).core == core
        logs[core] = fh.getvalue().splitlines()
    assert json.loads(logs["general"][1])["finished"] == ["0", "1"]
    assert logs["fast"] == logs["general"]
