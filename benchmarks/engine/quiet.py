"""A quiet, pinned machine for record.py: refuse to record while it is busy, pin the engine's
compute threads to one core and the client to the others (standard library only).

The engine's step times move with whatever else runs: the committed runs were recorded at
load averages 5-66 on two cores and repeats differed by 3-18 %; on an idle machine of the
same kind by 0.1-11 % (NOTES.md, vllm-cpu.md). So the recorder refuses to start when

    the 1-minute load average is above LOAD_MAX (0.5), or
    the CPUs are more than BUSY_MAX (25 %) busy over a SAMPLE_S (3 s) sample

(``--force`` records anyway, and run.json says so), and pins:

    core 0          vLLM's OpenMP compute threads (VLLM_CPU_OMP_THREADS_BIND=0, one thread)
    cores 1..n-1    this process (client, frontend) and the engine core it spawns
                    (os.sched_setaffinity; VLLM_CPU_NUM_OF_RESERVED_CPU = n - 1)
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from calibrate.fingerprint import cpu_list

LOAD_MAX = 0.5  # 1-minute load average above which the machine is busy
BUSY_MAX = 0.25  # fraction of all CPUs busy over the sample above which it is busy
SAMPLE_S = 3.0
PROC = Path("/proc")
RULE = (f"1-min load > {LOAD_MAX} or CPUs > {BUSY_MAX:.0%} busy over {SAMPLE_S:g} s")


def cpu_ticks(stat_text: str) -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs from /proc/stat's first line."""
    vals = [int(x) for x in stat_text.split("\n", 1)[0].split()[1:]]
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)  # idle + iowait
    total = sum(vals[:8])  # guest time is already in user
    return total - idle, total


def process_ticks(proc: Path = PROC) -> dict[int, tuple[str, int]]:
    """pid -> (command name, user + system jiffies) of every process readable."""
    out = {}
    for p in proc.glob("[0-9]*"):
        try:
            text = (p / "stat").read_text()
            name = text[text.index("(") + 1:text.rindex(")")]
            fields = text.rsplit(")", 1)[1].split()
            out[int(p.name)] = (name, int(fields[11]) + int(fields[12]))
        except (OSError, ValueError, IndexError):
            continue
    return out


def busiest(before: dict, after: dict, window_s: float, hz: float) -> str:
    """'pid 42 pytest (1.6 cores)' for the process that used most CPU in the window."""
    use = [(after[p][1] - before[p][1], p) for p in after if p in before and p != os.getpid()]
    if not use:
        return ""
    ticks, pid = max(use)
    return f"pid {pid} {after[pid][0]} ({ticks / hz / window_s:.1f} cores)"


def busy_reason(sample_s: float = SAMPLE_S, *, loadavg=os.getloadavg,
                read_stat=lambda: (PROC / "stat").read_text(), procs=process_ticks,
                sleep=time.sleep) -> str | None:
    """Why the machine is too busy to record on (None: quiet), with the numbers."""
    load1 = loadavg()[0]
    b0, t0 = cpu_ticks(read_stat())
    p0 = procs()
    sleep(sample_s)
    b1, t1 = cpu_ticks(read_stat())
    p1 = procs()
    frac = (b1 - b0) / max(t1 - t0, 1)
    reasons = []
    if load1 > LOAD_MAX:
        reasons.append(f"1-min load {load1:.2f} > {LOAD_MAX}")
    if frac > BUSY_MAX:
        reasons.append(f"CPUs {frac:.0%} busy over {sample_s:g} s > {BUSY_MAX:.0%}")
    if not reasons:
        return None
    top = busiest(p0, p1, sample_s, os.sysconf("SC_CLK_TCK"))
    return "; ".join(reasons) + (f"; busiest: {top}" if top else "")


def check_quiet(force: bool, wait_s: float = 0.0, reason=busy_reason,
                clock=time.monotonic) -> dict:
    """Wait up to ``wait_s`` for a quiet machine; then refuse (SystemExit, one line) unless
    ``force``. What was found goes into run.json."""
    t_end = clock() + wait_s
    why = reason()
    while why and clock() < t_end:
        why = reason()
    if why and not force:
        raise SystemExit(f"record: the machine is busy ({why}); refusing to record (rule: "
                         f"{RULE}); wait for it to go quiet, or --force")
    return {"rule": RULE, "busy": why, "forced": bool(why and force)}


def pin_plan(cpus: set[int]) -> dict:
    """Which cores the engine's compute threads and the client get, and the environment
    that does it; {"pinned": False, "why": ...} where the platform does not allow it."""
    if not hasattr(os, "sched_setaffinity"):
        return {"pinned": False, "why": "no sched_setaffinity on this platform"}
    if len(cpus) < 2:
        return {"pinned": False, "why": f"one CPU ({cpu_list(cpus)}): nothing to separate"}
    engine, client = min(cpus), sorted(cpus - {min(cpus)})
    return {"pinned": True, "engine_cpus": str(engine), "client_cpus": cpu_list(client),
            "env": {"VLLM_CPU_OMP_THREADS_BIND": str(engine),
                    "VLLM_CPU_NUM_OF_RESERVED_CPU": str(len(client)),
                    "OMP_NUM_THREADS": "1"}}


def apply_pins(plan: dict, environ=os.environ, setaffinity=None) -> dict:
    """Set the plan's environment (read by vLLM's CPU worker when it starts) and pin this
    process to the client cores (the engine core it spawns inherits them); the plan, as
    applied, for run.json."""
    if not plan["pinned"]:
        environ.setdefault("OMP_NUM_THREADS", "1")
        return {**plan, "env": {"OMP_NUM_THREADS": environ["OMP_NUM_THREADS"]}}
    environ.update(plan["env"])
    cores = {int(c) for part in plan["client_cpus"].split(",")
             for c in _expand(part)}
    (setaffinity or os.sched_setaffinity)(0, cores)
    return plan


def _expand(part: str) -> range:
    lo, _, hi = part.partition("-")
    return range(int(lo), int(hi or lo) + 1)
