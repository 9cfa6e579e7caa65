"""The per-step cost of a live step outside the profiled operations, measured.

The fitted model times GEMMs and attention operation by operation; everything else a step
does (build its inputs, embedding lookup, per layer the norms, RoPE, KV write, activation
and residual adds, the final norm, the sampler, the host round trip) is the file's
per-step overhead, which a profile only estimates with an empty step. For live mode,
``servesim fidelity`` measures it on the executor itself, with synthetic steps that are
not the trace's: decode batches of every size up to 8 and a geometric ladder beyond (up to
``max_num_seqs``), and prefill chunks, run through the live ``StepRunner`` and priced by
the fitted model with no overhead. The residual (measured - priced) is what the model
misses. It is not linear in the step's requests: on the CPU the untimed work of a step
(norms, RoPE, KV write, sampler, ...) measured 1.67 ms at one request, 2.41 at two and
2.50 at four, and the profile's per-row timings carry their own error at each batch
size; a line through all batch sizes over-predicted one-request decode steps by 7 % and
under-predicted two to eight requests by 4-6 % (NOTES.md). So:

    residual(step) = by_requests(R) + per_token * T

``by_requests`` is the decode residual at each measured batch size (minus its per-token
part), linear between them; ``per_token`` (>= 0) is the least-squares slope of the
one-request chunks' residual over their extra tokens. Every shape is measured in
``ROUNDS`` interleaved rounds (the median kept), so a drift of the machine during the
measurement spreads over all shapes instead of biasing the ones measured during it. In a
round each shape runs a block of ``BLOCK`` consecutive steps and the first ``SETTLE`` are
not kept: a live run's decode steps come in long stretches of one batch size, and a step
timed among steps of its own shape is what they cost (one step per shape per round, right
after a different shape, made one-request steps 3-8 % dearer relative to two-request
ones: a two/one time ratio of 1.54-1.67 against 1.70-1.80 in blocks and in live runs).
``fit_residual`` (fixed + per request + per token, the linear form) is kept for files
and reports that predate the table.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

DENSE_BATCHES = 8  # every decode batch size up to this is measured
PREFILL_CHUNKS = (16, 64, 256)
DECODE_CONTEXT = 128  # tokens cached before each synthetic decode (tokens)
ROUNDS = 5  # interleaved rounds over all shapes
BLOCK, SETTLE = 6, 2  # steps of one shape per round; of which not kept


def decode_batches(max_num_seqs: int) -> list[int]:
    """1..8, then 12, 16, 24, 32, 48, ... (2^k and 1.5 x 2^k) below max_num_seqs, and
    max_num_seqs itself."""
    out = list(range(1, min(DENSE_BATCHES, max_num_seqs) + 1))
    ladder = sorted({2 ** k for k in range(4, 24)} | {3 * 2 ** k for k in range(2, 23)})
    return out + [b for b in ladder if b < max_num_seqs] + \
        ([max_num_seqs] if max_num_seqs > DENSE_BATCHES else [])


def _shapes(r) -> list[tuple[int, int]]:
    """(requests, tokens per request) of the synthetic steps the scenario allows."""
    lim = r.limits
    decode = [(b, 1) for b in decode_batches(lim.max_num_seqs)]
    prefill = [(1, q) for q in PREFILL_CHUNKS
               if q <= lim.max_num_batched_tokens and q < lim.max_model_len]
    return decode + prefill


def measure_overhead(r, params, model_file: Path) -> dict:
    """{"by_requests": {"requests", "ms"}, "per_token_ms", "linear": the linear fit,
    "shapes": [{requests, tokens, measured_ms, priced_ms}, ...]}."""
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
    args = [(np.arange(b, dtype=np.int64), np.full(b, q, dtype=np.int64),
             np.full(b, DECODE_CONTEXT if q == 1 else 0, dtype=np.int64)) for b, q in shapes]
    times = np.zeros((ROUNDS, BLOCK - SETTLE, len(shapes)))
    runner = StepRunner(r, params, specs, num_blocks=n * per)
    try:
        for i in range(ROUNDS):
            for j, a in enumerate(args):
                for k in range(BLOCK):  # the first SETTLE steps of a block are not kept
                    t = runner.step(*a, tables)[0]
                    if k >= SETTLE:
                        times[i, k - SETTLE, j] = t
    finally:
        runner.close()
    times = times.reshape(-1, len(shapes))
    rows = [{"requests": b, "tokens": q, "measured_ms": 1e3 * float(np.median(times[:, j])),
             "priced_ms": 1e3 * float(cost.step_times(StepPlan.build(*args[j]))[0])}
            for j, (b, q) in enumerate(shapes)]
    return {**fit_by_requests(rows), "linear": fit_residual(rows), "shapes": rows}


def fit_by_requests(rows: list[dict]) -> dict:
    """``by_requests`` and ``per_token_ms`` of the rows' residuals (module docstring): the
    per-token slope from the one-request rows (>= 0), then each decode batch's residual
    less its per-token part (>= 0)."""
    res = {(row["requests"], row["tokens"]): row["measured_ms"] - row["priced_ms"]
           for row in rows}
    dec = sorted(b for b, q in res if q == 1)
    one = res.get((1, 1), 0.0)
    extra = np.array([q - 1 for b, q in res if b == 1 and q > 1], dtype=np.float64)
    d = np.array([res[(1, q + 1)] - one for q in extra.astype(int)])
    per_token = max(0.0, float(extra @ d / (extra @ extra))) if len(extra) else 0.0
    return {"by_requests": {"requests": dec,
                            "ms": [max(0.0, res[(b, 1)] - per_token * b) for b in dec]},
            "per_token_ms": per_token}


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
