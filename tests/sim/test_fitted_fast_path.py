"""The fitted model's one-step and pure-decode fast paths price exactly as the general path."""

import numpy as np
import pytest

from sim.catalog import get_gpu, get_model
from sim.cost.fitted import FittedCost, FittedParams
from sim.engine.plan import StepPlan


def _cost(tp=1):
    return FittedCost(get_model("llama-3-8b"), get_gpu("h100-sxm"), tp, FittedParams())


@pytest.mark.parametrize("tp", [1, 2])
def test_one_decode_step_prices_bit_for_bit_as_the_vectorised_decode(tp):
    c = _cost(tp)
    rng = np.random.default_rng(3)
    for _ in range(2000):
        n = int(rng.integers(1, 300))
        ctx = int(rng.integers(n, 8000 * n))
        assert c._decode_one(n, ctx) == c._decode(n, np.array([ctx]))[0]


def test_per_request_and_per_token_overheads_reach_every_path():
    c = _cost()
    decode = StepPlan.build([0, 1, 2], [1, 1, 1], [10, 20, 30])
    run = StepPlan.build([0, 1, 2], [1, 1, 1], [10, 20, 30], num_steps=4)
    mixed = StepPlan.build([0, 1], [1, 50], [10, 0])
    before = [c.step_times(p) for p in (decode, run, mixed)]
    c.over_req, c.over_tok = 1e-3, 1e-5  # seconds per request / per token
    after = [c.step_times(p) for p in (decode, run, mixed)]
    np.testing.assert_allclose(after[0] - before[0], [3e-3 + 3e-5], rtol=1e-9)
    np.testing.assert_allclose(after[1] - before[1], [3e-3 + 3e-5] * 4, rtol=1e-9)
    np.testing.assert_allclose(after[2] - before[2], [2e-3 + 51e-5], rtol=1e-9)
