"""Error of a model file against a profile: per operation and per shape region.

APE = |predicted / measured - 1| in percent. Rows are split as the fit split them
(calibrate/fit.py heldout_mask with the file's seed and fraction) when the profile is the
one the file was fitted to; against any other profile every row is unseen.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from rich.table import Table

from calibrate.fit import heldout_mask, op_of, predict, table_keys
from calibrate.profile import profile_hash
from sim.cost.profile.model_file import ModelFile

_KiB, _MiB = 1 << 10, 1 << 20


def _regions(op: str, df: pd.DataFrame) -> tuple[np.ndarray, list[str]]:
    """(region label of each row, labels in display order) for one operation's rows."""
    if op == "gemm":
        x, edges, names = df["m"], [16, 128, 1024, 8192], ["m<=16", "m<=128", "m<=1024",
                                                              "m<=8192", "m>8192"]
    elif op == "prefill_attn":
        x = df["batch"] * df["q_len"]
        edges, names = [128, 1024, 4096], ["tokens<=128", "<=1k", "<=4k", ">4k"]
    elif op == "decode_attn":
        x = df["batch"] * (df["ctx_len"] + 1)
        edges, names = [16 * _KiB, 256 * _KiB, 2 * _MiB], ["kv<=16k", "<=256k", "<=2M", ">2M"]
    elif op == "allreduce":
        x, edges, names = df["message_bytes"], [_MiB, 64 * _MiB], ["<=1MiB", "<=64MiB",
                                                                    ">64MiB"]
    else:
        return np.full(len(df), "all", dtype=object), []
    idx = np.searchsorted(np.asarray(edges, dtype=np.float64), x.to_numpy(np.float64),
                          side="left")
    return np.asarray(names, dtype=object)[idx], names


def split_of(mf: ModelFile, df: pd.DataFrame) -> tuple[np.ndarray, bool]:
    """(held-out mask, same profile as fitted?). Another profile: every row is unseen."""
    same = profile_hash(df) == mf.provenance.profile_sha256
    if not same:
        return np.ones(len(df), dtype=bool), False
    return heldout_mask(df["key"], mf.provenance.seed, mf.provenance.heldout_fraction), True


def error_table(mf: ModelFile, df: pd.DataFrame, rows: np.ndarray | None = None) -> pd.DataFrame:
    """One line per (table, region) plus an 'all' line per table (an op or its dtype
    variant, e.g. gemm.fp8): rows, median, p90, max APE (%)."""
    pred = predict(mf, df)
    ape = np.abs(pred / (df["median_ms"].to_numpy(np.float64) * 1e-3) - 1.0) * 100.0
    keep = np.isfinite(ape) if rows is None else np.isfinite(ape) & rows
    keys = table_keys(df)
    out = []
    for op in sorted(set(keys[keep])):
        sel = keep & (keys == op)
        regions, names = _regions(op_of(op), df[sel])
        groups = [("all", ape[sel])] + [(r, ape[sel][regions == r])
                                        for r in names if (regions == r).any()]
        for region, a in groups:
            out.append({"op": op, "region": region, "rows": len(a),
                        "median_ape": float(np.median(a)), "p90_ape": float(np.percentile(a, 90)),
                        "max_ape": float(a.max())})
    return pd.DataFrame(out, columns=["op", "region", "rows", "median_ape", "p90_ape",
                                      "max_ape"])


def render(table: pd.DataFrame, title: str) -> Table:
    """A rich table of ``error_table`` output."""
    t = Table(title=title)
    for col, just in (("op", "left"), ("region", "left"), ("rows", "right"),
                      ("median APE %", "right"), ("p90 APE %", "right"), ("max APE %", "right")):
        t.add_column(col, justify=just, no_wrap=True)
    for r in table.itertuples():
        style = "bold" if r.region == "all" else None
        t.add_row(r.op if r.region == "all" else "", r.region, str(r.rows),
                  f"{r.median_ape:.2f}", f"{r.p90_ape:.2f}", f"{r.max_ape:.1f}", style=style)
    return t
