"""The live KV cache holds exactly the K/V of each request's tokens, where its block table
says: checked after committed plans by gathering through the block table and comparing
with a contiguous recomputation of the same tokens (sim/live/check.py)."""

from __future__ import annotations

import pytest

from sim.live.check import null_block_untouched
from tests.live.helpers import run_checked, write_scenario

TOL = 1e-5  # float32, chunked/paged vs one causal pass: ~1e-6 observed

# long outputs into a small pool: decode runs cross block boundaries, requests get
# preempted; a shared system prompt: prefix-cache hits share blocks between requests
PRESSURE = ("engine.num_gpu_blocks_override=60", "workload.arrival.rate=400",
            "workload.lengths={dist: fixed, prompt: 70, output: 90}")
SHARED = ("engine.enable_prefix_caching=true",
          "workload.shared_prefix={tokens: 48, num_prefixes: 2}")


def test_kv_exact_with_decode_runs_preemption_and_prefix_sharing(tmp_path):
    res, chk = run_checked(write_scenario(tmp_path, n=14), *PRESSURE, *SHARED)
    assert res.counters["prefix_hits"] > 0 and res.counters["prefix_preempted_hits"] > 0
    assert res.num_preemptions.sum() > 0 and chk.runs > 5 and chk.after_preemption > 5
    assert chk.checks > 40 and chk.worst < TOL, (chk.checks, chk.worst)
    assert null_block_untouched(chk.executor)
    assert (res.generated == res.specs.output_tokens).all()


def test_kv_exact_after_swap_preemption(tmp_path):
    res, chk = run_checked(write_scenario(tmp_path, n=12), *PRESSURE,
                           "engine.preemption_mode=swap")
    assert res.counters["swap_in_events"] > 0 and chk.after_preemption > 5
    assert chk.checks > 40 and chk.worst < TOL, (chk.checks, chk.worst)
    assert null_block_untouched(chk.executor)


@pytest.mark.parametrize("scheduler", ["sarathi", "prefill-first", "static"])
def test_kv_exact_under_other_schedulers(tmp_path, scheduler):
    res, chk = run_checked(write_scenario(tmp_path, n=10, rate=100),
                           f"scheduler={{name: {scheduler}}}", per_plan=2)
    assert (res.generated == res.specs.output_tokens).all()
    assert chk.checks > 10 and chk.worst < TOL, (chk.checks, chk.worst)


def test_kv_exact_with_reserved_contiguous_tables(tmp_path):
    res, chk = run_checked(write_scenario(tmp_path, n=10, rate=100, blocks=400),
                           "kv={name: contiguous-exact}", per_plan=2)
    assert chk.checks > 10 and chk.worst < TOL, (chk.checks, chk.worst)
