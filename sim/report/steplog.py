"""``steps.jsonl``: one JSON object per engine step, for step-by-step comparison.

    {"step": i, "start_s": t, "duration_s": d, "tokens": {"<request_id>": n, ...},
     "preempted": [ids], "finished": [ids], "kv_blocks_used": u}

Decode runs are expanded into their individual steps.
"""

from __future__ import annotations

import json
from typing import IO


class StepLog:
    def __init__(self, fh: IO[str], request_ids):
        self.fh = fh
        self.ids = request_ids
        self.step = 0

    def __call__(self, plan, starts, durations, outcome) -> None:
        names = [str(self.ids[r]) for r in plan.req_ids.tolist()]
        tokens = plan.num_tokens.tolist()
        last = plan.num_steps - 1
        for j in range(plan.num_steps):
            rec = {
                "step": self.step, "start_s": float(starts[j]), "duration_s": float(durations[j]),
                "tokens": dict(zip(names, tokens)),
                "preempted": [str(self.ids[r]) for r in plan.preempted.tolist()] if j == 0 else [],
                "finished": [str(self.ids[r]) for r in outcome.finished.tolist()]
                if j == last else [],
                "kv_blocks_used": int(outcome.kv_blocks_used[j]),
            }
            self.fh.write(json.dumps(rec) + "\n")
            self.step += 1
