"""Two result directories side by side (`servesim compare A B`).

A is the reference (e.g. a recorded engine run), B the candidate (e.g. its replay); every
error is B relative to A, in percent: ``(B / A - 1) * 100``.

* per request, matched by request id (and equal prompt and output lengths): TTFT, TPOT,
  E2EL and each request's median and p90 ITL; the median and p90 of the absolute errors
  and the median signed error;
* the summary metrics of both, with B's relative error (result_view.metrics);
* the same workload rows with scaled lengths or times (``prompt_scale``, ``rate_scale``:
  ``sim.report.same_rows``) are matched by id alone;
* when the ids barely overlap (two traces) the per-request part is skipped and the
  summaries still compare.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from sim.report.result_view import ResultView, finished, metrics
from sim.report.same_rows import same_rows

PER_REQUEST = (("TTFT", "ttft_s"), ("TPOT", "tpot_s"), ("E2EL", "e2el_s"),
               ("ITL p50 (per request)", "itl_p50_s"), ("ITL p90 (per request)", "itl_p90_s"))
MIN_OVERLAP = 0.5  # matched / the smaller side's finished requests, to compare per request


@dataclass(frozen=True)
class Comparison:
    a: ResultView
    b: ResultView
    matched: int  # finished requests in both
    per_request: pd.DataFrame | None  # metric, requests, median_abs_pct, p90_abs_pct, ...
    summary: pd.DataFrame  # metric, a, b, error_pct
    pairs: pd.DataFrame | None  # matched requests: request_id and each PER_REQUEST column
    rows_scaled: bool = False  # matched by id alone: the same rows, lengths or times scaled


def rel_err_pct(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return (np.asarray(b, dtype=np.float64) / np.asarray(a, dtype=np.float64) - 1) * 100


def match(a: ResultView, b: ResultView, by_id: bool = False) -> pd.DataFrame:
    """Finished requests in both: same id, same prompt and output lengths (two traces that
    number their requests 0..n-1 share ids, not requests), or (``by_id``) the same id
    alone; each side's per-request columns."""
    keys = ["request_id"] if by_id else ["request_id", "prompt_tokens", "output_tokens"]
    cols = ["request_id", "prompt_tokens", "output_tokens"] + [
        c for _, c in PER_REQUEST if c in a.requests and c in b.requests]
    fa = finished(a)[cols].astype({"request_id": str})
    fb = finished(b)[cols].astype({"request_id": str})
    return fa.merge(fb, on=keys, suffixes=("_a", "_b"))


def per_request_errors(pairs: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for label, col in PER_REQUEST:
        if f"{col}_a" not in pairs:
            continue
        err = rel_err_pct(pairs[f"{col}_a"], pairs[f"{col}_b"])
        err = err[np.isfinite(err)]
        if not len(err):
            continue
        rows.append({"metric": label, "requests": len(err),
                     "median_abs_pct": float(np.median(np.abs(err))),
                     "p90_abs_pct": float(np.percentile(np.abs(err), 90)),
                     "median_signed_pct": float(np.median(err))})
    return pd.DataFrame(rows)


def summary_table(a: ResultView, b: ResultView) -> pd.DataFrame:
    ma, mb = metrics(a), metrics(b)
    return pd.DataFrame([{"metric": k, "a": ma[k], "b": mb[k],
                          "error_pct": float(rel_err_pct(ma[k], mb[k]))} for k in ma])


def compare(a: ResultView, b: ResultView) -> Comparison:
    pairs, scaled = match(a, b), False
    smaller = max(1, min(len(finished(a)), len(finished(b))))
    if len(pairs) < MIN_OVERLAP * smaller and same_rows(a.path, b.path):
        pairs, scaled = match(a, b, by_id=True), True
    if len(pairs) < MIN_OVERLAP * smaller:
        return Comparison(a, b, len(pairs), None, summary_table(a, b), None)
    return Comparison(a, b, len(pairs), per_request_errors(pairs), summary_table(a, b), pairs,
                      scaled)


def render(c: Comparison):
    """Rich tables: per-request errors (when matched) and the summaries side by side."""
    from rich.table import Table

    tables = []
    if c.per_request is not None:
        how = " (the same workload rows, scaled)" if c.rows_scaled else ""
        t = Table(title=f"per request: {c.b.name} vs {c.a.name}, {c.matched} requests matched "
                  f"by id{how} (error = B / A - 1)")
        for col in ("metric", "requests", "median |err| %", "p90 |err| %", "median err %"):
            t.add_column(col, justify="left" if col == "metric" else "right")
        for r in c.per_request.itertuples():
            t.add_row(r.metric, str(r.requests), f"{r.median_abs_pct:.2f}",
                      f"{r.p90_abs_pct:.2f}", f"{r.median_signed_pct:+.2f}")
        tables.append(t)
    t = Table(title=f"summary: A = {c.a.name} ({c.a.kind}), B = {c.b.name} ({c.b.kind})"
              + ("" if c.per_request is not None
                 else "; request ids or lengths differ: not matched"))
    for col in ("metric", "A", "B", "B vs A %"):
        t.add_column(col, justify="left" if col == "metric" else "right")
    for r in c.summary.itertuples():
        err = f"{r.error_pct:+.2f}" if np.isfinite(r.error_pct) else "-"
        t.add_row(r.metric, _fmt(r.a), _fmt(r.b), err)
    tables.append(t)
    return tables


def _fmt(x: float) -> str:
    if not np.isfinite(x):
        return "-"
    return f"{x:,.0f}" if abs(x) >= 1000 or float(x).is_integer() else f"{x:,.3g}"
