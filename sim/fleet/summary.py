"""Fleet summaries: each replica as it would report alone, each pool, and the fleet.

The fleet (and each pool) summary is the single-run summary of the requests it served,
with `vllm bench serve`'s definitions, as the clients see them: latencies count from the
client's send; in a disaggregated fleet the tokens come from the decode pool, so TTFT
includes prefill and the KV transfer. Blocks that describe one engine's steps are
replaced: ``stability`` is the worst replica's (a fleet keeps up only if every replica
does; which one is named), or, behind a concurrency cap on an open stream, the clients'
when their queue is worse (replica None); ``waiting.mean_waiting`` adds up the replicas',
``kv_cache`` is one replica's (means averaged, the highest peak; total_blocks adds up);
``schedule`` (host time per step) is given only where every pool prices steps alike
(sim/fleet/views.py combine), and ``speculative`` adds up the replicas' acceptance counts
and drafter time. ``fleet`` lists pools, replicas, GPUs, routing balance and transfers.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from sim.fleet.cluster import FleetResult
from sim.fleet.plan import DECODE, PREFILL
from sim.fleet.views import combine, restrict
from sim.metrics.stability import held_back
from sim.metrics.summary import summarize
from sim.runner import RunResult

_RANK = {"stable": 0, "saturated": 1, "unstable": 2}


def replica_view(fr: FleetResult, rep) -> tuple[RunResult, np.ndarray]:
    """What ``rep`` would report alone: its requests, arriving when they reached it (the
    client's send time, or a decode replica's transfer end); and their run numbers."""
    if fr.own_requests is not None:  # the replica ran alone: its result is its own already
        return fr.results[rep.name], fr.own_requests[rep.name]
    got = fr.received_s[rep.name]
    reqs = np.array(sorted(got, key=lambda q: (got[q], q)), dtype=np.int64)
    if rep.pool.role == DECODE:
        arrival = np.array([got[q] for q in reqs.tolist()]) - rep.specs.ingress_s
    else:
        arrival = rep.specs.client.arrival_s[reqs]
    shortened = int(rep.specs.shortened[reqs].sum())
    return restrict(fr.results[rep.name], reqs, arrival, shortened), reqs


def client_view(fr: FleetResult, views: dict) -> RunResult:
    """The whole fleet as the clients see it (one record per request)."""
    parts, arrivals, ids = [], [], []
    for rep in fr.replicas:
        v, reqs = views[rep.name]
        if rep.pool.role == PREFILL:  # only requests that never reached the decode pool
            keep = np.flatnonzero(fr.transfers[reqs] == 0)
            if not len(keep):
                continue
            v, reqs = restrict(v, keep, shortened=0), reqs[keep]
        parts.append(v)
        arrivals.append(fr.specs.arrival_s[reqs])
        ids.append(reqs)
    out = dataclasses.replace(combine(parts, arrivals), never_sent=fr.never_sent)
    if fr.client_queue_s is None:
        return out
    order = np.argsort(np.concatenate(arrivals), kind="stable")  # combine's order
    return dataclasses.replace(out, client_queue_s=fr.client_queue_s[np.concatenate(ids)[order]])


def fleet_summary(fr: FleetResult, views: dict | None = None) -> dict:
    """The fleet's summary (``views``: replica_view of each replica, if already made)."""
    views = views or {rep.name: replica_view(fr, rep) for rep in fr.replicas}
    per_replica = {name: summarize(v) for name, (v, _) in views.items()}
    seen = client_view(fr, views)
    out = summarize(seen)
    # under a concurrency cap on an open stream the clients' queue is no replica's
    # (sim/metrics/stability.py waiting_from): their own verdict is a candidate
    clients = out["stability"] if held_back(seen) else None
    _fleet_blocks(out, list(per_replica.values()), list(per_replica), clients)
    pools = {}
    for p in fr.pools:
        names = [r.name for r in p.replicas]
        if len(fr.pools) == 1 and names == list(per_replica):
            s = out  # the one pool serves every request as the clients see them: the fleet
        else:
            s = summarize(combine([views[n][0] for n in names]))
            _fleet_blocks(s, [per_replica[n] for n in names], names)
        pools[p.plan.name] = {"role": p.plan.role, "replicas": p.plan.replicas,
                              "gpus": p.plan.gpus, "router": p.plan.router.name,
                              "lanes": list(p.plan.lanes),
                              "routing_imbalance": _imbalance([len(views[n][1]) for n in names]),
                              **_compact(s)}
    out["fleet"] = {
        "replicas": fr.plan.num_replicas, "gpus": fr.plan.gpus,
        "kv_report_interval_ms": fr.plan.kv_report_ns / 1e6,
        "pools": pools,
        "replica": {n: {"pool": r.pool.name, "requests": int(len(views[n][1])), **_compact(s)}
                    for (n, s), r in zip(per_replica.items(), fr.replicas)},
        # each router balances its own pool: across pools the counts differ by the lane
        # mix, and in a prefill/decode split every request is on a replica of each pool
        "routing_imbalance": max(q["routing_imbalance"] for q in pools.values()),
        **_transfers(fr),
    }
    return out


def _fleet_blocks(out: dict, parts: list[dict], names: list[str],
                 clients: dict | None = None) -> None:
    """``clients``: the stability of the fleet seen from gated clients (their queue
    counted), None when no cap holds an open stream back."""
    worst = max(range(len(parts)), key=lambda i: _RANK[parts[i]["stability"]["verdict"]])
    out["stability"] = {**parts[worst]["stability"], "replica": names[worst]}
    if clients is not None and (len(parts) == 1 or _RANK[clients["verdict"]] > _RANK[
            parts[worst]["stability"]["verdict"]]):
        # one replica seen from its clients is the single run's block; else the replicas
        # keep up while the requests the cap holds back pile up client-side: no replica's
        out["stability"] = {**clients, "replica": names[0] if len(parts) == 1 else None}
    keys = dict.fromkeys(k for p in parts for k in p["waiting"])
    out["waiting"] = {k: float(sum(p["waiting"].get(k, 0.0) for p in parts)) for k in keys}
    # kv_cache describes one replica of the fleet (its KV and max_num_seqs are per replica:
    # sim/plan/binding.py reads the peak against the cap): means are the replicas' mean,
    # peaks the highest replica's, so mean <= peak; total_blocks is every replica's blocks
    # (the fleet's KV capacity, prefill pools included). The steps of the client view
    # would add up the running sequences of every replica in the mean but not in the peak.
    kv = [p["kv_cache"] for p in parts]
    mean = lambda key: float(np.mean([k.get(key, 0.0) for k in kv]))  # noqa: E731
    peak = lambda key: max(k.get(key, 0) for k in kv)  # noqa: E731
    used = {"mean_used_fraction": mean("mean_used_fraction"),
            "peak_used_fraction": float(peak("peak_used_fraction")),
            "peak_used_blocks": int(peak("peak_used_blocks"))}
    # no replica ran a step (every request rejected): as a single run, no used-block figures
    out["kv_cache"] = {**out["kv_cache"], "total_blocks": int(sum(k["total_blocks"] for k in kv)),
                       **(used if any("peak_used_blocks" in k for k in kv) else {}),
                       "mean_concurrent_seqs": mean("mean_concurrent_seqs"),
                       "peak_concurrent_seqs": int(peak("peak_concurrent_seqs"))}


def _compact(s: dict) -> dict:
    """The figures a fleet table shows per pool or replica."""
    lat = s["latency_ms"]
    return {"finished": s["requests"]["finished"],
            "request_per_s": float(s["throughput"]["request_per_s"]),
            "output_token_per_s": s["throughput"]["output_token_per_s"],
            "ttft_ms_p95": lat["ttft"].get("p95"), "tpot_ms_p95": lat["tpot"].get("p95"),
            "stability": s["stability"]["verdict"],
            "prefix_cache_hit_rate": s["prefix_cache"]["hit_rate"],
            "kv_mean_used_fraction": s["kv_cache"].get("mean_used_fraction", 0.0)}


def _imbalance(counts: list[int]) -> float:
    """Most requests on one replica of a pool / the pool's mean per replica (``counts``:
    requests per replica; 1.0: perfectly even)."""
    return float(max(counts) / np.mean(counts)) if counts and np.mean(counts) else 1.0


def _transfers(fr: FleetResult) -> dict:
    if fr.plan.transfer is None:
        return {}
    t = fr.transfer_s[~np.isnan(fr.transfer_s)]
    return {"kv_transfers": int(fr.transfers.sum()),
            "kv_transfer_ms_mean": float(t.mean() * 1e3) if len(t) else 0.0,
            "kv_transfer_ms_max": float(t.max() * 1e3) if len(t) else 0.0}
