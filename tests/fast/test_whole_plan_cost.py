"""A cost model that prices whole plans (a fitted ``steps`` file: a step's price depends on
the token counts the run has committed, and it counts the steps outside its fitted ranges)
runs on the fast core, which builds each plan as the general engine's, prices it with
``step_times`` and shows it committed (sim/fast/engine.py ``whole``): the same results as
the general engine, the recorded engine runs' replays included."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.config.load import load_scenario
from sim.pipeline import prepare
from sim.runner import simulate
from tests.fast.equivalence import assert_same, prepared, run_both, same_runs

RUNS = Path(__file__).resolve().parents[2] / "benchmarks" / "engine" / "runs"
STEPS = "cost={name: fitted, profile: benchmarks/engine/cpu-tiny-llama.yaml}"


def _replay(case: str, *sets: str):
    return prepare(load_scenario(RUNS / f"{case}-r1" / "scenario.yaml", list(sets)))[:2]


@pytest.mark.parametrize("case", ["heavy-mixed", "kv-tight", "light-short", "short-busy"])
def test_recorded_replays_run_on_the_fast_core(case):
    r, specs = _replay(case)
    assert r.scenario.cost.name == "fitted" and r.scenario.core == "auto"
    assert simulate(r, specs).core == "fast"
    a, _ = same_runs(r, specs)
    assert a.recorder.num_plans > 100 and (a.status == 3).all()


@pytest.mark.parametrize("sets", [
    # preemptions (a small pool), async scheduling with prefix caching
    ("engine.max_model_len=1024", "engine.num_gpu_blocks_override=40",
     "workload.rate_scale=3"),
    ("engine.max_model_len=1024", "engine.num_gpu_blocks_override=40",
     "workload.rate_scale=3", "engine.async_scheduling=true",
     "engine.enable_prefix_caching=true"),
])
def test_preemptions_and_async_scheduling(sets):
    r, specs = _replay("medium", *sets)
    a, _ = same_runs(r, specs)
    assert a.num_preemptions.sum() > 20


def test_steps_outside_the_fitted_ranges_are_counted_alike():
    r, specs = _replay("medium", "workload.rate_scale=6", "engine.max_num_seqs=128",
                       "engine.max_num_batched_tokens=4096")
    with pytest.warns(UserWarning, match="outside the ranges"):
        a, b = run_both(r, specs)
    assert_same(a, b)
    assert len(a.warnings) == 1 and a.warnings[0].startswith("cost fitted: 253 of 351 steps")


def test_the_default_scenario_priced_by_a_steps_file():
    r, specs = prepared(None, STEPS, "workload.num_requests=150")
    with pytest.warns(UserWarning):  # batches beyond the fit's ranges
        a, b = same_runs(r, specs)
    assert (a.core, b.core) == ("general", "fast") and a.recorder.num_steps > 500
