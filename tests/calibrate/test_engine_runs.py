"""The committed real-vLLM engine runs (benchmarks/engine/runs): read as results, internally
consistent, contexts re-derived by a replay of servesim's scheduler, and one leave-one-out
rotation of fit-steps within 3 % of the engine (needs no vLLM)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from calibrate.engine_delays import fit_delays
from calibrate.fit_steps import fit_logs
from calibrate.step_replay import derive_contexts, same_steps
from calibrate.steplog import from_records, read_log
from calibrate.validate_steps import rotation
from sim.config.load import load_scenario
from sim.cost.profile.model_file import load_model_file
from sim.report.recorded import read_run, requests_table
from sim.report.result_view import load_result

ROOT = Path(__file__).resolve().parents[2] / "benchmarks" / "engine"
RUNS = sorted(p.parent for p in (ROOT / "runs").glob("*/run.json"))
HELD_OUT = "light-long"  # the CI rotation: fit the other runs, replay this one

pytestmark = pytest.mark.xdist_group("engine-runs")


def test_at_least_five_runs_are_committed():
    assert len(RUNS) >= 5
    for run in RUNS:
        assert json.loads((run / "run.json").read_text())["kind"] == "vllm-engine-run"


@pytest.mark.parametrize("run", RUNS, ids=lambda p: p.name)
def test_a_run_reads_as_a_result(run):
    rec = read_run(run)
    req = requests_table(rec)
    assert len(req) == len(rec.trace) and (req["status"] == "finished").all()
    assert (req["generated_tokens"] == req["output_tokens"]).all()
    # every token the client got came from a step that gave the request one
    made = sum(len(s["tokens"]) - len(s["no_token"]) for s in rec.steps)
    assert made == req["generated_tokens"].sum()
    # a request's context before each step is the tokens it computed in earlier steps
    done: dict[str, int] = {}
    for s in rec.steps:
        for rid in s["preempted"]:
            done[rid] = 0
        for rid, n in s["tokens"].items():
            assert s["context"][rid] == done.get(rid, 0)
            done[rid] = done.get(rid, 0) + n
    view = load_result(run)
    assert view.kind == "vLLM engine" and len(view.steps) == len(rec.steps)
    assert (np.diff(view.steps["start_s"]) > 0).all() and (view.steps["duration_s"] > 0).all()


def test_delays_are_milliseconds():
    ingress, egress = fit_delays([read_run(r) for r in RUNS])
    assert 0.0002 < ingress < 0.02 and 0.0 <= egress < 0.02


def test_contexts_derived_by_a_replay_match_the_logged_ones():
    run = ROOT / "runs" / "light-long"
    exact = read_log(run)
    counts_only = [{k: v for k, v in s.items() if k not in ("tokens", "context")}
                   for s in read_run(run).steps]
    log = from_records(counts_only, "light-long")
    assert log["context_tokens"].isna().all()
    ingress, _ = fit_delays([read_run(run)])
    rep = derive_contexts(log, load_scenario(run / "scenario.yaml"), ingress)
    assert rep.paired >= 0.95 * rep.steps
    ok = rep.frame["context_tokens"].notna()
    for col in ("context_tokens", "pairs", "decode_seqs", "prefill_tokens"):
        np.testing.assert_allclose(rep.frame.loc[ok, col], exact.loc[ok, col])


@pytest.mark.parametrize("run", RUNS, ids=lambda p: p.name)
def test_the_scheduler_makes_the_engines_steps(run):
    # with the engine's own arrival times and step durations, every step is the same
    same, total = same_steps(run, read_log(run), load_scenario(run / "scenario.yaml"))
    assert same == total


def test_the_shipped_fit_is_the_fit_of_the_committed_runs():
    shipped_file, fresh_file = load_model_file(ROOT / "cpu-tiny-llama.yaml"), fit_logs(RUNS).model
    assert shipped_file.dtype == fresh_file.dtype == "float32"  # the runs' dtype (run.json)
    shipped, fresh = shipped_file.steps, fresh_file.steps
    assert fresh.execution.model_dump() == pytest.approx(shipped.execution.model_dump(),
                                                         rel=1e-6)
    assert fresh.host.model_dump() == pytest.approx(shipped.host.model_dump(), rel=1e-6)
    assert fresh.ingress_ms == pytest.approx(shipped.ingress_ms, rel=1e-6)
    assert fresh.egress_ms == pytest.approx(shipped.egress_ms, rel=1e-6)


def test_one_leave_one_out_rotation_is_within_3_percent():
    # fit-steps on the other runs, light-long replayed: the acceptance bounds of issue 9
    row = rotation(RUNS, ROOT / "runs" / HELD_OUT)
    for metric in ("TTFT mean", "E2EL mean", "ITL median"):
        assert abs(row[metric]) < 3.0, (metric, row)
    for metric in ("TTFT p90", "ITL p90"):
        assert abs(row[metric]) < 10.0, (metric, row)
    assert row["same steps %"] == 100.0
