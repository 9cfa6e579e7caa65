"""The library calls behind `servesim sweep` and `servesim capacity`, for notebooks and scripts.

    from sim.plan.api import capacity, sweep
    points = sweep(sets=["workload.num_requests=500"], grid=["engine.max_num_seqs=32,256"],
                   rate="4:28:8")
    front = capacity("scenarios/chat-trace.yaml", tol="5%")

Results go to ``out`` (a temporary folder when not given). With ``jobs`` > 1 a script must
guard its entry point (``if __name__ == "__main__":``), as for any process pool.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pandas as pd

from sim.config.load import load_scenario
from sim.plan.capacity import Tolerance, run_capacity
from sim.plan.executors import make_executor
from sim.plan.frontier import frontier
from sim.plan.grid import deterministic_workload, make_plan, parse_grid
from sim.plan.slo import as_overrides, parse_slo, scenario_slo
from sim.plan.sweep import run_sweep


def _out(out, what: str) -> Path:
    """``out``, or a new folder inside a new temporary one (an existing empty folder is
    refused, as `run` refuses it)."""
    if out is not None:
        return Path(out)
    return Path(tempfile.mkdtemp(prefix=f"servesim-{what}-")) / what


def sweep(scenario=None, *, sets=(), grid=(), rate: str | None = None,
          rate_scale: str | None = None, seeds: int = 1, jobs: int = 1,
          executor: str = "local", out=None) -> pd.DataFrame:
    """The points table (one row per configuration x load x seed) of a sweep."""
    loaded = load_scenario(scenario, tuple(sets))
    plan = make_plan(loaded.scenario, list(grid), rate, rate_scale, seeds)
    with make_executor(executor, jobs) as ex:
        res = run_sweep(loaded, plan, _out(out, "sweep"), ex, quiet=True, sets=tuple(sets))
    return res.table


def capacity(scenario=None, *, sets=(), grid=(), slo: str | None = None, seeds: int = 1,
             tol: str = "2%", jobs: int = 1, executor: str = "local",
             out=None) -> pd.DataFrame:
    """The frontier table: each configuration's highest sustainable load under ``slo``
    (default: the scenario's), worst of ``seeds``."""
    budgets = parse_slo(slo) if slo else None
    loaded = load_scenario(scenario, (*sets, *(as_overrides(budgets) if budgets else ())))
    budgets = budgets or scenario_slo(loaded.scenario)
    seeds = 1 if deterministic_workload(loaded.scenario) else seeds
    seed_list = tuple(loaded.scenario.seed + i for i in range(seeds))
    with make_executor(executor, jobs) as ex:
        res = run_capacity(loaded, parse_grid(list(grid)), budgets, seed_list,
                           Tolerance.parse(tol), _out(out, "capacity"), ex, quiet=True,
                           sets=tuple(sets))
    return frontier(res, loaded.scenario.gpu_hour_price)
