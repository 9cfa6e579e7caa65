"""The committed real-vLLM engine runs (benchmarks/engine/runs: every case of cases.json
recorded three times in rounds, then once more in a later session, quiet and pinned, on one
machine): read as results, internally consistent, contexts re-derived by a replay of
servesim's scheduler, and every leave-one-case-out rotation of fit-steps within the engine's
own spread or the issue's bars (needs no vLLM)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from calibrate.engine_delays import fit_delays
from calibrate.fit_steps import fit_logs
from calibrate.step_replay import derive_contexts, same_steps
from calibrate.steplog import from_records, read_log
from calibrate.validate_steps import case_rotation, cases
from sim.config.load import load_scenario
from sim.cost.profile.model_file import load_model_file
from sim.report.recorded import read_run, requests_table
from sim.report.result_view import load_result

ROOT = Path(__file__).resolve().parents[2] / "benchmarks" / "engine"
RUNS = sorted(p.parent for p in (ROOT / "runs").glob("*/run.json"))
CASES = json.loads((ROOT / "cases.json").read_text())["cases"]
REPEATS = 3  # record.py --repeats: each case three times in one session (r1-r3) ...
LATER = 4  # ... and once more (r4, record.py --repeats 1) 4.8 h after the first round

pytestmark = pytest.mark.xdist_group("engine-runs")


def test_every_case_is_committed_four_times_in_two_sessions_from_one_machine():
    assert [p.name for p in RUNS] == sorted(f"{c['name']}-r{i}" for c in CASES
                                            for i in range(1, LATER + 1))
    metas = [json.loads((run / "run.json").read_text()) for run in RUNS]
    assert {m["kind"] for m in metas} == {"vllm-engine-run"}
    later = [m for run, m in zip(RUNS, metas) if run.name.endswith(f"-r{LATER}")]
    assert {m["repeats"] for m in metas if m not in later} == {REPEATS}
    assert {m["repeats"] for m in later} == {1}
    # the later session began hours after the first one ended (the drift between sessions
    # is part of the engine's spread: NOTES.md, nineteenth session)
    first = max(m["started_unix"] for m in metas if m not in later)
    assert min(m["started_unix"] for m in later) - first > 4 * 3600
    # one machine, pinned, nothing forced: the fit and the spread are of one CPU
    ident = {(m["hardware"]["cpu"], tuple(m["hardware"]["cpu_flags"]), m["hardware"]["cores"],
              m["hardware"]["dtype"]) for m in metas}
    assert len(ident) == 1
    assert all(m["pinning"]["pinned"] and not m["forced"] for m in metas)
    assert [len(g) for g in cases(RUNS)] == [LATER] * len(CASES)


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
    run = ROOT / "runs" / "light-long-r1"
    exact = read_log(run)
    counts_only = [{k: v for k, v in s.items() if k not in ("tokens", "context")}
                   for s in read_run(run).steps]
    log = from_records(counts_only, "light-long")
    assert log["context_tokens"].isna().all()
    ingress, _ = fit_delays([read_run(run)])
    rep = derive_contexts(log, load_scenario(run / "scenario.yaml"), ingress)
    assert rep.paired >= 0.95 * rep.steps
    ok = rep.frame["context_tokens"].notna()
    # the replay sees every request at the mean ingress: one that reached the engine
    # within that jitter of a step's start is taken a step off, and the contexts differ
    # until it finishes (this run: request 25 at step 1,389, 69 of 1,681 steps)
    for col in ("context_tokens", "pairs", "decode_seqs", "prefill_tokens"):
        same = np.isclose(rep.frame.loc[ok, col], exact.loc[ok, col])
        assert same.mean() >= 0.95, (col, same.mean())


@pytest.mark.parametrize("run", RUNS, ids=lambda p: p.name)
def test_the_scheduler_makes_the_engines_steps(run):
    # with the engine's own arrival times and step durations, every step is the same
    same, total = same_steps(run, read_log(run), load_scenario(run / "scenario.yaml"))
    assert same == total  # arrivals while idle seen at the engine's wake (step_replay._woken)


def test_the_shipped_fit_is_the_fit_of_the_committed_runs():
    shipped_file, fresh_file = load_model_file(ROOT / "cpu-tiny-llama.yaml"), fit_logs(RUNS).model
    run = json.loads((RUNS[0] / "run.json").read_text())
    assert shipped_file.dtype == fresh_file.dtype == run["engine"]["dtype"]
    # the fit carries the recording machine's fingerprint (what must match to carry over)
    hw = shipped_file.hardware
    assert (hw.cpu, list(hw.cpu_flags), hw.cores, hw.dtype) == (
        run["hardware"]["cpu"], run["hardware"]["cpu_flags"], run["hardware"]["cores"],
        run["engine"]["dtype"])
    shipped, fresh = shipped_file.steps, fresh_file.steps
    assert fresh.execution.model_dump() == pytest.approx(shipped.execution.model_dump(),
                                                         rel=1e-6)
    assert fresh.host.model_dump() == pytest.approx(shipped.host.model_dump(), rel=1e-6)
    assert fresh.ingress_ms == pytest.approx(shipped.ingress_ms, rel=1e-6)
    assert fresh.egress_ms == pytest.approx(shipped.egress_ms, rel=1e-6)


@pytest.mark.parametrize("case", [c["name"] for c in CASES])
def test_every_leave_one_case_out_rotation_is_judged_against_the_engines_spread(case):
    # fit-steps on the other six cases, the held-out case's four repeats replayed: the
    # replays' mean against the repeats' mean. Issue 22's bars: max(3 %, spread) on the
    # means and ITL p50, max(10 %, spread) on the p90s, the spread spanning two sessions of
    # one machine (the same trace recorded hours later ran its ITL 15-42 % slower and its
    # short prompts' TTFT p90 15-18 % faster: NOTES.md, nineteenth session). Every case
    # meets them. The guard below keeps the errors themselves near today's (largest:
    # heavy-mixed ITL p90 +14.1 %, light-short TTFT p90 -11.8 %), whatever the spread.
    held = [r for r in RUNS if r.name.rsplit("-r", 1)[0] == case]
    t = case_rotation(RUNS, held).set_index("metric")
    assert (t["span_h"] > 4.0).all()  # r1 to r4: hours apart
    bars = {"TTFT mean ms": 3.0, "E2EL mean ms": 3.0, "ITL median ms": 3.0,
            "TTFT p90 ms": 10.0, "ITL p90 ms": 10.0}
    guard = {"TTFT mean ms": 7.0, "E2EL mean ms": 10.0, "ITL median ms": 10.0,
             "TTFT p90 ms": 15.0, "ITL p90 ms": 17.0}
    for metric, bar in bars.items():
        err, spread = t.loc[metric, "error_pct"], t.loc[metric, "spread_pct"]
        assert np.isfinite(spread) and abs(err) <= max(bar, spread), (metric, err, spread)
        assert abs(err) <= guard[metric], (metric, err)
