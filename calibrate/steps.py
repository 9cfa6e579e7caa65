"""fit-steps: a step-time model from a real engine's per-step log.

Input (README "steps.csv"), one row per engine step:

    prefill_tokens   tokens computed for prefill-shaped requests (chunks) in the step
    decode_seqs      decode-shaped requests (one token each) in the step
    context_tokens   (optional) KV tokens those decode requests had before the step
    step_ms          the step's duration (ms)

or a vLLM log with ``--enable-logging-iteration-details`` lines ("Iteration(N): A context
requests, B context tokens, C generation requests, D generation tokens, iteration elapsed
time: E ms"), read as prefill_tokens = B, decode_seqs = C, step_ms = E (no context_tokens).

Model: ``step_ms = base + a * prefill_tokens + b * decode_seqs + c * context_tokens`` with
non-negative coefficients, fitted by relative-error least squares (rows weighted by
1 / step_ms) on all subsets of the terms, keeping the best non-negative solution.
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
import zlib
from pathlib import Path

import numpy as np
import pandas as pd

from calibrate.fit import errors
from calibrate.model_file import ModelFile, Provenance, StepsFit
from traces.errors import InputError

TERMS = ("prefill_tokens", "decode_seqs", "context_tokens")
REQUIRED = ("prefill_tokens", "decode_seqs", "step_ms")
ITERATION_RE = re.compile(
    r"Iteration\((\d+)\): (\d+) context requests, (\d+) context tokens, (\d+) generation "
    r"requests, (\d+) generation tokens, iteration elapsed time: ([0-9.]+) ms(?! \(dummy\))")


class StepsError(InputError):
    """A step log that cannot be used."""


def _parse_vllm_log(path: Path) -> pd.DataFrame:
    rows = [(int(m[3]), int(m[4]), float(m[6]))
            for m in ITERATION_RE.finditer(path.read_text(errors="replace"))]
    if not rows:
        raise StepsError(f"{path}: no CSV header and no vLLM 'Iteration(N): ...' lines")
    df = pd.DataFrame(rows, columns=["prefill_tokens", "decode_seqs", "step_ms"])
    df["context_tokens"] = np.nan
    return df


def read_steps(path: str | Path) -> pd.DataFrame:
    """The step log as a frame with the TERMS and step_ms (context_tokens may be NaN)."""
    p = Path(path)
    if not p.is_file():
        raise StepsError(f"{p}: step log not found")
    if p.suffix.lower() != ".csv":
        return _parse_vllm_log(p)
    try:
        df = pd.read_csv(p)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise StepsError(f"{p}: not a CSV file ({e.__class__.__name__})") from None
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise StepsError(f"{p}: missing column {missing[0]!r} (need {', '.join(REQUIRED)}; "
                         "optional context_tokens)")
    if "context_tokens" not in df.columns:
        df["context_tokens"] = np.nan
    for c in (*REQUIRED, "context_tokens"):
        v = pd.to_numeric(df[c], errors="coerce")
        missing_ok = v.isna() & df[c].isna() if c == "context_tokens" else False
        bad = (~np.isfinite(v) | (v < 0)) & ~missing_ok
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            raise StepsError(f"{p}: row {row + 2}: column {c}: expected a number >= 0, got "
                             f"{df[c].iloc[row]!r}")
        df[c] = v
    if (df["step_ms"] <= 0).any():
        raise StepsError(f"{p}: column step_ms: every step must take > 0 ms")
    if len(df) < 8:
        raise StepsError(f"{p}: {len(df)} steps; fit-steps needs at least 8")
    return df[[*TERMS, "step_ms"]]


def fit_nonneg(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Weighted least squares of y on [1, x] with every coefficient >= 0 (exhaustive over
    the active sets; there are at most 2^4 of them)."""
    best, best_err = np.zeros(x.shape[1] + 1), np.inf
    design = np.column_stack([np.ones(len(y)), x]) * w[:, None]
    for k in range(design.shape[1] + 1):
        for cols in itertools.combinations(range(design.shape[1]), k):
            coef = np.zeros(design.shape[1])
            if cols:
                coef[list(cols)] = np.linalg.lstsq(design[:, cols], y * w, rcond=None)[0]
            if (coef < 0).any():
                continue
            err = float(((design @ coef - y * w) ** 2).sum())
            if err < best_err - 1e-15:
                best, best_err = coef, err
    return best


def fit_steps(df: pd.DataFrame, *, source: str = "", seed: int = 0, heldout: float = 0.2,
              gpu: str = "", model: str = "", tp: int = 1) -> ModelFile:
    """Fit the step model to a step log (``read_steps``) and return a ``steps`` model file."""
    use = [t for t in TERMS if df[t].notna().all()]
    keys = [f"step{i}" for i in range(len(df))]
    held = np.array([zlib.crc32(f"{seed}:{k}".encode()) / 2.0**32 < heldout for k in keys])
    train, test = df[~held], df[held]
    y = train["step_ms"].to_numpy(np.float64)
    coef = fit_nonneg(train[use].to_numpy(np.float64), y, 1.0 / y)
    c = dict.fromkeys(TERMS, 0.0) | dict(zip(use, coef[1:]))

    def pred(d: pd.DataFrame) -> np.ndarray:
        return coef[0] + sum(c[t] * d[t].fillna(0).to_numpy(np.float64) for t in TERMS)

    fit = StepsFit(base_ms=float(coef[0]), prefill_token_ms=c["prefill_tokens"],
                   decode_seq_ms=c["decode_seqs"], context_token_ms=c["context_tokens"],
                   train=errors(pred(train), y),
                   heldout=errors(pred(test), test["step_ms"].to_numpy(np.float64)))
    notes = [] if "context_tokens" in use else [
        "no context_tokens in the log: decode attention's growth with context is folded into "
        "the per-sequence term"]
    prov = Provenance(source=source or "engine step log", device=gpu or "unknown",
                      created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                      tool="servesim calibrate fit-steps", profile=source, rows=len(df),
                      seed=seed, heldout_fraction=heldout, notes=notes)
    return ModelFile(kind="steps", gpu=gpu or "unknown", framework="vllm", model=model,
                     tensor_parallel_size=tp, provenance=prov, steps=fit,
                     step_overhead_ms=round(fit.base_ms, 6),
                     step_overhead_source="fitted intercept of the step log")
