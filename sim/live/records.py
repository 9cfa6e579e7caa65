"""Per-step measurements of a live run, and the summary section they add up to.

``live_steps.parquet`` (next to ``steps.parquet``, same ``step`` numbers):

    step, kind (prefill | mixed | decode), tokens, requests, prefill_tokens, decode_seqs,
    duration_s   the time the simulated clock advanced (layers scaled, see LiveParams)
    measured_s   the chosen clock's reading, unscaled
    layers_s     of which the executed transformer blocks
    wall_s, cpu_s   both CPU clocks (CUDA: the events' time and the host's CPU time)
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sim.live.timer import StepTiming

COLUMNS = ("kind", "tokens", "requests", "prefill_tokens", "decode_seqs", "duration_s",
           "measured_s", "layers_s", "wall_s", "cpu_s")


def step_kind(prefill_tokens: int, decode_seqs: int) -> str:
    """prefill (no decode-shaped request), decode (only decode-shaped ones) or mixed."""
    if decode_seqs == 0:
        return "prefill"
    return "decode" if prefill_tokens == 0 else "mixed"


class StepRecords:
    def __init__(self):
        self.rows: dict[str, list] = {c: [] for c in COLUMNS}

    def add(self, num_tokens: np.ndarray, duration_s: float, t: StepTiming) -> None:
        dec = num_tokens == 1
        pre_tok, dec_seqs = int(num_tokens[~dec].sum()), int(dec.sum())
        values = (step_kind(pre_tok, dec_seqs), int(num_tokens.sum()), len(num_tokens),
                  pre_tok, dec_seqs, duration_s, t.step_s, t.layers_s, t.wall_s, t.cpu_s)
        for c, v in zip(COLUMNS, values):
            self.rows[c].append(v)

    def __len__(self) -> int:
        return len(self.rows["kind"])

    def truncate(self, n: int) -> None:
        """Keep the first ``n`` steps (a run the engine cut shorter than executed)."""
        for c in COLUMNS:
            del self.rows[c][n:]

    def table(self) -> pd.DataFrame:
        df = pd.DataFrame(self.rows, columns=list(COLUMNS))
        df.insert(0, "step", np.arange(len(df), dtype=np.int64))
        return df

    def totals(self) -> dict:
        r = self.rows
        return {"steps": len(self), "duration_s": float(np.sum(r["duration_s"])),
                "measured_s": float(np.sum(r["measured_s"])),
                "layers_s": float(np.sum(r["layers_s"])), "wall_s": float(np.sum(r["wall_s"])),
                "cpu_s": float(np.sum(r["cpu_s"]))}
