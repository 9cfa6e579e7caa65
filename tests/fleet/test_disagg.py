"""Disaggregated prefill/decode: each request's KV transfer is charged once, after its
prefill, and the decode replica admits it only when the transfer has ended."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sim.engine.clock import to_ns
from sim.sched.base import Status
from tests.fleet.helpers import fleet

DISAGG = str(Path(__file__).resolve().parents[2] / "scenarios" / "fleet-disagg.yaml")
SMALL = ("workload.num_requests=120",)


def test_transfer_charged_once_and_decode_starts_after_it():
    fr, res, s = fleet(DISAGG, *SMALL)
    t = fr.plan.transfer
    pre, dec = fr.pools[0].replicas[0], fr.pools[1].replicas[0]
    done = res.status == Status.FINISHED
    moved = np.flatnonzero(fr.transfers == 1)
    assert set(np.unique(fr.transfers)) <= {0, 1}  # never twice
    assert s["fleet"]["kv_transfers"] == len(moved) == int(done.sum())
    prompt = fr.specs.prompt_tokens
    # bytes per token from the model (Llama-3-8B bf16: 2 x 32 layers x 8 KV heads x 128 x 2 B)
    assert t.bytes_per_token == 131072
    for q in moved.tolist():
        prefill_end = to_ns(pre.recorder.finish_s[q])  # egress 0: the step end
        landed = dec.source.received[q]
        assert landed == prefill_end + t.ns(int(prompt[q]))  # charged once, after prefill
        assert fr.transfer_s[q] == t.ns(int(prompt[q])) / 1e9
        assert to_ns(dec.recorder.first_scheduled_s[q]) >= landed  # admitted after it
    # the client's first token comes from the decode replica: TTFT covers prefill+transfer
    ttft = res.recorder.first_token_s - res.specs.arrival_s
    first = dec.recorder.first_token_s[moved]
    assert np.allclose(np.sort(res.recorder.first_token_s[done]), np.sort(first))
    assert (ttft[done] > t.latency_s).all()
    # decode replicas do not recompute transferred prompts: far fewer priced prefill tokens
    assert s["fleet"]["pools"]["decode"]["finished"] == int(done.sum())


def test_transfer_time_follows_bandwidth_and_latency():
    fr, _, _ = fleet(DISAGG, *SMALL, "cluster.disaggregation.kv_transfer_bandwidth=1e9",
                     "cluster.disaggregation.kv_transfer_latency_ms=5")
    t = fr.plan.transfer
    assert t.ns(1000) == round((5e-3 + 1000 * 131072 / 1e9) * 1e9)
    moved = fr.transfers == 1
    expect = 5e-3 + fr.specs.prompt_tokens[moved] * 131072 / 1e9
    assert np.allclose(fr.transfer_s[moved], expect, atol=1e-9)


def test_decode_side_prices_the_transferred_prompt_as_one_token_once():
    from sim.engine.plan import StepPlan
    from sim.fleet.disagg import TransferredPrompts

    seen = []
    wrap = TransferredPrompts(lambda p: seen.append(p) or np.ones(p.num_steps),
                              np.array([100, 50, 40]))
    # request 0 arrives whole (its prompt in one chunk), request 1 in two chunks, 2 decodes
    wrap(StepPlan.build([0, 1, 2], [100, 30, 1], [0, 0, 45]))
    p = seen[-1]
    assert p.req_ids.tolist() == [0, 2] and p.num_tokens.tolist() == [1, 1]
    assert p.context_lens.tolist() == [99, 45]
    wrap(StepPlan.build([1], [20], [30]))
    assert seen[-1].num_tokens.tolist() == [1] and seen[-1].context_lens.tolist() == [49]
    wrap(StepPlan.build([0], [100], [0]))  # recomputed after a preemption: priced in full
    assert seen[-1].num_tokens.tolist() == [100]


def test_routing_imbalance_is_within_each_pool():
    """One prefill replica and two round-robin decode replicas are perfectly balanced: every
    request is on one replica of each pool (120 on prefill/0, 60 on each decode replica),
    which the fleet-wide max / mean read as 1.5."""
    _, _, s = fleet(DISAGG, *SMALL, "cluster.pools=[{name: prefill, "
                    "replicas: 1}, {name: decode, replicas: 2, router: {name: round_robin}}]")
    f = s["fleet"]
    assert {n: r["requests"] for n, r in f["replica"].items()} == {
        "prefill/0": 120, "decode/0": 60, "decode/1": 60}
    assert f["routing_imbalance"] == 1.0
    assert f["pools"]["prefill"]["routing_imbalance"] == 1.0
    assert f["pools"]["decode"]["routing_imbalance"] == 1.0
