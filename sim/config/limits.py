"""Upper (and some lower) bounds on configuration numbers, with the reason for each.

A bound keeps a value inside what the simulator can represent and what a real deployment
could mean: a 30-digit integer, 1e300 GiB of swap or a GPU with 2^62 bytes would otherwise
overflow, allocate terabytes or run for days. ``why(...)`` attaches the reason to a field
(``json_schema_extra``); ``sim.config.errors`` prints it with the rule.
"""

from __future__ import annotations

MAX_TOKENS = 1 << 24  # 16,777,216 tokens: above any model's context (Llama 4 Scout: 10M)
MAX_SEQS = 1 << 20  # concurrent requests of one replica
MAX_KV_BLOCKS = 1 << 23  # 8,388,608 blocks: the simulator's block pool holds ~40 B each
MAX_TIME_S = 1e9  # seconds (31.7 years): the clock keeps sub-microsecond resolution below
MAX_GPUS = 1024  # tensor_parallel_size
MAX_SEED = (1 << 63) - 1

TOKENS_WHY = "longer than any model's context window"
TIME_WHY = "31.7 years; the simulated clock counts integer nanoseconds"


def why(reason: str, unit: str | None = None) -> dict:
    """``json_schema_extra`` for a bounded field: the reason (and unit) shown on a violation."""
    return {"why": reason, **({"unit": unit} if unit else {})}
