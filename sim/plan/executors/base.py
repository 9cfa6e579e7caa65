"""The executor interface: points in, records out as each completes."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence

from sim.plan.grid import Point
from sim.plan.point import Base
from sim.registry import Registry
from traces.errors import InputError

EXECUTORS: Registry[type[Executor]] = Registry("executor")


class Executor(ABC):
    """Runs points and yields their records in completion order.

    Only the caller writes results: an executor never touches the output folder, so a
    killed sweep can leave no half-written point behind whatever the executor was doing.
    """

    def __init__(self, jobs: int, address: str | None = None):
        self.jobs = jobs  # points run at once
        self.address = address  # cluster to join (executors that have one)

    @abstractmethod
    def run(self, base: Base, points: Sequence[Point]) -> Iterator[dict]:
        """Yield ``run_point(base, p)`` for every point, as each completes (any order)."""

    def close(self) -> None:  # noqa: B027 (optional hook: executors without workers skip it)
        """Release workers (and a cluster this executor started)."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def make_executor(name: str, jobs: int, address: str | None = None) -> Executor:
    if jobs < 1:
        raise InputError(f"--jobs {jobs}: must be at least 1")
    if name not in EXECUTORS:
        raise InputError(f"--executor {name!r}: choose one of {', '.join(EXECUTORS.names())}")
    if address and name != "ray":
        raise InputError("--ray-address needs --executor ray")
    return EXECUTORS.get(name)(jobs, address)
