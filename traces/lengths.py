"""Token-length distributions: arrays of int64 token counts >= 1.

All random ones take a `numpy.random.Generator`; the same generator state gives the same
lengths. Distributions that produce prompt and output together return `Lengths`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from traces import length_tables as tables
from traces.errors import TraceError
from traces.schema import Trace

Z90 = 1.2815515655446004  # standard normal 90th percentile: ln p90 = mu + Z90 * sigma


class Lengths(NamedTuple):
    prompt: np.ndarray  # int64 prompt tokens per request, >= 1
    output: np.ndarray  # int64 output tokens per request, >= 1


def _count(n: int) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise TraceError(f"n is {n!r}; must be an integer >= 1 (requests)")
    return int(n)


def resample(trace: Trace, n: int, rng: np.random.Generator) -> Lengths:
    """`n` joint (prompt, output) pairs drawn from the trace's rows with replacement."""
    rows = rng.integers(0, len(trace), _count(n))
    return Lengths(trace.prompt_tokens[rows].copy(), trace.output_tokens[rows].copy())


def lognormal(
    p50: float,
    p90: float,
    n: int,
    rng: np.random.Generator,
    min_tokens: int = 1,
    max_tokens: int | None = None,
) -> np.ndarray:
    """Lognormal lengths with median `p50` and 90th percentile `p90` tokens.

    mu = ln p50, sigma = (ln p90 - ln p50) / Z90; samples are rounded to integers, then clipped
    to [min_tokens, max_tokens] (clipping moves the percentiles only if they lie outside).
    """
    if not (math.isfinite(p50) and math.isfinite(p90) and 0 < p50 < p90):
        raise TraceError(f"lognormal p50={p50!r}, p90={p90!r}; need 0 < p50 < p90 (tokens)")
    low = max(1, int(min_tokens))
    if max_tokens is not None and max_tokens < low:
        raise TraceError(f"lognormal max_tokens={max_tokens!r}; must be >= {low}")
    mu, sigma = math.log(p50), (math.log(p90) - math.log(p50)) / Z90
    x = np.rint(rng.lognormal(mu, sigma, _count(n)))
    return np.clip(x, low, max_tokens).astype(np.int64)


def fixed(value: int, n: int) -> np.ndarray:
    """`n` copies of `value` tokens."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise TraceError(f"fixed length is {value!r}; must be an integer >= 1 (tokens)")
    return np.full(_count(n), int(value), dtype=np.int64)


def from_quantiles(
    values: Sequence[float], n: int, rng: np.random.Generator, percentiles=tables.PERCENTILES
) -> np.ndarray:
    """Inverse-CDF sampling from a quantile table (linear between knots), rounded, >= 1."""
    u = rng.random(_count(n)) * 100.0
    return np.maximum(np.rint(np.interp(u, percentiles, values)), 1).astype(np.int64)


def sharegpt_like(n: int, rng: np.random.Generator) -> Lengths:
    """ShareGPT conversation lengths (sarathi-serve's Llama-2-tokenized 8k-filtered file).

    Prompt p50/p90/p99/max 1730/5696/7434/8141, output 415/834/998/1024; see length_tables.
    """
    prompt = from_quantiles(tables.SHAREGPT_PROMPT, n, rng)
    return Lengths(prompt, from_quantiles(tables.SHAREGPT_OUTPUT, n, rng))


def azure_conv_like(n: int, rng: np.random.Generator) -> Lengths:
    """Azure LLM inference 2023 conversation lengths (the Splitwise trace).

    Prompt p50/p90/p99 1020/2734/4142, output 129/424/601; see length_tables.
    """
    prompt = from_quantiles(tables.AZURE_CONV_PROMPT, n, rng)
    return Lengths(prompt, from_quantiles(tables.AZURE_CONV_OUTPUT, n, rng))
