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
    frame: pd.DataFrame  # the log's rows with DERIVED filled where paired
    paired: int  # log steps paired with a replayed step
    steps: int  # log steps


class _Collect:
    """on_plan callback: the features of every replayed step."""

    def __init__(self):
        self.rows: list[dict[str, np.ndarray]] = []

    def __call__(self, plan, starts, durations, outcome) -> None:
        f = features(StepShape.of(plan))
        k, dec = plan.num_steps, plan.num_tokens == 1
        f["tokens"] = np.full(k, float(plan.total_tokens))
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


def _executor(durations: np.ndarray):
    state = {"next": 0}

    def step_times(plan):
        i = state["next"]
        state["next"] = i + plan.num_steps
        idx = np.minimum(np.arange(i, i + plan.num_steps), len(durations) - 1)
        return durations[idx]

    return step_times


def pair_steps(log_sig: np.ndarray, sim_sig: np.ndarray) -> np.ndarray:
    """For each log step, the index of the replayed step paired with it (-1: none)."""
    out = np.full(len(log_sig), -1)
    i = j = 0
    while i < len(log_sig) and j < len(sim_sig):
        if (log_sig[i] == sim_sig[j]).all():
            out[i], i, j = j, i + 1, j + 1
            continue
        skip = next(((a, b) for d in range(1, LOOKAHEAD + 1) for a, b in ((d, 0), (0, d), (d, d))
                     if i + a < len(log_sig) and j + b < len(sim_sig)
                     and (log_sig[i + a] == sim_sig[j + b]).all()), (1, 1))
        i, j = i + skip[0], j + skip[1]
    return out


def derive_contexts(log: pd.DataFrame, loaded: LoadedScenario,
                    ingress_s: float = 0.0) -> Replay:
    """Fill a log's missing contexts from a replay of ``loaded`` (its trace, engine knobs)."""
    r, specs, _ = prepare(loaded)
    seen = dataclasses.replace(specs, arrival_s=specs.arrival_s + ingress_s)
    collect = _Collect()
    simulate(r, seen, executor=_executor(_durations(log)), on_plan=collect)
    sim = collect.frame()
    tokens = (log["prefill_tokens"] + log["decode_seqs"]).to_numpy(np.float64)
    pairs = pair_steps(np.column_stack([log["requests"].to_numpy(np.float64), tokens]),
                       sim[["requests", "tokens"]].to_numpy(np.float64))
    out = log.copy()
    ok = pairs >= 0
    for c in DERIVED:
        out.loc[ok, c] = sim[c].to_numpy()[pairs[ok]]
        if c not in ("prefill_tokens", "decode_seqs"):
            out.loc[~ok, c] = np.nan
    return Replay(out, int(ok.sum()), len(log))
