"""Swap preemption (``engine.preemption_mode: swap``, vLLM v0) on the fast core
(sim/fast/swap.py) equals the general engine: victims swapped out and back in with their
bytes charged to the plans, the host pool's refusals recomputed, failed or stopping the
engine, with random knobs and requests as tests/fast/test_properties.py draws them."""

from __future__ import annotations

import warnings

import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from sim.config.load import load_scenario
from sim.config.resolve import ConfigError
from sim.pipeline import resolve_loaded
from sim.runner import simulate
from sim.sched.base import Status
from tests.fast.equivalence import prepared, same_runs
from tests.fast.test_properties import knobs, requests

STEPS = "cost={name: fitted, profile: benchmarks/engine/cpu-tiny-llama.yaml}"
SMALL = "engine.swap_space=0.05"  # 25 of the scenario's 2 MiB blocks on the host


def _same(*sets: str):
    r, specs = prepared("swap-preemption", *sets)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the steps file's ranges
        a, b = same_runs(r, specs)
    assert (a.core, b.core) == ("general", "fast")
    return a


@pytest.mark.parametrize("sets", [(), ("engine.async_scheduling=true",), (STEPS,),
                                  ("scheduler=prefill-first",)])
def test_swaps_out_and_back_in(sets):
    a = _same(*sets)
    c = a.counters
    assert c["swap_out_events"] == c["swap_in_events"] > 20 and c["engine_stopped"] == ""
    assert c["swap_in_bytes"] == c["swap_out_bytes"] and a.recomputed_tokens == 0
    assert (a.status == Status.FINISHED).all()


def test_a_full_host_pool_recomputes():
    a = _same(SMALL, "engine.swap_space_full=recompute")
    c = a.counters
    assert c["swap_fallbacks"] == c["swap_space_exhausted"] > 0 and a.recomputed_tokens > 0
    assert c["swap_out_events"] > 0 and (a.status == Status.FINISHED).all()


def test_a_full_host_pool_fails_the_victim():
    a = _same(SMALL, "engine.swap_space_full=abort_request")
    c = a.counters
    aborted = int((a.status == Status.ABORTED).sum())
    assert aborted == c["swap_space_exhausted"] > 0 and c["engine_stopped"] == ""


@pytest.mark.parametrize("sets", [(), ("engine.async_scheduling=true",)])
def test_a_full_host_pool_stops_the_engine(sets):
    a = _same(SMALL, *sets)
    assert a.counters["engine_stopped"].startswith("Aborted due to the lack of CPU swap")
    assert (a.status == Status.ABORTED).sum() > 300 and a.run.stuck == 0


@pytest.mark.parametrize("sets,core", [
    ((), "fast"),
    (("scheduler=vllm-priority",), "fast"),
    (("scheduler=prefill-first",), "fast"),
    (("scheduler=lanes",), "general"),
    (("engine.enable_prefix_caching=true",), "general"),
    (("admission=reserve",), "fast"),
])
def test_which_core_swaps(sets, core):
    r, specs = prepared("swap-preemption", *sets)
    assert simulate(r, specs.head(20)).core == core


@st.composite
def swap_knobs(draw) -> tuple[str, ...]:
    """tests/fast/test_properties.py's knobs with swap preemption: a host pool of a few
    blocks to thousands, each of vLLM v0's answers to a full one, sync or async."""
    sched = draw(st.sampled_from(["vllm", "vllm-priority", "prefill-first"]))
    admission = "optimistic" if sched == "prefill-first" else draw(
        st.sampled_from(["optimistic", "reserve"]))  # v0 had no reserve rule
    return (*draw(knobs()), "engine.preemption_mode=swap",
            f"engine.swap_space={draw(st.sampled_from([0.004, 0.02, 0.1, 4]))}",
            "engine.swap_space_full="
            + draw(st.sampled_from(["stop_engine", "abort_request", "recompute"])),
            f"engine.async_scheduling={str(draw(st.booleans())).lower()}",
            f"scheduler={sched}", f"admission={admission}")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(swap_knobs(), requests())
def test_fast_swap_equals_general_engine(sets, specs):
    try:
        r = resolve_loaded(load_scenario(None, sets))
    except ConfigError:
        reject()
    a, b = same_runs(r, specs)
    assert (a.core, b.core) == ("general", "fast")


def test_reserve_admission_with_swap():
    """The reserve rule (sim/fast/admission.py) beside swap: a low quantile under-reserves,
    so victims are swapped, and a swapped request is judged as a waiting one (no blocks)."""
    r, specs = prepared("reserve-admission", "engine.preemption_mode=swap",
                        "engine.swap_space=1", "engine.swap_space_full=recompute",
                        "admission={name: reserve, quantile: 0.1}",
                        "engine.num_gpu_blocks_override=700")
    a, b = same_runs(r, specs)
    assert (a.core, b.core) == ("general", "fast")
    assert a.counters["swap_out_events"] == a.counters["swap_in_events"] > 30


@pytest.mark.parametrize("clients", [2, 8])
def test_a_failed_request_answers_its_client(clients):
    """A closed loop whose requests fail (``abort_request``) goes on: each failure frees its
    client, who sends the next (vllm bench serve counts the failure and goes on), so every
    request is sent although more fail than there are clients."""
    r, specs = prepared("swap-preemption", "engine.swap_space=0.004",
                        "engine.swap_space_full=abort_request",
                        "engine.num_gpu_blocks_override=300", "engine.max_model_len=4096",
                        "workload.num_requests=300",
                        f"workload.arrival={{process: closed, concurrency: {clients}}}")
    a, b = same_runs(r, specs)
    assert (a.core, b.core) == ("general", "fast")
    aborted = int((a.status == Status.ABORTED).sum())
    assert aborted > 2 * clients and a.never_sent == 0 and len(a.specs) == 300
    assert int((a.status == Status.FINISHED).sum()) + aborted + int(
        (a.status == Status.REJECTED).sum()) == 300


@pytest.mark.parametrize("sets", [
    ("engine.async_scheduling=true",),
    (SMALL, "engine.swap_space_full=recompute"),
    (SMALL, "engine.swap_space_full=abort_request"),
    (SMALL,),  # stops the engine
    ("engine.num_gpu_blocks_override=700", "workload.arrival.rate=4"),
])
def test_prefill_first_swaps_as_v0(sets):
    """v0's rules (sim/fast/prefill_first.py): no prompt admitted while one is swapped out,
    swap-ins after a decode step that preempted nothing, in that step."""
    a = _same("scheduler=prefill-first", *sets)
    c = a.counters
    assert c["swap_out_events"] + c["swap_space_exhausted"] > 0
