"""Request conservation with a horizon: total = finished + rejected + unfinished + aborted +
never sent.

Requests arriving while the last step before the horizon runs are never handed to the
scheduler; they arrived, so they count as unfinished (queued), not as lost.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from sim.config.load import LoadedScenario, validate
from sim.metrics.summary import summarize
from sim.pipeline import prepare
from sim.runner import simulate


def summary_of(n, rate, horizon_s, base_ms, token_ms, *, max_len=None, seed=0):
    engine = {"max_model_len": max_len} if max_len else {}
    sc = validate({
        "name": "c", "model": "llama-3-8b", "gpu": "h100-sxm", "seed": seed,
        "horizon_s": horizon_s, "engine": engine,
        "cost": {"name": "linear", "base_ms": base_ms, "prefill_token_ms": token_ms,
                 "decode_seq_ms": token_ms / 10},
        "workload": {"arrival": {"process": "poisson", "rate": rate},
                     "lengths": {"dist": "lognormal", "prompt_p50": 200, "prompt_p90": 900,
                                 "output_p50": 20, "output_p90": 120},
                     "num_requests": n},
    }, "test")
    r, specs, _ = prepare(LoadedScenario(sc, "test", Path(".")))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return summarize(simulate(r, specs))["requests"]


def conserved(req: dict, n: int) -> None:
    parts = (req["finished"] + req["rejected"] + req["unfinished"] + req["aborted"]
             + req["never_sent"])
    assert req["total"] == n == parts, req


def test_a_step_longer_than_the_run_keeps_every_request():
    # one 5,000 s step starts at the first arrival; the other 199 arrive during it
    req = summary_of(200, 10.0, 100.0, 5e6, 0.0)
    conserved(req, 200)
    assert req["unfinished"] == 200 and req["finished"] == 0 and req["never_sent"] == 0


def test_arrivals_after_the_horizon_are_never_sent():
    req = summary_of(300, 10.0, 10.0, 5.0, 0.01)
    conserved(req, 300)
    assert 50 < req["never_sent"] < 250 and req["finished"] > 0


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 120), rate=st.floats(0.5, 200), horizon=st.floats(0.001, 30),
       base_ms=st.floats(0, 3000), token_ms=st.floats(0, 5), max_len=st.sampled_from(
           [None, 512, 1024]), seed=st.integers(0, 3))
def test_conservation_over_random_horizons_and_step_costs(n, rate, horizon, base_ms,
                                                          token_ms, max_len, seed):
    conserved(summary_of(n, rate, horizon, base_ms, token_ms, max_len=max_len, seed=seed), n)


def test_the_drain_limit_ends_an_overloaded_run(monkeypatch):
    import sim.runner as runner

    monkeypatch.setattr(runner, "DRAIN_MIN_PLANS", 50)
    monkeypatch.setattr(runner, "DRAIN_FACTOR", 1)
    sc = validate({
        "name": "d", "model": "llama-3-8b", "gpu": "h100-sxm",
        "engine": {"max_num_batched_tokens": 16},  # 16 tokens per step: hopeless at 50 req/s
        "cost": {"name": "linear", "base_ms": 10, "prefill_token_ms": 0, "decode_seq_ms": 0},
        "workload": {"arrival": {"process": "constant", "rate": 50.0},
                     "lengths": {"dist": "fixed", "prompt": 400, "output": 4},
                     "num_requests": 100},
    }, "test")
    r, specs, _ = prepare(LoadedScenario(sc, "test", Path(".")))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = simulate(r, specs)
    assert res.drain_cut and any("drain limit" in str(w.message) for w in caught)
    req = summarize(res)["requests"]
    conserved(req, 100)
    assert req["unfinished"] > 0 and res.run.stopped_at_limit
    # arrivals took ~2 s = ~200 plans of 10 ms; the drain got max(50, 1 x plans) more
    assert len(res.recorder.steps()["duration_s"]) < 3 * 200 + 50
