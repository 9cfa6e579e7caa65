"""The server's stamped Iteration lines as a vLLM step log (JSON lines, one object per step).

record.py stamps every log line with the wall clock (s, to the microsecond). vLLM's
frontend logs a step's "Iteration(N): ..." line when that step's outputs reach it, so
consecutive stamps are one step apart: a step's interval (its start to the next step's
start, while the engine stays busy) is the stamp of the step minus the stamp of the one
before, whatever the (roughly constant) delay from the engine core to the frontend. Each
step becomes

    {"num_ctx_requests": A, "num_ctx_tokens": B, "num_generation_requests": C,
     "num_generation_tokens": D, "elapsed_ms": E, "start_s": s, "end_s": e,
     "idle_after": false}

with end_s = its stamp, start_s = the previous step's stamp, or its stamp minus its
execution time after an idle spell, and idle_after when the next step's stamp comes later
than its execution plus IDLE_MS could explain (the engine waited for work). Times are
seconds from the first stamp.

    python server_steps.py server_steps.log.gz > server_steps.jsonl
"""

from __future__ import annotations

import gzip
import json
import re
import sys
from pathlib import Path

LINE = re.compile(
    r"^(\d+\.\d+) .*Iteration\((\d+)\): (\d+) context requests, (\d+) context tokens, "
    r"(\d+) generation requests, (\d+) generation tokens, iteration elapsed time: "
    r"([0-9.]+) ms(?! \(dummy\))")
IDLE_MS = 10.0  # more than this between steps beyond the next step's execution: idle


def parse(text: str) -> list[tuple]:
    """(stamp s, A, B, C, D, elapsed ms) per stamped Iteration line, in log order."""
    out = []
    for line in text.splitlines():
        m = LINE.match(line)
        if m:
            out.append((float(m[1]), *(int(m[i]) for i in range(3, 7)), float(m[7])))
    return out


def steps(rows: list[tuple]) -> list[dict]:
    """The step-log records (see the module docstring)."""
    if not rows:
        return []
    t0, out = rows[0][0], []
    for i, (stamp, a, b, c, d, ms) in enumerate(rows):
        idle_before = i == 0 or out[-1]["idle_after"]
        start = stamp - ms / 1e3 if idle_before else rows[i - 1][0]
        nxt = rows[i + 1] if i + 1 < len(rows) else None
        idle_after = nxt is None or (nxt[0] - stamp) * 1e3 > nxt[5] + IDLE_MS
        out.append({"num_ctx_requests": a, "num_ctx_tokens": b, "num_generation_requests": c,
                    "num_generation_tokens": d, "elapsed_ms": ms,
                    "start_s": round(start - t0, 6), "end_s": round(stamp - t0, 6),
                    "idle_after": idle_after})
    return out


def read(path: Path) -> list[dict]:
    raw = path.read_bytes()
    text = (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode()
    return steps(parse(text))


if __name__ == "__main__":
    for rec in read(Path(sys.argv[1])):
        print(json.dumps(rec))
