"""fit-steps: what a real engine spends per step, from its step logs (calibrate/steplog.py).

The model (sim/cost/stepfit.py prices it):

    interval = execution + host
    execution = base + request * R + prefill_token * P + prefill_pair * A
                + decode_seq * max(0, D - knee) + context_token * C
                + N * (new_shape + new_shape_token * P)
    host = host_base + host_request * R

N is 1 on the first step of a log with its token count P + D (sim/cost/stepfit.py
``new_shapes``: a log is one engine process, in step order).

When the logs time both model execution and the step-to-step interval, execution is fitted
to the execution times and host to the rest; with intervals only, execution takes the whole
interval (no host terms); with execution only (vLLM's iteration log) the model prices
execution and says that the interval is longer. Terms the logs cannot give (context, pairs:
NaN; calibrate/step_replay.py derives them from a recorded run) are left out.

Least squares weighted by time: every step's residual in ms counts as it is, so long steps
weigh by their duration and the fit's total time matches the logs' (zero time-weighted bias
up to the non-negativity of the coefficients); a relative-error fit would let thousands of
short decode steps decide and underestimate the total. Coefficients are >= 0 (Lawson-Hanson
NNLS); the knee is the best integer with at least 5 % of the steps beyond it. A seeded 20 %
of the steps is held out of the fit and reported.
"""

from __future__ import annotations

import datetime as dt
import zlib

import numpy as np
import pandas as pd

from calibrate.nnls import nnls
from sim.cost.profile.model_file import (
    Hardware,
    HostTerms,
    ModelFile,
    Provenance,
    StepErrors,
    StepRanges,
    StepsFit,
    StepTerms,
)
from sim.cost.stepfit import FEATURES, new_shapes, step_ms, terms_ms

EXEC_TERMS = ("requests", "prefill_tokens", "pairs", "context_tokens", "new_shape",
              "new_shape_tokens")  # + knee column
COEF = {"requests": "request_ms", "prefill_tokens": "prefill_token_ms",
        "pairs": "prefill_pair_ms", "context_tokens": "context_token_ms",
        "new_shape": "new_shape_ms", "new_shape_tokens": "new_shape_token_ms"}
MAX_KNEE = 64
KNEE_SUPPORT, KNEE_MIN_STEPS = 0.05, 30  # steps beyond a knee: fraction of all, and count
MIN_COVERAGE = 0.9  # fraction of steps a term must be known for to be fitted


def _design(df: pd.DataFrame, terms: tuple[str, ...], knee: int | None) -> np.ndarray:
    cols = [np.ones(len(df))] + [df[t].to_numpy(np.float64) for t in terms]
    if knee is not None:
        cols.append(np.maximum(df["decode_seqs"].to_numpy(np.float64) - knee, 0.0))
    return np.column_stack(cols)


def knee_candidates(decode: np.ndarray) -> list[int | None]:
    """Knees with enough steps beyond them to fit a slope (KNEE_SUPPORT): a knee among the
    last few large batches would fit their noise, not a trend."""
    need = max(KNEE_MIN_STEPS, KNEE_SUPPORT * len(decode))
    out = [k for k in range(0, min(int(decode.max(initial=0)), MAX_KNEE) + 1)
           if (decode > k).sum() >= need]
    return out or [None]


def fit_terms(df: pd.DataFrame, y: np.ndarray, terms: tuple[str, ...]) -> StepTerms:
    """Execution terms by NNLS on ms residuals; the knee by exhaustive search."""
    best, best_sse = None, np.inf
    for knee in knee_candidates(df["decode_seqs"].to_numpy(np.float64)):
        x = _design(df, terms, knee)
        coef = nnls(x, y)
        sse = float(((x @ coef - y) ** 2).sum())
        if sse < best_sse - 1e-12:
            best, best_sse = (knee, coef), sse
    knee, coef = best
    fields = {COEF[t]: float(c) for t, c in zip(terms, coef[1:])}
    if knee is not None:
        fields.update(decode_knee=knee, decode_seq_ms=float(coef[-1]))
    return StepTerms(base_ms=float(coef[0]), **fields)


def fit_host(r: np.ndarray, host_ms: np.ndarray) -> HostTerms:
    coef = nnls(np.column_stack([np.ones(len(r)), r]), host_ms)
    return HostTerms(base_ms=float(coef[0]), request_ms=float(coef[1]))


def step_errors(pred: np.ndarray, meas: np.ndarray) -> StepErrors:
    if not len(meas):
        return StepErrors(rows=0, median_ape=0.0, p90_ape=0.0, max_ape=0.0)
    ape = np.abs(pred / meas - 1.0) * 100.0
    return StepErrors(rows=len(ape), median_ape=round(float(np.median(ape)), 3),
                      p90_ape=round(float(np.percentile(ape, 90)), 3),
                      max_ape=round(float(ape.max()), 3),
                      time_bias_pct=round(float(pred.sum() / meas.sum() - 1) * 100, 3))


def _ranges(df: pd.DataFrame) -> StepRanges:
    def top(c):
        v = df[c].dropna()
        return int(v.max()) if len(v) else None

    return StepRanges(requests=top("requests") or 0, decode_seqs=top("decode_seqs") or 0,
                      prefill_tokens=top("prefill_tokens") or 0,
                      context_tokens=top("max_context"), prompt_tokens=top("max_prompt"))


def heldout_mask(df: pd.DataFrame, seed: int, fraction: float) -> np.ndarray:
    keys = (f"{seed}:{log}:{step}" for log, step in zip(df["key"], df["step"]))
    return np.array([zlib.crc32(k.encode()) / 2.0**32 < fraction for k in keys], dtype=bool)


def _target(df: pd.DataFrame) -> tuple[str, str]:
    """(target, y column): intervals when most steps have one, else execution times."""
    if df["interval_ms"].notna().mean() >= 0.5:
        return "interval", "interval_ms"
    if df["exec_ms"].notna().all():
        return "execution", "exec_ms"
    raise ValueError("the logs time neither step intervals nor model execution")


def fit(df: pd.DataFrame, *, seed: int = 0, heldout: float = 0.2,
        delays: tuple[float, float] | None = None) -> tuple[StepsFit, list[str]]:
    """Fit the step model to ``df`` (rows of calibrate.steplog); (fit, notes)."""
    target, ycol = _target(df)
    df = with_new_shapes(df)
    use = df[df[ycol].notna()]
    # a term the logs give for most steps is fitted on those steps (a replay leaves the
    # steps it could not pair without contexts); one they lack is left out
    terms = tuple(t for t in EXEC_TERMS if use[t].notna().mean() >= MIN_COVERAGE
                  and (not t.startswith("new_shape") or _shapes_repeat(use)))
    use = use[use[list(terms)].notna().all(axis=1)]
    held = heldout_mask(use, seed, heldout)
    train, test = use[~held], use[held]
    both = target == "interval" and train["exec_ms"].notna().all()
    notes = [f"no {t} in the logs: its cost is folded into the other terms"
             for t in ("pairs", "context_tokens") if t not in terms]
    if both:
        execution = fit_terms(train, train["exec_ms"].to_numpy(np.float64), terms)
        host_ms = (train["interval_ms"] - train["exec_ms"]).to_numpy(np.float64)
        host = fit_host(train["requests"].to_numpy(np.float64), host_ms)
    else:
        execution, host = fit_terms(train, train[ycol].to_numpy(np.float64), terms), None
        if target == "execution":
            notes.append("the logs time model execution only: the step-to-step interval is "
                         "longer (scheduling, IPC, output handling; ~1 ms on vLLM CPU)")
    result = StepsFit(target=target, execution=execution, host=host,
                      ranges=_ranges(df), weighting="time (least squares on ms)",
                      logs=sorted(set(df["log"])),
                      ingress_ms=None if delays is None else round(delays[0] * 1e3, 4),
                      egress_ms=None if delays is None else round(delays[1] * 1e3, 4),
                      train=StepErrors(rows=0, median_ape=0, p90_ape=0, max_ape=0))
    return result.model_copy(update={
        "train": step_errors(predict_ms(result, train), train[ycol].to_numpy(np.float64)),
        "heldout": step_errors(predict_ms(result, test), test[ycol].to_numpy(np.float64))}), notes


def _shapes_repeat(df: pd.DataFrame) -> bool:
    """Whether N can be told from the other terms: at least KNEE_MIN_STEPS prefill steps
    that are the first of their count and as many that repeat one (a short log of distinct
    counts makes N a second intercept)."""
    pre = df["prefill_tokens"].fillna(0.0).to_numpy() > 0
    new = df["new_shape"].to_numpy() > 0
    return (pre & new).sum() >= KNEE_MIN_STEPS and (pre & ~new).sum() >= KNEE_MIN_STEPS


def with_new_shapes(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with N (``new_shape``) and N * P (``new_shape_tokens``) per row, each log in
    step order."""
    if "new_shape" in df:
        return df
    total = (df["prefill_tokens"] + df["decode_seqs"]).fillna(-1).to_numpy(np.int64)
    new = np.zeros(len(df))
    for _, idx in df.groupby("key", sort=False).indices.items():
        order = idx[np.argsort(df["step"].to_numpy()[idx], kind="stable")]
        new[order] = new_shapes(total[order])
    return df.assign(new_shape=new, new_shape_tokens=new * df["prefill_tokens"].fillna(0.0))


def predict_ms(f: StepsFit, df: pd.DataFrame) -> np.ndarray:
    """The fit on log rows (missing features count as 0, as the fit left them out)."""
    df = with_new_shapes(df)
    feats = {c: df[c].fillna(0.0).to_numpy(np.float64) for c in (*FEATURES, "new_shape")}
    return step_ms(f, feats) if f.host is not None else terms_ms(f.execution, feats)


def model_file(f: StepsFit, notes: list[str], *, rows: int, seed: int, heldout: float,
               gpu: str = "", model: str = "", tp: int = 1, dtype: str = "bfloat16",
               hardware: Hardware | None = None) -> ModelFile:
    prov = Provenance(source="engine step logs", device=gpu or "unknown",
                      created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                      tool="servesim calibrate fit-steps", profile=", ".join(f.logs),
                      rows=rows, seed=seed, heldout_fraction=heldout, notes=notes)
    host = f.host.base_ms if f.host else 0.0
    return ModelFile(kind="steps", gpu=gpu or "unknown", framework="vllm", model=model,
                     dtype=dtype, tensor_parallel_size=tp, provenance=prov, hardware=hardware,
                     steps=f,
                     step_overhead_ms=round(f.execution.base_ms + host, 6),
                     step_overhead_source="fitted intercepts (execution + host) of step logs")
