"""The engine's own noise floor: how far repeats of one case differ, and an error judged
against it.

Repeats are recorded engine runs of the same case (record.py --repeats): the same requests
(ids, prompt and output lengths, planned arrival times). Their spread per metric is the
largest pairwise difference, ``max / min - 1`` (%): the largest ``B vs A`` error `servesim
compare` would show between any two of them. A simulator's error (to the repeats' mean) is
within the engine's own spread when ``|error| <= spread``; beyond it by the difference.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sim.report.result_view import ResultView, metrics

METRICS = ("TTFT mean ms", "TTFT p90 ms", "E2EL mean ms", "ITL median ms", "ITL p90 ms",
           "TPOT median ms", "step p50 ms", "steps")
ENGINE = "vLLM engine"


def case_key(v: ResultView) -> frozenset:
    """The requests that make a case: id, prompt and output lengths (sets, any order)."""
    r = v.requests
    return frozenset(zip(r["request_id"].astype(str), r["prompt_tokens"].astype(int),
                         r["output_tokens"].astype(int)))


def repeats_of(first: ResultView, others: list[ResultView]) -> list[ResultView]:
    """``first`` and the ``others`` that are recordings of the same case (engine runs only:
    a simulation of the same trace is a candidate, not a repeat)."""
    if first.kind != ENGINE:
        return [first]
    key = case_key(first)
    return [first] + [v for v in others if v.kind == ENGINE and case_key(v) == key]


def spread_pct(values) -> float:
    """Largest pairwise difference of positive values, max / min - 1 (%); NaN below two."""
    x = np.asarray([v for v in values if np.isfinite(v)], dtype=np.float64)
    if len(x) < 2 or x.min() <= 0:
        return float("nan")
    return float((x.max() / x.min() - 1) * 100)


def judge(error_pct: float, spread: float) -> str:
    """'within the engine's own spread' or 'beyond it by X points' (or why not judged)."""
    if not np.isfinite(error_pct):
        return "-"
    if not np.isfinite(spread):
        return "no repeats"
    if abs(error_pct) <= spread:
        return "within the engine's own spread"
    return f"beyond it by {abs(error_pct) - spread:.2f} points"


def spread_table(repeats: list[dict], candidate: dict | None = None,
                 keys: tuple[str, ...] = METRICS) -> pd.DataFrame:
    """Per metric: the repeats' mean and spread (%); with a ``candidate`` (metrics of a
    simulated run) its error to the mean and the judgement."""
    rows = []
    for k in keys:
        vals = [m.get(k, np.nan) for m in repeats]
        mean = float(np.nanmean(vals)) if np.isfinite(vals).any() else float("nan")
        row = {"metric": k, "mean": mean, "spread_pct": spread_pct(vals)}
        if candidate is not None:
            err = float((candidate.get(k, np.nan) / mean - 1) * 100) if mean else np.nan
            row |= {"error_pct": err, "judgement": judge(err, row["spread_pct"])}
        rows.append(row)
    return pd.DataFrame(rows)


def views_table(repeats: list[ResultView], candidate: ResultView | None = None):
    """``spread_table`` of result views."""
    return spread_table([metrics(v) for v in repeats],
                        metrics(candidate) if candidate is not None else None)


def render(df: pd.DataFrame, names: list[str], candidate: str | None = None):
    """The spread table (rich)."""
    from rich.table import Table

    t = Table(title=f"engine vs engine: {len(names)} repeats of one case "
              f"({', '.join(names)}); spread = max / min - 1"
              + (f"; {candidate} vs their mean" if candidate else ""))
    cols = ["metric", "repeats' mean", "spread %"]
    cols += ["error %", "judgement"] if "error_pct" in df else []
    for c in cols:
        t.add_column(c, justify="left" if c in ("metric", "judgement") else "right")
    for r in df.itertuples():
        cells = [r.metric, _num(r.mean), _pct(r.spread_pct, signed=False)]
        if "error_pct" in df:
            cells += [_pct(r.error_pct), r.judgement]
        t.add_row(*cells)
    return t


def _num(x: float) -> str:
    return "-" if not np.isfinite(x) else f"{x:,.0f}" if abs(x) >= 1000 else f"{x:,.3g}"


def _pct(x: float, signed: bool = True) -> str:
    return "-" if not np.isfinite(x) else f"{x:+.2f}" if signed else f"{x:.2f}"
