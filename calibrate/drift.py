"""How much the engine's identical steps drift between recordings: a noise floor no step
model can go under.

A pure-decode step's work is set by its shape (sequences decoded, KV read); two recordings
of the same engine on the same machine should time a shape alike. They do not: the 2026-12-03
CPU runs (21 recordings in 48 minutes, each case's three in a row) ran 0.91-1.06x the median
recording; the committed ones (2026-12-07, recorded in rounds over 32 minutes) 0.89-1.21x,
every case's first repeat slower than its third (the machine sped up over the session). A
case replayed with a fit of the other cases cannot be nearer its recordings than their
drift: short-busy's recordings ran ~10 % faster than the others' (0.91-0.95x), and the
rotation prices its E2E +12.0 % and ITL p50 +13.4 %.

``speed`` is model-free: per run, the median over decode shapes (sequences, KV read in
blocks of KV_BUCKET tokens) seen in most runs of that shape's median step interval, over
the median of all runs' medians of it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

KV_BUCKET = 256  # tokens: decode shapes within this much KV read count as one
MIN_STEPS = 5  # a run's steps of a shape before its median counts


def shape_medians(df: pd.DataFrame) -> pd.Series:
    """A run's median step interval (ms) per pure-decode shape (decode_seqs, KV bucket)."""
    d = df[(df["prefill_tokens"] == 0) & np.isfinite(df["interval_ms"])
           & (df["decode_seqs"] > 0)]
    key = list(zip(d["decode_seqs"].astype(int),
                   (d["context_tokens"].fillna(0) // KV_BUCKET).astype(int)))
    g = d["interval_ms"].groupby(pd.Index(key, tupleize_cols=False))
    med = g.median()
    return med[g.size() >= MIN_STEPS]


def speed(logs: dict[str, pd.DataFrame]) -> pd.Series:
    """Per run (LOGS: name -> steplog frame), its same-shape decode steps' time over all
    runs' (1.0 = the median run; 1.04 = 4 % slower), from the shapes at least half the
    runs timed; NaN for a run without such shapes."""
    table = pd.DataFrame({k: shape_medians(d) for k, d in logs.items()})
    common = table[table.notna().sum(axis=1) >= max(2, len(logs) / 2)]
    ratio = common.div(common.median(axis=1), axis=0)
    return ratio.median(axis=0).reindex(list(logs))


def summary_line(s: pd.Series, case_of: dict[str, str]) -> str:
    """One line: the runs' speed range, and the widest case's between its own repeats."""
    ok = s.dropna()
    if len(ok) < 2:
        return "same-shape decode steps: too few shared shapes to compare recordings"
    by_case = ok.groupby(ok.index.map(case_of))
    within = (by_case.max() / by_case.min() - 1.0) * 100.0
    worst = within.idxmax()
    return (f"same-shape decode steps ran {ok.min():.3f}-{ok.max():.3f}x the median "
            f"recording ({(ok.max() / ok.min() - 1) * 100:.1f} % apart; {worst}'s repeats "
            f"{within[worst]:.1f} % apart); each case's recordings on average: "
            + ", ".join(f"{c} {(v - 1) * 100:+.1f} %" for c, v in by_case.mean().items())
            + " (+: slower). A held-out case's error of about that size and the opposite "
            "sign is the engine's drift between recordings, which no step model follows")
