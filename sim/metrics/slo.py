"""Goodput and the SLO verdict against the scenario's latency budgets (ms)."""

from __future__ import annotations

import numpy as np


def goodput_mask(res, lat: dict, done: np.ndarray) -> np.ndarray:
    """Finished requests within every SLO budget (`vllm bench serve --goodput`)."""
    slo, ok = res.resolved.scenario.slo, done.copy()
    for key, budget in (("ttft", slo.ttft_ms), ("tpot", slo.tpot_ms), ("e2el", slo.e2el_ms)):
        if budget is not None:
            v = lat[key]
            ok &= np.isnan(v) | (v * 1e3 <= budget)
    return ok


def slo_verdict(res, lat: dict, done: np.ndarray) -> dict:
    """Each budget against the scenario's percentile of the requests in ``done``."""
    slo = res.resolved.scenario.slo
    out = {"percentile": slo.percentile}
    met = True
    for key, budget in (("ttft", slo.ttft_ms), ("tpot", slo.tpot_ms), ("e2el", slo.e2el_ms)):
        if budget is None:
            continue
        v = lat[key][done]
        v = v[~np.isnan(v)]
        value = float(np.percentile(v, slo.percentile)) * 1e3 if len(v) else float("nan")
        out[f"{key}_ms"] = {"budget": budget, "value": value, "met": bool(value <= budget)}
        met &= bool(value <= budget)
    out["met"] = met
    return out
