"""Run points here (--jobs 1) or in a pool of worker processes (--jobs N)."""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from multiprocessing import forkserver

from sim.plan.executors import orphans
from sim.plan.executors.base import EXECUTORS, Executor
from sim.plan.grid import Point
from sim.plan.point import Base, run_point


def _context():
    # forkserver: workers fork from a clean single-threaded server that has imported the
    # simulator once (fast starts, no locks inherited from the progress bar's thread);
    # started here, from this thread, so that it dies with this process (orphans.py)
    if "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["sim.plan.executors.orphans", "sim.plan.point"])
        with orphans.marked():
            forkserver.ensure_running()
        return ctx
    return mp.get_context("spawn")


@EXECUTORS.register("local")
class LocalExecutor(Executor):
    """``jobs`` points at once on this machine; 1 runs them in this process."""

    pool: ProcessPoolExecutor | None = None

    def run(self, base: Base, points: Sequence[Point]) -> Iterator[dict]:
        if self.jobs == 1:
            for p in points:
                yield run_point(base, p)
            return
        if self.pool is None:  # kept across calls: a capacity search runs many rounds
            self.pool = ProcessPoolExecutor(self.jobs, mp_context=_context(),
                                            initializer=orphans.die_with_parent)
        pending = {self.pool.submit(run_point, base, p) for p in points}
        try:
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in done:
                    yield f.result()
        finally:
            for f in pending:
                f.cancel()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None
