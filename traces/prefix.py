"""Synthetic prefix sharing: attach hash chains that model shared system prompts."""

from __future__ import annotations

import numpy as np

from traces.errors import TraceError
from traces.hashes import blocks_for
from traces.schema import Trace, make_trace

MAX_HASH_IDS = 10_000_000  # prefix hash ids of one workload (~50 bytes each in the simulator)


def _int_at_least(name: str, value: int, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise TraceError(f"shared_prefix {name} is {value!r}; must be an integer >= {low}")
    return int(value)


def shared_prefix(
    trace: Trace,
    prefix_tokens: int,
    hash_block_size: int = 16,
    num_prefixes: int = 1,
    *,
    rng: np.random.Generator,
) -> Trace:
    """Make every prompt start with one of `num_prefixes` shared prefixes of `prefix_tokens`.

    - Each request picks its prefix uniformly at random (`rng`; unused when num_prefixes == 1).
    - The prefix is PART of the prompt: prompt_tokens becomes max(prompt_tokens,
      prefix_tokens + 1), so every request has at least one token of its own.
    - Chains have ceil(prompt_tokens / hash_block_size) ids. The F = prefix_tokens //
      hash_block_size FULL prefix blocks of prefix k get the shared ids k*F .. k*F+F-1; every
      other block (including a partial block that mixes prefix and own tokens) gets an id used
      by no other block, numbered from num_prefixes*F upward in arrival order.
    - Existing prefix_hashes are replaced; the result's hash_block_size is `hash_block_size`.
    """
    prefix = _int_at_least("tokens", prefix_tokens, 0)
    block = _int_at_least("hash_block_size", hash_block_size, 1)
    count = _int_at_least("num_prefixes", num_prefixes, 1)
    n, full = len(trace), prefix // block
    prompt = np.maximum(trace.prompt_tokens, prefix + 1)
    which = rng.integers(0, count, n) if count > 1 else np.zeros(n, dtype=np.int64)
    total = blocks_for(prompt, block)  # >= full + 1 because prompt > prefix
    if int(total.sum()) > MAX_HASH_IDS:
        raise TraceError(
            f"shared_prefix: {n:,} requests of >= {prefix + 1:,} tokens need "
            f"{int(total.sum()):,} prefix hash ids, more than {MAX_HASH_IDS:,} (the simulator "
            "holds ~50 bytes each); shorten tokens, raise hash_block_size or use fewer requests")
    own = total - full
    own_start = count * full + np.concatenate(([0], np.cumsum(own)[:-1]))
    shared = [list(range(k * full, (k + 1) * full)) for k in range(count)]
    chains = [shared[k] + list(range(a, a + m))  # list and range work at C speed
              for k, a, m in zip(which.tolist(), own_start.tolist(), own.tolist(), strict=True)]
    df = trace.df.assign(prompt_tokens=prompt, prefix_hashes=chains)
    source = f"{trace.source} + shared_prefix({prefix} tokens x {count}, block {block})"
    return make_trace(df, source=source, hash_block_size=block)
