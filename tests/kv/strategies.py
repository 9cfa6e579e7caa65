"""Hypothesis strategies: the foundation's random runs plus every memory policy's knobs."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from sim.sched.admission_reserve import ReserveParams
from tests.sim.test_invariants import runs

# (kv policy, prefix caching, scheduler) combinations; orca runs on reservations only;
# prefill-first is vLLM v0, whose swap preemption these runs exercise
MEMORY = [("paged", False, "vllm"), ("paged", True, "vllm"), ("paged", False, "vllm-priority"),
          ("paged", True, "vllm-priority"), ("contiguous-max", False, "vllm"),
          ("contiguous-exact", False, "vllm"), ("contiguous-max", False, "orca"),
          ("contiguous-exact", False, "orca"), ("paged", False, "prefill-first"),
          ("paged", True, "prefill-first"), ("contiguous-max", False, "prefill-first")]


@st.composite
def hash_chains(draw, prompt):
    """Chains where requests share the leading ids of one of three "system prompts"."""
    hbs = draw(st.sampled_from([4, 16, 32]))
    shared = draw(st.lists(st.integers(0, 4), min_size=3, max_size=3))  # ids per prompt group
    chains, fresh = [], 10**6
    for p in prompt:
        if draw(st.integers(0, 5)) == 0:
            chains.append(None)
            continue
        g, n = draw(st.integers(0, 2)), -(-p // hbs)
        ids = [g * 100 + j if j < shared[g] else fresh + j for j in range(n)]
        fresh += n
        chains.append(np.array(ids, dtype=np.int64))
    return chains, hbs


PAGED = [m for m in MEMORY if m[0] == "paged"]


@st.composite
def memory_runs(draw, pressure=False):
    """A random run with a random memory setup; ``pressure``: paged KV, optimistic
    admission and a pool barely larger than one request, so preemptions (recompute or
    swap) and cache evictions are the rule."""
    arrival, prompt, output, knobs = draw(runs())
    kv, caching, scheduler = draw(st.sampled_from(PAGED if pressure else MEMORY))
    chains, hbs = draw(hash_chains(prompt))
    rule = "optimistic" if pressure else draw(
        st.sampled_from(["optimistic", "reserve", "reserve-max"]))
    params = None
    if rule != "optimistic":
        params = ReserveParams(expect="max_tokens" if rule == "reserve-max" else "quantile",
                               quantile=draw(st.sampled_from([0.5, 0.9, 1.0])))
    n = len(arrival)
    if pressure or draw(st.booleans()):  # tight KV: preemptions, swaps and evictions happen
        least = -(-knobs["max_model_len"] // knobs["block_size"])
        knobs = dict(knobs, usable_blocks=draw(st.integers(least, least + 6)))
    knobs = dict(knobs, kv=kv, prefix_caching=caching, scheduler=scheduler,
                 prefix_hashes=chains, hash_block_size=hbs,
                 swap_blocks=draw(st.sampled_from([None, 0, 3, 40])),
                 swap_full=draw(st.sampled_from(["stop_engine", "abort_request", "recompute"])),
                 admission="optimistic" if rule == "optimistic" else "reserve",
                 admission_params=params,
                 priority=draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)))
    return arrival, prompt, output, knobs
