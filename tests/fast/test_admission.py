"""``reserve`` admission on the fast core (sim/fast/admission.py) equals the general engine:
the shipped scenario, and random knobs, requests, schedulers and expectations."""

from __future__ import annotations

from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from sim.config.load import load_scenario
from sim.config.resolve import ConfigError
from sim.pipeline import resolve_loaded
from tests.fast.equivalence import same_runs, same_scenario
from tests.fast.test_properties import knobs, requests
from traces.errors import InputError


def test_shipped_reserve_scenario():
    general, fast = same_scenario("reserve-admission")
    assert fast.core == "fast"
    # the rule held requests back: some waited on it (its own reason), none preempted
    assert int(fast.recorder.steps()["num_waiting"].max()) > 0
    assert int(fast.num_preemptions.sum()) == 0


def test_shipped_reserve_scenario_with_max_tokens_and_caching():
    same_scenario("reserve-admission", "admission.expect=max_tokens",
                  "engine.enable_prefix_caching=true")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(knobs(), requests(), st.data())
def test_reserve_fast_core_equals_general_engine(sets, specs, data):
    expect = data.draw(st.sampled_from(["{name: reserve, expect: max_tokens}",
                                        "{name: reserve, quantile: 0.5}",
                                        "{name: reserve, quantile: 0.9}",
                                        "{name: reserve, quantile: 1.0}"]))
    scheduler = data.draw(st.sampled_from(["vllm", "vllm-priority"]))
    caching = data.draw(st.booleans())
    try:
        r = resolve_loaded(load_scenario(None, (
            *sets, f"admission={expect}", f"scheduler={scheduler}",
            f"engine.enable_prefix_caching={str(caching).lower()}")))
    except (ConfigError, InputError):  # a pool too small for one request, say
        reject()
    a, b = same_runs(r, specs)
    assert (a.core, b.core) == ("general", "fast")
