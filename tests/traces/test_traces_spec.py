"""Workload spec validation and build_workload."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError

from tests.traces.trace_fixtures import AZURE_CSV, LENGTHS_CSV, MOONCAKE_JSONL
from traces import TraceError, WorkloadSpec, build_workload, load_trace
from traces.spec import ArrivalSpec, LengthSpec

POISSON = {"process": "poisson", "rate": 5.0}


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ({"arrival": {"process": "gamma", "rate": 1.0}, "num_requests": 5}, "needs cv"),
        ({"arrival": {"process": "poisson"}, "num_requests": 5}, "needs rate"),
        (
            {"arrival": {"process": "poisson", "rate": 1, "cv": 2}, "num_requests": 5},
            "cv applies only",
        ),
        ({"arrival": POISSON, "num_requests": 5}, "lengths dist 'trace' needs a trace file"),
        (
            {"arrival": {"process": "closed", "concurrency": 2},
             "lengths": {"dist": "fixed", "prompt": 5, "output": 5}},
            "a closed loop needs num_requests",
        ),
        ({"lengths": {"dist": "sharegpt_like"}, "num_requests": 5}, "replay needs a trace"),
        ({"trace": "t.csv", "arrival": POISSON, "rate_scale": 2.0}, "rate_scale speeds up"),
        ({"trace": "t.csv", "num_requests": 5}, "a replay takes its count from the trace"),
        ({"trace": "t.csv", "arrival": POISSON, "num_requests": 5, "duration_s": 9.0}, "not both"),
        ({"lengths": {"dist": "fixed", "prompt": 5}}, "needs output"),
        (
            {
                "lengths": {
                    "dist": "lognormal",
                    "prompt_p50": 5,
                    "prompt_p90": 4,
                    "output_p50": 1,
                    "output_p90": 2,
                }
            },
            "prompt_p90 must be greater",
        ),
        ({"lengths": {"dist": "sharegpt_like", "prompt": 5}}, "does not apply to dist"),
        ({"mix": [{"trace": "t.csv"}], "lane": "x"}, "may only also set max_requests"),
        ({"arrival": POISSON, "num_requests": 5, "window_s": [0, 5]}, "needs a trace file"),
        ({"trace": "t.csv", "window_s": [5, 1]}, "0 <= start < end"),
        ({"trace": "t.csv", "format": "azure", "spread_s": 3.0}, "only to the mooncake"),
        ({"trace": "t.csv", "rate": 3.0}, "Extra inputs are not permitted"),
        ({"trace": "t.csv", "rate_scale": float("inf")}, "finite"),
    ],
)
def test_impossible_specs_are_rejected(spec, match):
    with pytest.raises(ValidationError, match=match):
        WorkloadSpec.model_validate(spec)


def test_models_are_frozen_and_documented():
    spec = WorkloadSpec(trace="t.csv")
    with pytest.raises(ValidationError):
        spec.trace = "other.csv"
    for model in (WorkloadSpec, ArrivalSpec, LengthSpec):
        assert all(f.description for f in model.model_fields.values())


SYNTH = {"arrival": POISSON, "lengths": {"dist": "azure_conv_like"}, "num_requests": 300}


def test_synthetic_workload_is_deterministic():
    a = build_workload(SYNTH, seed=1, base_dir=".")
    pd.testing.assert_frame_equal(a.df, build_workload(SYNTH, seed=1, base_dir=".").df)
    assert not a.df.equals(build_workload(SYNTH, seed=2, base_dir=".").df)
    assert len(a) == 300 and a.source.startswith("synthetic: arrival poisson rate=5.0")


def test_changing_lengths_keeps_arrivals():
    a = build_workload(SYNTH, seed=4, base_dir=".")
    other = {**SYNTH, "lengths": {"dist": "fixed", "prompt": 10, "output": 3}}
    b = build_workload(other, seed=4, base_dir=".")
    assert np.array_equal(a.arrival_s, b.arrival_s)
    assert b.prompt_tokens.tolist() == [10] * 300


def test_duration_and_tags_and_prefix():
    spec = {
        "arrival": {"process": "gamma", "rate": 20.0, "cv": 2.0},
        "lengths": {
            "dist": "lognormal",
            "prompt_p50": 500,
            "prompt_p90": 900,
            "output_p50": 50,
            "output_p90": 90,
        },
        "duration_s": 30.0,
        "shared_prefix": {"tokens": 64, "hash_block_size": 16},
        "lane": "interactive",
        "priority": -1,
        "tenant": "acme",
    }
    t = build_workload(spec, seed=0, base_dir=".")
    assert t.arrival_s.max() < 30.0 and set(t.lanes) == {"interactive"}
    assert set(t.priority) == {-1} and set(t.df["tenant"]) == {"acme"}
    assert t.hash_block_size == 16 and all(h[:4].tolist() == [0, 1, 2, 3] for h in t.prefix_hashes)


def test_replay_relative_path_window_rate_scale_and_cap(write):
    path = write("conv.csv", AZURE_CSV)
    spec = {"trace": path.name, "window_s": [1.0, 10.0], "rate_scale": 2.0}
    t = build_workload(spec, seed=0, base_dir=path.parent)
    assert t.arrival_s == pytest.approx([(4.314579 - 1) / 2, (4.541877 - 1) / 2])
    assert t.df["request_id"].tolist() == ["1", "2"]
    capped = build_workload({"trace": path.name, "max_requests": 2}, seed=0, base_dir=path.parent)
    assert capped.df["request_id"].tolist() == ["0", "1"]


def test_replay_with_new_lengths_drops_hashes(write):
    path = write("m.jsonl", MOONCAKE_JSONL)
    spec = {"trace": str(path), "lengths": {"dist": "fixed", "prompt": 7, "output": 2}}
    t = build_workload(spec, seed=0, base_dir=".")
    assert t.arrival_s.tolist() == [0.0, 0.0, 3.0, 5.999] and t.hash_block_size is None
    assert t.prompt_tokens.tolist() == [7] * 4
    keep = build_workload({"trace": str(path), "spread_s": 3.0}, seed=0, base_dir=".")
    assert keep.hash_block_size == 512 and keep.arrival_s[0] > 0


def test_lengths_file_workload_equals_load_trace(write):
    path = write("sharegpt.csv", LENGTHS_CSV)
    spec = {"trace": str(path), "arrival": POISSON}
    t = build_workload(spec, seed=9, base_dir=".")
    pd.testing.assert_frame_equal(t.df, load_trace(path, arrivals=POISSON, seed=9).df)
    shuffled = {**spec, "lengths": {"dist": "trace", "shuffle": True}}
    a = build_workload(shuffled, seed=9, base_dir=".")
    b = load_trace(path, arrivals=POISSON, seed=9, shuffle=True)
    pd.testing.assert_frame_equal(a.df, b.df)


def test_data_dependent_errors(write):
    path = write("sharegpt.csv", LENGTHS_CSV)
    with pytest.raises(TraceError, match="needs 10 requests but the trace has 3 rows"):
        build_workload(
            {"trace": str(path), "arrival": POISSON, "num_requests": 10}, seed=0, base_dir="."
        )
    with pytest.raises(TraceError, match="no arrival times, so it cannot be replayed"):
        build_workload({"trace": str(path)}, seed=0, base_dir=".")
    resampled = {
        "trace": str(path),
        "arrival": POISSON,
        "num_requests": 10,
        "lengths": {"dist": "resample"},
    }
    assert len(build_workload(resampled, seed=0, base_dir=".")) == 10
    with pytest.raises(TraceError, match="no such file"):
        build_workload({"trace": "missing.csv"}, seed=0, base_dir=path.parent)


def test_mix_of_lanes_with_independent_streams():
    child = {**SYNTH, "num_requests": 50}
    spec = {
        "mix": [{**child, "lane": "interactive"}, {**child, "lane": "batch", "priority": 1}],
        "max_requests": 80,
    }
    t = build_workload(spec, seed=0, base_dir=".")
    assert len(t) == 80 and set(t.lanes) == {"interactive", "batch"}
    inter = t.df[t.df["lane"] == "interactive"]["arrival_s"].to_numpy()
    batch = t.df[t.df["lane"] == "batch"]["arrival_s"].to_numpy()
    assert not np.array_equal(inter[:10], batch[:10])  # same spec, different streams
    assert np.all(np.diff(t.arrival_s) >= 0)
