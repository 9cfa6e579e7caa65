"""A sweep's or capacity search's own tables: the points (as `servesim sweep` prints them),
the capacity frontier and what the search locked (as `servesim capacity` prints them)."""

from __future__ import annotations

from html import escape

from sim.plan.plotdir import budgets_of
from sim.report.html.folder import Folder
from sim.report.html.tables import from_rich, key_values
from sim.report.plan_tables import frontier_table, sweep_table


def plan_tables(f: Folder) -> str:
    budgets, load_key = budgets_of(f.manifest), f.manifest["load_key"]
    if f.kind == "capacity" and f.frontier is not None:
        tol = str(f.manifest.get("tolerance", ""))
        parts = [from_rich(frontier_table(f.frontier, budgets, load_key, tol))]
        if f.chosen is not None:
            parts.append(_locked(f.chosen["locked"]))
        return "".join(parts)
    return from_rich(sweep_table(f.points, budgets, load_key, len(f.manifest["seeds"])))


def _locked(locked: dict) -> str:
    """The capacity found and the traffic it holds for (chosen.yaml's locked section)."""
    cap = locked.get("capacity") or {}
    mix = locked.get("length_mix") or {}
    rows = [(k.replace("_", " "), _value(v)) for k, v in cap.items()]
    rows += [(f"{what.replace('_', ' ')} {stat}", _value(v))
             for what in ("prompt_tokens", "output_tokens")
             for stat, v in (mix.get(what) or {}).items()]
    rows += [(f"arrivals {k.replace('_', ' ')}", _value(v))
             for k, v in (mix.get("arrivals") or {}).items()]
    config = locked.get("config") or {}
    head = f"<h3>Best configuration: {escape(_value(config) if config else 'the base')}</h3>"
    return head + key_values(rows, "capacity and the length mix it holds for")


def _value(v) -> str:
    if isinstance(v, float):
        return f"{v:,.4g}"
    if isinstance(v, dict):
        return ", ".join(f"{k}={_value(x)}" for k, x in v.items())
    return str(v)
