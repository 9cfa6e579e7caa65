"""Closed-loop and concurrency-capped arrivals (sim.engine.arrivals.Gated, workload
`arrival.process: closed` / `arrival.concurrency`): golden event times, the in-system count,
think time, rejections, horizons, decode-run equivalence, config errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cli import main
from sim.engine.clock import to_ns
from sim.sched.base import Status
from tests.cli.test_cli_errors import assert_one_line_error, write
from tests.sim.helpers import assert_same_results, folded_and_single, ms, run
from tests.sim.test_invariants import runs
from traces import build_workload

CLOSED4 = """\
name: closed
model: llama-3-8b
gpu: h100-sxm
seed: 5
workload:
  arrival: {process: closed, concurrency: 4}
  lengths: {dist: lognormal, prompt_p50: 300, prompt_p90: 1500, output_p50: 40, output_p90: 200}
  num_requests: 120
"""


def sent(sim) -> np.ndarray:
    return sim.engine.source.arrival_times()


def in_system(arrive: np.ndarray, done: np.ndarray, t: float) -> int:
    return int((arrive <= t).sum() - (done <= t).sum())


def test_concurrency_4_keeps_exactly_4_requests_in_the_system(tmp_path):
    """Acceptance: between the first and the last request's arrival, always 4 in flight."""
    out = tmp_path / "o"
    assert main(["run", str(write(tmp_path, CLOSED4)), "-o", str(out), "-q", "--no-plots"]) == 0
    import pandas as pd

    req = pd.read_parquet(out / "requests.parquet")
    # the engine's clock counts integer nanoseconds; the reported seconds are derived from it
    arrive, done = to_ns(req["arrival_s"].to_numpy()), to_ns(req["finish_s"].to_numpy())
    assert (req["status"] == "finished").all() and len(req) == 120
    events = np.unique(np.concatenate([arrive, done]))
    inside = events[(events >= arrive.min()) & (events < arrive.max())]
    probes = np.concatenate([inside, (inside[:-1] + inside[1:]) / 2])  # at and between events
    assert len(inside) > 100
    assert {in_system(arrive, done, t) for t in probes} == {4}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["kv_cache"]["peak_concurrent_seqs"] == 4
    assert summary["sim"]["client_queue_ms"]["count"] == 120  # all ready at 0, sent later


def test_closed_loop_golden_times():
    # 10 ms + 1 ms per prefill token: prefill of 10 tokens = 20 ms, each decode 10 ms
    sim = run([0.0, 0.0, 0.0], [10] * 3, [3] * 3, concurrency=1)
    assert sent(sim) == pytest.approx([0.0, ms(40), ms(80)], abs=1e-12)
    assert sim.recorder.first_token_s == pytest.approx([ms(20), ms(60), ms(100)], abs=1e-12)
    assert sim.recorder.finish_s == pytest.approx([ms(40), ms(80), ms(120)], abs=1e-12)


def test_think_time_delays_the_next_request():
    sim = run([0.0, 0.0, 0.0], [10] * 3, [3] * 3, concurrency=1, think_s=0.5)
    assert sent(sim) == pytest.approx([0.0, 0.54, 1.08], abs=1e-12)
    assert sim.recorder.finish_s == pytest.approx([0.04, 0.58, 1.12], abs=1e-12)


def test_a_cap_over_open_arrivals_sends_each_when_a_slot_frees():
    # vllm bench serve --max-concurrency 2 over requests ready at 0, 0, 5 ms and 100 ms
    sim = run([0.0, 0.0, 0.005, 0.1], [10] * 4, [3] * 4, concurrency=2)
    # r0 + r1 prefill together (30 ms), decode to 50 ms; r2 waits for a slot, r3 does not
    assert sent(sim) == pytest.approx([0.0, 0.0, 0.05, 0.1], abs=1e-12)
    assert sim.recorder.finish_s == pytest.approx([0.05, 0.05, 0.09, 0.14], abs=1e-12)


def test_a_rejected_request_frees_its_slot_at_its_arrival():
    sim = run([0.0, 0.0], [30, 10], [3, 3], max_model_len=20, concurrency=1, think_s=0.25)
    assert sim.scheduler.status.tolist() == [4, 3]  # rejected, finished
    assert sent(sim) == pytest.approx([0.0, 0.25], abs=1e-12)


def test_a_horizon_drops_the_requests_never_sent(tmp_path):
    sc = write(tmp_path, CLOSED4 + "horizon_s: 2.0\n")
    assert main(["run", str(sc), "-o", str(tmp_path / "o"), "-q", "--no-plots"]) == 0
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    r = s["requests"]
    assert r["total"] == 120 and 0 < r["never_sent"] < 120
    assert r["finished"] + r["unfinished"] + r["never_sent"] == r["total"]


@settings(max_examples=60, deadline=None)
@given(runs(), st.integers(1, 6), st.sampled_from([0.0, 0.003]), st.booleans())
def test_gated_runs_fold_like_single_steps_and_never_exceed_the_cap(case, cap, think, lag):
    arrival, prompt, output, knobs = case
    folded, single = folded_and_single(run, arrival, prompt, output, concurrency=cap,
                                       think_s=think, async_scheduling=lag, **knobs)
    assert_same_results(folded, single)
    np.testing.assert_array_equal(sent(folded), sent(single))
    # in the engine's integer nanoseconds: every send after its ready time, never > cap inside
    arrive = folded.engine.source.sent  # (ns; -1 never sent)
    fin = folded.recorder.finish_s
    done = np.where(np.isnan(fin), np.iinfo(np.int64).max, to_ns(np.nan_to_num(fin)))
    rejected = folded.scheduler.status == 4
    done[rejected] = arrive[rejected]
    ok = arrive >= 0
    assert (arrive[ok] >= to_ns(arrival)[ok]).all()
    for t in np.unique(arrive[ok]):
        assert in_system(arrive[ok], done[ok], t) <= cap


def test_closed_workloads_generate_ready_times_at_zero(tmp_path):
    t = build_workload({"arrival": {"process": "closed", "concurrency": 3}, "num_requests": 5,
                        "lengths": {"dist": "fixed", "prompt": 7, "output": 2}},
                       seed=0, base_dir=tmp_path)
    assert t.arrival_s.tolist() == [0.0] * 5


@pytest.mark.parametrize(("workload", "needle"), [
    ("arrival: {process: closed}\n  num_requests: 5", "needs concurrency"),
    ("arrival: {process: closed, concurrency: 2, rate: 3}\n  num_requests: 5",
     "takes no rate or cv"),
    ("arrival: {process: poisson, rate: 3, think_s: 1}\n  num_requests: 5",
     "think_s applies only with concurrency"),
    ("arrival: {process: closed, concurrency: 0}\n  num_requests: 5", "concurrency"),
    ("arrival: {process: closed, concurrency: 2}\n  duration_s: 5", "not duration_s"),
    ("mix:\n    - {arrival: {process: closed, concurrency: 2}, num_requests: 3, lengths: "
     "{dist: fixed, prompt: 5, output: 2}}", "a mix's sub-workloads cannot set it"),
])
def test_bad_closed_loop_configs_fail_in_one_line(tmp_path, capsys, workload, needle):
    text = CLOSED4.split("workload:")[0] + "workload:\n  " + workload + "\n"
    if "mix" not in workload:
        text += "  lengths: {dist: fixed, prompt: 5, output: 2}\n"
    code = main(["run", str(write(tmp_path, text)), "-o", str(tmp_path / "o"), "-q"])
    assert_one_line_error(code, capsys.readouterr().err, needle)
    assert not (tmp_path / "o").exists()


def test_a_decode_run_past_a_release_hands_it_over_as_single_steps_do():
    """max_num_seqs 1: request 8's decode run cannot take an arrival (not interruptible) and
    runs past request 11's release (0.164223 s) to the horizon (0.2 s). Single steps hand
    request 11 over at the next step start; the folded run must end the same way: sent at
    0.164223 s and waiting, not counted as never sent (found by hypothesis)."""
    from sim.cost.linear import LinearParams

    prompt = [1, 1, 1, 33, 1, 18, 24, 5, 1, 1, 1, 4, 1, 1, 1, 1, 1, 1, 1, 1, 1]
    output = [1, 1, 1, 3, 1, 1, 28, 30, 30, 1, 1, 1, 6, 1, 1, 1, 1, 11, 1, 1, 8]
    knobs = dict(usable_blocks=12, block_size=16, max_num_seqs=1, max_num_batched_tokens=81,
                 max_model_len=48, chunked=False, threshold=5, full_isl=False, adaptive=False,
                 cost=LinearParams(base_ms=2.0, prefill_token_ms=0.05, decode_seq_ms=0.1,
                                   context_token_ms=0.001), stop_s=0.2)
    folded, single = folded_and_single(run, [0.0] * 21, prompt, output, concurrency=4,
                                       think_s=0.003, **knobs)
    assert folded.engine.source.sent[11] == single.engine.source.sent[11] == 164_223_000
    assert folded.scheduler.status[11] == single.scheduler.status[11] == Status.WAITING


@pytest.mark.parametrize("core", ["general", "fast"])
def test_a_closed_loop_behind_an_ingress_counts_its_first_wave(tmp_path, core):
    # the client's send time is the engine's arrival less the ingress; for a request ready at
    # 0 behind 11.0592 ms that subtraction leaves -1.7e-18 s, which once fell before the
    # warm-up of 0 and dropped the first wave (4 of 120 requests) from every latency figure
    out = tmp_path / "o"
    sc = write(tmp_path, CLOSED4 + f"core: {core}\nengine: {{ingress_ms: 11.0592}}\n")
    assert main(["run", str(sc), "-o", str(out), "-q", "--no-plots"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["latency_ms"]["ttft"]["count"] == 120
    import pandas as pd

    req = pd.read_parquet(out / "requests.parquet")
    first = req.sort_values("arrival_s").head(4)
    assert (first["arrival_s"] == 0.0).all()  # exactly the time they were ready
    assert (first["ttft_s"] > 0.0110592).all()
