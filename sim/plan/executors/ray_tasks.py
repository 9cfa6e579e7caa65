"""Run each point as a Ray task: a local Ray started on demand, or a cluster (--ray-address).

Workers import servesim themselves, so a cluster's nodes need the same servesim installed
(and the trace files at the same paths). Ray is an optional extra: pip install 'servesim[ray]'.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Iterator, Sequence

from sim.plan.executors.base import EXECUTORS, Executor
from sim.plan.grid import Point
from sim.plan.point import Base, run_point
from traces.errors import InputError, clip

WAIT_BATCH = 64  # results collected per ray.wait call (keeps each wait short)


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _ray():
    try:
        import ray
    except ImportError:
        raise InputError("--executor ray needs Ray: pip install 'servesim[ray]'") from None
    return ray


@EXECUTORS.register("ray")
class RayExecutor(Executor):
    """Each point a Ray task with one CPU; a local Ray gets ``jobs`` CPUs."""

    def __init__(self, jobs: int, address: str | None = None):
        super().__init__(jobs, address)
        self.ray = _ray()  # fail now if Ray is missing, but start it only when points run
        self.started = False
        self.task = None
        if address:  # a cluster: connect now, so a bad address fails before any output
            self._start()

    def _start(self) -> None:
        if self.task is not None:
            return
        if not self.ray.is_initialized():
            local = {} if self.address else {"num_cpus": self.jobs}
            if str(self.address or "").startswith("ray://") and not _has("grpc"):
                raise InputError(f"--ray-address {clip(self.address)!r}: a ray:// address "
                                 "needs the Ray Client: pip install 'ray[client]'")
            try:
                self.ray.init(address=self.address, include_dashboard=False,
                              log_to_driver=False, logging_level=logging.ERROR, **local)
            except (ConnectionError, ValueError, RuntimeError, TimeoutError) as e:
                where = f"--ray-address {clip(self.address)!r}" if self.address else "local Ray"
                raise InputError(f"{where}: cannot start or reach Ray "
                                 f"({type(e).__name__}: {clip(str(e))})") from None
            self.started = True
        self.task = self.ray.remote(num_cpus=1)(run_point)

    def run(self, base: Base, points: Sequence[Point]) -> Iterator[dict]:
        if not points:
            return
        self._start()
        base_ref = self.ray.put(base)
        pending = [self.task.remote(base_ref, p) for p in points]
        try:
            while pending:
                done, pending = self.ray.wait(pending, num_returns=min(len(pending), WAIT_BATCH),
                                              timeout=0.2)
                for ref in done:
                    yield self._get(ref)
        finally:
            for ref in pending:
                self.ray.cancel(ref)

    def _get(self, ref) -> dict:
        try:
            return self.ray.get(ref)
        except self.ray.exceptions.RayTaskError as e:
            cause = getattr(e, "cause", None)
            raise (cause if isinstance(cause, Exception) else e) from None

    def close(self) -> None:
        if self.started and self.ray.is_initialized():
            self.ray.shutdown()
