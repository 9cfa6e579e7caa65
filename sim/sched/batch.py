"""The step under construction: which requests get how many tokens, in order.

Chunks of numpy arrays are appended (the vectorized running pass adds many
requests at once); removal (a priority preemption of an already-scheduled
request) is rare and rebuilds the arrays.
"""

from __future__ import annotations

import numpy as np


class BatchBuilder:
    def __init__(self) -> None:
        self._ids: list[np.ndarray] = []
        self._tok: list[np.ndarray] = []
        self._ctx: list[np.ndarray] = []
        self.num_reqs = 0

    def add(self, ids: np.ndarray, tokens: np.ndarray, context: np.ndarray) -> None:
        if len(ids):
            self._ids.append(ids)
            self._tok.append(tokens)
            self._ctx.append(context)
            self.num_reqs += len(ids)

    def add_one(self, req: int, tokens: int, context: int) -> None:
        self.add(np.array([req]), np.array([tokens]), np.array([context]))

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if not self._ids:
            z = np.zeros(0, dtype=np.int64)
            return z, z, z
        if len(self._ids) > 1:
            self._ids = [np.concatenate(self._ids)]
            self._tok = [np.concatenate(self._tok)]
            self._ctx = [np.concatenate(self._ctx)]
        return self._ids[0], self._tok[0], self._ctx[0]

    def contains(self, req: int) -> bool:
        return any((chunk == req).any() for chunk in self._ids)

    def remove(self, req: int) -> int:
        """Drop ``req`` from the step; returns the tokens it had been granted."""
        ids, tok, ctx = self.arrays()
        keep = ids != req
        granted = int(tok[~keep].sum())
        self._ids, self._tok, self._ctx = [ids[keep]], [tok[keep]], [ctx[keep]]
        self.num_reqs = int(keep.sum())
        return granted
