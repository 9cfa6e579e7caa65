"""End-to-end runs of scenario dicts or shipped scenario files (validate -> prepare ->
simulate -> summarize), for the memory-policy acceptance tests."""

from __future__ import annotations

from pathlib import Path

from sim.config.load import LoadedScenario, apply_override, load_scenario, validate
from sim.metrics.summary import summarize
from sim.pipeline import prepare
from sim.runner import simulate

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def run_dict(data: dict, *overrides: str):
    """Run a scenario given as a dict; ``overrides`` as ``--set`` assignments."""
    data = {**data}
    for o in overrides:
        apply_override(data, o)
    sc = validate(data, "test")
    r, specs, _ = prepare(LoadedScenario(sc, "test", Path(".")))
    res = simulate(r, specs)
    return res, summarize(res)


def run_file(name: str, *overrides: str):
    """Run ``scenarios/<name>.yaml`` with ``--set`` overrides."""
    loaded = load_scenario(SCENARIOS / f"{name}.yaml", overrides)
    r, specs, _ = prepare(loaded)
    res = simulate(r, specs)
    return res, summarize(res)
