"""How many of a GPU's experts a step's tokens reach, and what the reach costs.

A fused-MoE layer's time at a small token count follows the experts whose weights it reads:
MiniMax-M2's fp8 experts at MoE TP 2 on B200 take about 60 us plus 1.1 us per expert reached
(6.7 TB/s of weights; aiconfigurator's vLLM 0.19 table). aiconfigurator measured each shape
under two routings (aiconfigurator-core 0.12.0, collector/helper.py):

- ``balanced``: token i's j-th expert is ``(i * stride / n + j * stride) % E`` with
  ``stride = ceil(E / k)`` (``(i + j * stride) % E`` once n >= stride): ``min(E, n k)``
  distinct experts, the most any routing reaches;
- power law (``_generate_power_law_distribution``), its default: per-expert loads drawn
  from a power law on [1, 0.8 n] when ``n k > E``, else on [0.01, 2], scaled to ``n k``,
  rounded, the EP rank with the most tokens swapped to rank 0 (the GPU timed). Below
  ``n k = E`` most drawn loads round to zero: 32 tokens of MiniMax-M2 (256 experts, top-8)
  reach about 98 experts, where tokens routed independently reach 163, and the curve jumps
  between 32 and 48 tokens where the sampling range changes (0.17 -> 0.28 ms).

Independent routing (each token's k experts drawn uniformly, as the tokens of a decode
batch of unrelated requests to first order) reaches an expert with probability
``1 - (1 - k / E) ** n``. ``priced`` adds to the power-law curve REACH of the experts
independent routing reaches beyond the power-law draw, each at the time per expert reached
that the two measured curves show (``per_expert_ms``). The work per token is the same;
only the weights read differ. As the token count grows every routing reaches every expert
and the addition goes to zero; the power law's spread of loads at scale is kept.

MOE_REACH = 0.5 was chosen on NVIDIA's measured deployments (benchmarks/silicon; the
leave-one-system-out figure: `python -m benchmarks.silicon --loso moe_reach`): TPOT median
abs error over the 1,328 rows at reach 0 / 0.25 / 0.5 / 0.75 / 1 was 6.35 / 5.77 / 5.75 /
5.75 / 6.44 %, and each system held out picks 0.25-0.75 from the other three. MiniMax-M2.5
(523 rows) alone is best near 1, gpt-oss-120b and Kimi-K2.5 (415) near 0: real routing's
skew (some experts more popular than others) reaches fewer experts than independent
uniform routing, and aiconfigurator's draw below ``n k = E`` far fewer.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

DRAWS = 64  # power-law draws averaged per token count (seeded: the same every run)
MOE_REACH = 0.5  # fraction of the reach gap priced (module docstring)


def random_active(n: np.ndarray, experts: int, topk: int, ep: int) -> np.ndarray:
    """Expected experts of one EP rank reached by N independently routed tokens."""
    local = experts // ep
    return local * (1.0 - (1.0 - topk / experts) ** np.asarray(n, dtype=np.float64))


def balanced_active(n: int, experts: int, topk: int, ep: int) -> int:
    """Distinct experts of EP rank 0 in aiconfigurator's balanced routing of N tokens."""
    stride = -(-experts // topk)
    i = np.arange(n)[:, None]
    j = np.arange(topk)[None, :]
    pos = (i + j * stride) if n >= stride else (i * stride / n + j * stride)
    chosen = np.unique(pos.astype(np.int64) % experts)
    return int((chosen < experts // ep).sum())


def power_law_active(n: int, experts: int, topk: int, ep: int, alpha: float,
                     draws: int = DRAWS) -> float:
    """Mean experts of EP rank 0 (the most loaded rank) reached in aiconfigurator's
    power-law routing of N tokens, over DRAWS seeded draws."""
    rng = np.random.default_rng(n * 7919 + experts)
    lo, hi = (1.0, n * 0.8) if n * topk > experts else (0.01, 2.0)
    out = 0.0
    for _ in range(draws):
        u = rng.random(experts)
        x = ((hi ** (1 - alpha) - lo ** (1 - alpha)) * u + lo ** (1 - alpha)) ** (1 / (1 - alpha))
        load = np.round(x / x.sum() * n * topk).astype(np.int64)
        _fix_sum(load, n * topk)
        ranks = load.reshape(ep, experts // ep)
        out += float((ranks[int(np.argmax(ranks.sum(axis=1)))] > 0).sum())
    return out / draws


def _fix_sum(load: np.ndarray, target: int) -> None:
    """The collector's rounding repair: the shortfall added to the largest loads in turn,
    an excess taken from the smallest (from the largest where the smallest is empty)."""
    delta = target - int(load.sum())
    order = np.argsort(-load, kind="stable")
    for i in range(abs(delta)):
        if delta > 0:
            load[order[i % len(order)]] += 1
        else:
            idx = order[-(i % len(order)) - 1]
            load[idx if load[idx] > 0 else int(np.argmax(load))] -= 1


def priced(tokens: tuple[int, ...], skewed_ms: np.ndarray, balanced_ms: np.ndarray,
           experts: int, topk: int, ep: int, alpha: float,
           reach: float = MOE_REACH) -> np.ndarray:
    """Milliseconds per token node: the power-law curve plus REACH of the experts
    independent routing reaches beyond it, each at ``per_expert_ms`` (module docstring),
    never above the slower measured curve."""
    b, p, r = reached(tokens, experts, topk, ep, alpha)
    c = per_expert_ms(skewed_ms, balanced_ms, b, p)
    if c is None:
        return skewed_ms
    add = reach * c * np.clip(r - p, 0.0, None)
    return np.minimum(skewed_ms + add, np.fmax(skewed_ms, balanced_ms))


def per_expert_ms(skewed_ms: np.ndarray, balanced_ms: np.ndarray, b: np.ndarray,
                  p: np.ndarray) -> float | None:
    """Time per expert reached: (balanced - power law) / (their reach gap), the median
    over the token nodes whose gap is at least half the largest (the weights read
    dominate there); None where the curves never differ in reach by one expert."""
    gap = b - p
    ok = np.isfinite(skewed_ms) & np.isfinite(balanced_ms) & (gap >= 1.0)
    if not ok.any():
        return None
    ok &= gap >= 0.5 * gap[ok].max()
    return float(np.median((balanced_ms[ok] - skewed_ms[ok]) / gap[ok]))


@lru_cache(maxsize=256)
def reached(tokens: tuple[int, ...], experts: int, topk: int, ep: int,
            alpha: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Experts of the timed GPU reached per token node: (balanced, power law, independent).
    Past 64 x experts token slots every draw reaches every expert (not drawn)."""
    b = np.array([balanced_active(n, experts, topk, ep) for n in tokens], dtype=np.float64)
    p = np.array([power_law_active(n, experts, topk, ep, alpha) if n * topk <= 64 * experts
                  else experts // ep for n in tokens])
    return b, p, random_active(np.array(tokens), experts, topk, ep)
