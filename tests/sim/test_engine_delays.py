"""engine.ingress_ms / egress_ms: hand-computed client times; per-token times and ITLs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from sim.config.load import LoadedScenario, validate
from sim.metrics.summary import summarize
from sim.pipeline import prepare
from sim.report.tables import requests_table
from sim.runner import simulate

LINEAR = {"name": "linear", "base_ms": 10, "prefill_token_ms": 1, "decode_seq_ms": 0}


def trace(tmp_path: Path, rows) -> Path:
    p = tmp_path / "t.jsonl"
    p.write_text("".join(json.dumps({"arrival_s": a, "prompt_len": n, "max_tokens": m}) + "\n"
                         for a, n, m in rows))
    return p


def run(tmp_path, rows, cost=LINEAR, **engine):
    # the synchronous scheduler unless a test asks for async (the times are by hand)
    engine = {"async_scheduling": False} | engine
    data = {"name": "d", "model": "llama-3-8b", "gpu": "h100-sxm", "cost": cost,
            "engine": engine, "workload": {"trace": str(trace(tmp_path, rows))}}
    r, specs, _ = prepare(LoadedScenario(validate(data, "test"), "test", tmp_path))
    res = simulate(r, specs)
    return res, requests_table(res), summarize(res)


def test_ingress_and_egress_by_hand(tmp_path):
    # client sends r0 (P=8, O=3) at 0 and r1 (P=4, O=2) at 16 ms; ingress 3 ms, egress 1 ms.
    # engine sees r0 at 3 ms: s1 [3, 21) prefill 8 -> r0 token 1 (client 22 ms)
    # r1 visible at 19 ms, inside s1: s2 [21, 35) r0 decode + r1 prefill 4 -> client 36 ms
    # s3 [35, 45): both decode and finish -> client 46 ms
    res, req, s = run(tmp_path, [(0.0, 8, 3), (0.016, 4, 2)], ingress_ms=3.0, egress_ms=1.0)
    np.testing.assert_allclose(req["arrival_s"], [0.0, 0.016])  # the client's send time
    np.testing.assert_allclose(req["first_scheduled_s"], [0.003, 0.021], atol=1e-12)
    np.testing.assert_allclose(req["ttft_s"], [0.022, 0.020], atol=1e-12)
    np.testing.assert_allclose(req["e2el_s"], [0.046, 0.030], atol=1e-12)
    np.testing.assert_allclose(req["queue_s"], [0.003, 0.005], atol=1e-12)
    np.testing.assert_allclose(req["token_times_s"][0], [0.022, 0.036, 0.046], atol=1e-12)
    np.testing.assert_allclose(req["token_times_s"][1], [0.036, 0.046], atol=1e-12)
    assert req["itl_p50_s"][0] == pytest.approx(0.012) and req["itl_p90_s"][1] == \
        pytest.approx(0.010)
    assert s["sim"]["ingress_ms"] == pytest.approx(3.0) and s["sim"]["egress_ms"] == 1.0
    assert s["latency_ms"]["itl"]["count"] == 3


def test_delays_default_to_zero(tmp_path):
    # no delays: r1 arrives at 16 ms, inside s1 [0, 18): s2 [18, 32), s3 [32, 42)
    _, req, s = run(tmp_path, [(0.0, 8, 3), (0.016, 4, 2)])
    np.testing.assert_allclose(req["ttft_s"], [0.018, 0.016], atol=1e-12)
    assert s["sim"]["ingress_ms"] == 0.0 and s["sim"]["egress_ms"] == 0.0


def test_folded_decode_runs_keep_every_token_time(tmp_path):
    # one long decode run: 200 tokens of 10 ms each after a 18 ms prefill
    _, req, _ = run(tmp_path, [(0.0, 8, 200)], egress_ms=0.5)
    t = req["token_times_s"][0]
    assert len(t) == 200
    np.testing.assert_allclose(t, 0.0185 + 0.010 * np.arange(200), atol=1e-9)
    assert req["itl_p99_s"][0] == pytest.approx(0.010)


def test_token_times_are_dropped_past_the_limit(tmp_path, monkeypatch):
    import sim.metrics.recorder as recorder

    class Small(recorder.TokenTimes):
        def __init__(self, n):
            super().__init__(n, limit=5)

    monkeypatch.setattr(recorder, "TokenTimes", Small)
    _, req, s = run(tmp_path, [(0.0, 8, 3), (0.016, 4, 3)])
    assert req["token_times_s"].isna().all() and req["itl_p50_s"].isna().all()
    assert req["max_itl_s"].notna().all() and s["latency_ms"]["itl"]["count"] == 4


def test_requests_parquet_round_trips_token_times(tmp_path):
    res, req, _ = run(tmp_path, [(0.0, 8, 3), (0.016, 4, 2)])
    req.to_parquet(tmp_path / "r.parquet", index=False)
    import pandas as pd

    back = pd.read_parquet(tmp_path / "r.parquet")
    np.testing.assert_allclose(back["token_times_s"][0], req["token_times_s"][0])


def test_the_per_token_ingress_by_hand(tmp_path):
    # ingress 1 ms + 250 us per prompt token (the API server's work on a text prompt):
    # r0 (P=8) sent at 0 is seen at 1 + 2 = 3 ms: s1 [3, 21) prefill 8 -> token 1 at 21 ms;
    # r1 (P=4) sent at 16 ms is seen at 16 + 1 + 1 = 18 ms, inside s1: s2 [21, 35), s3 [35, 45)
    res, req, s = run(tmp_path, [(0.0, 8, 3), (0.016, 4, 2)], ingress_ms=1.0,
                      ingress_per_token_us=250.0, ingress_serial=False)
    np.testing.assert_allclose(req["arrival_s"], [0.0, 0.016])  # the client's send time
    np.testing.assert_allclose(req["first_scheduled_s"], [0.003, 0.021], atol=1e-12)
    np.testing.assert_allclose(req["ttft_s"], [0.021, 0.019], atol=1e-12)
    assert s["sim"]["ingress_per_token_us"] == pytest.approx(250.0)


def test_a_short_prompt_behind_a_long_one_waits_for_it(tmp_path):
    # r0 (P=40) sent at 0 is seen at 40 x 0.5 = 20 ms; r1 (P=2) sent at 5 ms would be seen at
    # 6 ms, but requests reach the scheduler in the order sent: both at 20 ms, one step of
    # 42 prefill tokens [20, 72) (10 + 42 ms)
    _, req, _ = run(tmp_path, [(0.0, 40, 1), (0.005, 2, 1)], ingress_per_token_us=500.0,
                    ingress_serial=False)
    np.testing.assert_allclose(req["first_scheduled_s"], [0.020, 0.020], atol=1e-12)
    np.testing.assert_allclose(req["ttft_s"], [0.072, 0.067], atol=1e-12)


def closed_pair(tmp_path, core, serial):
    """Three requests (P = 8, 4, 6; one token each) from two clients, 100 us per prompt
    token, synchronous steps of 10 ms + 1 ms per prefill token."""
    rows = [(0.0, 8, 1), (0.0, 4, 1), (0.0, 6, 1)]
    data = {"name": "d", "model": "llama-3-8b", "gpu": "h100-sxm", "cost": LINEAR, "core": core,
            "engine": {"async_scheduling": False, "ingress_per_token_us": 100.0,
                       "ingress_serial": serial},
            "workload": {"trace": str(trace(tmp_path, rows)),
                         "arrival": {"process": "closed", "concurrency": 2}}}
    r, specs, _ = prepare(LoadedScenario(validate(data, "test"), "test", tmp_path))
    return requests_table(simulate(r, specs))


# (arrival, first scheduled, TTFT) of r0, r1, r2 (s) in closed_pair's loop, by hand:
CLOSED_PAIR = {
    # beside each other: r0 (P=8) and r1 (P=4) sent at 0, tokenized side by side: seen at
    # 0.8 and 0.8 ms (in order: r1 behind r0). s1 [0.8, 22.8) prefills both (12 tokens):
    # both finish (1 token each) at 22.8 ms; r2 is sent then and seen 0.6 ms later: s2
    # [23.4, 39.4)
    False: ([0.0, 0.0, 0.0228], [0.0008, 0.0008, 0.0234], [0.0228, 0.0228, 0.0166]),
    # engine.ingress_serial: r0 tokenized [0, 0.8) ms, r1 [0.8, 1.2): s1 [0.8, 18.8)
    # prefills r0 alone (r1 is seen inside it); s2 [18.8, 32.8) r1; r2 (P=6), sent at 18.8
    # when r0 finished, seen 0.6 later: s3 [32.8, 48.8)
    True: ([0.0, 0.0, 0.0188], [0.0008, 0.0188, 0.0328], [0.0188, 0.0328, 0.0300]),
}


@pytest.mark.parametrize("serial", [False, True], ids=["beside", "one_worker"])
@pytest.mark.parametrize("core", ["general", "fast"])
def test_a_closed_loop_sends_then_waits_its_per_token_delay(tmp_path, core, serial):
    req = closed_pair(tmp_path, core, serial=serial)
    arrival, first, ttft = CLOSED_PAIR[serial]
    np.testing.assert_allclose(req["arrival_s"], arrival, atol=1e-12)
    np.testing.assert_allclose(req["first_scheduled_s"], first, atol=1e-12)
    np.testing.assert_allclose(req["ttft_s"], ttft, atol=1e-12)


def test_one_tokenizing_worker_queues_a_burst_by_hand(tmp_path):
    # engine.ingress_serial: r0 (P=40), r1 (P=2) and r2 (P=10) sent at 0, 1 and 30 ms, 500 us
    # per token, ingress 1 ms, steps 10 ms + 1 ms per prefill token. One worker: r0 tokenized
    # [0, 20) ms, seen at 21; r1 waits for the worker, [20, 21), seen at 22; r2 [30, 35), seen
    # at 36. s1 [21, 71) prefills r0 alone; s2 [71, 93) prefills r1 and r2 (12 tokens).
    rows = [(0.0, 40, 2), (0.001, 2, 1), (0.030, 10, 1)]
    _, req, _ = run(tmp_path, rows, ingress_ms=1.0, ingress_per_token_us=500.0,
                    ingress_serial=True)
    np.testing.assert_allclose(req["first_scheduled_s"], [0.021, 0.071, 0.071], atol=1e-12)
    np.testing.assert_allclose(req["ttft_s"], [0.071, 0.092, 0.063], atol=1e-12)
    # beside each other: r1 would be seen at 3 ms but follows r0 in order (21): s1 [21, 73)
    # prefills both (42 tokens), s2 [73, 93) r2
    _, req, _ = run(tmp_path, rows, ingress_ms=1.0, ingress_per_token_us=500.0,
                    ingress_serial=False)
    np.testing.assert_allclose(req["first_scheduled_s"], [0.021, 0.021, 0.073], atol=1e-12)
    np.testing.assert_allclose(req["ttft_s"], [0.073, 0.072, 0.063], atol=1e-12)


def test_the_serial_rule_vectorised_equals_the_recursion():
    from sim.engine.arrivals import api_server_seen, api_server_seen_all

    rng = np.random.default_rng(0)
    sent = np.sort(rng.uniform(0, 1, 500))
    delays = 0.002 + rng.uniform(0, 0.01, 500)
    for serial in (False, True):
        last, want = -np.inf, []
        for t, d in zip(sent, delays):
            last = api_server_seen(t, d, last, 0.002 if serial else None)
            want.append(last)
        np.testing.assert_allclose(api_server_seen_all(sent, delays, 0.002, serial), want,
                                   rtol=0, atol=1e-12)
