"""The engine's same-shape drift between recordings (calibrate/drift.py): hand-made step
logs, and the committed CPU runs, whose drift has the sign of the rotation's errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from calibrate.drift import MIN_STEPS, speed, summary_line

RUNS = Path(__file__).resolve().parents[2] / "benchmarks" / "engine" / "runs"


def log(times: dict[tuple[int, int], float], n: int = MIN_STEPS) -> pd.DataFrame:
    """N pure-decode steps per shape (sequences, KV tokens) at the given interval (ms), and
    one prefill step (never a decode shape)."""
    rows = [(0, s, kv, t) for (s, kv), t in times.items() for _ in range(n)]
    rows.append((128, 1, 0, 99.0))
    return pd.DataFrame(rows, columns=["prefill_tokens", "decode_seqs", "context_tokens",
                                       "interval_ms"])


def test_speed_by_hand():
    # shape (2, 100) and (8, 600): b is 10 % slower on both, c 10 % faster on one and
    # equal on the other (median of its two ratios: 0.95)
    a = log({(2, 100): 10.0, (8, 600): 20.0})
    b = log({(2, 100): 11.0, (8, 600): 22.0})
    c = log({(2, 100): 9.0, (8, 600): 20.0})
    s = speed({"a": a, "b": b, "c": c})
    # per shape the median run is the reference: (2, 100) -> 10, (8, 600) -> 20
    assert s["a"] == 1.0 and s["b"] == pytest.approx(1.1) and s["c"] == pytest.approx(0.95)
    line = summary_line(s, {"a": "x", "b": "x", "c": "y"})
    assert "0.950-1.100x" in line and "x's repeats 10.0 % apart" in line
    assert "x +5.0 %, y -5.0 %" in line


def test_rare_shapes_and_short_runs_of_a_shape_do_not_count():
    a = log({(2, 100): 10.0, (4, 100): 50.0})
    b = log({(2, 100): 12.0})
    c = log({(2, 100): 12.0})
    d = pd.concat([log({(2, 100): 12.0}), log({(4, 100): 5.0}, n=MIN_STEPS - 1)])
    s = speed({"a": a, "b": b, "c": c, "d": d})
    # (4, 100): one run of four with enough steps of it (d has too few): only (2, 100)
    assert s.round(6).to_dict() == {"a": pytest.approx(10 / 12), "b": 1.0, "c": 1.0, "d": 1.0}
    assert np.isnan(speed({"a": a, "e": log({(16, 0): 1.0})})["a"])


def test_the_committed_runs_drift_with_the_sign_of_the_rotation_errors():
    """The committed runs' first three repeats were recorded in rounds (2026-12-07
    19:29-20:01): every case's repeats sped up over that session (r1 > r2 > r3), and
    short-busy's ran fast against the others. The fourth (2026-12-08 00:17-00:29) ran slower
    than every earlier one of its case: the model cannot follow a drift the step shapes do
    not carry, so it sits in the cases' spread."""
    from calibrate.steplog import read_log
    from calibrate.validate_steps import case_name

    dirs = sorted(p for p in RUNS.iterdir() if (p / "run.json").is_file())
    s = speed({p.name: read_log(p) for p in dirs})
    assert len(s.dropna()) == 28
    assert 0.82 < s.min() < 0.86 and 1.25 < s.max() < 1.29
    by_case = s.groupby(s.index.map({p.name: case_name(p) for p in dirs}))
    assert (by_case.apply(lambda v: v.iloc[0] > v.iloc[2])).all()  # r1 slower than r3
    assert (by_case.apply(lambda v: v.iloc[3] > v.iloc[:3].max())).all()  # r4 slowest
    first = by_case.apply(lambda v: v.iloc[:3].mean())
    assert first["short-busy"] < 0.92 and (first.drop("short-busy") > 0.96).all()
