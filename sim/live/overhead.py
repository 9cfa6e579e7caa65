"""The per-step cost of a live step outside the profiled operations, measured.

The fitted model times GEMMs and attention operation by operation; everything else a step
does (build its inputs, embedding lookup, per layer the norms, RoPE, KV write, activation
and residual adds, the final norm, the sampler, the host round trip) is the file's
per-step overhead, which a profile only estimates with an empty step. For live mode,
``servesim fidelity`` measures it on the executor itself, with synthetic steps that are
not the trace's: decode batches and prefill chunks run through the live ``StepRunner``,
each priced by the fitted model with no overhead, each measured as the median of a few
repeats. The residual (measured - priced) grows with a step's requests and tokens (input
building, per-token norms and RoPE, one sampled row per request: work the per-operation
tables do not time), so it is fitted by least squares as

    residual = fixed + per_request * requests + per_token * tokens

with every coefficient >= 0. All three go into the model file (``step_overhead_ms``,
``step_overhead_per_request_ms``, ``step_overhead_per_token_ms``), which the fitted model
adds to every step: a decode-heavy run is mostly small steps, where these terms are 5-15 %
of the step (a fixed term alone under-predicted live decode steps by 4-8 %).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

DECODE_BATCHES = (1, 2, 4, 8, 16, 32)
PREFILL_CHUNKS = (16, 64, 256)
DECODE_CONTEXT = 128  # tokens cached before each synthetic decode (tokens)
REPEATS = 9


def _shapes(r) -> list[tuple[int, int]]:
    """(requests, tokens per request) of the synthetic steps the scenario allows."""
    lim = r.limits
    decode = [(b, 1) for b in DECODE_BATCHES if b <= lim.max_num_seqs]
    prefill = [(1, q) for q in PREFILL_CHUNKS
               if q <= lim.max_num_batched_tokens and q < lim.max_model_len]
    return decode + prefill


def measure_overhead(r, params, model_file: Path) -> dict:
    """{"overhead_ms", "shapes": [{requests, tokens, measured_ms, priced_ms}, ...]}."""
    from sim.cost.fitted import FittedCost, FittedParams
    from sim.engine.plan import StepPlan
    from sim.engine.requests import RequestSpecs
    from sim.live.runner import StepRunner

    shapes = _shapes(r)
    n = max(b for b, _ in shapes)
    longest = max(DECODE_CONTEXT + 1, max(q for _, q in shapes))
    per = -(-longest // r.block_size)  # blocks per synthetic request
    specs = RequestSpecs.from_arrays(np.zeros(n), np.full(n, longest + 1), np.ones(n))
    cost = FittedCost(r.model, r.gpu, 1, FittedParams(profile=str(model_file),
                                                      step_overhead_ms=0.0))
    tables = {i: list(range(1 + i * per, 1 + (i + 1) * per)) for i in range(n)}
    runner = StepRunner(r, params, specs, num_blocks=n * per)
    rows = []
    try:
        for b, q in shapes:
            ids = np.arange(b, dtype=np.int64)
            tok = np.full(b, q, dtype=np.int64)
            ctx = np.full(b, DECODE_CONTEXT if q == 1 else 0, dtype=np.int64)
            priced = float(cost.step_times(StepPlan.build(ids, tok, ctx))[0])
            measured = np.median([runner.step(ids, tok, ctx, tables)[0]
                                  for _ in range(REPEATS)])
            rows.append({"requests": b, "tokens": q, "measured_ms": 1e3 * measured,
                         "priced_ms": 1e3 * priced})
    finally:
        runner.close()
    return {**fit_residual(rows), "shapes": rows}


def fit_residual(rows: list[dict]) -> dict:
    """Least-squares ``fixed + per_request * requests + per_token * tokens`` (ms) of the
    rows' residuals, every coefficient >= 0 (a term fitted negative is dropped and the rest
    refitted: the active-set solution for three unknowns)."""
    req = np.array([row["requests"] for row in rows], dtype=np.float64)
    tok = np.array([row["requests"] * row["tokens"] for row in rows], dtype=np.float64)
    res = np.array([row["measured_ms"] - row["priced_ms"] for row in rows])
    cols = np.column_stack((np.ones_like(req), req, tok))
    keep = [0, 1, 2]
    coef = np.zeros(3)
    while keep:
        sol = np.linalg.lstsq(cols[:, keep], res, rcond=None)[0]
        if (sol >= 0).all():
            coef[keep] = sol
            break
        keep.pop(int(np.argmin(sol)))
    return {"overhead_ms": float(coef[0]), "fixed_ms": float(coef[0]),
            "per_request_ms": float(coef[1]), "per_token_ms": float(coef[2])}
