"""Metric definitions (vllm bench serve), weighted percentiles, the stability verdict."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.config.load import validate
from sim.metrics.stats import describe_ms, weighted_percentiles
from sim.metrics.summary import summarize
from sim.pipeline import prepare
from sim.runner import simulate


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 10, allow_nan=False), st.integers(1, 7)), min_size=1,
                max_size=40))
def test_weighted_percentiles_equal_expanded(pairs):
    v = np.array([p[0] for p in pairs])
    w = np.array([p[1] for p in pairs])
    got = weighted_percentiles(v, w, (0, 50, 90, 95, 99, 100))
    want = np.percentile(np.repeat(v, w), (0, 50, 90, 95, 99, 100))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.floats(0, 1e3, allow_nan=False), st.just(float("nan")),
                          st.sampled_from([0.5, 1.25, 7.0])), min_size=1, max_size=300))
def test_describe_ms_without_weights_equals_unit_weights(values):
    """The unweighted path (one sorted copy: memory for ten million latencies) gives the
    figures of unit weights to the bit."""
    v = np.array(values)
    assert describe_ms(v) == _unit_reference(v)


def _unit_reference(v: np.ndarray) -> dict:
    """describe_ms as unit weights computed it before the unweighted path."""
    v = v[~np.isnan(v)]
    if not len(v):
        return {"count": 0}
    w = np.ones(len(v), dtype=np.int64)
    n = len(v)
    mean = float((v * w).sum() / n)
    out = {"count": n, "mean": mean, "std": float(np.sqrt((w * (v - mean) ** 2).sum() / n))}
    for p, x in zip((50, 90, 95, 99), weighted_percentiles(v, w, (50, 90, 95, 99))):
        out["median" if p == 50 else f"p{p}"] = x
    out["max"] = float(v.max())
    return {k: (x * 1e3 if k != "count" else x) for k, x in out.items()}


def test_describe_ms_units_and_nan():
    d = describe_ms(np.array([0.001, 0.003, np.nan]))
    assert d["count"] == 2 and d["mean"] == pytest.approx(2.0) and d["max"] == pytest.approx(3.0)


def scenario(**over):
    data = {
        "name": "m", "model": "llama-3-8b", "gpu": "h100-sxm", "seed": 3,
        "cost": {"name": "linear", "base_ms": 10, "prefill_token_ms": 1, "decode_seq_ms": 0},
        "workload": {"arrival": {"process": "constant", "rate": 1.0},
                     "lengths": {"dist": "fixed", "prompt": 8, "output": 3},
                     "num_requests": 4},
    }
    data.update(over)
    return validate(data, "test")


def run(sc):
    from sim.config.load import LoadedScenario

    r, specs, _ = prepare(LoadedScenario(sc, "test", Path(".")))
    res = simulate(r, specs)
    return res, summarize(res)


def test_a_refusal_sent_last_ends_the_duration(tmp_path):
    # vllm bench serve times the benchmark to its last response, failed ones included: two
    # requests at 0 s finish within 0.1 s, a prompt over max_model_len (64) sent at 2 s is
    # refused as it arrives, so the duration is 2 s and 2 requests / 2 s are served
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"arrival_s": 0.0, "prompt_len": 8, "max_tokens": 3}\n'
                     '{"arrival_s": 0.0, "prompt_len": 8, "max_tokens": 3}\n'
                     '{"arrival_s": 2.0, "prompt_len": 100, "max_tokens": 3}\n')
    res, s = run(scenario(workload={"trace": str(trace)}, engine={"max_model_len": 64}))
    assert s["requests"]["rejected"] == 1 and s["requests"]["finished"] == 2
    assert float(res.recorder.finish_s[:2].max()) < 0.1
    assert s["duration_s"] == pytest.approx(2.0)
    assert s["throughput"]["request_per_s"] == pytest.approx(1.0)


def test_vllm_bench_definitions_by_hand():
    # 4 isolated requests (1 s apart), P=8 O=3: TTFT 18 ms, E2E 38 ms, TPOT (38-18)/2 = 10 ms,
    # two ITLs of 10 ms each; duration = last finish 3.038 s - first arrival 0.
    res, s = run(scenario())
    lat = s["latency_ms"]
    assert lat["ttft"]["mean"] == pytest.approx(18.0)
    assert lat["tpot"]["median"] == pytest.approx(10.0)
    assert lat["itl"]["count"] == 8 and lat["itl"]["p99"] == pytest.approx(10.0)
    assert lat["e2el"]["max"] == pytest.approx(38.0)
    assert s["duration_s"] == pytest.approx(3.038)
    assert s["throughput"]["request_per_s"] == pytest.approx(4 / 3.038)
    assert s["throughput"]["output_token_per_s"] == pytest.approx(12 / 3.038)
    assert s["throughput"]["total_token_per_s"] == pytest.approx(44 / 3.038)
    assert s["stability"]["verdict"] == "stable"


def test_goodput_counts_requests_within_every_budget():
    _, s = run(scenario(slo={"ttft_ms": 17.0, "tpot_ms": 50}))
    assert s["throughput"]["goodput_request_per_s"] == 0  # TTFT 18 ms > 17 ms
    assert s["slo"]["met"] is False
    _, s = run(scenario(slo={"ttft_ms": 18.5, "tpot_ms": 50}))
    assert s["throughput"]["goodput_request_per_s"] == pytest.approx(4 / 3.038)
    assert s["slo"]["met"] is True


def test_a_budget_no_request_has_a_value_for_is_met_as_goodput_counts_it():
    # one output token each: no TPOT anywhere. Goodput counted all 4 as good while the
    # verdict read the TPOT budget as missed (value None)
    lengths = {"dist": "fixed", "prompt": 8, "output": 1}
    _, s = run(scenario(slo={"ttft_ms": 18.5, "tpot_ms": 50},
                        workload={"arrival": {"process": "constant", "rate": 1.0},
                                  "lengths": lengths, "num_requests": 4}))
    assert s["slo"]["good"] == s["slo"]["judged"] == 4
    assert s["slo"]["tpot_ms"] == {"budget": 50, "value": None, "met": True,
                                   "note": "no judged request has one"}
    assert s["slo"]["met"] is True


def test_overload_is_unstable_and_still_finishes():
    # 400 req/s of 2000-token prompts against ~1 s of prefill per 1000 tokens: hopeless
    sc = scenario(workload={"arrival": {"process": "poisson", "rate": 400.0},
                            "lengths": {"dist": "fixed", "prompt": 2000, "output": 20},
                            "num_requests": 300})
    res, s = run(sc)
    assert s["stability"]["verdict"] == "unstable"
    assert s["requests"]["finished"] == 300


def test_horizon_reports_unfinished():
    sc = scenario(horizon_s=1.5)
    res, s = run(sc)
    assert s["requests"]["never_sent"] == 2  # arrivals at 2 s and 3 s
    assert s["requests"]["finished"] == 2 and s["requests"]["unfinished"] == 0
    sc = scenario(horizon_s=1.02)  # cuts the second request mid-generation
    res, s = run(sc)
    assert s["requests"]["unfinished"] == 1 and s["sim"]["stopped_at_limit"]


def test_unfinished_requests_fail_the_slo_and_goodput_and_stay_out_of_itl():
    # 40 requests at once, 4 run at a time (50 outputs, ~0.5 s each): the horizon cuts the run
    # after the first 4 finish. Those 4 meet every budget; the 36 others never finished and
    # count as failures, so p95 of TTFT/TPOT over all 40 is a failure
    sc = scenario(horizon_s=0.6, engine={"max_num_seqs": 4},
                  workload={"arrival": {"process": "constant", "rate": 1000.0},
                            "lengths": {"dist": "fixed", "prompt": 8, "output": 50},
                            "num_requests": 40})
    res, s = run(sc)
    assert s["requests"]["finished"] == 4 and s["requests"]["unfinished"] == 36
    slo = s["slo"]
    assert slo["met"] is False and slo["ttft_ms"]["met"] is False
    assert slo["judged"] == 40 and slo["unfinished_as_failures"] == 36
    assert s["throughput"]["goodput_request_per_s"] == pytest.approx(4 / s["duration_s"])
    # the run's end (the step in flight at the horizon ends at 0.604 s), not the 4th finish
    assert s["duration_s"] == pytest.approx(res.run.end_s) and res.run.end_s >= 0.6
    # ITL as vllm bench serve: gaps of the finished requests only (49 each)
    assert s["latency_ms"]["itl"]["count"] == 4 * 49


def test_rejected_requests_fail_the_slo_and_show_their_share():
    # 16 requests 1 s apart with 8-token prompts, 4 more (20%) with 300-token prompts >=
    # max_model_len 256, rejected; the 16 served meet every budget by far (TTFT 18 ms), yet
    # at p95 the rejected ones are failures, so the verdict is missed, as a planner counts
    part = {"arrival": {"process": "constant", "rate": 1.0}, "num_requests": 16,
            "lengths": {"dist": "fixed", "prompt": 8, "output": 3}}
    long = {"arrival": {"process": "constant", "rate": 0.25}, "num_requests": 4,
            "lengths": {"dist": "fixed", "prompt": 300, "output": 3}}
    sc = scenario(engine={"max_model_len": 256}, slo={"ttft_ms": 500, "tpot_ms": 50},
                  workload={"mix": [part, long]})
    _, s = run(sc)
    assert s["requests"]["rejected"] == 4 and s["latency_ms"]["ttft"]["p95"] < 500
    slo = s["slo"]
    assert slo["met"] is False and slo["ttft_ms"]["value"] is None
    assert (slo["judged"], slo["rejected_as_failures"], slo["rejected_fraction"]) == (20, 4, 0.2)
    assert slo["unfinished_as_failures"] == 0
    w = slo["with_failures_ms"]["ttft"]
    assert w["p95"] is None and w["mean"] is None and w["max"] is None
    assert w["median"] == pytest.approx(18.0)  # the served requests' TTFT
    from sim.report.console import slo_line

    assert slo_line(slo) == "MISSED: 4 rejected (20.0%) counted as failures"


def test_a_percentile_on_the_last_value_before_the_failures_is_that_value():
    from sim.metrics.slo import percentile_with_failures, with_failures_ms

    # 21 values, the last a failure: p95's rank is 19.0, on the 20th value (1.0 s), which
    # no failure weighs on; p99's (19.8) leans on the failure: undefined
    v = np.append(np.arange(1, 21) * 0.05, np.inf)
    assert percentile_with_failures(v, 95) == pytest.approx(1.0)
    assert percentile_with_failures(v, 99) is None
    assert percentile_with_failures(np.array([0.001, 0.002, np.inf]), 50) == 0.002
    w = with_failures_ms(np.array([0.001, 0.002, np.inf]))
    assert w["median"] == pytest.approx(2.0) and w["p90"] is None and w["mean"] is None


def test_time_weighted_means_cover_idle_time():
    # static batching: r0 (t=0) and r1 (t=0.5) wait for the batch to start at t=1.0
    # (max_wait_s), then run 46 ms (a 26 ms context step, two 10 ms decodes): 1.5
    # request-seconds of waiting over the 1.046 s run, 2 requests running for 46 ms of it
    sc = scenario(scheduler={"name": "static", "batch_size": 4, "max_wait_s": 1.0},
                  workload={"arrival": {"process": "constant", "rate": 2.0},
                            "lengths": {"dist": "fixed", "prompt": 8, "output": 3},
                            "num_requests": 2})
    res, s = run(sc)
    assert s["duration_s"] == pytest.approx(1.046)
    assert s["waiting"]["mean_waiting"] == pytest.approx(1.5 / 1.046)
    assert s["kv_cache"]["mean_concurrent_seqs"] == pytest.approx(2 * 0.046 / 1.046)
    kv = s["kv_cache"]
    assert kv["mean_used_fraction"] == pytest.approx(kv["peak_used_fraction"] * 0.046 / 1.046)
