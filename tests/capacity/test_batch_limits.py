"""What capped the running batch, from the step records (summary ``batch_limits``), and the
binding that names that cause rather than only the budget it broke: tiny.yaml at 20 req/s
(twice what it holds) under each of the three limits."""

from __future__ import annotations

import pytest

from sim.config.load import load_scenario
from sim.pipeline import run
from sim.plan.capacity import cause, judge
from sim.plan.point import derived, flatten
from sim.plan.slo import scenario_slo

from .helpers import TINY

CASES = {
    "seats": (("engine.max_num_seqs=8",), "at_max_num_seqs",
              "max_num_seqs (8 running at the cap in 97% of busy time)"),
    "kv": (("engine.num_gpu_blocks_override=60", "engine.max_model_len=256"), "kv_cache_full",
           "KV cache (full in 98% of busy time)"),
    "tokens": (("engine.max_num_batched_tokens=256", "engine.max_num_seqs=64"),
               "token_budget_full", "token budget (max_num_batched_tokens 256 full in 80% of "
               "busy time)"),
}


def _metrics(*sets: str) -> tuple[dict, dict]:
    loaded = load_scenario(TINY, ("workload.arrival.rate=20", *sets))
    with pytest.warns(UserWarning, match="too short to judge"):  # 300 requests in 15 s
        out = run(loaded, None, plots=False)
    s = out.summary
    return s, {**flatten(s), **derived(s, 1, out.result.specs.arrival_s)}


@pytest.mark.parametrize("case", CASES)
def test_the_binding_names_the_limit_the_batch_sat_at(case):
    sets, limit, binding = CASES[case]
    s, m = _metrics(*sets)
    shares = {k: s["batch_limits"][k] for k in
              ("at_max_num_seqs", "kv_cache_full", "token_budget_full")}
    assert shares[limit] > 0.75
    assert all(v == 0.0 for k, v in shares.items() if k != limit)
    assert judge(m, scenario_slo(load_scenario(TINY).scenario)) == binding


def test_a_batch_with_room_names_only_the_budget():
    s, m = _metrics()
    assert s["batch_limits"] == {"at_max_num_seqs": 0.0, "kv_cache_full": 0.0,
                                 "token_budget_full": 0.0, "max_num_seqs": 1024,
                                 "max_num_batched_tokens": 8192}
    assert cause(m) is None and judge(m, scenario_slo(load_scenario(TINY).scenario)) == \
        "TPOT p95"


def test_the_step_share_decides_when_the_queue_does_not():
    """Little waiting (the queue is not what held requests back), yet the batch ran at
    max_num_seqs for 70% of the busy time: the seat cap is the cause; under half: none."""
    m = {"waiting.mean_waiting": 0.2, "batch_limits.at_max_num_seqs": 0.7,
         "batch_limits.kv_cache_full": 0.0, "batch_limits.token_budget_full": 0.1,
         "batch_limits.max_num_seqs": 32}
    assert cause(m) == "max_num_seqs (batch at 32 in 70% of busy time)"
    assert cause({**m, "batch_limits.at_max_num_seqs": 0.4}) is None


def test_the_run_summary_shows_the_shares():
    from sim.report.console import memory_rows

    s, _ = _metrics("engine.max_num_seqs=8")
    assert ("batch capped: max_num_seqs / KV / tokens (% busy)", "97 / 0 / 0") in memory_rows(s)
