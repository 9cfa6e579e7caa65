"""Compare run results: latency metrics side by side, per-step errors, repeat noise.

Small functions over result folders and tables, so the fidelity report can move onto
``servesim compare`` (sim/report/compare.py) when that lands: a result folder in,
plain dicts and DataFrames out.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

METRICS = ("ttft", "tpot", "itl", "e2el")  # summary.json latency_ms keys (vllm bench serve)
STATS = (("mean", "mean"), ("p50", "median"), ("p90", "p90"), ("p99", "p99"))
KINDS = ("prefill", "mixed", "decode")


def load_summary(run_dir: Path) -> dict:
    return json.loads((Path(run_dir) / "summary.json").read_text())


def rel_error(value: float, reference: float) -> float:
    """value / reference - 1 (NaN when the reference is 0 or missing)."""
    if reference is None or value is None or not reference:
        return float("nan")
    return float(value) / float(reference) - 1.0


def latency_rows(runs: dict[str, dict], reference: str) -> list[dict]:
    """One row per (metric, statistic): each run's value (ms) and its relative error
    against ``runs[reference]``."""
    rows = []
    for metric in METRICS:
        for label, key in STATS:
            vals = {name: s["latency_ms"][metric].get(key) for name, s in runs.items()}
            ref = vals[reference]
            rows.append({"metric": metric, "stat": label, **vals,
                         **{f"{name}_err": rel_error(v, ref) for name, v in vals.items()
                            if name != reference}})
    return rows


def ape_block(predicted: np.ndarray, measured: np.ndarray) -> dict:
    """Median / p90 / mean absolute percentage error, the signed median bias and the
    time bias (sum predicted / sum measured - 1) (%)."""
    if len(measured) == 0:
        return {"steps": 0, "median_ape": None, "p90_ape": None, "mean_ape": None,
                "median_bias": None, "time_bias": None}
    pred, meas = np.asarray(predicted, dtype=np.float64), np.asarray(measured, np.float64)
    err = pred / meas - 1.0
    ape = 100.0 * np.abs(err)
    return {"steps": int(len(ape)), "median_ape": float(np.median(ape)),
            "p90_ape": float(np.percentile(ape, 90)), "mean_ape": float(ape.mean()),
            "median_bias": float(100.0 * np.median(err)),
            "time_bias": float(100.0 * (pred.sum() / meas.sum() - 1.0))}


def step_errors(table: pd.DataFrame) -> dict:
    """Per-step error of ``predicted_s`` against ``measured`` durations, overall and per kind
    (``table``: kind, predicted_s, duration_s)."""
    out = {"all": ape_block(table["predicted_s"], table["duration_s"])}
    for kind in KINDS:
        part = table[table["kind"] == kind]
        out[kind] = ape_block(part["predicted_s"], part["duration_s"])
    return out


BATCH_GROUPS = ((1, 1), (2, 2), (3, 4), (5, 8), (9, 16), (17, 32), (33, 1 << 30))


def decode_by_batch(table: pd.DataFrame) -> list[dict]:
    """Decode steps' error by batch size (``table``: kind, requests, predicted_s,
    duration_s): the shape of the model's error in the batch, group by group."""
    dec = table[table["kind"] == "decode"]
    out = []
    for lo, hi in BATCH_GROUPS:
        part = dec[(dec["requests"] >= lo) & (dec["requests"] <= hi)]
        if len(part):
            label = str(lo) if lo == hi else (f"{lo}-{hi}" if hi < 1 << 30 else f"{lo}+")
            out.append({"requests": label,
                        **ape_block(part["predicted_s"], part["duration_s"])})
    return out


def repeat_noise(a: pd.DataFrame, b: pd.DataFrame) -> dict:
    """How much the same step's measured time differs between two runs: steps whose plan
    (requests, tokens, contexts) is identical in both, matched by ``signature``."""
    first_a = a.drop_duplicates("signature").set_index("signature")["duration_s"]
    first_b = b.drop_duplicates("signature").set_index("signature")["duration_s"]
    both = first_a.index.intersection(first_b.index)
    return {**ape_block(first_b[both].to_numpy(), first_a[both].to_numpy()),
            "matched_of": int(min(len(first_a), len(first_b)))}
