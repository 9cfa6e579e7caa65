"""Random engine knobs, lengths and arrival bursts: the fast core equals the general engine.

Each example resolves a scenario (Llama-3-8B on one H100) with random vLLM knobs and a
small or tight KV pool, then replays random requests (bursts of simultaneous arrivals,
prompts and outputs around max_model_len so some are rejected or shortened) through both
cores and compares everything (tests/fast/equivalence.py).
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from sim.config.load import load_scenario
from sim.config.resolve import ConfigError
from sim.engine.requests import RequestSpecs
from sim.pipeline import resolve_loaded
from tests.fast.equivalence import same_runs

COSTS = [
    "{name: linear, base_ms: 2, prefill_token_ms: 0.05, decode_seq_ms: 0.1, "
    "context_token_ms: 0.001}",
    "{name: linear, base_ms: 0.5, prefill_token_ms: 0.001, decode_seq_ms: 0, "
    "context_token_ms: 0}",
    "{name: linear, base_ms: 10, prefill_token_ms: 0, decode_seq_ms: 0, context_token_ms: 0}",
    "{name: roofline}",
    "{name: fitted}",
    # a steps file: whole plans priced as the general engine builds them (its first step of
    # a token count dearer; sim/fast/engine.py ``whole``)
    "{name: fitted, profile: benchmarks/engine/cpu-tiny-llama.yaml}",
]


@st.composite
def knobs(draw) -> tuple[str, ...]:
    """``--set`` overrides of the default scenario: vLLM knobs and the KV pool."""
    bs = draw(st.sampled_from([16, 32]))
    max_len = draw(st.sampled_from([128, 256, 512]))
    seqs = draw(st.integers(1, 12))
    chunked = draw(st.booleans())
    low = max(seqs, 16) if chunked else max(seqs, max_len)
    tokens = draw(st.integers(low, low + 700))
    per_seq = -(-max_len // bs)
    pool = draw(st.one_of(
        st.integers(per_seq + 1, per_seq + 40).map(lambda b: f"num_gpu_blocks_override={b}"),
        st.sampled_from([0.2, 0.205, 0.9]).map(lambda u: f"gpu_memory_utilization={u}")))
    threshold = draw(st.sampled_from([0, 16, 64, max_len]))
    sets = [f"engine.block_size={bs}", f"engine.max_model_len={max_len}",
            f"engine.max_num_seqs={seqs}", f"engine.max_num_batched_tokens={tokens}",
            f"engine.enable_chunked_prefill={str(chunked).lower()}", f"engine.{pool}",
            f"engine.long_prefill_token_threshold={threshold}",
            f"engine.long_prefill_token_threshold_adaptive={draw(st.booleans())}".lower(),
            f"engine.scheduler_reserve_full_isl={draw(st.booleans())}".lower(),
            f"kv.watermark={draw(st.sampled_from([0.0, 0.0, 0.05, 0.2]))}",
            f"cost={draw(st.sampled_from(COSTS))}"]
    if draw(st.booleans()):
        sets += [f"engine.ingress_ms={draw(st.sampled_from([0.5, 3.0]))}",
                 f"engine.egress_ms={draw(st.sampled_from([0.0, 1.25, 7.0]))}"]
    if draw(st.integers(0, 3)) == 0:
        sets.append(f"horizon_s={draw(st.sampled_from([0.05, 0.3, 1.0]))}")
    return tuple(sets)


@st.composite
def requests(draw) -> RequestSpecs:
    """Up to 60 requests in bursts (several arrivals at one instant; with the 10 ms linear
    cost, some exactly at step ends), lengths up to a bit past 512 tokens."""
    n = draw(st.integers(1, 60))
    instant = st.one_of(st.floats(0, 1.5, allow_nan=False),
                        st.integers(0, 150).map(lambda i: i * 0.01))
    bursts = draw(st.lists(instant, min_size=1, max_size=6))
    at = draw(st.lists(st.sampled_from(bursts), min_size=n, max_size=n))
    jitter = draw(st.lists(st.sampled_from([0.0, 0.0, 1e-3, 0.02]), min_size=n, max_size=n))
    arrival = np.sort(np.asarray(at) + np.asarray(jitter))
    prompt = draw(st.lists(st.integers(1, 560), min_size=n, max_size=n))
    output = draw(st.lists(st.integers(1, 300), min_size=n, max_size=n))
    return RequestSpecs.from_arrays(arrival, prompt, output)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(knobs(), requests())
def test_fast_core_equals_general_engine(sets, specs):
    try:
        r = resolve_loaded(load_scenario(None, sets))
    except ConfigError:  # a pool too small for one max_model_len request, say
        reject()
    a, b = same_runs(r, specs)  # asserts identical results, hooked and not
    assert (a.core, b.core) == ("general", "fast")
