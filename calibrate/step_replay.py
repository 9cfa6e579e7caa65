"""Per-step contexts a step log lacks, from a replay of servesim's own scheduler.

vLLM's iteration details count requests and tokens per step but not the context each
request read. The engine's decisions are reproduced by servesim's ``vllm`` scheduler
(step for step: the conformance tests), so replaying the trace with every step forced to
the logged duration gives each step's requests, tokens and contexts. Replay and log are
walked together and paired while their counts (requests, tokens) agree; after a mismatch
they resynchronise on the next few steps. Unpaired log steps keep NaN contexts (the fit
leaves them out) and are counted.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sim.config.load import LoadedScenario
from sim.cost.base import StepShape
from sim.cost.stepfit import features
from sim.pipeline import prepare
from sim.runner import simulate

DERIVED = ("prefill_tokens", "pairs", "decode_seqs", "context_tokens", "max_context",
           "max_prompt")
LOOKAHEAD = 4


@dataclass(frozen=True)
class Replay:
    frame: pd.DataFrame  # the log's rows with DERIVED filled (approximately where unpaired)
    paired: int  # log steps paired exactly with a replayed step
    steps: int  # log steps


class _Replay:
    """Executor and on_plan callback of the replay, pairing replayed steps with logged ones.

    Each replayed step takes the duration of the logged step it is paired with: the next
    logged step, or one a few steps on whose counts (requests, tokens) match (the replay
    skipped steps the engine made); a replayed step matching none (one the engine did not
    make) stays unpaired and takes the typical duration of such a step (``_like``). A priced
    decode run may be cut short before it commits, so the pairing advances on commit."""

    def __init__(self, log_sig: np.ndarray, durations: np.ndarray,
                 log_start: np.ndarray | None = None):
        self.sig, self.durations = log_sig, durations
        self.start = log_start  # logged step starts (s), to resynchronise by time
        self.clock = 0.0  # end of the last committed replayed step (s)
        self.pos = 0  # next logged step to pair
        self.pending: list[int] = []  # log index (-1: none) per step of the priced plan
        self.rows: list[dict[str, np.ndarray]] = []
        self.paired: list[int] = []  # log index per committed replayed step

    def _match(self, sig: np.ndarray, pos: int) -> int:
        for m in range(pos, min(pos + LOOKAHEAD + 1, len(self.sig))):
            if (self.sig[m] == sig).all():
                return m
        return -1

    def _resync(self, sig: np.ndarray, clock: float) -> int:
        """A match among the logged steps starting around ``clock`` (-1: none)."""
        if self.start is None:
            return -1
        tol = float(np.median(self.durations))
        return self._match(sig, int(np.searchsorted(self.start, clock - tol)))

    def step_times(self, plan) -> np.ndarray:
        sig = np.array([plan.batch_size, plan.total_tokens], dtype=np.float64)
        pos, self.pending, out = self.pos, [], []
        for _ in range(plan.num_steps):
            m = self._match(sig, pos)
            if m < 0:  # drifted further than the lookahead: find the step by time
                m = self._resync(sig, self.clock + sum(out))
            self.pending.append(m)
            out.append(self.durations[m] if m >= 0 else self._like(sig, pos))
            pos = m + 1 if m >= 0 else pos
        return np.asarray(out)

    def _like(self, sig: np.ndarray, pos: int) -> float:
        """Duration of an unpaired replayed step: the median of nearby logged steps with its
        counts, else of the last logged step (a step the engine did not make must not move
        the replay's clock by an unrelated step's time)."""
        lo, hi = max(0, pos - 64), min(len(self.sig), pos + 64)
        same = np.flatnonzero((self.sig[lo:hi] == sig).all(axis=1)) + lo
        if len(same):
            return float(np.median(self.durations[same]))
        return float(self.durations[min(max(pos - 1, 0), len(self.durations) - 1)])

    def __call__(self, plan, starts, durations, outcome) -> None:
        done = self.pending[: plan.num_steps]
        self.paired += done
        self.pos = max([self.pos] + [m + 1 for m in done])
        self.clock = float(starts[-1] + durations[-1])
        f = features(StepShape.of(plan))
        k, dec = plan.num_steps, plan.num_tokens == 1
        last = plan.context_lens + plan.num_tokens
        pre = float(last[~dec].max()) if (~dec).any() else np.nan
        f["max_prompt"] = np.full(k, pre)
        ctx0 = float(plan.context_lens[dec].max()) + 1 if dec.any() else np.nan
        f["max_context"] = ctx0 + np.arange(k)
        self.rows.append(f)

    def frame(self) -> pd.DataFrame:
        keys = self.rows[0].keys() if self.rows else ()
        return pd.DataFrame({k: np.concatenate([r[k] for r in self.rows]) for k in keys})


def _durations(log: pd.DataFrame) -> np.ndarray:
    """Each logged step's duration for the replay (s): its interval, or for a step after
    which the engine idled, its execution time plus the typical host time."""
    iv, ex = log["interval_ms"].to_numpy(np.float64), log["exec_ms"].to_numpy(np.float64)
    host = np.nanmedian(iv - ex) if np.isfinite(iv - ex).any() else 0.0
    fill = np.where(np.isfinite(ex), ex + host, np.nanmedian(iv) if np.isfinite(iv).any()
                    else 10.0)
    return np.where(np.isfinite(iv), iv, fill) * 1e-3


def _nearest(pairs: np.ndarray, n_sim: int) -> np.ndarray:
    """For every log step, a replayed step: its pair, else the one at the same offset from
    the last paired step before it (the first replayed steps before any pair)."""
    idx = np.arange(len(pairs))
    anchor = np.maximum.accumulate(np.where(pairs >= 0, idx, -1))
    offset = np.where(anchor >= 0, pairs[np.maximum(anchor, 0)] - anchor, 0)
    return np.clip(idx + offset, 0, max(n_sim - 1, 0))


def _approximate(out: pd.DataFrame, sim: pd.DataFrame, rows: np.ndarray, near: np.ndarray):
    """Contexts of unpaired log steps from a nearby replayed step, scaled to the logged
    counts: mean context per decode request, query-key pairs per prefill token."""
    d_log = out["decode_seqs"].to_numpy(np.float64)[rows]
    p_log = out["prefill_tokens"].to_numpy(np.float64)[rows]
    s = sim.iloc[near]
    d_sim, p_sim = s["decode_seqs"].to_numpy(), s["prefill_tokens"].to_numpy()
    with np.errstate(invalid="ignore", divide="ignore"):
        ctx = np.where(d_log == 0, 0.0, s["context_tokens"].to_numpy() / d_sim * d_log)
        pairs = np.where(p_log == 0, 0.0, s["pairs"].to_numpy() / p_sim * p_log)
    out.loc[out.index[rows], "context_tokens"] = np.where(np.isfinite(ctx), ctx, np.nan)
    out.loc[out.index[rows], "pairs"] = np.where(np.isfinite(pairs), pairs, np.nan)
    out.loc[out.index[rows], "max_context"] = s["max_context"].to_numpy()
    out.loc[out.index[rows], "max_prompt"] = s["max_prompt"].to_numpy()


def derive_contexts(log: pd.DataFrame, loaded: LoadedScenario,
                    ingress_s: float = 0.0) -> Replay:
    """Fill a log's missing contexts from a replay of ``loaded`` (its trace, engine knobs).

    Paired steps take the replayed step's quantities; the others keep their logged counts
    and take contexts from the replayed step at the same offset from the last pair."""
    r, specs, _ = prepare(loaded)
    seen = dataclasses.replace(specs, arrival_s=specs.arrival_s + ingress_s)
    tokens = (log["prefill_tokens"] + log["decode_seqs"]).to_numpy(np.float64)
    sig = np.column_stack([log["requests"].to_numpy(np.float64), tokens])
    start = log["start_s"].to_numpy(np.float64)
    replay = _Replay(sig, _durations(log), start if np.isfinite(start).all() else None)
    simulate(r, seen, executor=replay.step_times, on_plan=replay)
    sim, paired = replay.frame(), np.asarray(replay.paired)
    pairs = np.full(len(log), -1)
    pairs[paired[paired >= 0]] = np.flatnonzero(paired >= 0)
    out = log.copy()
    ok = pairs >= 0
    for c in DERIVED:
        out.loc[ok, c] = sim[c].to_numpy()[pairs[ok]]
    rows = np.flatnonzero(~ok)
    if len(rows) and len(sim):
        _approximate(out, sim, rows, _nearest(pairs, len(sim))[rows])
    return Replay(out, int(ok.sum()), len(log))


def _woken(arrival: np.ndarray, steps: list[dict]) -> np.ndarray:
    """Arrivals as the replay's scheduler should see them: one the engine received while
    idle (after a step's end, before the next start) is seen when the engine's loop woke
    and started that next step (~0.2 ms later on the CPU engine); the replay, which starts a
    step at the arrival, would otherwise run that far ahead of the engine until the next
    idle, and take a request that reached the engine just before a step's start one step
    late."""
    starts = np.array([s["start_s"] for s in steps], dtype=np.float64)
    ends = np.array([s["end_s"] for s in steps], dtype=np.float64)
    nxt = np.searchsorted(starts, arrival, side="left")  # first step starting at/after it
    ok = (nxt > 0) & (nxt < len(starts))
    idle = np.zeros(len(arrival), dtype=bool)
    idle[ok] = ends[nxt[ok] - 1] <= arrival[ok]  # the step before had ended: engine idle
    idle |= (nxt == 0) & (len(starts) > 0)
    out = arrival.copy()
    out[idle] = starts[np.minimum(nxt[idle], len(starts) - 1)]
    return np.maximum.accumulate(out)


def same_steps(run_dir, log: pd.DataFrame, loaded: LoadedScenario) -> tuple[int, int]:
    """(identical, logged): steps the scheduler makes exactly as the engine did when the
    replay gets the engine's own arrival times (its input thread's receipt, ``seen_s``) and
    every step the logged duration. Measures the scheduler alone, not the step times."""
    from sim.report.recorded import read_run

    rec = read_run(run_dir)
    seen = {r["request_id"]: r["seen_s"] for r in rec.requests}
    r, specs, _ = prepare(loaded)
    arrival = _woken(np.maximum.accumulate([seen[str(i)] for i in specs.request_id]),
                     rec.steps)
    tokens = (log["prefill_tokens"] + log["decode_seqs"]).to_numpy(np.float64)
    sig = np.column_stack([log["requests"].to_numpy(np.float64), tokens])
    replay = _Replay(sig, _durations(log), log["start_s"].to_numpy(np.float64))
    made: list[dict] = []

    def on_plan(plan, starts, durations, outcome):
        ids = [str(specs.request_id[i]) for i in plan.req_ids]
        made.extend([dict(zip(ids, plan.num_tokens.tolist()))] * plan.num_steps)
        replay(plan, starts, durations, outcome)

    simulate(r, dataclasses.replace(specs, arrival_s=arrival), executor=replay.step_times,
             on_plan=on_plan)
    logged = [s["tokens"] for s in rec.steps]
    return sum(a == b for a, b in zip(made, logged)), len(logged)
