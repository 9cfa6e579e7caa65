"""Scheduling policies. Importing this package registers every built-in one."""

from sim.sched import vllm  # noqa: F401
from sim.sched.base import SCHEDULERS, Scheduler, SchedulerLimits, Status

__all__ = ["SCHEDULERS", "Scheduler", "SchedulerLimits", "Status"]
