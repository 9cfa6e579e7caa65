"""A fleet's replicas on the fast core (sim/fast/engine.py as SimPy processes) give the
general engine's replicas' results: every replica's step rows, per-request times and
counters, and the fleet summary, for gated clients and routers that read the replicas
(their load, their KV usage)."""

from __future__ import annotations

import numpy as np
import pytest

from sim.config.load import load_scenario, validate
from sim.engine.requests import RequestSpecs
from sim.fleet.cluster import simulate_fleet
from sim.fleet.plan import plan_fleet
from sim.pipeline import prepare
from tests.fleet.helpers import fleet
from tests.fleet.test_golden import SCENARIO
from tests.fleet.test_identity import _same

N = "workload.num_requests=300"
CLOSED = "workload.arrival={process: closed, concurrency: 24}"
TIGHT = ("engine.num_gpu_blocks_override=60", "engine.max_model_len=900")


def _router(name: str, replicas: int = 3) -> str:
    return f"cluster={{replicas: {replicas}, router: {{name: {name}}}}}"


def _static(size: int, wait: float) -> str:
    return f"scheduler={{name: static, batch_size: {size}, max_wait_s: {wait}}}"


CASES = {
    "closed, least outstanding": (CLOSED, _router("least_outstanding")),
    "closed, round robin, sync": (CLOSED, _router("round_robin"),
                                  "engine.async_scheduling=false"),
    "capped stream, prefix affinity": ("workload.arrival.rate=20",
                                       "workload.arrival.concurrency=6",
                                       _router("prefix_affinity")),
    # preemptions, and decode runs no arrival may cut (the waiting rows counted at the end)
    "closed, tight KV": ("workload.arrival={process: closed, concurrency: 32}",
                         *TIGHT, _router("least_outstanding")),
    "open stream, tight KV, no caching": ("workload.arrival.rate=30",
                                          *TIGHT,
                                          "engine.enable_prefix_caching=false",
                                          _router("least_outstanding", 2)),
    "closed, think time, per-token ingress": (
        "workload.arrival={process: closed, concurrency: 16, think_s: 0.05}",
        "engine.ingress_ms=3", "engine.egress_ms=2", "engine.ingress_per_token_us=12",
        _router("least_outstanding")),
    "closed, vllm-priority": (CLOSED, "scheduler=vllm-priority", _router("random", 2)),
    "closed, small KV pool, reserve admission": (
        "workload.arrival={process: closed, concurrency: 32}",
        *TIGHT, "admission=reserve",
        _router("least_kv", 2)),
    # a router reading each replica's KV at every decision, mid-plan included
    "closed, least kv": (CLOSED, _router("least_kv")),
    "open stream, tight KV, least kv, sync": ("workload.arrival.rate=30", *TIGHT,
                                              "engine.async_scheduling=false",
          _router("least_kv", 2)),
    "open stream, least kv reported every 50 ms": (
        "workload.arrival.rate=40",
        "cluster={replicas: 3, router: {name: least_kv}, kv_report_interval_ms: 50}"),
    "open stream, horizon": ("workload.arrival.rate=40", "horizon_s=4",
                             _router("least_outstanding")),
    # the other policies the fast core runs: v0's block manager, reservations
    "closed, sarathi, tight KV": ("workload.arrival={process: closed, concurrency: 32}",
                                  *TIGHT, "scheduler={name: sarathi, chunk_size: 100}",
                                  "engine.enable_prefix_caching=false",
                                  _router("least_outstanding", 2)),
    "open stream, prefill-first, tight KV, least kv": (
        "workload.arrival.rate=30", *TIGHT, "scheduler=prefill-first",
        _router("least_kv", 2)),
    "closed, orca, contiguous-exact": (CLOSED, "scheduler=orca", "kv.name=contiguous-exact",
                                       _router("round_robin", 2)),
    # static batches: an idle replica wakes at its oldest request's deadline
    "open stream, static, deadlines, least outstanding": (
        "workload.arrival.rate=20", _static(8, 0.2), _router("least_outstanding")),
    "open stream, static, horizon": ("workload.arrival.rate=20", "horizon_s=4",
                                     _static(8, 0.2), _router("least_outstanding")),
    "open stream, static, a deadline past the horizon": (
        "workload.arrival.rate=5", "horizon_s=2", _static(64, 5.0),
        _router("least_outstanding", 2)),
    "open stream, static, batches cut by the KV pool, least kv": (
        "workload.arrival.rate=30", *TIGHT, _static(32, 0.3), _router("least_kv", 2)),
    "closed, static, least kv, sync": (
        "workload.arrival={process: closed, concurrency: 12}", _static(3, 0.0),
        "engine.async_scheduling=false", _router("least_kv", 2)),
    "closed, static, think time": (
        "workload.arrival={process: closed, concurrency: 10, think_s: 0.3}", _static(4, 0.1),
        _router("least_outstanding")),
    # swap preemption (sim/fast/swap.py): a host pool that refuses some victims
    "closed, swap preemption, tight KV": (
        "workload.arrival={process: closed, concurrency: 32}", *TIGHT,
        "engine.preemption_mode=swap", "engine.swap_space=0.1",
        "engine.swap_space_full=recompute", _router("least_kv", 2)),
    # a cost model that prices whole plans (a steps file), built per replica
    "closed, a fitted steps file": (
        CLOSED, "cost={name: fitted, profile: benchmarks/engine/cpu-tiny-llama.yaml}",
        _router("least_outstanding")),
    # prefill/decode split: the decode pool prices transferred prompts (disagg.py)
    "disaggregated": ("scenarios/fleet-disagg.yaml", "workload.num_requests=300"),
    "disaggregated, closed, tight decode KV": (
        "scenarios/fleet-disagg.yaml", "workload.num_requests=300",
        "workload.arrival={process: closed, concurrency: 24}",
        "engine.num_gpu_blocks_override=100", "engine.max_model_len=1500"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_fast_replicas_equal_the_general_ones(case):
    sets = CASES[case]
    scenario, sets = (sets[0], sets[1:]) if sets[0].startswith("scenarios/") else (
        None, (N, *sets))
    fr_fast, res_fast, s_fast = fleet(scenario, *sets)
    fr_gen, res_gen, s_gen = fleet(scenario, *sets, "core=general")
    assert {r.core for r in fr_fast.results.values()} == {"fast"}
    assert {r.core for r in fr_gen.results.values()} == {"general"}
    for s in (s_fast, s_gen):
        s.pop("sim")  # wall times
    _same(s_gen, s_fast)
    for name, g in fr_gen.results.items():
        f = fr_fast.results[name]
        for col, want in g.recorder.steps().items():
            np.testing.assert_array_equal(want, f.recorder.steps()[col], err_msg=f"{name} {col}")
        for col in ("first_scheduled_s", "first_token_s", "finish_s", "max_itl_s"):
            np.testing.assert_array_equal(getattr(g.recorder, col), getattr(f.recorder, col),
                                          err_msg=f"{name} {col}")
        for col in ("status", "num_preemptions", "cached_tokens", "generated"):
            np.testing.assert_array_equal(getattr(g, col), getattr(f, col),
                                          err_msg=f"{name} {col}")
        assert g.run == f.run and g.counters == f.counters
    np.testing.assert_array_equal(res_gen.specs.arrival_s, res_fast.specs.arrival_s)
    if "tight" in case:  # the case is what it says
        assert sum(int(r.num_preemptions.sum()) for r in fr_fast.results.values()) > 0
    if "cut by the KV pool" in case:
        assert sum(r.counters["memory_blocked"] for r in fr_fast.results.values()) > 0


def _step_log(*sets) -> tuple[str, set[str]]:
    import io

    from sim.fleet.run import run_fleet

    scenario, sets = (sets[0], sets[1:]) if sets[0].startswith("scenarios/") else (None, sets)
    r, specs, _ = prepare(load_scenario(scenario, sets))
    fh = io.StringIO()
    fr = run_fleet(r, specs, fh)
    return fh.getvalue(), {res.core for res in fr.results.values()}


@pytest.mark.parametrize("case", ["closed, least kv", "open stream, tight KV, least kv, sync",
                                  "disaggregated, closed, tight decode KV"])
def test_a_fleet_step_log_is_the_general_engines(case):
    """steps.jsonl: every replica's plan reported at its end, after the routing its
    finishes let go, line for line as the general engine writes it."""
    sets = CASES[case] if CASES[case][0].startswith("scenarios/") else (N, *CASES[case])
    fast, cores = _step_log(*sets)
    general, _ = _step_log(*sets, "core=general")
    assert cores == {"fast"} and '"event": "route"' in fast
    assert fast.splitlines() == general.splitlines()


@pytest.mark.parametrize("core", ["auto", "general"])
def test_an_idle_static_replica_starts_its_batch_at_the_deadline(core):
    # batch_size 2, max_wait_s 0.5, a 10 ms step; least outstanding: request 0 (0 s) goes
    # to replica 0, request 1 (0.1 s) to replica 1, request 2 (0.2 s) to replica 0 (a tie:
    # the first), whose batch is full at 0.2 s (finishes 0.23 and 0.22 s). Replica 1 is idle
    # with request 1 alone: its batch starts at the deadline, 0.6 s
    scenario = {**SCENARIO, "core": core,
                "cost": {**SCENARIO["cost"], "prefill_token_ms": 0},
                "scheduler": {"name": "static", "batch_size": 2, "max_wait_s": 0.5},
                "engine": {"async_scheduling": False}}
    specs = RequestSpecs.from_arrays([0.0, 0.1, 0.2], [8, 8, 8], [3, 2, 2])
    fr = simulate_fleet(plan_fleet(validate(scenario, "static fleet")), specs)
    assert {r.core for r in fr.results.values()} == {"fast" if core == "auto" else "general"}
    assert fr.first.tolist() == [0, 1, 0]
    rec = {rep.name: rep.recorder for rep in fr.replicas}
    on = [rec[f"default/{k}"] for k in fr.first.tolist()]
    assert [r.first_scheduled_s[i] for i, r in enumerate(on)] == pytest.approx(
        [0.2, 0.6, 0.2], abs=1e-12)
    assert [r.finish_s[i] for i, r in enumerate(on)] == pytest.approx(
        [0.23, 0.62, 0.22], abs=1e-12)


def test_a_decode_pool_priced_by_a_steps_file_stays_on_the_general_engine():
    """The decode pool prices transferred prompts from step shapes (disagg.py), which a
    steps file does not give: its replicas run the general engine, the prefill pool's the
    fast core, and both cores' fleets agree."""
    sets = ("workload.num_requests=120",
            "cost={name: fitted, profile: benchmarks/engine/cpu-tiny-llama.yaml}")
    with pytest.warns(UserWarning, match="outside the ranges"):
        fr, _, s_auto = fleet("scenarios/fleet-disagg.yaml", *sets)
        _, _, s_gen = fleet("scenarios/fleet-disagg.yaml", *sets, "core=general")
    cores = {name.split("/")[0]: r.core for name, r in fr.results.items()}
    assert cores == {"prefill": "fast", "decode": "general"}
    for s in (s_auto, s_gen):
        s.pop("sim")
    _same(s_gen, s_auto)
