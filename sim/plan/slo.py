"""Latency budgets for capacity search: ``--slo ttft_p95=500ms,tpot_p95=50ms``.

A budget names a metric (ttft, tpot, itl, e2el, as `vllm bench serve` defines them), a
statistic of it (mean, median or p50, p90, p95, p99, max) and a limit in ms (``500``,
``500ms``) or seconds (``0.5s``). Checked against a point's flattened summary columns
``latency_ms.<metric>.<stat>``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from sim.config.limits import MAX_TIME_S
from sim.config.scenario import Scenario
from traces.errors import InputError, clip

METRICS = ("ttft", "tpot", "itl", "e2el")
STATS = {"mean": "mean", "median": "median", "p50": "median", "p90": "p90", "p95": "p95",
         "p99": "p99", "max": "max"}
_VALUE = re.compile(r"^\s*([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ms|s)?\s*$")


@dataclass(frozen=True)
class Budget:
    metric: str  # ttft | tpot | itl | e2el
    stat: str  # mean | median | p90 | p95 | p99 | max
    ms: float  # limit (ms)

    @property
    def name(self) -> str:
        return f"{self.metric}_{'p50' if self.stat == 'median' else self.stat}"

    @property
    def column(self) -> str:
        return f"latency_ms.{self.metric}.{self.stat}"

    @property
    def label(self) -> str:
        return f"{self.metric.upper()} {'p50' if self.stat == 'median' else self.stat}"

    def value(self, metrics: dict) -> float:
        """The finished requests' statistic, as `vllm bench serve` reports it."""
        return _number(metrics.get(self.column))

    def judged(self, metrics: dict) -> float:
        """The statistic over every request that arrived, rejected and unfinished ones
        counted as failures, as the run's SLO verdict counts them (``sim.metrics.slo``):
        inf where a failure decides it. ITL (per token gap, where a failed request has no
        gaps): inf when more than 100 - percentile % of the requests failed (any for the
        mean or max), else the finished requests' value."""
        failures = _failures(metrics)
        if self.metric == "itl":
            pct = {"mean": 100.0, "max": 100.0, "median": 50.0}.get(self.stat)
            share = 1 - (pct if pct else float(self.stat[1:])) / 100
            judged = metrics.get("slo.judged") or 0
            over = failures > (share * judged if share else 0)
            return math.inf if over else self.value(metrics)
        key = f"slo.with_failures_ms.{self.metric}.{self.stat}"
        if key not in metrics:  # no samples at all (or a record from before failures counted)
            return self.value(metrics)
        v = _number(metrics[key])
        return math.inf if math.isnan(v) and failures else v  # None: a failure decides it

    def holds(self, metrics: dict) -> bool:
        """Within budget, failures counted (``judged``); a metric with no samples (NaN,
        e.g. TPOT of 1-token outputs) holds."""
        v = self.judged(metrics)
        return math.isnan(v) or v <= self.ms

    def lost_to_failures(self, metrics: dict) -> bool:
        """The finished requests are within budget; the failures (rejections) break it."""
        v = self.value(metrics)
        return (math.isnan(v) or v <= self.ms) and not self.holds(metrics)


def _number(v) -> float:
    return math.nan if v is None else float(v)


def _failures(metrics: dict) -> int:
    """Judged requests that failed every budget: rejected or unfinished."""
    counts = (_number(metrics.get(k)) for k in ("slo.rejected_as_failures",
                                                "slo.unfinished_as_failures"))
    return int(sum(c for c in counts if not math.isnan(c)))


def _budget(item: str) -> Budget:
    name, sep, raw = item.partition("=")
    metric, _, stat = name.strip().lower().partition("_")
    m = _VALUE.match(raw)
    if sep and metric in METRICS and stat in STATS and m and not 0 < float(m[1]) < math.inf:
        raise InputError(f"--slo {clip(item)!r}: the limit must be > 0 and finite (a time in "
                         "ms or s, e.g. ttft_p95=500ms)")
    if not sep or metric not in METRICS or stat not in STATS or not m:
        raise InputError(
            f"--slo {item!r}: expected METRIC_STAT=LIMIT with METRIC one of "
            f"{', '.join(METRICS)}, STAT one of {', '.join(STATS)} and LIMIT in ms or s (a bare "
            "number is ms), e.g. ttft_p95=500ms")
    ms = float(m[1]) * (1e3 if m[2] == "s" else 1.0)
    if ms > MAX_TIME_S * 1e3:  # the scenario's slo limit, said here for the flag given
        raise InputError(f"--slo {clip(item)!r}: the limit must be at most "
                         f"{MAX_TIME_S * 1e3:,.0f} ms")
    return Budget(metric, STATS[stat], ms)


def parse_slo(text: str) -> tuple[Budget, ...]:
    items = text.split(",")
    if not text.strip():
        raise InputError("--slo: give at least one budget, e.g. ttft_p95=500ms")
    if not all(item.strip() for item in items):  # as --grid and --rate: not dropped
        raise InputError(f"--slo {clip(text)!r}: an empty budget between commas")
    budgets = tuple(_budget(item) for item in items)
    names = [b.name for b in budgets]
    if len(set(names)) != len(names):
        raise InputError(f"--slo {text!r}: a budget is given twice")
    return budgets


def scenario_slo(sc: Scenario) -> tuple[Budget, ...]:
    """The scenario's own ``slo`` section as budgets (its percentile on every metric)."""
    stat = {50.0: "median", 90.0: "p90", 95.0: "p95", 99.0: "p99", 100.0: "max"}.get(
        sc.slo.percentile)
    pairs = (("ttft", sc.slo.ttft_ms), ("tpot", sc.slo.tpot_ms), ("e2el", sc.slo.e2el_ms))
    budgets = tuple(Budget(m, stat, v) for m, v in pairs if v is not None) if stat else ()
    if not budgets:
        raise InputError(f"slo: percentile {sc.slo.percentile:g} with budgets "
                         f"{[m for m, v in pairs if v is not None]}: capacity needs budgets at "
                         "p50, p90, p95, p99 or max; give them with --slo")
    return budgets


def as_overrides(budgets: tuple[Budget, ...]) -> tuple[str, ...]:
    """``--set`` lines that make the scenario's own SLO verdict and goodput use ``budgets``,
    when one scenario percentile can express them all (else none)."""
    pct = {"median": 50, "p90": 90, "p95": 95, "p99": 99, "max": 100}
    stats = {b.stat for b in budgets}
    if len(stats) != 1 or next(iter(stats)) not in pct or any(b.metric == "itl" for b in budgets):
        return ()
    given = {b.metric: b.ms for b in budgets}
    return (f"slo.percentile={pct[next(iter(stats))]}",
            *(f"slo.{m}_ms={given.get(m, 'null')}" for m in ("ttft", "tpot", "e2el")))


def describe(budgets: tuple[Budget, ...]) -> str:
    return ", ".join(f"{b.label} <= {b.ms:g} ms" for b in budgets)
