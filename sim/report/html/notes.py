"""The warnings a results folder stores: the run's own (summary ``sim.warnings``, an engine
stop, a verdict the run could not judge), every sweep point's, and what reading the folder
left out. Each is listed once, with how many points said it."""

from __future__ import annotations

import json
from collections import Counter

from sim.report.html.folder import Folder


def run_notes(summary: dict) -> list[str]:
    sim, st = summary.get("sim", {}), summary.get("stability", {})
    out = [str(w) for w in sim.get("warnings") or ()]
    if sim.get("stopped"):
        out.append(f"engine stopped: {sim['stopped']}")
    if st.get("verdict") == "unstable" or st.get("long_enough") is False:
        out.append(f"stability {st.get('verdict')}: {st.get('reason')}")
    return out


def _point_notes(f: Folder) -> list[str]:
    """Each distinct warning of the sweep's points, with how many points stored it."""
    if f.points is None or "sim.warnings" not in f.points:
        return []
    seen: Counter[str] = Counter()
    for cell in f.points["sim.warnings"]:
        try:  # points.parquet stores list columns as JSON text (sim.plan.store)
            items = json.loads(cell) if isinstance(cell, str) else list(cell)
        except (ValueError, TypeError):
            items = [str(cell)]
        seen.update(str(w) for w in items)
    n = len(f.points)
    return [f"{w} ({k} of {n} points)" for w, k in seen.items()]


def collect(f: Folder) -> list[str]:
    found = [*f.warnings, *(run_notes(f.summary) if f.summary else ()), *_point_notes(f)]
    return list(dict.fromkeys(found))  # once each, in order
