"""Scheduling policies. Importing this package registers every built-in one."""

from sim.sched import (  # noqa: F401
    admission_reserve,
    lanes,
    orca,
    prefill_first,
    priority,
    sarathi,
    static,
    vllm,
)
from sim.sched.base import SCHEDULERS, Scheduler, SchedulerLimits, Status

__all__ = ["SCHEDULERS", "Scheduler", "SchedulerLimits", "Status"]
