"""A long run streams its step rows (sim/metrics/spill.py, sim/fast/record.py): the same
results as the run that keeps them in memory.

``STREAM_STEPS`` is patched down so that runs small enough to keep everything stream too;
then every per-request array, step column, token time and steps.parquet / requests.parquet
row must equal the in-memory run's, the summary's step figures agree to the last bits (sums
of seconds add chunk by chunk) and its ITL figures within the histogram's 0.1 %
(sim/metrics/itl.py). Also: requests.parquet written a row group at a time, a large
workload's compact specs, and the settled ITL's masks.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

import sim.engine.requests as requests_mod
import sim.fast
import sim.fast.record as fast_record
import sim.report.tables as tables
import sim.report.write as write_mod
import traces.validate as validate
from sim import pipeline
from sim.config.load import load_scenario
from sim.fast.record import StreamedRecorder
from sim.metrics.itl import RELATIVE_ACCURACY, SettledItl
from sim.metrics.recorder import STEP_COLUMNS
from sim.metrics.stats import describe_ms
from sim.metrics.summary import summarize
from sim.pipeline import prepare
from sim.runner import simulate
from tests.fast.equivalence import prepared

PER_REQUEST = ("first_scheduled_s", "first_token_s", "finish_s", "last_token_s", "max_itl_s")
ITL_KEYS = ("mean", "std", "median", "p90", "p95", "p99", "max")


def pair(monkeypatch, scenario, *sets, chunk=700):
    """(in memory, streamed every ``chunk`` steps) results of one scenario."""
    r, specs = prepared(scenario, *sets)
    a = simulate(r, specs)
    monkeypatch.setattr(fast_record, "STREAM_STEPS", chunk)
    monkeypatch.setattr(fast_record, "PIECE", chunk // 3)  # a flush in several pieces
    b = simulate(r, specs)
    monkeypatch.undo()
    return a, b


def assert_same_records(a, b) -> None:
    ra, rb = a.recorder, b.recorder
    assert not ra.streamed and isinstance(rb, StreamedRecorder)
    assert (ra.num_steps, ra.num_plans) == (rb.num_steps, rb.num_plans)
    assert ra.num_steps > 2 * 700  # streamed in several chunks
    for name in PER_REQUEST:
        assert np.array_equal(getattr(ra, name), getattr(rb, name), equal_nan=True), name
    sa, sb = ra.steps(), rb.steps()
    for c in STEP_COLUMNS:
        assert sa[c].dtype == sb[c].dtype and np.array_equal(sa[c], sb[c]), c
    ca, cb = ra.tokens.csr(), rb.tokens.csr()
    assert (ca is None) == (cb is None)
    if ca is not None:
        assert all(np.array_equal(x, y) for x, y in zip(ca, cb))
    fin = ~np.isnan(ra.finish_s)
    for mask in (None, fin):
        da, db = describe_ms(*ra.itl_samples(mask)), describe_ms(*rb.itl_samples(mask))
        assert da["count"] == db["count"] > 0
        for k in ITL_KEYS[2:]:
            assert db[k] == pytest.approx(da[k], rel=RELATIVE_ACCURACY)
        assert db["mean"] == pytest.approx(da["mean"], rel=RELATIVE_ACCURACY)


def assert_same_summary(a: dict, b: dict, path: str = "") -> None:
    """Equal, floats to 1e-12 relative; ITL figures within the histogram's accuracy."""
    if isinstance(a, dict):
        assert set(a) == set(b), path
        for k in a:
            assert_same_summary(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same_summary(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and not (a == b or math.isnan(a) and math.isnan(b)):
        rel = 2 * RELATIVE_ACCURACY if ".itl." in path else 1e-12
        assert b == pytest.approx(a, rel=rel, abs=1e-15), path
    elif not isinstance(a, float):
        assert a == b, path


CASES = {
    "default": (None,),
    "async off": (None, "engine.async_scheduling=false"),
    "caching off": (None, "engine.enable_prefix_caching=false"),
    "shared prefixes": ("prefix-cache-system-prompt", "workload.num_requests=600"),
    "preemptions": ("small-kv-pressure", "workload.num_requests=300"),
    "budget skips": (None, "engine.max_num_batched_tokens=300", "engine.max_num_seqs=128"),
    "lanes": ("lanes", "workload.mix.0.duration_s=10", "workload.mix.1.duration_s=10"),
    "priority": (None, "scheduler=vllm-priority"),
    "closed loop": (None, "workload.arrival={process: closed, concurrency: 48}"),
    "warm-up": (None, "workload.warmup_s=30"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_streamed_run_records_what_the_run_in_memory_does(monkeypatch, case):
    scenario, *sets = CASES[case]
    if scenario is None:
        sets = ["workload.num_requests=1000", *sets]
    a, b = pair(monkeypatch, scenario, *sets)
    assert_same_records(a, b)
    assert_same_summary(summarize(a), summarize(b))


def test_a_preempted_request_resumes_with_a_lone_gap_across_chunks(monkeypatch):
    a, b = pair(monkeypatch, "small-kv-pressure", "workload.num_requests=300", chunk=97)
    assert a.num_preemptions.sum() > 0
    assert_same_records(a, b)


def test_streamed_results_folder_equals_the_in_memory_one(monkeypatch, tmp_path):
    loaded = load_scenario(None, ("workload.num_requests=800",))
    pipeline.run(loaded, tmp_path / "a")
    monkeypatch.setattr(fast_record, "STREAM_STEPS", 600)
    monkeypatch.setattr(fast_record, "PIECE", 250)
    b = pipeline.run(loaded, tmp_path / "b")
    assert b.result.recorder.streamed and b.result.recorder.num_steps > 1200
    for name in ("steps.parquet", "requests.parquet"):
        pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "a" / name),
                                      pd.read_parquet(tmp_path / "b" / name))
    sa, sb = (json.loads((tmp_path / x / "summary.json").read_text()) for x in "ab")
    for s in (sa, sb):
        del s["sim"]["wall_s"]
    assert_same_summary(sa, sb)
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == sorted(
        p.name for p in (tmp_path / "b").iterdir())  # no spill folder left behind
    assert b.result.recorder.spill.path == tmp_path / "b" / "steps.parquet"
    assert len(b.result.recorder.steps()["start_s"]) == b.result.recorder.num_steps
    assert not list(tmp_path.glob(".*"))  # nor beside it


def test_a_run_without_results_streams_into_a_private_folder_it_removes(monkeypatch):
    monkeypatch.setattr(fast_record, "STREAM_STEPS", 500)
    r, specs, _ = prepare(load_scenario(None, ("workload.num_requests=300",)))
    res = simulate(r, specs)
    folder = res.recorder.spill.path.parent
    assert folder.name.startswith(".servesim-steps-") and folder.is_dir()
    summarize(res)
    del res
    import gc

    gc.collect()
    assert not folder.exists()


def test_requests_parquet_in_row_groups_equals_the_one_table(monkeypatch, tmp_path):
    r, specs, _ = prepare(load_scenario(None, ("workload.num_requests=600",)))
    res = simulate(r, specs)
    requests_one = tables.requests_table(res)
    monkeypatch.setattr(tables, "ROW_GROUP", 64)
    monkeypatch.setattr(tables, "CHUNK_ROWS", 64)
    tables.write_requests(res, tmp_path / "r.parquet")
    import pyarrow.parquet as pq

    assert pq.ParquetFile(tmp_path / "r.parquet").num_row_groups == 10
    pd.testing.assert_frame_equal(requests_one, pd.read_parquet(tmp_path / "r.parquet"))
    monkeypatch.setattr(write_mod, "ROW_GROUP", 64)  # the writer's own path too
    pipeline.run(load_scenario(None, ("workload.num_requests=600",)), tmp_path / "out")
    pd.testing.assert_frame_equal(requests_one, pd.read_parquet(tmp_path / "out" /
                                                                "requests.parquet"))


def test_a_large_workload_builds_compact_specs_with_the_same_values(monkeypatch, tmp_path):
    sets = ("workload.num_requests=700",)
    r, ref, _ = prepare(load_scenario(None, sets))
    monkeypatch.setattr(validate, "COMPACT_ROWS", 100)
    monkeypatch.setattr(requests_mod, "COMPACT_ROWS", 100)
    _, small, _ = prepare(load_scenario(None, sets))
    assert small.request_id.dtype != object and small.lane.strides == (0,)
    assert small.request_id.tolist() == ref.request_id.tolist()
    for name in ("arrival_s", "prompt_tokens", "output_tokens", "priority", "lane"):
        a, b = getattr(ref, name), getattr(small, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name
    assert small.lane_names == ref.lane_names and small.prefix_hashes == ref.prefix_hashes
    ra = simulate(r, ref)
    monkeypatch.setattr(sim.fast, "COMPACT_ROWS", 100)  # the run's counts in 4 bytes too
    rb = simulate(r, small)
    assert rb.generated.dtype == rb.num_preemptions.dtype == np.int32
    pd.testing.assert_frame_equal(tables.requests_table(ra), tables.requests_table(rb))
    sa, sb = summarize(ra), summarize(rb)
    for s in (sa, sb):
        s["sim"].pop("wall_s", None)
    assert sa == sb


def test_settled_itl_answers_the_masks_a_summary_asks():
    judged = np.array([False, True, True, True])  # request 0 arrived in the warm-up
    itl = SettledItl(4, judged)
    gap = np.array([0.010, 0.020, 0.030])
    finished = np.array([True, True, True, False])
    # every request emitted after steps 1..2 of this chunk; request 3 (in flight) also
    # after a pause (a lone gap)
    every = np.arange(4)
    itl.add(gap, every, np.ones(4, np.int64), np.full(4, 2), np.array([3]), np.array([0.5]),
            finished)
    assert itl.samples(None)[1].sum() == 9
    v, w = itl.samples(finished & judged)  # the summary's mask: requests 1 and 2
    assert w.sum() == 4 and v.max() == pytest.approx(0.030, rel=RELATIVE_ACCURACY)
    with pytest.raises(ValueError):  # a mask splitting the settled judged requests
        itl.samples(np.array([False, True, False, False]))
    v, w = itl.samples(np.array([False, False, False, True]))  # in flight: exact
    assert sorted(v.tolist()) == [0.020, 0.030, 0.5] and w.tolist() == [1, 1, 1]
    none = np.zeros(0, np.int64)
    itl.add(gap, none, none, none, none, np.zeros(0), np.ones(4, bool))  # all finished
    assert itl.samples(np.ones(4, bool))[1].sum() == 9
    assert itl.samples(np.array([False, True, True, True]))[1].sum() == 7
