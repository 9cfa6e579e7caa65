"""Bracketing + bisection, the worst-of-seeds rule and the binding constraint, without the
simulator: an oracle says which loads are sustainable."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.plan.capacity import HIGH, LOW, MAX_STEPS, Probe, Search, Tolerance, judge
from sim.plan.slo import parse_slo
from traces.errors import InputError

BUDGETS = parse_slo("ttft_p95=500ms,tpot_p95=50ms")


def metrics(ok: bool = True, ttft: float = 100.0, tpot: float = 20.0, preempt: int = 0,
            on_kv: float = 0.0, on_seqs: float = 0.0) -> dict:
    return {"engine_sustains": ok, "latency_ms.ttft.p95": ttft, "latency_ms.tpot.p95": tpot,
            "preemption.count": preempt, "waiting.mean_waiting": 4.0,
            "waiting.mean_waiting_on_kv_memory": on_kv,
            "waiting.mean_waiting_on_max_num_seqs": on_seqs,
            "kv_cache.peak_concurrent_seqs": 32}


def search(threshold: float, start: float, tol: Tolerance, k: int = 1) -> Search:
    s = Search((), start, tol)
    while s.status == "searching":
        loads = s.next_loads(k)
        if not loads:
            break
        for x in loads:
            s.probes.append(Probe.of(x, [{"metrics": metrics(ok=x <= threshold)}], BUDGETS))
    return s


@settings(max_examples=200, deadline=None)
@given(factor=st.floats(1.01 / 2 ** MAX_STEPS, 0.99 * 2 ** MAX_STEPS), start=st.floats(0.5, 50),
       k=st.integers(1, 3), rel=st.booleans())
def test_the_answer_brackets_the_threshold_within_the_tolerance(factor, start, k, rel):
    threshold = start * factor
    tol = Tolerance(0.02, True) if rel else Tolerance(0.25, False)
    s = search(threshold, start, tol, k)
    assert s.status == "found"
    assert s.lo.load <= threshold < s.hi.load
    assert s.hi.load - s.lo.load <= tol.width(s.hi.load) * (1 + 1e-9)


def test_bisection_from_a_sustainable_start_takes_the_expected_probes():
    s = search(threshold=27.3, start=8, tol=Tolerance(0.5, False))
    # 8, 16 ok, 32 fails; then 24, 28, 26, 27, 27.5: width 0.5
    assert [p.load for p in s.probes] == [8, 16, 32, 24, 28, 26, 27, 27.5]
    assert (s.lo.load, s.hi.load) == (27, 27.5)


def test_a_load_that_never_fails_is_reported_above_the_range():
    # a rate doubles up to its bound (1e6 requests/s), not 2^10 times the start
    s = search(threshold=math.inf, start=1, tol=Tolerance(0.02, True))
    assert s.status == "above range" and s.hi is None
    assert s.lo.load == HIGH == 1e6 and len(s.probes) == 21  # 1, 2, ..., 2^19, 1e6


def test_a_config_sustainable_nowhere_is_none():
    s = search(threshold=0, start=1, tol=Tolerance(0.02, True))
    assert s.status == "none" and s.lo is None
    assert s.hi.load == LOW == 1e-6


@pytest.mark.parametrize("start", [1e6, 0.01, 1e-6])
def test_a_start_far_from_the_answer_still_brackets_it(start):
    # a start of 1e6 req/s against ~15.4 sustainable stopped at 976 after ten halvings and
    # answered "none"; 0.01 stopped at 10.24 and said the SLOs do not bind
    s = search(threshold=15.4, start=start, tol=Tolerance(0.02, True))
    assert s.status == "found" and s.lo.load <= 15.4 < s.hi.load


def test_a_closed_loops_clients_keep_their_ten_doublings():
    s = Search((), 4, Tolerance(0.02, True), integer=True)
    while s.status == "searching":
        for x in s.next_loads(1):
            s.probes.append(Probe.of(x, [{"metrics": metrics()}], BUDGETS))
    assert s.status == "above range" and s.lo.load == 4 * 2 ** MAX_STEPS


def test_the_worst_seed_decides():
    good, bad = {"metrics": metrics()}, {"metrics": metrics(tpot=51)}
    assert Probe.of(5, [good, good], BUDGETS).ok
    p = Probe.of(5, [good, bad], BUDGETS)
    assert not p.ok and p.binding == "TPOT p95"
    assert p.worst("latency_ms.tpot.p95") == 51


@pytest.mark.parametrize("m, binding", [
    (metrics(), None),
    (metrics(ttft=600), "TTFT p95"),
    (metrics(ttft=600, tpot=80), "TPOT p95"),  # 1.6x over beats 1.2x over
    (metrics(ok=False, ttft=9000), "saturation"),
    (metrics(ok=False, preempt=3), "KV cache"),
    (metrics(ok=False, on_kv=3.0), "KV cache"),
    (metrics(ok=False, on_seqs=3.0), "max_num_seqs (32 running at the cap)"),
    (metrics(ok=False, on_seqs=1.0), "saturation"),  # a quarter of the queue: no one cause
    (metrics(ttft=600, on_seqs=2.0), "max_num_seqs (32 running at the cap; TTFT p95 over)"),
    (metrics(ttft=600, on_kv=2.5, on_seqs=1.5), "KV cache (TTFT p95 over)"),
])
def test_binding_constraint(m, binding):
    assert judge(m, BUDGETS) == binding


def test_rejected_requests_count_against_the_budgets():
    """14% rejected (max_model_len): the finished requests' p95 holds, the judged one (the
    rejected as failures, as the run's SLO verdict counts them) does not."""
    m = {**metrics(), "slo.judged": 100, "slo.rejected_as_failures": 14,
         "slo.unfinished_as_failures": 0, "slo.with_failures_ms.ttft.p95": None,
         "slo.with_failures_ms.tpot.p95": None}
    assert judge(m, BUDGETS) == "rejected"
    few = {**m, "slo.rejected_as_failures": 3, "slo.with_failures_ms.ttft.p95": 450.0,
           "slo.with_failures_ms.tpot.p95": 45.0}
    assert judge(few, BUDGETS) is None  # 3% rejected: p95 still among the served requests
    assert judge({**few, "slo.with_failures_ms.ttft.p95": 620.0}, BUDGETS) == "rejected"
    assert judge({**few, "latency_ms.ttft.p95": 700.0, "slo.with_failures_ms.ttft.p95": 750.0},
                 BUDGETS) == "TTFT p95"  # over on its own


def test_an_engine_failure_outranks_a_budget_across_seeds():
    recs = [{"metrics": metrics(tpot=90)}, {"metrics": metrics(ok=False)}]
    assert Probe.of(5, recs, BUDGETS).binding == "saturation"
    recs = [{"metrics": metrics(ttft=600, on_seqs=3.0)}, {"metrics": metrics(ok=False, on_kv=3)}]
    assert Probe.of(5, recs, BUDGETS).binding == "KV cache"


@pytest.mark.parametrize("text, width", [("2%", 0.2), ("0.5", 0.5)])
def test_tolerance(text, width):
    assert Tolerance.parse(text).width(10) == pytest.approx(width)


@pytest.mark.parametrize("bad", ["0", "-1", "x", "100%", "0%"])
def test_bad_tolerance(bad):
    with pytest.raises(InputError, match="--tol"):
        Tolerance.parse(bad)
