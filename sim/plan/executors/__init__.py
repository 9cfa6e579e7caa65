"""Where points run: one small interface, one module per executor.

    EXECUTORS["local"]  this process (--jobs 1) or a process pool (--jobs N)
    EXECUTORS["ray"]    Ray tasks on a local Ray started on demand, or on --ray-address

A point runs the same everywhere: ``sim.plan.point.run_point(base, point)``.
"""

from sim.plan.executors import local, ray_tasks  # noqa: F401  (register the executors)
from sim.plan.executors.base import EXECUTORS, Executor, make_executor

__all__ = ["EXECUTORS", "Executor", "make_executor"]
