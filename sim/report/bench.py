"""A `vllm bench serve` result as a measured run, and servesim's prediction next to it.

The measured numbers are recomputed from the result's per-request lists with vLLM's own
definitions (vllm/benchmarks/serve.py, `calculate_metrics`): TTFT and E2E latency per
successful request, TPOT = (E2E - TTFT) / (output - 1) for outputs longer than one token,
ITL = every gap between streamed chunks, numpy linear percentiles; throughput = completed
requests (output tokens) / the benchmark's duration. The summary fields of the file are
not used: `e2el` is only there when the run asked for it (`--percentile-metrics`).
"""

from __future__ import annotations

import numpy as np
from rich.table import Table

from sim.metrics.stats import describe_ms
from traces.loaders.vllm_result import succeeded

ROWS = (  # (label, block, key, stat)
    ("TTFT mean (ms)", "latency_ms", "ttft", "mean"),
    ("TTFT median (ms)", "latency_ms", "ttft", "median"),
    ("TTFT p99 (ms)", "latency_ms", "ttft", "p99"),
    ("TPOT mean (ms)", "latency_ms", "tpot", "mean"),
    ("TPOT median (ms)", "latency_ms", "tpot", "median"),
    ("TPOT p99 (ms)", "latency_ms", "tpot", "p99"),
    ("ITL mean (ms)", "latency_ms", "itl", "mean"),
    ("ITL p99 (ms)", "latency_ms", "itl", "p99"),
    ("E2EL mean (ms)", "latency_ms", "e2el", "mean"),
    ("E2EL median (ms)", "latency_ms", "e2el", "median"),
    ("E2EL p99 (ms)", "latency_ms", "e2el", "p99"),
    ("request throughput (req/s)", "throughput", "request_per_s", None),
    ("output throughput (tok/s)", "throughput", "output_token_per_s", None),
)


def measured_summary(result: dict) -> dict:
    """The result's metrics in the shape of servesim's summary (latency_ms, throughput)."""
    ok = succeeded(result)
    ttft, e2el, out = (np.asarray(result[k], dtype=np.float64)[ok]
                       for k in ("ttfts", "latencies", "output_lens"))
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(out > 1, (e2el - ttft) / (out - 1), np.nan)
    itls = [x for i in np.flatnonzero(ok) for x in result["itls"][i]]
    duration = float(result["duration"])
    return {
        "requests": {"total": len(ok), "finished": int(ok.sum())},
        "duration_s": duration,
        "latency_ms": {"ttft": describe_ms(ttft), "tpot": describe_ms(tpot),
                       "itl": describe_ms(np.asarray(itls, dtype=np.float64)),
                       "e2el": describe_ms(e2el)},
        "throughput": {"request_per_s": int(ok.sum()) / duration,
                       "output_token_per_s": float(out.sum()) / duration},
    }


def comparison(measured: dict, simulated: dict) -> list[dict]:
    """One row per metric: measured, predicted and the error (predicted / measured - 1)."""
    rows = []
    for label, block, key, stat in ROWS:
        m, s = measured[block].get(key), simulated[block].get(key)
        if stat is not None:
            m, s = (m or {}).get(stat), (s or {}).get(stat)
        err = None if m in (None, 0) or s is None else s / m - 1.0
        rows.append({"metric": label, "measured": m, "servesim": s, "error": err})
    return rows


def comparison_table(rows: list[dict], title: str) -> Table:
    """The rows of `comparison` as a console table."""
    t = Table(title=title, title_justify="left")
    for col in ("metric", "vllm bench serve", "servesim", "error"):
        t.add_column(col, justify="left" if col == "metric" else "right")
    for r in rows:
        err = "-" if r["error"] is None else f"{100 * r['error']:+.1f}%"
        t.add_row(r["metric"], _fmt(r["measured"]), _fmt(r["servesim"]), err)
    return t


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:,.2f}"
