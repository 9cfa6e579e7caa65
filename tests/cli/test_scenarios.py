"""Every shipped scenario validates, fits its GPU and builds its workload."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.config.load import default_scenario_path, load_scenario
from sim.pipeline import prepare

SCENARIOS = sorted((Path(__file__).resolve().parents[2] / "scenarios").glob("*.yaml"))


def test_default_is_embedded_in_the_package():
    p = default_scenario_path()
    assert p.name == "default.yaml" and p.exists()
    sc = load_scenario().scenario
    assert (sc.model, sc.gpu, sc.tensor_parallel_size) == ("llama-3-8b", "h100-sxm", 1)


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario_prepares(path):
    loaded = load_scenario(path)
    r, specs, _ = prepare(loaded)
    assert len(specs) > 0
    assert r.memory.usable_blocks > 0
    assert loaded.scenario.description, "every shipped scenario says what it shows"
