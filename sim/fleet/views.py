"""Results seen from one replica, and from the whole fleet, as plain ``RunResult``s.

Every replica of a fleet indexes requests as the run does (request i is i everywhere), so
its arrays also hold rows for requests it never saw. ``restrict`` keeps a replica's own
requests, renumbered 0..m-1: what that replica would report run alone. ``combine`` joins
several such views into one result (a pool, or the fleet as its clients see it).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from sim.cost.drafter import time_summary
from sim.engine.requests import RequestSpecs
from sim.runner import RunResult
from sim.sched.spec import acceptance_summary

PER_REQUEST = ("first_scheduled_s", "first_token_s", "last_token_s", "finish_s", "max_itl_s")


def subset_specs(specs: RequestSpecs, idx: np.ndarray, arrival_s=None) -> RequestSpecs:
    """Requests ``idx`` of ``specs`` (optionally with other arrival times), renumbered."""
    def ro(a):
        a = np.ascontiguousarray(a)
        a.flags.writeable = False
        return a
    arr = specs.arrival_s[idx] if arrival_s is None else arrival_s
    return RequestSpecs(
        ro(specs.request_id[idx]), ro(arr), ro(specs.prompt_tokens[idx]),
        ro(specs.output_tokens[idx]), ro(specs.priority[idx]), ro(specs.lane[idx]),
        specs.lane_names, tuple(specs.prefix_hashes[i] for i in idx.tolist()),
        specs.hash_block_size)


class _Tokens:
    """Token times (CSR) of chosen requests taken from the recorders that served them."""

    def __init__(self, sources: list[tuple[object, np.ndarray, np.ndarray]], n: int):
        self.sources, self.n = sources, n  # (recorder, global ids, local positions)

    def csr(self):
        counts = np.zeros(self.n, dtype=np.int64)
        parts: list[tuple[np.ndarray, np.ndarray]] = []
        for rec, ids, pos in self.sources:
            got = rec.tokens.csr()
            if got is None:
                return None
            off, times = got
            counts[pos] = off[ids + 1] - off[ids]
            parts.append((pos, [times[off[i]:off[i + 1]] for i in ids.tolist()]))
        rows: list = [np.zeros(0)] * self.n
        for pos, chunks in parts:
            for p, c in zip(pos.tolist(), chunks):
                rows[p] = c
        times = np.concatenate(rows) if rows else np.zeros(0)
        return np.concatenate(([0], np.cumsum(counts))), times


class RecorderView:
    """A recorder restricted to chosen requests of one or more recorders (read-only)."""

    streamed = False  # its steps are listed in memory (``steps``)

    def __init__(self, sources: list[tuple[object, np.ndarray, np.ndarray]], n: int,
                 steps_from=(), settings=None):
        """``sources``: (recorder, ids, positions): request ``ids[j]`` of that recorder is
        request ``positions[j]`` here. ``steps_from``: recorders whose steps are listed;
        ``settings``: per recorder of ``steps_from``, the engine settings its steps ran
        under (max_num_seqs, max_num_batched_tokens, block_size), given when they differ:
        ``step_settings`` lists them per step for the summary's step statistics."""
        self._settings = settings
        self.n, self._src = n, list(sources)
        for name in PER_REQUEST:
            out = np.full(n, np.nan) if name != "max_itl_s" else np.zeros(n)
            for rec, ids, p in self._src:
                out[p] = getattr(rec, name)[ids]
            setattr(self, name, out)
        self.tokens = _Tokens(self._src, n)
        self._steps_from = tuple(steps_from)
        self.egress_s = self._src[0][0].egress_s if self._src else 0.0
        self.num_steps = sum(r.num_steps for r in self._steps_from)

    def itl_samples(self, mask: np.ndarray | None = None):
        vals, weights = [np.zeros(0)], [np.zeros(0, dtype=np.int64)]
        for rec, ids, pos in self._src:
            full = np.zeros(len(rec.finish_s), dtype=bool)
            full[ids] = True if mask is None else mask[pos]
            v, w = rec.itl_samples(full)
            vals.append(v)
            weights.append(w)
        return np.concatenate(vals), np.concatenate(weights)

    def steps(self) -> dict:
        parts = [r.steps() for r in self._steps_from]
        if len(parts) == 1:
            return parts[0]
        keys = parts[0].keys() if parts else ()
        out = {k: np.concatenate([p[k] for p in parts]) for k in keys}
        order = np.argsort(out["start_s"], kind="stable") if parts else None
        return {k: v[order] for k, v in out.items()}

    def step_settings(self) -> dict | None:
        """Per step (in ``steps`` order), the settings it ran under; None when every step
        ran under the same (the run's own)."""
        if self._settings is None:
            return None
        starts = [r.steps()["start_s"] for r in self._steps_from]
        order = np.argsort(np.concatenate(starts), kind="stable")
        return {k: np.concatenate([np.full(len(t), s[k]) for t, s in zip(
            starts, self._settings)])[order] for k in self._settings[0]}

    def step_chunks(self, columns=None):
        steps = self.steps()
        yield steps if columns is None else {c: steps[c] for c in columns}

    def head(self, m: int):
        return self


def restrict(res: RunResult, idx: np.ndarray, arrival_s: np.ndarray | None = None,
             shortened: int = 0) -> RunResult:
    """``res`` (one replica, run-wide numbering) cut to requests ``idx`` (its own, in the
    order it received them; ``arrival_s``: when they reached it), as that replica alone
    would report."""
    idx = np.asarray(idx, dtype=np.int64)
    rec = RecorderView([(res.recorder, idx, np.arange(len(idx)))], len(idx),
                       steps_from=(res.recorder,))
    return dataclasses.replace(
        res, specs=subset_specs(res.specs, idx, arrival_s), recorder=rec,
        status=res.status[idx], num_preemptions=res.num_preemptions[idx],
        cached_tokens=res.cached_tokens[idx], generated=res.generated[idx], never_sent=0,
        shortened=shortened, client_queue_s=None)


def combine(views: list[RunResult], arrival_s: list[np.ndarray] | None = None) -> RunResult:
    """Several replicas' own results (``restrict``) as one, requests in arrival order
    (``arrival_s``: other arrival times per view, e.g. the client's send times)."""
    arrs = arrival_s or [v.specs.arrival_s for v in views]
    allarr = np.concatenate([np.zeros(0)] + list(arrs))
    order = np.argsort(allarr, kind="stable")
    pos = np.empty(len(order), dtype=np.int64)
    pos[order] = np.arange(len(order))
    offsets = np.concatenate(([0], np.cumsum([len(v.specs) for v in views])))
    srcs = [(v.recorder, np.arange(len(v.specs)), pos[offsets[i]:offsets[i + 1]])
            for i, v in enumerate(views)]
    settings = [_settings(v) for v in views]
    rec = RecorderView(srcs, len(order), steps_from=[v.recorder for v in views],
                       settings=settings if len({tuple(s.values()) for s in settings}) > 1
                       else None)
    cat = lambda name: np.concatenate([getattr(v, name) for v in views])[order]  # noqa: E731
    specs = _cat_specs([v.specs for v in views], order, allarr[order])
    first = views[0]
    run = dataclasses.replace(first.run, end_s=max(v.run.end_s for v in views),
                              stopped_at_limit=any(v.run.stopped_at_limit for v in views),
                              stuck=sum(v.run.stuck for v in views))
    return dataclasses.replace(
        first, specs=specs, recorder=rec, status=cat("status"),
        num_preemptions=cat("num_preemptions"), cached_tokens=cat("cached_tokens"),
        generated=cat("generated"), recomputed_tokens=sum(v.recomputed_tokens for v in views),
        counters=_sum_counters([v.counters for v in views]),
        kv_total_blocks=sum(v.kv_total_blocks for v in views), run=run,
        shortened=sum(v.shortened for v in views), drain_cut=any(v.drain_cut for v in views),
        warnings=tuple(dict.fromkeys(w for v in views for w in v.warnings)),
        client_queue_s=None, extras=None,
        speculative=_sum_speculative([v.speculative for v in views if v.speculative]),
        # the host part of a step's price is the view's own cost model's: one for all the
        # steps only where every view's pool prices steps alike (else no schedule block)
        host_times=first.host_times if all(
            v.resolved.scenario == first.resolved.scenario for v in views) else None)


def _cat_specs(parts: list[RequestSpecs], order: np.ndarray, arrival: np.ndarray):
    def cat(name):
        a = np.concatenate([getattr(p, name) for p in parts])[order]
        a.flags.writeable = False
        return a
    hashes = [h for p in parts for h in p.prefix_hashes]
    arrival = np.ascontiguousarray(arrival)
    arrival.flags.writeable = False
    return RequestSpecs(cat("request_id"), arrival, cat("prompt_tokens"), cat("output_tokens"),
                        cat("priority"), cat("lane"), parts[0].lane_names,
                        tuple(hashes[i] for i in order.tolist()), parts[0].hash_block_size)


def _sum_counters(items: list[dict]) -> dict:
    """Counters of several replicas: numbers add up, flags are any, text is the first's."""
    out: dict = {}
    for c in items:
        for k, v in c.items():
            if isinstance(v, bool):
                out[k] = out.get(k, False) or v
            elif isinstance(v, (int, float, np.integer, np.floating)):
                out[k] = out.get(k, 0) + v
            else:
                out[k] = out.get(k) or v
    return out


def _settings(v: RunResult) -> dict:
    """The engine settings the summary judges each step by (sim/metrics/batch_limits.py,
    the KV waste of summary.kv_block)."""
    lim = v.resolved.limits
    return {"max_num_seqs": lim.max_num_seqs,
            "max_num_batched_tokens": lim.max_num_batched_tokens,
            "block_size": v.resolved.block_size}


def _sum_speculative(blocks: list[dict]) -> dict | None:
    """The speculative blocks of several replicas as one: totals add up, rates and the
    mean acceptance length come from the totals; the method, draft length and expected
    acceptance are kept where every replica has the same (else None)."""
    if len(blocks) <= 1:
        return blocks[0] if blocks else None

    def same(key):
        vals = {repr(b.get(key)) for b in blocks}
        return blocks[0].get(key) if len(vals) == 1 else None

    total = lambda key: sum(b[key] for b in blocks)  # noqa: E731
    hists = [b["accepted_histogram"] for b in blocks]
    hist = [sum(h) for h in zip(*hists)] if len({len(h) for h in hists}) == 1 else None
    out = acceptance_summary(same("method"), same("num_speculative_tokens"),
                             total("verify_steps"), total("draft_tokens"),
                             total("accepted_tokens"), same("expected_acceptance_length"), hist)
    if all("draft_s" in b for b in blocks):  # the drafter's time, where it is priced
        out |= time_summary(total("draft_s"), total("verify_s"))
    return out
