"""Synthetic generators: statistical properties on large n, determinism, replay, prefixes, mix."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from traces import Trace, TraceError, make_trace
from traces import synthetic as syn
from traces.hashes import cache_hit_ratios
from traces.rng import Streams

N = 200_000


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def cv(times: np.ndarray) -> float:
    gaps = np.diff(times)
    return float(gaps.std() / gaps.mean())


def rate(times: np.ndarray) -> float:
    return (len(times) - 1) / (times[-1] - times[0])


def test_poisson_rate_and_cv():
    t = syn.poisson(5.0, n=N, rng=rng())
    assert len(t) == N and t[0] == 0.0 and np.all(np.diff(t) >= 0)
    assert rate(t) == pytest.approx(5.0, rel=0.03)
    assert cv(t) == pytest.approx(1.0, rel=0.03)


def test_poisson_duration():
    t = syn.poisson(10.0, duration_s=2000.0, rng=rng())
    assert t[0] == 0.0 and t[-1] < 2000.0
    assert len(t) == pytest.approx(20_000, rel=0.03)


@pytest.mark.parametrize("target", [0.5, 2.0, 4.0])
def test_gamma_cv_and_rate(target):
    t = syn.gamma(5.0, target, n=N, rng=rng(1))
    assert cv(t) == pytest.approx(target, rel=0.05)
    assert rate(t) == pytest.approx(5.0, rel=0.03)


def test_gamma_cv_one_is_poisson():
    a = syn.gamma(3.0, 1.0, n=1000, rng=rng(7))
    b = syn.poisson(3.0, n=1000, rng=rng(7))
    assert np.array_equal(a, b)


def test_constant():
    assert syn.constant(4.0, n=5).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert syn.constant(2.0, duration_s=2.0).tolist() == [0.0, 0.5, 1.0, 1.5]


@pytest.mark.parametrize(
    "call",
    [
        lambda: syn.poisson(0.0, n=3, rng=rng()),
        lambda: syn.poisson(1.0, rng=rng()),
        lambda: syn.poisson(1.0, n=3, duration_s=4.0, rng=rng()),
        lambda: syn.gamma(1.0, -1.0, n=3, rng=rng()),
        lambda: syn.constant(1.0, n=0),
        lambda: syn.lognormal(100, 50, 10, rng()),
        lambda: syn.fixed(0, 3),
    ],
)
def test_bad_generator_arguments(call):
    with pytest.raises(TraceError):
        call()


def test_same_seed_same_times_different_seed_different():
    assert np.array_equal(syn.gamma(2, 3, n=100, rng=rng(1)), syn.gamma(2, 3, n=100, rng=rng(1)))
    assert not np.array_equal(syn.poisson(2, n=100, rng=rng(1)), syn.poisson(2, n=100, rng=rng(2)))


def test_lognormal_matches_p50_p90():
    x = syn.lognormal(1000, 3000, N, rng())
    assert x.dtype == np.int64 and x.min() >= 1
    assert np.percentile(x, 50) == pytest.approx(1000, rel=0.03)
    assert np.percentile(x, 90) == pytest.approx(3000, rel=0.03)
    capped = syn.lognormal(1000, 3000, 10_000, rng(), min_tokens=500, max_tokens=2000)
    assert capped.min() == 500 and capped.max() == 2000


def test_fixed_and_resample():
    assert syn.fixed(7, 3).tolist() == [7, 7, 7]
    base = make_trace(
        {"arrival_s": [0, 1, 2], "prompt_tokens": [10, 20, 30], "output_tokens": [1, 2, 3]},
        source="x",
    )
    got = syn.resample(base, 1000, rng())
    pairs = set(zip(got.prompt.tolist(), got.output.tolist(), strict=True))
    assert pairs == {(10, 1), (20, 2), (30, 3)}  # joint pairs, all drawn


@pytest.mark.parametrize(
    ("fn", "prompt", "output"),
    [
        (syn.sharegpt_like, (1730, 5696, 7434), (415, 834, 998)),
        (syn.azure_conv_like, (1020, 2734, 4142), (129, 424, 601)),
    ],
)
def test_embedded_mixes_match_readme(fn, prompt, output):
    got = fn(N, rng(3))
    for values, want in ((got.prompt, prompt), (got.output, output)):
        assert values.min() >= 1
        assert np.percentile(values, [50, 90, 99]) == pytest.approx(want, rel=0.03)


def trace_of(arrivals, **columns) -> Trace:
    n = len(arrivals)
    return make_trace(
        {"arrival_s": arrivals, "prompt_tokens": [100] * n, "output_tokens": [5] * n, **columns},
        source="base",
    )


def test_replay_rate_scale_halves_every_gap_exactly():
    t = trace_of(np.cumsum(rng().exponential(0.37, 1000)))
    fast = syn.replay(t, rate_scale=2.0)
    assert np.array_equal(np.diff(fast.arrival_s), np.diff(t.arrival_s) / 2)
    assert syn.replay(t) is t


def test_replay_window_rezeroes_to_start():
    t = trace_of([0.0, 1.0, 5.0, 9.99, 10.0, 12.0])
    w = syn.replay(t, window=(1.0, 10.0))
    assert w.arrival_s.tolist() == [0.0, 4.0, pytest.approx(8.99)]
    assert w.df["request_id"].tolist() == ["1", "2", "3"]
    both = syn.replay(t, rate_scale=2.0, window=(1.0, 10.0))
    assert both.arrival_s.tolist() == [0.0, 2.0, pytest.approx(4.495)]


def test_shared_prefix_structure():
    base = make_trace(
        {"arrival_s": [0, 1, 2, 3], "prompt_tokens": [100, 20, 41, 200], "output_tokens": [1] * 4},
        source="x",
    )
    t = syn.shared_prefix(base, 40, hash_block_size=16, num_prefixes=2, rng=rng(5))
    assert t.hash_block_size == 16
    assert t.prompt_tokens.tolist() == [100, 41, 41, 200]  # short prompts raised to prefix + 1
    chains = [c.tolist() for c in t.prefix_hashes]
    full = 40 // 16
    own = []
    for chain, prompt in zip(chains, t.prompt_tokens, strict=True):
        assert len(chain) == math.ceil(prompt / 16)
        assert chain[:full] in ([0, 1], [2, 3])  # prefix k: ids k*F .. k*F + F - 1
        own += chain[full:]
    assert len(own) == len(set(own)) and min(own) >= 2 * full  # the rest are unique
    one = syn.shared_prefix(base, 40, hash_block_size=16, rng=rng(0))
    assert all(c[:full].tolist() == [0, 1] for c in one.prefix_hashes)
    stats = cache_hit_ratios(one.df["prefix_hashes"].tolist())
    assert stats["hit_ratio"] == stats["prefix_hit_ratio"] == 3 * full / stats["blocks"]


def test_mix_merges_stably_and_offsets_hashes():
    a = trace_of([0.0, 2.0], lane=["interactive"] * 2)
    b = syn.shared_prefix(trace_of([0.0, 1.0]), 32, hash_block_size=16, rng=rng())
    c = syn.shared_prefix(trace_of([2.0]), 32, hash_block_size=16, rng=rng())
    m = syn.mix(a, b, c)
    assert m.df["request_id"].tolist() == ["0:0", "1:0", "1:1", "0:1", "2:0"]
    assert m.arrival_s.tolist() == [0.0, 0.0, 1.0, 2.0, 2.0]
    assert m.hash_block_size == 16 and m.df["prefix_hashes"][0] is None
    b_ids = set(np.concatenate([h for h in m.prefix_hashes[1:3]]).tolist())
    c_ids = set(m.prefix_hashes[4].tolist())
    assert not b_ids & c_ids  # different inputs never share blocks
    bad = syn.shared_prefix(trace_of([0.0]), 32, hash_block_size=8, rng=rng())
    with pytest.raises(TraceError, match="different hash_block_size"):
        syn.mix(b, bad)


def test_synthesize_is_deterministic_per_seed():
    def build(seed):
        s = Streams(seed)
        times = syn.poisson(5.0, n=500, rng=s.rng("arrivals"))
        return syn.synthesize(times, syn.azure_conv_like(500, s.rng("lengths")), source="s")

    pd.testing.assert_frame_equal(build(1).df, build(1).df)
    assert not build(1).df.equals(build(2).df)


def test_streams_are_independent_and_validated():
    s = Streams(3)
    a = s.rng("arrivals").random(4)
    assert not np.array_equal(a, s.rng("lengths").random(4))
    assert not np.array_equal(a, s.child(0).rng("arrivals").random(4))
    assert np.array_equal(a, Streams(3).rng("arrivals").random(4))
    with pytest.raises(TraceError, match="seed is -1"):
        Streams(-1)
