"""workload.prompt_scale / output_scale: every request's lengths times a factor."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from sim.cli import main
from sim.config.load import replay_workload
from tests.traces.trace_fixtures import MOONCAKE_JSONL
from traces import TraceError, build_workload
from traces.spec import WorkloadSpec, validated

FIXED = {"arrival": {"process": "poisson", "rate": 10.0}, "num_requests": 20,
         "lengths": {"dist": "fixed", "prompt": 200, "output": 40}}


def test_fixed_200_40_with_prompt_scale_4_gives_800_40():
    t = build_workload({**FIXED, "prompt_scale": 4}, seed=0, base_dir=".")
    assert t.prompt_tokens.tolist() == [800] * 20 and t.output_tokens.tolist() == [40] * 20
    base = build_workload(FIXED, seed=0, base_dir=".")
    assert t.arrival_s.tolist() == base.arrival_s.tolist()  # arrivals untouched


def test_output_scale_and_generated_lengths():
    t = build_workload({**FIXED, "output_scale": 0.5}, seed=0, base_dir=".")
    assert t.prompt_tokens.tolist() == [200] * 20 and t.output_tokens.tolist() == [20] * 20
    logn = {**FIXED, "lengths": {"dist": "lognormal", "prompt_p50": 300, "prompt_p90": 900,
                                 "output_p50": 50, "output_p90": 200}}
    a = build_workload(logn, seed=3, base_dir=".")
    b = build_workload({**logn, "prompt_scale": 2, "output_scale": 3}, seed=3, base_dir=".")
    assert b.prompt_tokens.tolist() == (a.prompt_tokens * 2).tolist()
    assert b.output_tokens.tolist() == (a.output_tokens * 3).tolist()


def test_trace_lengths_round_half_up_at_least_one(tmp_path):
    csv = tmp_path / "t.csv"
    csv.write_text("arrival_s,prompt_tokens,output_tokens\n0,1,1\n0.5,3,10\n1.0,10,25\n")
    t = build_workload({"trace": str(csv), "prompt_scale": 0.5, "output_scale": 0.1},
                       seed=0, base_dir=".")
    # 0.5 -> 1, 1.5 -> 2, 5; outputs 0.1 -> 1 (at least one), 1, 2.5 -> 3
    assert t.prompt_tokens.tolist() == [1, 2, 5] and t.output_tokens.tolist() == [1, 1, 3]
    assert t.arrival_s.tolist() == [0.0, 0.5, 1.0]


def test_scaled_prompts_drop_the_traces_prefix_chains(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text(MOONCAKE_JSONL)
    kept = build_workload({"trace": str(path), "output_scale": 2}, seed=0, base_dir=".")
    assert kept.hash_block_size == 512 and kept.output_tokens.tolist() == [10, 2, 14, 4]
    dropped = build_workload({"trace": str(path), "prompt_scale": 4}, seed=0, base_dir=".")
    assert dropped.prompt_tokens.tolist() == [4000, 2052, 4096, 40]
    assert dropped.hash_block_size is None
    assert all(c is None for c in dropped.df["prefix_hashes"])


def test_a_mix_scales_every_sub_workload():
    t = build_workload({"mix": [FIXED, {**FIXED, "lengths": {"dist": "fixed", "prompt": 50,
                                                             "output": 5}}],
                        "prompt_scale": 2}, seed=0, base_dir=".")
    assert sorted(set(t.prompt_tokens.tolist())) == [100, 400]


@pytest.mark.parametrize("value", [0, -1, 2e6])
def test_scale_bounds(value):
    with pytest.raises(TraceError, match="prompt_scale"):
        validated(WorkloadSpec, {**FIXED, "prompt_scale": value}, "workload")


def test_trace_swap_keeps_the_scales():
    got = replay_workload({**FIXED, "prompt_scale": 4, "output_scale": 0.5}, "/x.csv")
    assert got == {"prompt_scale": 4, "output_scale": 0.5, "trace": "/x.csv"}


def test_run_with_prompt_scale_simulates_the_longer_prompts(tmp_path, capsys):
    from tests.capacity.helpers import TINY

    out = tmp_path / "r"
    assert main(["run", str(TINY), "--set", "workload.prompt_scale=4", "--out", str(out),
                 "--no-plots", "-q"]) == 0
    s = json.loads((out / "summary.json").read_text())
    assert s["requests"]["total"] == s["requests"]["finished"] == 300
    req = pd.read_parquet(out / "requests.parquet")
    assert set(req["prompt_tokens"]) == {800} and set(req["generated_tokens"]) == {40}
