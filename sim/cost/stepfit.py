"""Pricing a fit of whole engine steps (``servesim calibrate fit-steps``, kind ``steps``).

    step = execution + host                                                      (ms)
    execution = base + request * R + prefill_token * P + prefill_pair * A
                + decode_seq * max(0, D - knee) + context_token * C
    host = host_base + host_request * R          (absent when the fit priced intervals whole)

per step: R requests scheduled, P tokens of prefill-shaped requests (more than one query
token), A = sum over those of q * (prefix + q / 2) query-key pairs of causal attention over
their cached prefix and themselves, D decode-shaped requests (one query token), C the context
tokens the decode requests read. The knee makes decode piecewise linear in D: below it the
per-request cost is ``request`` alone (on a CPU the first few requests ride along almost
free), beyond it each request adds ``decode_seq`` more. ``features`` is the one definition of
these quantities; the fit (calibrate/steps.py) uses it on logged steps, so what is fitted is
what is priced.

**The first step of a token count.** vLLM on the CPU runs a step of P + D scheduled tokens
it has not run before in the process markedly slower: over the 21 engine runs of 2026-12-03
(benchmarks/engine/runs, bf16 on an AMX Xeon) steps whose token count was the first of its
value in the run took 1.14-1.37x the linear model's time (median, prefill steps) and the
repeats of a count 0.79-0.94x; a fit with N (1 on such a step, else 0) and N * P prices
both within 2 % (NOTES.md, issue 22). The cause: vLLM's CPU linear layers
(``create_onednn_mm``) make a oneDNN matmul primitive per M (the step's token count) on its
first use, JIT code included; oneDNN's global primitive cache then serves the other layers
and later steps. Timed alone on that machine, the first call of the three oneDNN-dispatched
GEMMs (qkv, gate_up, down) costs ~1 ms more at M <= 32, 3.5 at 33-128, 6 at 129-256, 12-15
at 257-512, the same per M in two processes (correlation 0.98); the recorded excess is
~1.8x that (other per-shape setup) and follows P as well as it follows the probe, so P it
is. The pricer keeps the counts a run
has committed (``observe``) and adds the term to the first step of a plan of a new count;
GPU engines run captured graphs and fit it as ~0.

A step outside what the fitted logs covered (batch, decode batch, prefill tokens, context,
prompt) is extrapolated; the run says once how many steps were (``run_warnings``).
"""

from __future__ import annotations

import numpy as np

from sim.cost.base import StepShape
from sim.cost.profile.model_file import HostTerms, StepsFit, StepTerms
from sim.engine.plan import StepPlan

FEATURES = ("requests", "prefill_tokens", "pairs", "decode_seqs", "context_tokens")


def new_shapes(totals) -> np.ndarray:
    """N per step of a run, in order: 1.0 where its scheduled token count (P + D) is the
    first of its value in the run, else 0.0."""
    seen: set[int] = set()
    out = np.zeros(len(totals))
    for i, t in enumerate(np.asarray(totals, dtype=np.int64).tolist()):
        if t not in seen:
            seen.add(t)
            out[i] = 1.0
    return out


def prefill_pairs(q: np.ndarray, prefix: np.ndarray) -> float:
    """Query-key pairs of causal prefill attention: sum q * (prefix + q / 2)."""
    qf = np.asarray(q, dtype=np.float64)
    return float((qf * (np.asarray(prefix, dtype=np.float64) + qf / 2.0)).sum())


def features(s: StepShape) -> dict[str, np.ndarray]:
    """The fitted quantities of each step of a shape (arrays of length num_steps)."""
    k = s.num_steps
    const = {"requests": s.num_reqs, "prefill_tokens": float(s.prefill_q.sum()),
             "pairs": prefill_pairs(s.prefill_q, s.prefill_ctx), "decode_seqs": s.num_decode}
    out = {name: np.full(k, float(v)) for name, v in const.items()}
    out["context_tokens"] = np.asarray(s.decode_ctx, dtype=np.float64)
    return out


def terms_ms(t: StepTerms, f: dict[str, np.ndarray]) -> np.ndarray:
    """A StepTerms model on feature arrays (ms)."""
    knee = np.maximum(f["decode_seqs"] - t.decode_knee, 0.0)
    ms = (t.base_ms + t.request_ms * f["requests"] + t.prefill_token_ms * f["prefill_tokens"]
          + t.prefill_pair_ms * f["pairs"] + t.decode_seq_ms * knee
          + t.context_token_ms * f["context_tokens"])
    if "new_shape" in f and (t.new_shape_ms or t.new_shape_token_ms):
        ms = ms + f["new_shape"] * (t.new_shape_ms + t.new_shape_token_ms * f["prefill_tokens"])
    return ms


def step_ms(fit: StepsFit, f: dict[str, np.ndarray]) -> np.ndarray:
    """Execution plus host time (ms) of steps with features ``f``."""
    ms = terms_ms(fit.execution, f)
    if fit.host is not None:
        ms = ms + fit.host.base_ms + fit.host.request_ms * f["requests"]
    return ms


class StepFitPricer:
    """Prices plans with a ``steps`` fit and counts steps outside its ranges."""

    def __init__(self, fit: StepsFit, source: str, host_base_ms: float | None = None):
        """``host_base_ms`` (cost param step_overhead_ms) replaces the fitted host base."""
        if host_base_ms is not None:
            host = fit.host or HostTerms(base_ms=0.0)
            fit = fit.model_copy(update={"host": host.model_copy(
                update={"base_ms": host_base_ms})})
        self.fit, self.source = fit, source
        self.outside = 0  # steps priced outside the fitted ranges
        self.steps = 0
        self.seen: set[int] = set()  # token counts (P + D) of the steps committed so far
        t = fit.execution
        self._new_shape = bool(t.new_shape_ms or t.new_shape_token_ms)

    def step_times(self, plan: StepPlan) -> np.ndarray:
        """Seconds per step of ``plan`` (swap time is the caller's). Every step of a plan
        schedules the same tokens, so only its first can be the first of its count."""
        f = features(StepShape.of(plan))
        if self._new_shape:
            f["new_shape"] = np.zeros(plan.num_steps)
            f["new_shape"][0] = float(int(plan.num_tokens.sum()) not in self.seen)
        return step_ms(self.fit, f) * 1e-3

    def observe(self, plan: StepPlan) -> None:
        """Count a committed plan's steps, and those outside the fitted ranges; remember its
        token count."""
        s = StepShape.of(plan)
        self.seen.add(int(plan.num_tokens.sum()))
        self.steps += s.num_steps
        if self.fit.ranges is not None:
            self.outside += self._outside(plan, s)

    def _outside(self, plan: StepPlan, s: StepShape) -> int:
        """Steps of the plan beyond a fitted range (a decode run's last step reads most)."""
        r = self.fit.ranges
        dec = plan.num_tokens == 1
        if (s.num_reqs > r.requests or s.num_decode > r.decode_seqs
                or float(s.prefill_q.sum()) > r.prefill_tokens):
            return s.num_steps
        if r.prompt_tokens is not None and (~dec).any():
            if int((plan.context_lens + plan.num_tokens)[~dec].max()) > r.prompt_tokens:
                return s.num_steps
        if r.context_tokens is not None and dec.any():
            first = int(plan.context_lens[dec].max()) + 1  # KV read in the run's first step
            return int(np.clip(first + s.num_steps - 1 - r.context_tokens, 0, s.num_steps))
        return 0

    def warnings(self) -> list[str]:
        if not self.outside:
            return []
        r = self.fit.ranges
        return [f"cost fitted: {self.outside} of {self.steps} steps outside the ranges "
                f"{self.source} was fitted on (batch <= {r.requests}, decode batch <= "
                f"{r.decode_seqs}, prefill tokens <= {r.prefill_tokens}, context <= "
                f"{r.context_tokens}, prompt <= {r.prompt_tokens}): extrapolated"]
