"""Small fleet runs for the tests: a scenario (the embedded default or a file) + --set."""

from __future__ import annotations

from sim.config.load import load_scenario
from sim.fleet.run import fleet_outputs, run_fleet
from sim.metrics.summary import summarize
from sim.pipeline import prepare
from sim.runner import simulate


def fleet(scenario=None, *sets):
    """(FleetResult, client-view RunResult, summary) of a fleet run."""
    r, specs, _ = prepare(load_scenario(scenario, tuple(sets)))
    fr = run_fleet(r, specs)
    res, summary = fleet_outputs(fr)
    return fr, res, summary


def single(scenario=None, *sets):
    """(RunResult, summary) of a plain one-replica run."""
    r, specs, _ = prepare(load_scenario(scenario, tuple(sets)))
    res = simulate(r, specs)
    return res, summarize(res)
