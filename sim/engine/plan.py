"""The seam between scheduler and step executor: small frozen records.

A step plan says, per scheduled request, how many tokens it computes and how many
tokens it already had in the KV cache. The executor (a cost model, or the live GPU
executor) turns a plan into step durations; the scheduler turns the plan plus those
durations into an outcome (tokens emitted, requests finished).

A plan may stand for a *run* of ``num_steps`` identical-shape decode steps: every
scheduled request computes exactly one token per step, and in step ``j`` (0-based)
its context is ``context_lens + j``. With speculative decoding a run is of verify steps:
each request computes ``num_tokens`` (its last token and K drafts) in every step, and its
context in step ``j`` is ``step_contexts[j]`` (it grows by what the step accepted). The
scheduler only emits such runs when it has
proved that planning each step separately would produce exactly these steps
(nothing finishes before the last one, every KV allocation succeeds, and no waiting
request could be admitted — or, if ``interruptible``, none arrives). This is what
lets an hour-long trace replay in seconds.

    request r:  |<------ context_lens[r] ------>|<- num_tokens[r] ->|
                 tokens already in KV (computed)   computed this step
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

_EMPTY = np.zeros(0, dtype=np.int64)


def _frozen_array(values) -> np.ndarray:
    arr = np.asarray(values, dtype=np.int64)
    arr.flags.writeable = False
    return arr


@dataclass(frozen=True)
class StepPlan:
    """What one engine step (or a run of identical decode steps) computes.

    Invariants: ``req_ids``, ``num_tokens`` and ``context_lens`` have equal length;
    ``num_tokens >= 1``; ``num_steps > 1`` only when every ``num_tokens == 1`` or
    ``step_contexts`` ([num_steps, batch], row 0 ``context_lens``) gives each step's
    contexts (a speculative verify run).
    """

    req_ids: np.ndarray  # request indices, in schedule order
    num_tokens: np.ndarray  # tokens computed this step per request (tokens)
    context_lens: np.ndarray  # tokens already in the KV cache before this step (tokens)
    preempted: np.ndarray = field(default_factory=lambda: _EMPTY)  # request indices
    num_steps: int = 1  # >1: a run of decode steps, see module docstring
    interruptible: bool = True  # an arrival during a run could change the schedule
    swap_out_bytes: int = 0  # KV bytes moved GPU -> host before this step (bytes)
    swap_in_bytes: int = 0  # KV bytes moved host -> GPU before this step (bytes)
    step_contexts: np.ndarray | None = None  # a verify run's contexts per step (tokens)

    @staticmethod
    def build(req_ids, num_tokens, context_lens, preempted=(), **kw) -> StepPlan:
        """Build a plan from array-likes, freezing the arrays."""
        return StepPlan(
            _frozen_array(req_ids), _frozen_array(num_tokens), _frozen_array(context_lens),
            _frozen_array(preempted), **kw,
        )

    @property
    def batch_size(self) -> int:
        """Requests scheduled in each step."""
        return len(self.req_ids)

    @property
    def total_tokens(self) -> int:
        """Tokens computed in one step (the token budget's unit)."""
        return int(self.num_tokens.sum())

    @property
    def decode_mask(self) -> np.ndarray:
        """Requests whose work this step is decode-shaped: one query token.

        A one-token tail of a chunked prefill counts as decode-shaped: it is the same
        computation (one query against its context).
        """
        return self.num_tokens == 1

    @property
    def num_prefill_tokens(self) -> int:
        return int(self.num_tokens[~self.decode_mask].sum())

    @property
    def num_decode_seqs(self) -> int:
        return int(self.decode_mask.sum())

    def first(self, k: int) -> StepPlan:
        """The same run cut to its first ``k`` steps (1 <= k <= num_steps)."""
        if not 1 <= k <= self.num_steps:
            raise ValueError(f"cannot cut a {self.num_steps}-step plan to {k} steps")
        if k == self.num_steps:
            return self
        return StepPlan(
            self.req_ids, self.num_tokens, self.context_lens, self.preempted, k,
            self.interruptible, self.swap_out_bytes, self.swap_in_bytes,
            None if self.step_contexts is None else self.step_contexts[:k],
        )

    def step(self, j: int) -> StepPlan:
        """Step ``j`` of a verify run (``step_contexts``) as a plan of its own: what it
        costs is what that step planned alone would cost."""
        return StepPlan(self.req_ids, self.num_tokens, self.step_contexts[j],
                        self.preempted if j == 0 else _EMPTY, 1, self.interruptible,
                        self.swap_out_bytes if j == 0 else 0,
                        self.swap_in_bytes if j == 0 else 0)


@dataclass(frozen=True)
class StepResult:
    """What executing a plan took: one duration per step (seconds)."""

    durations_s: np.ndarray


@dataclass(frozen=True)
class StepOutcome:
    """What committing a plan changed, for metrics and logs.

    For a multi-step run every scheduled request emits in every step (one token; a verify
    run's, 1 + what it accepted).
    """

    emitted: np.ndarray  # request indices that emitted a token in the (last) step
    first_tokens: np.ndarray  # request indices whose first output token came in this plan
    finished: np.ndarray  # request indices that finished at the plan's last step
    kv_blocks_used: np.ndarray  # KV blocks in use during each step (blocks) [num_steps]
    num_running: int  # running requests after the plan was scheduled
    num_waiting: int  # waiting requests when the plan was scheduled
    kv_tokens: np.ndarray  # tokens whose KV the held blocks store, after each step [num_steps]
    blocked: str = ""  # why admission stopped when the plan was made ('' = queue drained)
