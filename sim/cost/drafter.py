"""The drafter's time in a speculative-decoding step, by vLLM method.

vLLM 0.32 runs the drafter inside the step, after the target model's forward (which verifies
the scheduled drafts: its price is the step's ordinary price, each decoding request a query
of 1 + K tokens over its context) and sampling, so a step lasts verify + draft. The drafter
proposes K tokens for the batch: one pass over the step's tokens (the EAGLE proposer and a
draft model both take the target's scheduled positions first), then K - 1 passes of one
token per request. Each pass is priced by the scenario's own cost model (same GPU, TP and
profile) on the drafter's shape, kernels only (its host share is the step's):

* eagle, eagle3: a head of one decoder layer of the target's shape (dense MLP of the target's
  intermediate size) and the target's lm_head. Assumption: EAGLE-3's fusion layer (3 hidden
  states -> 1) and a smaller draft vocabulary are left out; SpecDecode-Bench measured 2.1 ms
  per K = 3 draft for Llama-3.1-8B on H100 in vLLM 0.10.1 (github.com/SpecDecode-Bench/
  simulator predictor.py ``Llama8BH100.draft_c_fixed``), this prices 1.9 ms.
* mtp: one layer of the target itself (a MoE layer for MoE models) and its lm_head.
* draft_model: the catalog model named by ``speculative_config.model``.
* ngram: on the host; 0.5875 % of the verify time (SpecDecode-Bench's measured share on
  H100, the same file's ``ngram_draft_percentage``). ngram_gpu, the same lookup as a GPU
  kernel, is given that share too (an assumption: no published timing of it).

A cost model that prices whole steps by formula (``linear``) adds no drafter time: its
coefficients are the whole step (the conformance cases rely on that).
"""

from __future__ import annotations

import numpy as np

from sim.config.speculative import SpeculativeConfig
from sim.engine.plan import StepPlan

NGRAM_SHARE = 0.005875  # n-gram drafting / verify time (SpecDecode-Bench, H100, vLLM 0.10.1)


def drafter_of(cost, resolved) -> Drafter | None:
    """The scenario's drafter priced like ``cost`` (None: no speculative_config, or the cost
    model prices whole steps by formula)."""
    spec = resolved.scenario.engine.speculative_config
    return Drafter.build(spec, cost, resolved) if spec is not None else None


def priced_steps(cost, resolved) -> tuple:
    """(what a step costs, the drafter): ``cost.step_times``, or verify + draft where the
    scenario speculates (``drafter_of``; None: no drafter of its own)."""
    drafter = drafter_of(cost, resolved)
    return (cost.step_times if drafter is None else drafter.step_times), drafter


class Drafter:
    """Prices the drafter's part of each planned step; keeps the totals for the summary."""

    def __init__(self, cfg: SpeculativeConfig, target_cost, draft_cost=None):
        self.cfg, self.k = cfg, cfg.num_speculative_tokens
        self.target, self.draft = target_cost, draft_cost
        self.draft_s = 0.0  # drafter time charged (s)
        self.verify_s = 0.0  # the target's step time in speculative steps (s)
        self._hosts: dict[tuple[int, int], float] = {}  # (tokens, requests) -> host s
        # (verify s, draft s) of each step priced since the last plan was committed: an
        # engine may cut a run it priced, so only the steps it ran are counted (settle)
        self._pending: list[tuple[float, float]] = []

    @classmethod
    def build(cls, cfg: SpeculativeConfig, cost, resolved) -> Drafter | None:
        """The drafter of ``cfg`` priced like ``cost`` (None: the cost model prices steps by
        formula, so the drafter is in its coefficients)."""
        if not getattr(cost, "prices_shapes", False) or cost.host_times(
                np.array([1]), np.array([1])) is None:
            return None
        model = cfg.drafter_spec(resolved.model)
        if model is None:  # n-gram
            return cls(cfg, cost)
        params = resolved.scenario.cost.params
        draft = type(cost)(model, resolved.gpu, resolved.tp, params, resolved=resolved)
        if hasattr(draft, "async_host"):  # its passes: kernels (host added, then taken off)
            draft.async_host = False
        if hasattr(draft, "share_attention"):  # an EAGLE head attends as a target layer
            draft.share_attention(cost)
        return cls(cfg, cost, draft)

    def step_times(self, plan: StepPlan) -> np.ndarray:
        """The target's price of ``plan`` plus the drafter's (s per step)."""
        if plan.step_contexts is not None:
            return self._run_times(plan)
        verify = self.target.step_times(plan)
        d = self.times(plan, verify)
        self._pending.append((float(verify.sum()), float(d.sum())))
        return verify + d

    def _run_times(self, plan: StepPlan) -> np.ndarray:
        """A verify run (``plan.step_contexts``): each step as ``step_times`` prices it alone,
        all at once where the cost models can (``verify_run_times``), else step by step."""
        verify = self.target.verify_run_times(plan)
        first = None
        if verify is not None and self.draft is not None:
            first = self.draft.verify_run_times(plan)
        if verify is None or (first is None and self.draft is not None):
            return np.concatenate([self.step_times(plan.step(j))
                                   for j in range(plan.num_steps)])
        if self.draft is None:  # n-gram: host-side lookup
            d = verify * NGRAM_SHARE
        else:
            tok = plan.num_tokens
            n, total = len(tok), int(tok.sum())
            d = first - self._host(total, n)
            if self.k > 1:
                for i, base in enumerate((plan.step_contexts.sum(axis=1) + total).tolist()):
                    d[i] += self._passes(n, base)
            d = np.maximum(d, 0.0)
        self._pending.extend(zip(verify.tolist(), d.tolist()))
        return verify + d

    def settle(self, plan, starts, durations, outcome) -> None:
        """An on_plan hook: the plan just committed ran ``len(durations)`` of the steps
        priced for it (a run cut at an arrival runs fewer); count those."""
        for v, d in self._pending[: len(durations)]:
            self.verify_s += v
            self.draft_s += d
        self._pending = []

    def times(self, plan: StepPlan, verify: np.ndarray) -> np.ndarray:
        if self.draft is None:  # n-gram: host-side lookup
            return verify * NGRAM_SHARE
        tok, ctx = plan.num_tokens, plan.context_lens
        n = len(tok)
        c = self.draft
        first = c.step_times(plan) - self._host(int(tok.sum()), n)
        if self.k == 1:
            return np.maximum(first, 0.0)
        return np.maximum(first + self._passes(n, int((ctx + tok).sum())), 0.0)

    def _passes(self, n: int, base: int) -> float:
        """The K - 1 passes of one token per request after the first (s, kernels only), over
        the contexts the first pass left (``base`` tokens in all)."""
        c, rest, host = self.draft, 0.0, self._host(n, n)
        for j in range(self.k - 1):
            rest += c.shape_time1(n, n, [], [], n, base + j * n) - host
        return rest

    def _host(self, total: int, reqs: int) -> float:
        """The draft cost's host time of a pass (s), memoised: passes repeat their shapes."""
        key = (total, reqs)
        t = self._hosts.get(key)
        if t is None:
            if len(self._hosts) >= 4096:
                self._hosts.clear()
            t = self._hosts[key] = float(self.draft.host_times(np.array([total]),
                                                               np.array([reqs]))[0])
        return t

    def summary(self) -> dict:
        return time_summary(self.draft_s, self.verify_s)


def time_summary(draft_s: float, verify_s: float) -> dict:
    """The summary's drafter time: drafting and verifying (s) and drafting's share."""
    return {"draft_s": round(draft_s, 6), "verify_s": round(verify_s, 6),
            "draft_share": round(draft_s / (draft_s + verify_s), 4)
            if draft_s + verify_s > 0 else None}
