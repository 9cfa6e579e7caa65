"""A Marlin MoE curve for gpt-oss's shape, transferred from Marlin's timing of another shape
(calibrate/aiconfigurator_transfer.py)."""

from __future__ import annotations

import numpy as np
import pytest

from calibrate.aiconfigurator_transfer import transfer
from sim.cost.profile.model_file import load_model_file, shipped_profiles

GPT_OSS = (2880, 2880, 128, 4)  # hidden, expert intermediate, experts, top-k
KIMI = (7168, 2048, 384, 8)


def test_the_rule_by_hand():
    # donor (hidden 4, inter 2, 8 experts, top-2): 1 token 0.05 ms, 4 tokens 0.2, 16 tokens 0.8;
    # target (hidden 8, inter 2, 4 experts, top-1): tokens per expert n x 1/4 = m x 2/8, so
    # m = n; weights 8*4*2 = 64 against 8*4*2 = 64: the donor's time at the same count.
    x, y = np.array([1.0, 4.0, 16.0]), np.array([0.05, 0.2, 0.8])
    got = transfer(np.array([1, 4, 16]), x, y, (4, 2, 8, 2), 0.01, (8, 2, 4, 1))
    assert got == pytest.approx([0.05, 0.2, 0.8])
    # twice the weights (inter 4): the time above the 0.01 ms floor doubles
    got = transfer(np.array([4]), x, y, (4, 2, 8, 2), 0.01, (8, 4, 4, 1))
    assert got == pytest.approx([0.01 + 2 * 0.19])
    # top-2 of the 4 experts: twice the tokens per expert -> the donor at 8 tokens (log-log
    # between 4 and 16: 0.4 ms); beyond the donor's last count in proportion to tokens
    got = transfer(np.array([4, 16]), x, y, (4, 2, 8, 2), 0.0, (8, 2, 4, 2))
    assert got == pytest.approx([0.4, 1.6])


def _curves(gpu: str):
    pytest.importorskip("aiconfigurator_core")
    import pandas as pd

    from calibrate.aiconfigurator import package_root

    root, _ = package_root()
    t = pd.read_parquet(root / "data" / gpu / "moe" / "vllm" / "0.24.0" / "moe_perf.parquet")
    return t[t["moe_tp_size"] * t["moe_ep_size"] <= 8]


@pytest.mark.parametrize("gpu", ["l40s", "rtx_pro_6000_server"])
def test_the_int4_curve_transferred_meets_gpt_oss_own_marlin_timing(gpu):
    """The GPUs whose tables time gpt-oss's shape in Marlin: from 16 tokens up the int4
    (Kimi-K2 shape) curve transferred lands at 0.85-1.0x the measured per MoE TP (median)."""
    t = _curves(gpu)
    donor = t[t["kernel_source"].str.contains("wna16marlin")]
    floor = float(donor.loc[donor["num_tokens"] == 1, "latency"].min())
    mine = t[t["kernel_source"].str.contains("gptossmxfp4moe_marlin") & (t["num_experts"] == 128)]
    for tp in (1, 2, 4, 8):
        d, m = (_split(x, tp).groupby("num_tokens")["latency"].median() for x in (donor, mine))
        m = m[m.index >= 16]
        got = transfer(m.index.to_numpy(float), d.index.to_numpy(float), d.to_numpy(), KIMI,
                       floor, GPT_OSS)
        ratio = float(np.median(got / m.to_numpy()))
        assert 0.85 <= ratio <= 1.0, (gpu, tp, ratio)


def _split(t, tp: int):
    """Rows of MoE TP ``tp``, no EP, aiconfigurator's default routing for gpt-oss."""
    return t[(t["moe_tp_size"] == tp) & (t["moe_ep_size"] == 1)
             & (t["distribution"] == "power_law_1.2")]


def test_h200_prices_gpt_oss_marlin_from_the_transfer():
    """The shipped H200 profile: gpt-oss's Marlin curve is the transferred one; its prefill
    is slower than the Triton kernel's (the reason it exists), its decode within 25 %."""
    moe = load_model_file(shipped_profiles()["h200-sxm/vllm"]).moe
    idx, ms, tokens = moe.index(), moe.ms(), list(moe.tokens)
    key = "w4a16_mxfp4|2880|2880|128|4|1|1|power_law_1.2"
    marlin, triton = idx[key + "@marlin"], idx[key]
    assert "transferred from 7168x2048x384x8" in moe.kernels[marlin]
    assert "marlin" in moe.kernels[marlin] and "triton" in moe.kernels[triton]
    at = {n: tokens.index(n) for n in (4, 8192)}
    assert ms[marlin][at[8192]] > 1.5 * ms[triton][at[8192]]
    assert abs(ms[marlin][at[4]] / ms[triton][at[4]] - 1) < 0.25
    assert "aiconfigurator_transfer" in moe.source
