"""Leave-slice-out error: refit each table with whole shape slices held out.

The random held-out rows (calibrate/fit.py) sit next to fitted neighbours on every axis,
so their error says little about a shape the profile never measured. Here each table is
refitted with a whole slice of shapes removed and scored on it:

* **slices**: the distinct values of one axis (GEMM ``n``, prefill ``q``, decode KV
  length) in ``FOLDS`` interleaved folds; each fold is held out in turn (every ``m``, ``k``
  / batch / heads of those values): interpolation between measured slices;
* **extrapolation**: every row beyond a limit of batch, context or prompt is held out and
  the table fitted on the rest: how far the edge efficiency carries (GEMM tokens > 4096,
  prefill tokens per sequence > 4096, decode batch > 256, decode KV length > 8192).

APE = |predicted / measured - 1| in percent, as everywhere in calibration.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from calibrate.fit import errors, fit_op, op_of, predict_table, table_keys
from sim.cost.profile.model_file import ModelFile

FOLDS = 4


@dataclass(frozen=True)
class Test:
    """One held-out slice: a name and the rows of a table it holds out."""

    name: str
    held: np.ndarray  # bool per row of the table's frame


def _axis(op: str, df: pd.DataFrame) -> tuple[str, np.ndarray]:
    """(name, values) of the axis sliced for interpolation."""
    if op == "gemm":
        return "n", df["n"].to_numpy()
    if op == "prefill_attn":
        return "q", df["q_len"].to_numpy()
    return "kv_len", df["ctx_len"].to_numpy() + 1


def _limits(op: str, df: pd.DataFrame) -> list[tuple[str, np.ndarray]]:
    """(name, held-out mask) of each extrapolation test of one op."""
    if op == "gemm":
        return [("m > 4096 (tokens)", df["m"].to_numpy() > 4096)]
    if op == "prefill_attn":
        return [("q > 4096 (prompt)", df["q_len"].to_numpy() > 4096)]
    if op == "decode_attn":
        return [("batch > 256", df["batch"].to_numpy() > 256),
                ("kv_len > 8192 (context)", df["ctx_len"].to_numpy() + 1 > 8192)]
    return []


def tests_of(op: str, df: pd.DataFrame) -> list[Test]:
    """Every leave-slice-out test of one table's rows ``df``."""
    name, x = _axis(op, df)
    values = np.unique(x)
    out = []
    for f in range(FOLDS):
        held_values = values[f::FOLDS]
        if len(held_values) and len(held_values) < len(values):
            out.append(Test(f"{name} slices, fold {f + 1}/{FOLDS}", np.isin(x, held_values)))
    return out + [Test(n, m) for n, m in _limits(op, df) if 0 < m.sum() < len(m)]


def slice_table(mf: ModelFile, df: pd.DataFrame, keys: list[str] | None = None) -> pd.DataFrame:
    """One row per (table, test): rows fitted, rows held out, median / p90 / max APE (%):
    the file's random held-out error, the slice folds pooled into one row, then each
    extrapolation."""
    all_keys = table_keys(df)
    out = []
    for key in sorted(set(all_keys) & set(mf.ops)):
        op = op_of(key)
        if op == "allreduce" or (keys and key not in keys):
            continue
        rows = df[all_keys == key].reset_index(drop=True)
        held = mf.ops[key].heldout
        if held is not None:
            out.append(_row(key, "random 20% (the fit's)", len(rows) - held.rows, held))
        folds, extra = [], []
        for t in tests_of(op, rows):
            table = fit_op(key, rows[~t.held], rows[t.held].iloc[:0], mf.norm)
            pred = predict_table(table, key, rows[t.held], mf.norm)
            meas = rows[t.held]["median_ms"].to_numpy(np.float64) * 1e-3
            if "fold" in t.name:
                folds.append((t.name.split(",")[0], pred, meas))
            else:
                extra.append(_row(key, t.name, int((~t.held).sum()), errors(pred, meas)))
        if folds:
            pred, meas = (np.concatenate([f[i] for f in folds]) for i in (1, 2))
            fitted = len(rows) - len(meas) // len(folds)  # rows per fit, on average
            out.append(_row(key, f"{folds[0][0]} ({len(folds)} folds)", fitted,
                            errors(pred, meas)))
        out += extra
    return pd.DataFrame(out, columns=["table", "test", "fitted_rows", "held_rows",
                                      "median_ape", "p90_ape", "max_ape"])


def _row(key: str, test: str, fitted: int, e) -> dict:
    return {"table": key, "test": test, "fitted_rows": fitted, "held_rows": e.rows,
            "median_ape": e.median_ape, "p90_ape": e.p90_ape, "max_ape": e.max_ape}


def render(table: pd.DataFrame, title: str):
    """A rich table of ``slice_table`` output."""
    from rich.table import Table

    t = Table(title=title)
    for col in ("table", "held out", "fitted", "held", "median APE %", "p90 APE %",
                "max APE %"):
        t.add_column(col, justify="left" if col in ("table", "held out") else "right",
                     no_wrap=True)
    last = None
    for r in table.itertuples():
        t.add_row(r.table if r.table != last else "", r.test, str(r.fitted_rows),
                  str(r.held_rows), f"{r.median_ape:.2f}", f"{r.p90_ape:.2f}",
                  f"{r.max_ape:.1f}")
        last = r.table
    return t
