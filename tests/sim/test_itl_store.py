"""ITL records settle into a histogram within its stated accuracy; step rows compact."""

import numpy as np
import pytest

from sim.metrics import itl as itl_mod
from sim.metrics import recorder as recorder_mod
from sim.metrics.itl import RELATIVE_ACCURACY, ItlStore, LogHistogram
from sim.metrics.stats import describe_ms
from tests.sim.helpers import run


def test_histogram_represents_each_value_within_its_relative_accuracy():
    values = np.array([1e-6, 3.3e-3, 0.0123456, 0.5, 42.0])
    h = LogHistogram()
    for v in values:
        h.add(np.array([v]), 3)
    reps, counts = h.samples()
    assert counts.tolist() == [3] * 5
    assert np.all(np.abs(reps / values - 1) <= RELATIVE_ACCURACY * (1 + 1e-9))


def _fill(store: ItlStore, rng) -> None:
    for _ in range(300):
        reqs = np.sort(rng.choice(40, size=rng.integers(1, 10), replace=False))
        gaps = rng.uniform(0.005, 0.2, size=len(reqs))
        store.add_own(gaps, reqs)
        store.add_run(rng.uniform(0.005, 0.05, size=rng.integers(1, 6)), reqs)


def test_settled_samples_match_exact_ones_within_accuracy():
    exact, settled = ItlStore(40), ItlStore(40, exact_numbers=50)
    _fill(exact, np.random.default_rng(1))
    _fill(settled, np.random.default_rng(1))
    finished = np.arange(40) < 30  # requests 30..39 still in flight
    settled.settle(finished)
    assert exact.exact and not settled.exact
    assert settled.settled[:30].all() and not settled.settled[30:].any()
    for mask in (None, finished):
        a, b = describe_ms(*exact.samples(mask)), describe_ms(*settled.samples(mask))
        assert a["count"] == b["count"]
        for key in ("mean", "median", "p90", "p95", "p99", "max"):
            assert b[key] == pytest.approx(a[key], rel=RELATIVE_ACCURACY)


def test_a_mask_dropping_a_settled_request_is_refused():
    store = ItlStore(4, exact_numbers=0)
    store.add_own(np.array([0.01, 0.02]), np.array([0, 1]))
    store.settle(np.array([True, False, False, False]))
    with pytest.raises(ValueError, match="finished request"):
        store.samples(np.array([False, True, True, True]))


def _small():
    n = 12
    return run(np.arange(n) * 0.013, np.full(n, 40), np.arange(n) % 5 + 2)


def test_compacted_step_rows_equal_the_uncompacted_ones(monkeypatch):
    whole = _small()
    monkeypatch.setattr(recorder_mod, "COMPACT_PLANS", 3)
    chunked = _small()
    a, b = whole.recorder.steps(), chunked.recorder.steps()
    assert whole.recorder.num_plans == chunked.recorder.num_plans > 3
    for col in a:
        assert a[col].tolist() == b[col].tolist(), col


def test_a_run_settled_as_it_goes_reports_itl_within_accuracy(monkeypatch):
    exact = _small().recorder
    monkeypatch.setattr(itl_mod, "EXACT_NUMBERS", 8)
    settled = _small().recorder
    assert exact.itl.exact and not settled.itl.exact
    done = ~np.isnan(exact.finish_s)
    a, b = describe_ms(*exact.itl_samples(done)), describe_ms(*settled.itl_samples(done))
    assert a["count"] == b["count"] > 0
    for key in ("mean", "median", "p99", "max"):
        assert b[key] == pytest.approx(a[key], rel=RELATIVE_ACCURACY)
