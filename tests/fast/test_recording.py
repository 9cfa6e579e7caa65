"""What both cores record and summarize: the comparer itself, the summary, and the two
memory bounds of the general recorder (token times, the ITL sketch)."""

from __future__ import annotations

import numpy as np
import pytest

import sim.fast.record
import sim.metrics.itl
from sim.metrics.summary import summarize
from sim.metrics.token_times import TokenTimes
from tests.fast.equivalence import assert_same, prepared, run_both

SMALL = ("workload.num_requests=200",)


@pytest.fixture(scope="module")
def pair():
    return run_both(*prepared(None, *SMALL))


def test_the_comparer_names_the_first_difference(pair):
    a, b = pair
    assert_same(a, b)
    durations = b.recorder._step_chunks["duration_s"][0]
    saved = durations[7]
    durations[7] = np.nextafter(saved, 1.0)  # one ulp
    try:
        with pytest.raises(AssertionError, match=r"step column duration_s differs first at "
                                                 r"step 7 \(start "):
            assert_same(a, b)
    finally:
        durations[7] = saved
    finish = b.recorder.finish_s
    saved = finish[3]
    finish[3] = np.nan
    try:
        with pytest.raises(AssertionError, match=r"recorder.finish_s differs first at "
                                                 r"request 3 .*general np.float64\("):
            assert_same(a, b)
    finally:
        finish[3] = saved
    assert_same(a, b)


def test_the_summaries_agree(pair):
    a, b = pair
    sa, sb = summarize(a), summarize(b)
    assert sa["latency_ms"]["itl"]["count"] > 10_000
    assert sa == sb  # ITL mean and std included: sums over the grouped sample, exact


def _tokens(res) -> int:
    offsets, _ = res.recorder.tokens.csr()
    return int(offsets[-1])


@pytest.mark.parametrize("spare", [0, -1])
def test_token_times_dropped_at_the_same_limit(monkeypatch, pair, spare):
    # the general recorder drops every token time once the run passes the limit; the fast
    # core must keep them exactly when the general one does
    limit = _tokens(pair[0]) + spare
    monkeypatch.setattr(TokenTimes.__init__, "__defaults__", (limit,))
    monkeypatch.setattr(sim.fast.record, "TOKEN_TIMES_LIMIT", limit)
    a, b = run_both(*prepared(None, *SMALL))
    assert_same(a, b)
    kept = a.recorder.tokens.csr() is not None
    assert kept == (spare == 0)


def test_itl_beyond_the_exact_limit(monkeypatch):
    # past EXACT_NUMBERS the general recorder settles finished requests' gaps into a log
    # histogram (relative accuracy 1e-3); the fast core keeps its samples exact, so its
    # ITL percentiles lie within that accuracy of the general ones and nothing else differs
    monkeypatch.setattr(sim.metrics.itl, "EXACT_NUMBERS", 3000)
    a, b = run_both(*prepared(None, *SMALL))
    assert not a.recorder.itl.exact and b.recorder.itl.exact
    assert_same(a, b, itl=False)
    ia, ib = summarize(a)["latency_ms"]["itl"], summarize(b)["latency_ms"]["itl"]
    acc = sim.metrics.itl.RELATIVE_ACCURACY * (1 + 1e-9)
    assert ia["count"] == ib["count"] > 10_000
    for key in ("median", "p90", "p95", "p99", "max", "mean"):
        assert ib[key] == pytest.approx(ia[key], rel=acc), key
    monkeypatch.undo()  # the general recorder exact again: its p99 is the fast core's
    exact, _ = run_both(*prepared(None, *SMALL))
    assert exact.recorder.itl.exact
    assert summarize(exact)["latency_ms"]["itl"]["p99"] == ib["p99"]
