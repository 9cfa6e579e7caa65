"""Can the engine keep up? The ONE place sweeps and capacity search ask it.

The rule lives with the metrics (``sim.metrics.stability``: stable / saturated /
unstable, judged on queue growth, drain time and utilization); a point is sustainable
only when the verdict is ``stable``.
"""

from __future__ import annotations

from sim.metrics.stability import is_sustainable


def engine_sustains(summary: dict) -> bool:
    """True when the run kept up with headroom (verdict ``stable``)."""
    return is_sustainable(summary)
