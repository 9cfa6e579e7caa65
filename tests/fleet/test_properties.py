"""Property tests over random tiny traces (linear cost): every request is routed once and
ends finished; each replica's blocks all come back; one replica equals the plain engine."""

from __future__ import annotations

import io

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.config.load import validate
from sim.config.resolve import resolve
from sim.engine.requests import RequestSpecs
from sim.fleet.cluster import simulate_fleet
from sim.fleet.plan import plan_fleet
from sim.fleet.routers import ROUTERS
from sim.fleet.run import FleetLog
from sim.runner import simulate
from sim.sched.base import Status
from tests.fleet.test_golden import SCENARIO

trace = st.lists(st.tuples(st.integers(0, 200), st.integers(1, 300), st.integers(1, 40)),
                 min_size=1, max_size=25)


def _specs(rows) -> RequestSpecs:
    rows = sorted(rows)
    return RequestSpecs.from_arrays([r[0] * 1e-3 for r in rows], [r[1] for r in rows],
                                    [r[2] for r in rows])


def _scenario(replicas: int, router: str, blocks: int):
    return validate({**SCENARIO, "engine": {"num_gpu_blocks_override": blocks,
                                            "max_model_len": 512},
                     "cluster": {"replicas": replicas, "router": {"name": router}}}, "prop")


@settings(max_examples=25, deadline=None)
@given(rows=trace, replicas=st.integers(1, 3), router=st.sampled_from(ROUTERS.names()),
       blocks=st.sampled_from([40, 4000]))
def test_routed_once_all_finish_blocks_return(rows, replicas, router, blocks):
    specs = _specs(rows)
    fr = simulate_fleet(plan_fleet(_scenario(replicas, router, blocks)), specs, alone=False)
    assert (fr.first >= 0).all()
    got = sorted(q for rep in fr.replicas for q in rep.source.received)
    assert got == list(range(len(specs)))  # each request to exactly one replica
    for rep in fr.replicas:
        rep.kv.check_integrity()
        assert rep.kv.usage().used == 0
        mine = np.array(sorted(rep.source.received), dtype=np.int64)
        assert (fr.results[rep.name].status[mine] == Status.FINISHED).all()


@settings(max_examples=25, deadline=None)
@given(rows=trace, blocks=st.sampled_from([40, 4000]))
def test_one_replica_matches_the_plain_engine(rows, blocks):
    specs = _specs(rows)
    sc = _scenario(1, "round_robin", blocks)
    fr = simulate_fleet(plan_fleet(sc), specs, alone=False)  # the event loop's replica
    plain = simulate(resolve(sc), specs)
    rec = fr.replicas[0].recorder
    for name in ("first_scheduled_s", "first_token_s", "finish_s"):
        np.testing.assert_array_equal(getattr(plain.recorder, name), getattr(rec, name))


def _replica_rows(fr) -> dict:
    """Every replica's step table and per-request times and states (comparable arrays)."""
    out = {}
    for name, r in fr.results.items():
        rec = r.recorder
        out[name] = {**rec.steps(), **{c: getattr(rec, c) for c in (
            "first_scheduled_s", "first_token_s", "finish_s", "max_itl_s")},
            "status": r.status, "num_preemptions": r.num_preemptions,
            "generated": r.generated, "end_s": np.array([r.run.end_s])}
    return out


@settings(max_examples=30, deadline=None)
@given(rows=trace, replicas=st.integers(1, 3), router=st.sampled_from(ROUTERS.names()),
       blocks=st.sampled_from([40, 4000]), clients=st.sampled_from([None, 1, 3, 8]),
       lag=st.booleans(), split=st.booleans(), per_token_us=st.sampled_from([0, 40]))
def test_fast_replicas_equal_general_replicas(rows, replicas, router, blocks, clients, lag,
                                              split, per_token_us):
    specs = _specs(rows)
    runs = []
    cluster = {"replicas": replicas, "router": {"name": router}}
    if split:  # prefill/decode pools: the decode pool prices transferred prompts
        cluster = {"pools": [{"name": "p", "replicas": replicas},
                             {"name": "d", "replicas": 2, "router": {"name": router}}],
                   "disaggregation": {"prefill_pool": "p", "decode_pool": "d"}}
    for core in ("auto", "general"):
        sc = {**SCENARIO, "core": core,
              "engine": {"num_gpu_blocks_override": blocks, "max_model_len": 512,
                         "async_scheduling": lag, "ingress_ms": 1, "egress_ms": 2,
                         "ingress_per_token_us": per_token_us},  # requests on their way
              "cluster": cluster}
        if clients is not None:
            sc["workload"] = {**SCENARIO["workload"],
                              "arrival": {"process": "closed", "concurrency": clients}}
        runs.append(_replica_rows(simulate_fleet(plan_fleet(validate(sc, "prop")), specs,
                                                 alone=False)))
    fast, general = runs
    assert fast.keys() == general.keys()
    for name, cols in general.items():
        for col, want in cols.items():
            np.testing.assert_array_equal(want, fast[name][col], err_msg=f"{name} {col}")


@settings(max_examples=20, deadline=None)
@given(rows=trace, replicas=st.integers(1, 3), router=st.sampled_from(ROUTERS.names()),
       blocks=st.sampled_from([40, 4000]), clients=st.sampled_from([None, 1, 3, 8]),
       lag=st.booleans(), split=st.booleans())
def test_fast_replicas_write_the_general_step_log(rows, replicas, router, blocks, clients,
                                                   lag, split):
    """steps.jsonl (every replica's plans, reported at their ends, and every routing) is
    the same text from fast replicas as from general ones."""
    specs = _specs(rows)
    cluster = {"replicas": replicas, "router": {"name": router}}
    if split:
        cluster = {"pools": [{"name": "p", "replicas": replicas},
                             {"name": "d", "replicas": 2, "router": {"name": router}}],
                   "disaggregation": {"prefill_pool": "p", "decode_pool": "d"}}
    logs = []
    for core in ("auto", "general"):
        sc = {**SCENARIO, "core": core,
              "engine": {"num_gpu_blocks_override": blocks, "max_model_len": 512,
                         "async_scheduling": lag, "ingress_ms": 1, "egress_ms": 2},
              "cluster": cluster}
        if clients is not None:
            sc["workload"] = {**SCENARIO["workload"],
                              "arrival": {"process": "closed", "concurrency": clients}}
        fh = io.StringIO()
        fr = simulate_fleet(plan_fleet(validate(sc, "prop")), specs,
                            log=FleetLog(fh, specs.request_id))
        logs.append((fh.getvalue(), {r.core for r in fr.results.values()}))
    (fast, fast_cores), (general, general_cores) = logs
    assert fast_cores == {"fast"} and general_cores == {"general"}
    assert fast.splitlines() == general.splitlines()


@settings(max_examples=30, deadline=None)
@given(rows=trace, replicas=st.integers(2, 3), router=st.sampled_from(ROUTERS.names()),
       blocks=st.sampled_from([40, 4000]), clients=st.sampled_from([None, 1, 3, 8]),
       lag=st.booleans(), size=st.integers(1, 8), wait=st.sampled_from([0.0, 0.02, 0.3]),
       horizon=st.sampled_from([None, 0.1, 0.4]))
def test_static_fast_replicas_equal_general_replicas(rows, replicas, router, blocks, clients,
                                                     lag, size, wait, horizon):
    """Static batches in a fleet: an idle replica wakes at its oldest request's deadline
    on both cores, whatever reaches it meanwhile."""
    specs = _specs(rows)
    runs = []
    for core in ("auto", "general"):
        sc = {**SCENARIO, "core": core,
              "scheduler": {"name": "static", "batch_size": size, "max_wait_s": wait},
              "engine": {"num_gpu_blocks_override": blocks, "max_model_len": 512,
                         "async_scheduling": lag},
              "cluster": {"replicas": replicas, "router": {"name": router}}}
        if clients is not None:
            sc["workload"] = {**SCENARIO["workload"],
                              "arrival": {"process": "closed", "concurrency": clients}}
        if horizon is not None:
            sc["horizon_s"] = horizon
        fr = simulate_fleet(plan_fleet(validate(sc, "prop")), specs, alone=False)
        assert {r.core for r in fr.results.values()} == {"fast" if core == "auto" else
                                                         "general"}
        runs.append(_replica_rows(fr))
    fast, general = runs
    assert fast.keys() == general.keys()
    for name, cols in general.items():
        for col, want in cols.items():
            np.testing.assert_array_equal(want, fast[name][col], err_msg=f"{name} {col}")
