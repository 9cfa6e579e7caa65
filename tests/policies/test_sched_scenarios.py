"""The example scenarios for the scheduling experiments load, validate and resolve."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.config.load import load_scenario
from sim.pipeline import prepare

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


@pytest.mark.parametrize("name, scheduler", [
    ("max-num-seqs", "vllm"), ("chunked-vs-prefill-first", "vllm"), ("lanes", "lanes"),
    ("static-offline", "static")])
def test_example_scenario_is_complete_and_valid(name, scheduler):
    loaded = load_scenario(SCENARIOS / f"{name}.yaml")
    assert loaded.scenario.scheduler.name == scheduler
    assert loaded.scenario.cost.name == "roofline"  # pinned: the numbers in the comments
    r, specs, _ = prepare(loaded)
    assert len(specs) > 0 and r.limits.max_num_seqs >= 1
