"""Engine step logs in, one row per step out (the quantities sim/cost/stepfit.py prices).

Accepted logs (``read_log``):

* a recorded run directory (benchmarks/engine/README.md): its ``engine_steps.jsonl.gz``;
* vLLM step-log JSONL, gzipped or not: one object per step with vLLM's iteration fields
  ``num_ctx_requests``, ``num_ctx_tokens``, ``num_generation_requests``,
  ``num_generation_tokens`` and any of ``elapsed_ms`` (model execution), ``start_s`` /
  ``end_s`` (step start and end, seconds), ``tokens`` / ``context`` (per request id: tokens
  this step, tokens cached before it), ``idle_after`` (the engine had no work after it);
* vLLM's own log with ``--enable-logging-iteration-details`` lines ("Iteration(N): A
  context requests, B context tokens, C generation requests, D generation tokens,
  iteration elapsed time: E ms"): execution time and counts only;
* ``steps.csv``: ``prefill_tokens``, ``decode_seqs``, ``step_ms`` (the step interval) and
  optionally ``requests``, ``pairs``, ``context_tokens``, ``exec_ms``.

Output columns: ``log``, ``key``, ``step``, ``start_s``, ``interval_ms`` (start to next start while
the engine stayed busy, NaN otherwise), ``exec_ms``, the FEATURES of sim/cost/stepfit.py
(NaN where the log cannot tell), ``max_context`` (longest KV a decode request read) and
``max_prompt`` (longest prefix + chunk a prefill request reached).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from sim.cost.stepfit import FEATURES, prefill_pairs
from traces.errors import InputError, clip_repr
from traces.files import read_utf8
from traces.limits import MAX_TIME_S, MAX_TOKENS

COLUMNS = ("log", "key", "step", "start_s", "interval_ms", "exec_ms", *FEATURES, "max_context",
           "max_prompt")
COUNTS = ("num_ctx_requests", "num_ctx_tokens", "num_generation_requests",
          "num_generation_tokens")
ITERATION_RE = re.compile(
    r"Iteration\((\d+)\): (\d+) context requests, (\d+) context tokens, (\d+) generation "
    r"requests, (\d+) generation tokens, iteration elapsed time: ([0-9.]+) ms(?! \(dummy\))")
RUN_STEPS = "engine_steps.jsonl.gz"
MIN_STEPS = 8


class StepsError(InputError):
    """A step log that cannot be used."""


def _frame(rows: dict, name: str) -> pd.DataFrame:
    """``log`` names the file as given; ``key`` (its own name, or a run folder's) seeds the
    held-out split, so the split does not depend on how the path was written."""
    n = len(next(iter(rows.values())))
    df = pd.DataFrame({c: rows.get(c, np.full(n, np.nan)) for c in COLUMNS[2:]})
    df.insert(0, "log", name)
    p = Path(name)
    df.insert(1, "key", p.parent.name if p.name == RUN_STEPS else p.name)
    return df


def _per_request(rec: dict) -> dict:
    """Exact features from a step's per-request tokens and contexts."""
    q = np.fromiter(rec["tokens"].values(), dtype=np.int64)
    p = np.array([rec["context"][r] for r in rec["tokens"]], dtype=np.int64)
    dec = q == 1
    return {"requests": len(q), "prefill_tokens": float(q[~dec].sum()),
            "pairs": prefill_pairs(q[~dec], p[~dec]), "decode_seqs": int(dec.sum()),
            "context_tokens": float(p[dec].sum()),
            "max_context": float(p[dec].max() + 1) if dec.any() else np.nan,
            "max_prompt": float((p + q)[~dec].max()) if (~dec).any() else np.nan}


def _counts(rec: dict) -> dict:
    """Features the iteration counts give (vLLM: context phase = prefill-shaped)."""
    return {"requests": rec["num_ctx_requests"] + rec["num_generation_requests"],
            "prefill_tokens": float(rec["num_ctx_tokens"]),
            "decode_seqs": rec["num_generation_requests"]}


def intervals_ms(start: np.ndarray, end: np.ndarray, idle_after: np.ndarray) -> np.ndarray:
    """Start to next start of steps after which the engine stayed busy; NaN otherwise."""
    iv = np.full(len(start), np.nan)
    if len(start) > 1:
        busy = ~idle_after[:-1]
        iv[:-1] = np.where(busy, (start[1:] - start[:-1]) * 1e3, np.nan)
    return iv


def _idle_after(records: list[dict], start: np.ndarray, end: np.ndarray) -> np.ndarray:
    if all("idle_after" in r for r in records):
        return np.array([bool(r["idle_after"]) for r in records])
    gap = np.append(start[1:] - end[:-1], np.inf)  # no flag: a long gap means it idled
    return gap > max(5 * float(np.median(gap[:-1])) if len(gap) > 1 else 0.0, 0.005)


def from_records(records: list[dict], name: str) -> pd.DataFrame:
    """One row per logged step of vLLM step-log JSONL records."""
    exact = all("tokens" in r and "context" in r for r in records)
    feats = [(_per_request(r) if exact else _counts(r)) for r in records]
    rows = {k: np.array([f.get(k, np.nan) for f in feats], dtype=np.float64)
            for k in (*FEATURES, "max_context", "max_prompt")}
    rows["step"] = np.arange(len(records))
    if all("start_s" in r and "end_s" in r for r in records):
        start = np.array([r["start_s"] for r in records], dtype=np.float64)
        end = np.array([r["end_s"] for r in records], dtype=np.float64)
        rows["start_s"] = start
        rows["interval_ms"] = intervals_ms(start, end, _idle_after(records, start, end))
    if all("elapsed_ms" in r for r in records):
        rows["exec_ms"] = np.array([r["elapsed_ms"] for r in records], dtype=np.float64)
    elif all("scheduled_s" in r and "exec_end_s" in r for r in records):
        rows["exec_ms"] = np.array([(r["exec_end_s"] - r["scheduled_s"]) * 1e3
                                    for r in records])
    return _frame(rows, name)


def _jsonl_records(path: Path) -> list[dict]:
    out = []
    for number, line in enumerate(read_utf8(path, "a step log").split("\n"), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            raise StepsError(f"{path}: line {number}: not a JSON object") from None
        missing = [k for k in COUNTS if k not in rec] if isinstance(rec, dict) else COUNTS
        if missing:
            raise StepsError(f"{path}: line {number}: missing field {missing[0]!r} (vLLM "
                             f"step-log JSONL needs {', '.join(COUNTS)})")
        check_record(rec, f"{path}: line {number}")
        out.append(rec)
    check_order(out, path)
    return out


TIMES = ("start_s", "end_s", "scheduled_s", "exec_end_s")  # client-clock seconds


def _count(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= MAX_TOKENS


def _time(x) -> bool:
    return (isinstance(x, int | float) and not isinstance(x, bool)
            and -MAX_TIME_S <= x <= MAX_TIME_S)


def check_record(rec: dict, where: str) -> None:
    """Counts are integers from 0 to MAX_TOKENS, times finite numbers (<= MAX_TIME_S),
    durations >= 0, and a step ends after it starts."""
    for k in COUNTS:
        if not _count(rec[k]):
            raise StepsError(f"{where}: {k} {clip_repr(rec[k])}: expected an integer from 0 to "
                             f"{MAX_TOKENS:,}")
    for k in ("tokens", "context"):
        v = rec.get(k)
        if v is not None and not (isinstance(v, dict) and all(map(_count, v.values()))):
            raise StepsError(f"{where}: {k} {clip_repr(v)}: expected an object of request id "
                             f"-> integer tokens from 0 to {MAX_TOKENS:,}")
    if "tokens" in rec and "context" in rec and not set(rec["tokens"]) <= set(rec["context"]):
        raise StepsError(f"{where}: context has no entry for a request in tokens")
    for k in TIMES:
        if k in rec and not _time(rec[k]):
            raise StepsError(f"{where}: {k} {clip_repr(rec[k])}: expected a finite number of "
                             f"seconds (at most {MAX_TIME_S:g})")
    ms = rec.get("elapsed_ms")
    if ms is not None and not (_time(ms) and ms >= 0):
        raise StepsError(f"{where}: elapsed_ms {clip_repr(ms)}: expected a finite number of "
                         "ms >= 0")
    for a, b in (("start_s", "end_s"), ("scheduled_s", "exec_end_s"), ("start_s", "scheduled_s")):
        if a in rec and b in rec and rec[b] < rec[a]:
            raise StepsError(f"{where}: {b} {rec[b]!r} is before {a} {rec[a]!r}: a step ends "
                             "after it starts")


def check_order(records: list[dict], path: Path) -> None:
    """Steps are logged in time order: each starts no earlier than the one before."""
    prev = None
    for i, rec in enumerate(records):
        if "start_s" not in rec:
            return
        if prev is not None and rec["start_s"] < prev - 1e-9:
            raise StepsError(f"{path}: step {i}: start_s {rec['start_s']!r} is before the start "
                             f"of step {i - 1} ({prev!r}); the log is not in time order")
        prev = rec["start_s"]


def _vllm_text(path: Path, text: str) -> pd.DataFrame:
    rows = [(int(m[2]) + int(m[4]), float(m[3]), int(m[4]), float(m[6]))
            for m in ITERATION_RE.finditer(text)]
    if not rows:
        raise StepsError(f"{path}: no CSV header, no JSON lines and no vLLM 'Iteration(N): "
                         "...' lines")
    a = np.array(rows, dtype=np.float64)
    return _frame({"step": np.arange(len(a)), "requests": a[:, 0], "prefill_tokens": a[:, 1],
                   "decode_seqs": a[:, 2], "exec_ms": a[:, 3]}, str(path))


MAX_STEP_MS = 3.6e6  # an engine step of an hour is a recording fault, not a step (ms)
MAX_COUNT = 1 << 30  # tokens, sequences, pairs in one step: far above any engine's budget


def _csv(path: Path) -> pd.DataFrame:
    try:
        df = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise StepsError(f"{path}: not a CSV file ({e.__class__.__name__})") from None
    need = ("prefill_tokens", "decode_seqs", "step_ms")
    missing = [c for c in need if c not in df.columns]
    if missing:
        raise StepsError(f"{path}: missing column {missing[0]!r} (need {', '.join(need)}; "
                         "optional requests, pairs, context_tokens, exec_ms)")
    optional = ("requests", "pairs", "context_tokens", "exec_ms")
    for c in (*need, *[o for o in optional if o in df.columns]):
        v = pd.to_numeric(df[c], errors="coerce")
        top = MAX_STEP_MS if c in ("step_ms", "exec_ms") else MAX_COUNT
        bad = ~np.isfinite(v) | (v < 0) | (v > top)
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            got = df[c].iloc[row]
            got = got.item() if isinstance(got, np.generic) else got
            raise StepsError(f"{path}: row {row + 2}: column {c}: expected a number from 0 to "
                             f"{top:g}, got {got!r}")
        df[c] = v
    if (df["step_ms"] <= 0).any():
        raise StepsError(f"{path}: column step_ms: every step must take > 0 ms")
    rows = {c: df[c].to_numpy(np.float64) for c in (*FEATURES, "exec_ms") if c in df.columns}
    rows.update(step=np.arange(len(df)), interval_ms=df["step_ms"].to_numpy(np.float64))
    return _frame(rows, str(path))


def read_log(path: str | Path) -> pd.DataFrame:
    """Any accepted step log (module docstring) as one row per step."""
    p = Path(path)
    if p.is_dir():
        if not (p / RUN_STEPS).is_file():
            raise StepsError(f"{p}: a folder without {RUN_STEPS} (not a recorded run)")
        p = p / RUN_STEPS
    elif not p.is_file():
        raise StepsError(f"{p}: step log not found")
    if p.suffix.lower() == ".csv":
        df = _csv(p)
    else:
        text = read_utf8(p, "a step log")
        first = text.lstrip()[:1]
        df = from_records(_jsonl_records(p), str(p)) if first == "{" else _vllm_text(p, text)
    if len(df) < MIN_STEPS:
        raise StepsError(f"{p}: {len(df)} steps; fit-steps needs at least {MIN_STEPS}")
    return df
