"""Can the engine keep up? The ONE place sweeps and capacity search ask it.

It reads the run summary's stability block (``sim.metrics.stability``). When the
stability rule gains verdicts beyond stable / unstable (saturated: busy nearly all the
time with a growing queue), anything but ``stable`` is not sustainable here, and only
this function changes if the rule exposes its own predicate.
"""

from __future__ import annotations


def engine_sustains(summary: dict) -> bool:
    """True when the run's queue did not grow without bound (verdict ``stable``)."""
    return summary["stability"]["verdict"] == "stable"
