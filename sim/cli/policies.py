"""`servesim policies`: every registered policy with its one-line description."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from sim.cost.base import COST_MODELS
from sim.fleet.routers import ROUTERS
from sim.kv.base import KV_POLICIES
from sim.sched.admission import ADMISSION_RULES
from sim.sched.base import SCHEDULERS

REGISTRIES = (("scheduler", SCHEDULERS), ("kv", KV_POLICIES), ("admission", ADMISSION_RULES),
              ("cost", COST_MODELS), ("cluster.router", ROUTERS))


def policies() -> None:
    """List schedulers, KV policies and cost models (the names scenarios may use)."""
    import sim.config.scenario  # noqa: F401  (imports every registering package)

    t = Table(title="Registered policies", title_justify="left")
    for col in ("kind", "name", "params", "description"):
        t.add_column(col)
    for kind, reg in REGISTRIES:
        for name, cls in reg.items():
            params = ", ".join(cls.Params.model_fields) or "-"
            t.add_row(kind, name, params, cls.description)
    Console().print(t)
