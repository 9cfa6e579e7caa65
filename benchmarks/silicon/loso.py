"""The leave-one-system-out figure of the one value chosen on the silicon rows.

The API server's time per prompt token (the shipped profiles' ``frontend_us_per_token``,
calibrate/aiconfigurator.py FRONTEND_US_PER_TOKEN) was chosen as the value of CANDIDATES
with the least TTFT median abs error over every row measured through vllm serve's Python
frontend. Here each system is held out in turn: the value is chosen again on the other
systems' rows alone (same rule), and the held-out system's rows are judged at that value,
beside their figures at the shipped one (in-sample). The rows of another frontend
(``Protocol.ingress_per_token_us`` set: NVIDIA Dynamo's Rust one) do not depend on it and
are replayed once. Every other parameter of the cost model comes from NVIDIA's kernel
tables or named sources, not from these rows (the eager launch cost, 0.8 ms per block, was
chosen on rows with its own held-out figures: NOTES.md).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from benchmarks.silicon.rows import Row, protocol

CANDIDATES = (0.0, 8.0, 10.0, 12.0, 14.0, 16.0)  # us per prompt token
METRICS = ("ttft", "tpot")


def depends(row: Row) -> bool:
    """The row's replay reads the profile's frontend time (its protocol sets none)."""
    return protocol(row).ingress_per_token_us is None


def with_frontend(row: Row, us: float):
    """ROW's protocol with the API server at ``us`` per prompt token."""
    return dataclasses.replace(protocol(row), ingress_per_token_us=us)


def _median_abs(e: pd.Series) -> float:
    return float(np.median(np.abs(e))) if len(e) else float("nan")


def choose(by_value: dict[float, pd.DataFrame], keep) -> float:
    """The candidate with the least TTFT median abs error over the rows ``keep`` selects
    (ties: the smaller value)."""
    scores = {v: _median_abs(df.loc[keep(df), "ttft_err_pct"]) for v, df in by_value.items()}
    return min(sorted(scores), key=lambda v: scores[v])


def table(by_value: dict[float, pd.DataFrame], shipped: float) -> pd.DataFrame:
    """Per held-out system (all its rows, and its MoE rows): the value chosen on the other
    systems, and the held-out rows' TTFT / TPOT median and p90 abs error at that value and
    at the shipped one. ``by_value``: the error frame (report.errors) of every row at each
    candidate, with a boolean ``moe`` column (the row's model has experts)."""
    out = []
    first = next(iter(by_value.values()))
    for system in sorted(first["system"].unique()):
        pick = choose(by_value, lambda df, s=system: df["system"] != s)
        for group, keep in (("system", lambda df, s=system: df["system"] == s),
                            ("moe", lambda df, s=system: (df["system"] == s) & df["moe"])):
            held, ins = by_value[pick], by_value[shipped]
            row = {"group": f"{group} {system}", "rows": int(keep(held).sum()),
                   "chosen_us": pick, "shipped_us": shipped}
            if not row["rows"]:
                continue
            for m in METRICS:
                for tag, df in (("loso", held), ("in_sample", ins)):
                    e = np.abs(df.loc[keep(df), f"{m}_err_pct"].to_numpy())
                    row[f"{m}_median_{tag}"] = float(np.median(e))
                    row[f"{m}_p90_{tag}"] = float(np.percentile(e, 90))
            out.append(row)
    return pd.DataFrame(out)


def scores(by_value: dict[float, pd.DataFrame]) -> pd.DataFrame:
    """Per candidate: TTFT / TPOT median abs error over every row and over the rows that
    read the value (``depends`` column), the in-sample choice's own evidence."""
    out = []
    for us, df in sorted(by_value.items()):
        mine = df[df["depends"]]
        out.append({"frontend_us": us, "rows": len(df), "ttft_median": _median_abs(
            df["ttft_err_pct"]), "tpot_median": _median_abs(df["tpot_err_pct"]),
            "frontend_rows": len(mine), "frontend_ttft_median": _median_abs(
                mine["ttft_err_pct"])})
    return pd.DataFrame(out)


def format_table(t: pd.DataFrame) -> str:
    head = (f"{'held out':<22}{'n':>6}{'us':>5}  {'TTFT med':>9}{'p90':>7}  {'TPOT med':>9}"
            f"{'p90':>7}   (leave-one-system-out; in-sample at the shipped value in [])")
    lines = [head]
    for r in t.itertuples(index=False):
        lines.append(
            f"{r.group:<22}{r.rows:>6}{r.chosen_us:>5.0f}  "
            f"{r.ttft_median_loso:>5.1f} [{r.ttft_median_in_sample:4.1f}]"
            f"{r.ttft_p90_loso:>6.1f} [{r.ttft_p90_in_sample:5.1f}]  "
            f"{r.tpot_median_loso:>5.1f} [{r.tpot_median_in_sample:4.1f}]"
            f"{r.tpot_p90_loso:>6.1f} [{r.tpot_p90_in_sample:5.1f}]")
    return "\n".join(lines)
