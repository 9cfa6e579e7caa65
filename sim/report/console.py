"""The rich summary table printed after a run."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table


def _fmt(v, digits=1) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    return f"{v:,}"


def latency_table(lat: dict, title: str) -> Table:
    t = Table(title=title, title_justify="left")
    t.add_column("metric (ms)")
    for c in ("mean", "median", "p90", "p95", "p99", "max"):
        t.add_column(c, justify="right")
    for key, label in (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2el", "E2EL")):
        d = lat.get(key, {})
        if d.get("count"):
            t.add_row(label, *(_fmt(d.get(c)) for c in ("mean", "median", "p90", "p95", "p99",
                                                        "max")))
    return t


def overview_table(s: dict, derived: dict) -> Table:
    t = Table(title="Run", title_justify="left", show_header=False)
    t.add_column("key")
    t.add_column("value", justify="right")
    r, th, kv, pre = s["requests"], s["throughput"], s["kv_cache"], s["preemption"]
    rows = [
        ("requests finished / total", f"{r['finished']:,} / {r['total']:,}"),
        ("rejected / max_tokens shortened / unfinished / aborted",
         f"{r['rejected']:,} / {r.get('shortened', 0):,} / {r['unfinished']:,} / "
         f"{r.get('aborted', 0):,}"),
        ("duration (s)", _fmt(s["duration_s"], 2)),
        ("request throughput (req/s)", _fmt(th["request_per_s"], 3)),
        ("output token throughput (tok/s)", _fmt(th["output_token_per_s"])),
        ("total token throughput (tok/s)", _fmt(th["total_token_per_s"])),
        ("goodput under SLO (req/s)", _fmt(th["goodput_request_per_s"], 3)),
        ("KV blocks (usable) / capacity (tokens)",
         f"{derived['usable_kv_blocks']:,} / {derived['kv_capacity_tokens']:,}"),
        ("KV used mean / peak (%)", f"{100 * kv.get('mean_used_fraction', 0):.1f} / "
                                    f"{100 * kv.get('peak_used_fraction', 0):.1f}"),
        ("preemptions (recomputed tokens)", f"{pre['count']:,} ({pre['recomputed_tokens']:,})"),
        *memory_rows(s),
        ("SLO at p{:g}".format(s["slo"]["percentile"]), slo_line(s["slo"])),
        ("stability", f"{s['stability']['verdict']}: {s['stability']['reason']}"),
    ]
    if r.get("warmup_left_out") is not None:
        rows.insert(1, ("warm-up left out of the figures", f"{r['warmup_left_out']:,} requests "
                        f"arriving before {r['warmup_s']:g} s"))
    if s["sim"].get("stopped"):
        rows.append(("engine stopped", s["sim"]["stopped"]))
    for k, v in rows:
        t.add_row(k, v)
    return t


def slo_line(slo: dict) -> str:
    """The verdict with what counted against it: the rejected share and the unfinished."""
    verdict = "met" if slo["met"] else "MISSED"
    parts = []
    rejected = slo.get("rejected_as_failures", 0)
    if rejected:
        parts.append(f"{rejected:,} rejected ({100 * slo['rejected_fraction']:.1f}%)")
    unfinished = slo.get("unfinished_as_failures", 0)
    if unfinished:
        parts.append(f"{unfinished:,} unfinished")
    return f"{verdict}: {' and '.join(parts)} counted as failures" if parts else verdict


def memory_rows(s: dict) -> list[tuple[str, str]]:
    """The memory-policy lines that apply to this run (swap and prefix cache when used)."""
    kv, pre, wait = s["kv_cache"], s["preemption"], s["waiting"]
    rows = [
        ("KV slots held but empty, mean (%)",
         f"{100 * kv.get('mean_wasted_slot_fraction', 0):.1f}"),
        ("concurrent sequences peak / mean",
         f"{kv.get('peak_concurrent_seqs', 0):,} / {kv.get('mean_concurrent_seqs', 0):.1f}"),
        ("allocation failures / requests refused for KV",
         f"{pre['allocation_failures']:,} / {pre['requests_blocked_on_memory']:,}"),
        ("waiting, mean: all / on KV memory", f"{wait['mean_waiting']:.1f} / "
                                             f"{wait.get('mean_waiting_on_kv_memory', 0):.1f}"),
    ]
    lim = s.get("batch_limits") or {}
    if lim:
        rows.append(("batch capped: max_num_seqs / KV / tokens (% busy)",
                     f"{100 * lim['at_max_num_seqs']:.0f} / {100 * lim['kv_cache_full']:.0f} / "
                     f"{100 * lim['token_budget_full']:.0f}"))
    sch = (s.get("schedule") or {}).get("host_ms_per_step")
    if sch:
        rows.append(("host (schedule) per step ms: mean / p99 (% busy)",
                     f"{sch['mean']:.2f} / {sch['p99']:.2f} "
                     f"({100 * s['schedule']['host_share_of_busy_time']:.1f})"))
    sp = s.get("speculative") or {}
    if sp.get("verify_steps"):
        share = sp.get("draft_share")
        rows.append((f"speculative ({sp['method']}, K={sp['num_speculative_tokens']}): "
                     "mean acceptance length (expected) / draft % of step",
                     f"{sp['mean_acceptance_length']:.3f} ({sp['expected_acceptance_length']:.3f})"
                     f" / {'-' if share is None else f'{100 * share:.1f}'}"))
    if pre.get("mode") == "swap":
        rows.append(("swaps out / in (GiB moved)",
                     f"{pre['swap_out_events']:,} / {pre['swap_in_events']:,} "
                     f"({(pre['swap_out_bytes'] + pre['swap_in_bytes']) / 2**30:,.2f})"))
    pc = s.get("prefix_cache", {})
    if pc.get("enabled"):
        rows.append(("prefix cache hit rate (saved prefill tokens)",
                     f"{100 * pc['hit_rate']:.1f}% ({pc['saved_prefill_tokens']:,})"))
    return rows


def lanes_table(lanes: dict, percentile: float) -> Table:
    """One row per lane: the numbers a lane's owner is promised (throughput over the lane's
    own duration)."""
    t = Table(title="Lanes", title_justify="left")
    for col in ("lane", "finished", "TTFT p95 ms", "TPOT p95 ms", "duration s", "output tok/s",
                "goodput req/s", f"SLO at p{percentile:g}"):
        t.add_column(col, justify="right")
    for lane, b in lanes.items():
        lat, th = b["latency_ms"], b["throughput"]
        t.add_row(lane, f"{b['finished']:,}/{b['requests']:,}", _fmt(lat["ttft"].get("p95")),
                  _fmt(lat["tpot"].get("p95")), _fmt(b["duration_s"], 2),
                  _fmt(th["output_token_per_s"]),
                  _fmt(th["goodput_request_per_s"], 3), slo_line(b["slo"]))
    return t


def fleet_table(fleet: dict) -> Table:
    """One row per pool and per replica of a fleet (sim.fleet.summary)."""
    t = Table(title=f"Fleet: {fleet['replicas']} replicas, {fleet['gpus']} GPUs "
              f"(most requests on one replica / its pool's mean: "
              f"{fleet['routing_imbalance']:.2f})",
              title_justify="left")
    for col in ("pool / replica", "router", "finished", "req/s", "TTFT p95 ms", "TPOT p95 ms",
                "KV used mean %", "prefix hit %", "stability"):
        t.add_column(col, justify="right")
    rows = [(n, f"{p['role']} {p['router']}", p) for n, p in fleet["pools"].items()]
    rows += [(n, "", r) for n, r in fleet["replica"].items()] if len(fleet["replica"]) > 1 else []
    for name, router, b in rows:
        t.add_row(name, router, f"{b['finished']:,}", _fmt(b["request_per_s"], 2),
                  _fmt(b["ttft_ms_p95"]), _fmt(b["tpot_ms_p95"]),
                  _fmt(100 * b["kv_mean_used_fraction"]), _fmt(100 * b["prefix_cache_hit_rate"]),
                  b["stability"])
    return t


def print_summary(summary: dict, derived: dict, console: Console | None = None) -> None:
    console = console or Console()
    console.print(overview_table(summary, derived))
    console.print(latency_table(summary["latency_ms"], "Latency"))
    if summary.get("lanes"):
        console.print(lanes_table(summary["lanes"], summary["slo"]["percentile"]))
    if summary.get("fleet"):
        console.print(fleet_table(summary["fleet"]))
    if summary.get("cost_error"):
        from sim.cost.validation import describe

        console.print(describe(summary["cost_error"]), highlight=False, soft_wrap=True)
