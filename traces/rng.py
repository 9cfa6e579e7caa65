"""Independent random streams derived from ONE scenario seed.

Every random choice draws from a named stream, so changing one part of a workload spec (say the
length distribution) never changes another (the arrival times):

    Streams(seed).rng("arrivals")   SeedSequence(seed, spawn_key=(*path, 0))
    Streams(seed).rng("lengths")    ... spawn_key=(*path, 1)
    Streams(seed).rng("prefix")     ... spawn_key=(*path, 2)
    Streams(seed).child(i)          sub-workload i of a mix: path + (3 + i,)

Spawn keys are numpy's SeedSequence tree, so all streams are statistically independent. Stream
ids are part of the reproducibility contract: never renumber them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from traces.errors import TraceError

STREAM_IDS = {"arrivals": 0, "lengths": 1, "prefix": 2}


@dataclass(frozen=True)
class Streams:
    """The random streams of one workload node (the root, or one sub-workload of a mix)."""

    seed: int
    path: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        seed = self.seed
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise TraceError(f"seed is {seed!r}; must be an integer >= 0")

    def rng(self, name: str) -> np.random.Generator:
        """A fresh generator for stream `name` (same seed and path => same draws)."""
        key = (*self.path, STREAM_IDS[name])
        return np.random.default_rng(np.random.SeedSequence(int(self.seed), spawn_key=key))

    def child(self, index: int) -> Streams:
        """The streams of sub-workload `index` of a mix (independent of this node's streams)."""
        return Streams(self.seed, (*self.path, len(STREAM_IDS) + index))
