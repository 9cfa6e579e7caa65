"""Speculative decoding's scheduler state: drafts held, the acceptance draws, the counts.

vLLM 0.32 (v1/core/sched/scheduler.py), as the vllm schedulers apply it (sim/sched/vllm.py):

* after a step, every request that sampled (not a mid-prefill chunk) and did not finish
  holds K drafts (``update_draft_token_ids``, 2550-2569; the model-less recorder supplies K
  for every such request);
* a running request asks for ``known + drafts - computed`` tokens (703-706), capped as
  any demand; the drafts that fit are its scheduled drafts (861-876) and it holds none
  until the next step's drafts arrive;
* a waiting request resuming with one token to compute, with a running request scheduled
  or computed tokens found, is padded to 1 + K with placeholder drafts (1131-1155: "pad
  new decode requests to uniform spec decoding size"), unless that passes max_model_len;
  a budget short of 1 + K stops admission ("prefer to not schedule than schedule
  un-padded"); placeholders are never accepted;
* the update takes back the rejected drafts (``num_computed_tokens -= num_rejected``,
  2110-2125) and appends 1 + accepted tokens, stopping at max_tokens;
* a preempted request drops its drafts (1594).

Async scheduling (async_scheduler.py; the plan for a step is made while the step before it
runs): vLLM counts that step's 1 + K tokens as computed with placeholder drafts, so KV slots
are reserved for its rejected drafts too (``inflight``, until the next update) and
max_model_len counts them; a request that step finishes with more than one token (drafts
accepted) was still expected to need one more (its skip rule, scheduler.py:662-676, knows only
that a step emits one token at least), so it is scheduled once more for 1 + K tokens that
produce nothing (``ghosts``), and preempting it frees its blocks and leaves it finished.

Acceptance: the j-th verify step of request r with d real drafts accepts the leading drafts
whose uniform ``u(seed, r, j, i)`` is below the conditional rate of position i. The uniform
is a splitmix64 hash of its key, so the draw of one verify step does not depend on what else
ran (the conformance recorder computes the same function; tests compare the two).
"""

from __future__ import annotations

import numpy as np

from sim.config.speculative import SpeculativeConfig

_M64 = (1 << 64) - 1
# requests by id whose draws a draw makes ahead of need, beside the ones it was called for
# (requests join the batch about in id order: one numpy pass serves the next ones too)
DRAW_AHEAD = 64


def _mix(x: int) -> int:
    """splitmix64's finalizer."""
    x &= _M64
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & _M64
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def uniform(seed: int, req: int, step: int, pos: int) -> float:
    """A uniform in [0, 1) keyed by (seed, request, its verify step, draft position)."""
    h = _mix(seed ^ 0x5EC0DE)
    for k in (req, step, pos):
        h = _mix(h ^ (k + 0x632BE59BD9B4E019))
    return (h >> 11) * (1.0 / (1 << 53))


_C1 = np.uint64(0xBF58476D1CE4E5B9)
_C2 = np.uint64(0x94D049BB133111EB)
_KEY = np.uint64(0x632BE59BD9B4E019)


def _mix_np(x: np.ndarray) -> np.ndarray:
    """``_mix`` on uint64 arrays (multiplication wraps modulo 2^64, as ``& _M64`` does)."""
    x = x ^ (x >> np.uint64(30))
    x = x * _C1
    x = x ^ (x >> np.uint64(27))
    x = x * _C2
    return x ^ (x >> np.uint64(31))


def uniforms(seed: int, reqs: np.ndarray, steps: np.ndarray, k: int) -> np.ndarray:
    """``uniform(seed, r, j, pos)`` for each (r, j) pair and pos < k: [len(reqs), k]."""
    with np.errstate(over="ignore"):
        h = np.full(len(reqs), _mix(seed ^ 0x5EC0DE), dtype=np.uint64)
        h = _mix_np(h ^ (reqs.astype(np.uint64) + _KEY))
        h = _mix_np(h ^ (steps.astype(np.uint64) + _KEY))
        pos = np.arange(k, dtype=np.uint64) + _KEY
        h = _mix_np(h[:, None] ^ pos[None, :])
    return (h >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def accepted(seed: int, rates, req: int, step: int, drafts: int) -> int:
    """Drafts accepted of ``drafts`` at request ``req``'s verify step ``step``."""
    a = 0
    while a < drafts and uniform(seed, req, step, a) < rates[a]:
        a += 1
    return a


class SpecState:
    """Per-request drafts and the acceptance process of one run."""

    def __init__(self, cfg: SpeculativeConfig, seed: int, bound: np.ndarray):
        num_requests = len(bound)
        self.cfg = cfg
        self.k = cfg.num_speculative_tokens
        self.lookahead = cfg.num_lookahead_tokens
        # vLLM's max_num_new_slots_for_drafting (config/speculative.py:1888): 1 for a
        # (sequential) draft model, 0 for the others
        self.draft_slots = 1 if cfg.method == "draft_model" else 0
        self.seed = cfg.acceptance_seed if cfg.acceptance_seed is not None else seed
        self.rates = cfg.conditional_rates()
        self.drafts = np.zeros(num_requests, dtype=np.int64)  # drafts held (tokens)
        self.verifies = [0] * num_requests  # verify steps so far, per request
        # each request's leading accepted drafts of K at its next verify steps, drawn ahead
        # (``_draw``): req -> (the first verify step drawn, one byte each)
        self._lead: dict[int, tuple[int, bytes]] = {}
        # each request's verify steps at most (its output tokens: a verify step emits one
        # at least), an int array. A bound only sizes the draws (a request verifying past
        # it is drawn again), never the outcome
        self.bound = bound
        self._drawn_to = 0  # requests below this id were drawn ahead once (DRAW_AHEAD)
        # whether the request's last scheduled chunk stopped short of its known tokens
        # (vLLM's is_prefill_chunk, as the schedule before this one left it)
        self.chunk = np.zeros(num_requests, dtype=bool)
        self.scheduled: dict[int, tuple[int, bool]] = {}  # req -> (drafts, padded), this plan
        self.padded: set[int] = set()  # padded by the waiting pass of the plan being built
        # async scheduling (vLLM's AsyncScheduler, a batch in flight while it schedules):
        # drafts of the step in flight that vLLM still counts as computed (its rejected
        # ones), and requests that step finished early by acceptance, which vLLM still
        # schedules once more ("ghosts": their tokens produce nothing)
        self.async_ = False
        self.inflight = np.zeros(num_requests, dtype=np.int64)
        self._inflight_at: list = []  # where inflight was set since it was last cleared
        self.ghosts: set[int] = set()
        self.ghost_plan: set[int] = set()
        # totals for the summary: verify steps, drafts scheduled, drafts accepted
        self.num_verifies = self.num_drafts = self.num_accepted = 0
        self.accepted_hist = [0] * (self.k + 1)

    def accept_many(self, reqs: np.ndarray, drafts: np.ndarray) -> np.ndarray:
        """Draw the accepted counts of each request's next verify step (``drafts`` real
        drafts each): ``accepted`` of every request (the same numbers). The leading run of
        accepted positions of d drafts is that of all K cut at d (a draw at position i
        does not depend on d), so each request's runs of K are drawn ahead, a chunk of
        verify steps at a time, and a step only reads them."""
        rs, ds = reqs.tolist(), drafts.tolist()
        ver, lead = self.verifies, self._lead
        self._cover(rs, 1)
        hist, out = self.accepted_hist, []
        for r, d in zip(rs, ds):
            j = ver[r]
            ver[r] = j + 1
            j0, run = lead[r]
            a = run[j - j0]
            if a > d:
                a = d
            out.append(a)
            hist[a] += 1
        self.num_verifies += len(rs)
        self.num_drafts += sum(ds)
        self.num_accepted += sum(out)
        return np.array(out, dtype=np.int64)

    def ahead(self, reqs: list[int], m: int) -> np.ndarray:
        """The accepted drafts of K at each of the next ``m`` verify steps of ``reqs``
        (int64 [len(reqs), m]), drawn but not taken (``take_run``)."""
        ver, lead = self.verifies, self._lead
        self._cover(reqs, m)
        rows = []
        for r in reqs:
            j0, run = lead[r]
            i = ver[r] - j0
            rows.append(run[i:i + m])
        return np.frombuffer(b"".join(rows), np.uint8).reshape(len(reqs), m).astype(np.int64)

    def _cover(self, reqs: list[int], m: int) -> None:
        """Draw ahead for each of ``reqs`` whose draws do not hold its next ``m`` verify
        steps (from its next: ``m`` at least, up to its bound); the next ``DRAW_AHEAD``
        requests by id not drawn yet come along."""
        ver, lead = self.verifies, self._lead
        stale = [r for r in reqs if (c := lead.get(r)) is None
                 or not 0 <= ver[r] - c[0] <= len(c[1]) - m]
        if not stale:
            return
        bound = self.bound
        top = max(stale) + 1
        if top > self._drawn_to - DRAW_AHEAD // 2:  # the next ones, once each
            more = range(max(self._drawn_to, top), min(top + DRAW_AHEAD, len(bound)))
            self._drawn_to = max(self._drawn_to, more.stop)
            stale += [r for r in more if r not in lead]
        left = bound[np.array(stale, dtype=np.int64)].tolist()
        self._draw(stale, [max(m, b - ver[r], 1) for r, b in zip(stale, left)])

    def take_run(self, reqs: list[int], accepted: np.ndarray) -> None:
        """``reqs`` verified K drafts at each step of a run and accepted ``accepted`` [len(reqs),
        steps] of them (their next draws, ``ahead``): counted as ``accept_many`` counts each."""
        k = accepted.shape[1]
        ver = self.verifies
        for r in reqs:
            ver[r] += k
        n = accepted.size
        self.num_verifies += n
        self.num_drafts += n * self.k
        self.num_accepted += int(accepted.sum())
        for a, c in enumerate(np.bincount(accepted.ravel(), minlength=self.k + 1).tolist()):
            self.accepted_hist[a] += c

    def _draw(self, reqs: list[int], counts: list[int]) -> None:
        """Draw the next ``counts[i]`` verify steps of each of ``reqs`` (from its current
        one): the leading accepted positions of K drafts at each."""
        k = self.k
        first = [self.verifies[r] for r in reqs]
        c = np.array(counts, dtype=np.int64)
        ends = np.cumsum(c)
        # each step's request and verify index: reqs[i] at first[i] .. first[i] + c[i] - 1
        offset = np.repeat(np.array(first, dtype=np.int64) - (ends - c), c)
        steps = np.arange(int(ends[-1]), dtype=np.int64) + offset
        u = uniforms(self.seed, np.repeat(np.array(reqs, dtype=np.int64), c), steps, k)
        ok = u < np.asarray(self.rates)[None, :]
        # leading accepted positions: the first False ends the run
        a = np.where(ok.all(axis=1), k, np.argmin(ok, axis=1)).astype(np.uint8).tobytes()
        lead, start = self._lead, 0
        for r, j0, end in zip(reqs, first, ends.tolist()):
            lead[r] = (j0, a[start:end])
            start = end

    def hold_inflight(self, reqs, drafts) -> None:
        """``reqs`` (an index or an array) hold ``drafts`` rejected drafts in flight."""
        self.inflight[reqs] = drafts
        self._inflight_at.append(reqs)

    def clear_inflight(self) -> None:
        """The step in flight's outcome is known: no drafts are in flight (only the
        entries set since the last clear are, so a step's work is not the run's size)."""
        for reqs in self._inflight_at:
            self.inflight[reqs] = 0
        self._inflight_at = []

    def forget(self, reqs) -> None:
        """``reqs`` left the batch for good (finished): their draws ahead go."""
        lead = self._lead
        for r in reqs:
            lead.pop(r, None)

    def summary(self) -> dict:
        return acceptance_summary(self.cfg.method, self.k, self.num_verifies, self.num_drafts,
                                  self.num_accepted, round(1 + self.cfg.mean_accepted(), 4),
                                  list(self.accepted_hist))


def acceptance_summary(method: str | None, k: int | None, verifies: int, drafts: int,
                       accepted: int, expected: float | None,
                       histogram: list[int] | None) -> dict:
    """The summary's acceptance figures from the run's totals: verify steps, drafts scheduled
    and accepted (tokens), the histogram of accepted drafts per verify step."""
    return {
        "method": method, "num_speculative_tokens": k,
        "verify_steps": verifies, "draft_tokens": drafts, "accepted_tokens": accepted,
        # vLLM's "Mean acceptance length": 1 + accepted per verify step (tokens)
        "mean_acceptance_length": round(1 + accepted / verifies, 4) if verifies else None,
        "draft_acceptance_rate": round(accepted / drafts, 4) if drafts else None,
        "expected_acceptance_length": expected,
        "accepted_histogram": histogram,
    }
