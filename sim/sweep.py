"""Sweep one knob at a time (the seed article's tuning loop, step 3).

    rows = sweep(loaded, "workload.arrival.rate", [2, 4, 8, 16])

Each value is applied with the same mechanism as ``--set`` and simulated; the result
is one row per value with the numbers a planner compares: TTFT/TPOT/E2E percentiles,
throughput, goodput, KV occupancy, preemptions and the stability verdict.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable

import pandas as pd

from sim.config.load import LoadedScenario, apply_override, validate
from sim.metrics.summary import summarize
from sim.pipeline import prepare
from sim.runner import simulate


def with_value(loaded: LoadedScenario, key: str, value) -> LoadedScenario:
    """The scenario with ``key`` set to ``value`` (validated)."""
    data = copy.deepcopy(loaded.scenario.model_dump(mode="json", exclude_unset=True))
    apply_override(data, f"{key}={value}")
    return LoadedScenario(validate(data, loaded.source), loaded.source, loaded.base_dir)


def row(key: str, value, summary: dict) -> dict:
    lat, th = summary["latency_ms"], summary["throughput"]
    return {
        key: value,
        "ttft_p50_ms": lat["ttft"].get("median"), "ttft_p95_ms": lat["ttft"].get("p95"),
        "ttft_p99_ms": lat["ttft"].get("p99"), "tpot_p50_ms": lat["tpot"].get("median"),
        "tpot_p95_ms": lat["tpot"].get("p95"), "e2el_p95_ms": lat["e2el"].get("p95"),
        "request_per_s": th["request_per_s"], "output_token_per_s": th["output_token_per_s"],
        "goodput_request_per_s": th["goodput_request_per_s"],
        "kv_used_mean": summary["kv_cache"].get("mean_used_fraction"),
        "kv_used_peak": summary["kv_cache"].get("peak_used_fraction"),
        "preemptions": summary["preemption"]["count"],
        "slo_met": summary["slo"]["met"], "verdict": summary["stability"]["verdict"],
    }


def sweep(loaded: LoadedScenario, key: str, values: Iterable) -> pd.DataFrame:
    """Simulate the scenario once per value of ``key``; one row per value."""
    rows = []
    for v in values:
        variant = with_value(loaded, key, v)
        r, specs, _ = prepare(variant)
        rows.append(row(key, v, summarize(simulate(r, specs))))
    return pd.DataFrame(rows)
