"""Experts reached by a step's tokens and what the reach costs (sim/cost/moe_routing.py):
hand-computed reach under aiconfigurator's balanced routing and under independent routing,
the collector's power-law draw reaching fewer below n k = E, and the shipped B200 profile's
MiniMax-M2.5 decode step priced between the measured curves."""

from __future__ import annotations

import numpy as np
import pytest

from sim.cost.moe_routing import (
    MOE_REACH,
    balanced_active,
    per_expert_ms,
    power_law_active,
    priced,
    random_active,
    reached,
)
from sim.engine.plan import StepPlan
from sim.runner import build_cost
from tests.fast.equivalence import prepared


def test_balanced_reach_by_hand():
    # stride ceil(256 / 8) = 32: 16 tokens x 8 experts land on 128 distinct experts,
    # 32 tokens on all 256; EP 2: rank 0 holds experts 0..127
    assert balanced_active(16, 256, 8, 1) == 128
    assert balanced_active(32, 256, 8, 1) == 256
    assert balanced_active(32, 256, 8, 2) == 128
    assert balanced_active(1, 256, 8, 1) == 8


def test_independent_reach_by_hand():
    # each expert missed by one token with probability 1 - 8/256 = 31/32
    assert float(random_active(32, 256, 8, 1)) == pytest.approx(256 * (1 - (31 / 32) ** 32))
    assert float(random_active(32, 256, 8, 1)) == pytest.approx(163.3, abs=0.05)
    assert float(random_active(32, 256, 8, 2)) == pytest.approx(163.3 / 2, abs=0.05)
    assert float(random_active(1, 128, 4, 1)) == pytest.approx(4.0)


def test_the_collectors_power_law_reaches_fewer_below_n_k_equal_e():
    """Below n k = E the draw's loads on [0.01, 2] mostly round to zero: 32 tokens of a
    256-expert top-8 layer reach about 98 experts (163 independently); from 48 tokens the
    range is [1, 0.8 n] and the reach jumps."""
    p32 = power_law_active(32, 256, 8, 1, 1.2)
    p48 = power_law_active(48, 256, 8, 1, 1.2)
    assert 90 < p32 < 106 and p32 < 0.7 * float(random_active(32, 256, 8, 1))
    assert p48 > 1.5 * p32
    assert power_law_active(32, 256, 8, 1, 1.2) == p32  # seeded: the same every call
    # the rounding repair keeps n k token slots: one token reaches its k experts at most
    assert power_law_active(1, 256, 8, 1, 1.2) <= 8


def test_time_per_expert_from_the_nodes_of_largest_reach_gap():
    skewed = np.array([0.10, 0.20, 0.30, 0.90])
    balanced = np.array([0.10, 0.30, 0.50, 1.00])
    b = np.array([8.0, 100.0, 200.0, 256.0])
    p = np.array([8.0, 50.0, 100.0, 255.5])
    # gaps 0, 50, 100, 0.5: nodes with gap >= 50 count (half the largest); per expert
    # 0.1 / 50 = 0.002 and 0.2 / 100 = 0.002 ms
    assert per_expert_ms(skewed, balanced, b, p) == pytest.approx(0.002)
    assert per_expert_ms(skewed, balanced, b, b) is None  # never differ in reach


def test_priced_adds_the_reach_fraction_and_vanishes_at_scale():
    tokens = (16, 32, 48, 8192)
    skewed = np.array([0.131, 0.166, 0.278, 1.338])
    balanced = np.array([0.179, 0.313, 0.377, 1.132])
    b, p, r = reached(tokens, 256, 8, 1, 1.2)
    assert b[-1] == p[-1] == 256 and r[-1] == pytest.approx(256)
    c = per_expert_ms(skewed, balanced, b, p)
    for frac in (0.0, 0.5, 1.0):
        got = priced(tokens, skewed, balanced, 256, 8, 1, 1.2, reach=frac)
        want = np.minimum(skewed + frac * c * np.clip(r - p, 0, None),
                          np.fmax(skewed, balanced))
        np.testing.assert_allclose(got, want)
        assert got[-1] == pytest.approx(skewed[-1])  # every expert reached: as measured
    half = priced(tokens, skewed, balanced, 256, 8, 1, 1.2, reach=0.5)
    assert skewed[1] < half[1] < balanced[1]
    assert MOE_REACH == 0.5


def _cost(*sets):
    base = ("model=minimax-m2.5", "gpu=b200", "tensor_parallel_size=2", "cost.name=fitted")
    return build_cost(prepared(None, *base, *sets)[0])


def test_the_minimax_decode_step_is_priced_between_the_measured_curves():
    """MiniMax-M2.5 on B200 (62 MoE layers): a 32-sequence decode step costs more at reach
    0.5 than on the power-law curve (reach 0) and less than at reach 1, by the MoE
    layers' difference alone; an 8,192-token prefill is the same at every reach."""
    decode = StepPlan.build(np.arange(32), [1] * 32, [1000] * 32)
    prefill = StepPlan.build(np.arange(1), [8192], [0])
    at = {frac: _cost(f"cost.moe_reach={frac}") for frac in (0.0, 0.5, 1.0)}
    auto = _cost()
    step = {f: float(c.step_times(decode)[0]) for f, c in at.items()}
    assert step[0.0] < step[0.5] < step[1.0]
    assert float(auto.step_times(decode)[0]) == step[0.5]
    moe = {f: float(c.moe.seconds(32)) for f, c in at.items()}
    assert step[1.0] - step[0.0] == pytest.approx(62 * (moe[1.0] - moe[0.0]), rel=1e-6)
    assert moe[0.5] - moe[0.0] == pytest.approx((moe[1.0] - moe[0.0]) / 2, rel=1e-6)
    pre = {f: float(c.step_times(prefill)[0]) for f, c in at.items()}
    assert pre[0.0] == pre[0.5] == pre[1.0]
    # a measured curve asked for by name is priced as measured, whatever the reach
    named = _cost("cost.moe_distribution=power_law_1.2", "cost.moe_reach=1")
    assert float(named.moe.seconds(32)) == moe[0.0]
