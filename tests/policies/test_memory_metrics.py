"""Every run reports the memory metrics; the console shows the lines that apply."""

from __future__ import annotations

from sim.report.console import memory_rows
from tests.kv.e2e import run_file


def _labels(summary):
    return [label for label, _ in memory_rows(summary)]


def test_summary_has_swap_prefix_cache_and_concurrency_for_every_run():
    # a run without swap or prefix caching still reports both sections, all zeros
    _, s = run_file("reserve-admission", "admission.name=optimistic",
                    "engine.enable_prefix_caching=false")
    pre, kv, pc = s["preemption"], s["kv_cache"], s["prefix_cache"]
    assert pre["mode"] == "recompute" and pre["swap_out_events"] == pre["swap_out_bytes"] == 0
    assert pc == {"enabled": False, "queries": 0, "hits": 0, "preempted_queries": 0,
                  "preempted_hits": 0, "evictions": 0, "hit_rate": 0.0,
                  "saved_prefill_tokens": 0}
    assert 1 <= kv["mean_concurrent_seqs"] <= kv["peak_concurrent_seqs"] <= 1024
    assert s["waiting"]["mean_waiting_on_kv_memory"] > 0 and pre["allocation_failures"] > 0
    labels = _labels(s)
    assert "concurrent sequences peak / mean" in labels
    assert not any("swap" in x or "prefix" in x for x in labels)


def test_swap_and_prefix_cache_lines_appear_when_used():
    _, swap = run_file("swap-preemption")
    p = swap["preemption"]
    assert p["mode"] == "swap" and p["swap_out_events"] == p["swap_in_events"] == p["count"] > 0
    assert p["swap_out_bytes"] == p["swap_in_bytes"] > 0 and p["recomputed_tokens"] == 0
    assert "swaps out / in (GiB moved)" in _labels(swap)
    _, pc = run_file("prefix-cache-system-prompt")
    assert "prefix cache hit rate (saved prefill tokens)" in _labels(pc)


def test_swap_beats_recompute_on_the_same_pressure():
    _, swap = run_file("swap-preemption")
    _, rec = run_file("swap-preemption", "engine.preemption_mode=recompute")
    assert rec["preemption"]["recomputed_tokens"] > 50_000
    assert swap["steps"]["prefill_tokens"] < rec["steps"]["prefill_tokens"]
    assert swap["latency_ms"]["e2el"]["median"] < rec["latency_ms"]["e2el"]["median"]
